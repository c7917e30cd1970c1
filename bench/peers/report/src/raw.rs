//! The measurements: `raw.tsv` as the bench scripts write it, one row per measurement, and the
//! medians over repetitions that the charts and tables show.
//!
//! Columns (a header line names them; `#` lines are comments; an empty cell is "not measured"):
//! `section server workload conns rep rps p50_ms p99_ms cpu_us errors rss_kib threads`.
//! `section` is `load` (a wrk run: `workload` is the request target, `conns` wrk's connections,
//! `cpu_us` the server's CPU per request), `idle` (`workload` is `http` or `ws`, `conns` the idle
//! connections held, `rss_kib` and `threads` the server's with them), or any other name a
//! script uses for its own table (`peers`, `ws`).

use std::collections::BTreeMap;

/// One measurement.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub section: String,
    pub server: String,
    pub workload: String,
    pub conns: u32,
    pub values: [Option<f64>; METRICS.len()],
}

/// The measured columns, in file order after `rep`.
pub const METRICS: [&str; 7] = [
    "rps", "p50_ms", "p99_ms", "cpu_us", "errors", "rss_kib", "threads",
];

/// A measured column's index in [`Row::values`].
pub fn metric(name: &str) -> usize {
    METRICS
        .iter()
        .position(|m| *m == name)
        .unwrap_or_else(|| panic!("no metric {name}"))
}

/// Parses `raw.tsv`; a malformed line is an error naming its number.
pub fn parse(text: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.starts_with("section\t") || line.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = line.split('\t').collect();
        if cells.len() != 5 + METRICS.len() {
            return Err(format!(
                "line {}: {} cells, want {}",
                i + 1,
                cells.len(),
                5 + METRICS.len()
            ));
        }
        let conns = cells[3]
            .parse()
            .map_err(|_| format!("line {}: connections {:?}", i + 1, cells[3]))?;
        let mut values = [None; METRICS.len()];
        for (value, cell) in values.iter_mut().zip(&cells[5..]) {
            *value = cell.parse::<f64>().ok().filter(|v| v.is_finite());
        }
        rows.push(Row {
            section: cells[0].to_owned(),
            server: cells[1].to_owned(),
            workload: cells[2].to_owned(),
            conns,
            values,
        });
    }
    Ok(rows)
}

/// Median, minimum and maximum of the repetitions of one point.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    fn of(mut xs: Vec<f64>) -> Option<Spread> {
        if xs.is_empty() {
            return None;
        }
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        let median = if n % 2 == 1 {
            xs[n / 2]
        } else {
            (xs[n / 2 - 1] + xs[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: xs[0],
            max: xs[n - 1],
        })
    }
}

/// One line of a chart: a server's medians of one metric against connections.
pub type Series = Vec<(u32, Spread)>;

/// The series of `metric` in `section`/`workload`, one per server, servers in first-seen order.
pub fn series(rows: &[Row], section: &str, workload: &str, metric: usize) -> Vec<(String, Series)> {
    let mut order: Vec<String> = Vec::new();
    let mut points: BTreeMap<(usize, u32), Vec<f64>> = BTreeMap::new();
    for row in rows
        .iter()
        .filter(|r| r.section == section && r.workload == workload)
    {
        let server = match order.iter().position(|s| *s == row.server) {
            Some(i) => i,
            None => {
                order.push(row.server.clone());
                order.len() - 1
            }
        };
        if let Some(v) = row.values[metric] {
            points.entry((server, row.conns)).or_default().push(v);
        }
    }
    let mut out: Vec<(String, Series)> = order.into_iter().map(|s| (s, Vec::new())).collect();
    for ((server, conns), xs) in points {
        if let Some(spread) = Spread::of(xs) {
            out[server].1.push((conns, spread));
        }
    }
    out.retain(|(_, s)| !s.is_empty());
    out
}

/// The workloads of a section, in first-seen order.
pub fn workloads(rows: &[Row], section: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for row in rows.iter().filter(|r| r.section == section) {
        if !out.contains(&row.workload) {
            out.push(row.workload.clone());
        }
    }
    out
}

/// The sections, in first-seen order.
pub fn sections(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for row in rows {
        if !out.contains(&row.section) {
            out.push(row.section.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAW: &str = "section\tserver\tworkload\tconns\trep\trps\tp50_ms\tp99_ms\tcpu_us\terrors\trss_kib\tthreads\n\
        load\ta\t/\t16\t1\t100\t1\t2\t10\t0\t\t\n\
        load\ta\t/\t16\t2\t300\t1\t4\t12\t0\t\t\n\
        load\ta\t/\t16\t3\t200\t1\t3\t11\t0\t\t\n\
        load\tb\t/\t64\t1\t50\tnan\t9\t\t0\t\t\n\
        idle\ta\thttp\t1000\t1\t\t\t\t\t\t5000\t4\n";

    #[test]
    fn medians_per_server_and_point() {
        let rows = parse(RAW).expect("parses");
        assert_eq!(rows.len(), 5);
        let rps = series(&rows, "load", "/", metric("rps"));
        assert_eq!(rps.len(), 2);
        let (name, points) = &rps[0];
        assert_eq!(name, "a");
        let s = points[0].1;
        assert_eq!(
            (points[0].0, s.median, s.min, s.max),
            (16, 200.0, 100.0, 300.0)
        );
        // b measured no p50: only a has a series.
        assert_eq!(series(&rows, "load", "/", metric("p50_ms")).len(), 1);
        assert_eq!(workloads(&rows, "idle"), ["http"]);
        assert_eq!(sections(&rows), ["load", "idle"]);
    }

    #[test]
    fn a_short_line_is_an_error() {
        assert!(parse("load\ta\t/\t16\n").is_err());
    }
}
