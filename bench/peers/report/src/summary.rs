//! Markdown tables of the medians: one per section and workload, a row per server and
//! connection count, only the columns that were measured.

use std::fmt::Write;

use crate::charts::thousands;
use crate::raw::{METRICS, Row, Spread, metric, sections, series, workloads};

/// Column headings of the metrics, in [`METRICS`] order.
const HEADINGS: [&str; METRICS.len()] = [
    "req/s",
    "p50 ms",
    "p99 ms",
    "server CPU µs/req",
    "errors",
    "RSS KiB",
    "threads",
];

/// Every section's tables, each under a `###` heading.
pub fn tables(rows: &[Row]) -> String {
    let mut out = String::new();
    for section in sections(rows) {
        for workload in workloads(rows, &section) {
            let _ = writeln!(out, "### {section}: `{workload}`\n");
            out.push_str(&table(rows, &section, &workload));
            out.push('\n');
        }
    }
    out
}

fn table(rows: &[Row], section: &str, workload: &str) -> String {
    let columns: Vec<(usize, Vec<(String, crate::raw::Series)>)> = (0..METRICS.len())
        .map(|m| (m, series(rows, section, workload, m)))
        .filter(|(_, s)| !s.is_empty())
        .collect();
    let mut keys: Vec<(String, u32)> = Vec::new();
    for row in rows
        .iter()
        .filter(|r| r.section == section && r.workload == workload)
    {
        let key = (row.server.clone(), row.conns);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    // Each server's rows together, by connections, servers in first-seen order.
    let servers: Vec<String> = keys
        .iter()
        .map(|(s, _)| s.clone())
        .fold(Vec::new(), |mut v, s| {
            if !v.contains(&s) {
                v.push(s);
            }
            v
        });
    keys.sort_by_key(|(s, c)| (servers.iter().position(|x| x == s), *c));
    let mut out = String::from("| server | connections |");
    for (m, _) in &columns {
        let _ = write!(out, " {} |", HEADINGS[*m]);
    }
    out.push_str("\n|---|---|");
    out.push_str(&"---|".repeat(columns.len()));
    out.push('\n');
    for (server, conns) in keys {
        let _ = write!(out, "| {server} | {} |", thousands(f64::from(conns)));
        for (m, lines) in &columns {
            let cell = lines
                .iter()
                .find(|(s, _)| *s == server)
                .and_then(|(_, points)| points.iter().find(|(c, _)| *c == conns))
                .map_or_else(|| "–".to_owned(), |(_, s)| cell(*m, *s));
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
    out
}

/// `median (min–max)`, or the median alone when every repetition agreed or there was one.
fn cell(m: usize, s: Spread) -> String {
    let f = |v: f64| {
        let counted = ["rps", "errors", "rss_kib", "threads"].map(metric);
        if counted.contains(&m) || v >= 1000.0 {
            thousands(v)
        } else if v >= 10.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        }
    };
    if s.min == s.max {
        f(s.median)
    } else {
        format!("{} ({}–{})", f(s.median), f(s.min), f(s.max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::parse;

    #[test]
    fn a_row_per_server_and_count_with_measured_columns_only() {
        let rows = parse(
            "load\ta\t/\t16\t1\t1000\t0.5\t2\t10\t0\t\t\n\
             load\ta\t/\t16\t2\t3000\t0.5\t4\t12\t0\t\t\n",
        )
        .expect("parses");
        let t = tables(&rows);
        assert!(t.contains("### load: `/`"), "{t}");
        assert!(
            t.contains(
                "| server | connections | req/s | p50 ms | p99 ms | server CPU µs/req | errors |"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "| a | 16 | 2,000 (1,000–3,000) | 0.50 | 3.00 (2.00–4.00) | 11.0 (10.0–12.0) | 0 |"
            ),
            "{t}"
        );
    }
}
