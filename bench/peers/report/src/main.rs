//! `twinhttp-report`: turns the bench scripts' `raw.tsv` into markdown tables and SVG charts.
//!
//! - `twinhttp-report table RAW_TSV`: markdown tables of medians (min–max) on standard output
//!   (bench/compare_peers.sh, bench/compare_ws.sh).
//! - `twinhttp-report charts DIR`: reads `DIR/raw.tsv` (bench/report.sh) and writes the charts
//!   beside it (`throughput-*.svg`, `p99-*.svg`, `cpu-*.svg` per workload against concurrency;
//!   `idle-rss.svg`, `idle-threads.svg` against idle connections) and `summary.md`.
//!
//! The columns of `raw.tsv` are described in `raw.rs`.

mod charts;
mod raw;
mod summary;

use std::fmt::Write;
use std::path::Path;

use charts::Chart;
use raw::{Row, metric, series, workloads};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["table", raw] => read(Path::new(raw)).map(|rows| print!("{}", summary::tables(&rows))),
        ["charts", dir] => report(Path::new(dir)),
        _ => Err("usage: twinhttp-report table RAW_TSV | twinhttp-report charts DIR".into()),
    };
    if let Err(e) = result {
        eprintln!("twinhttp-report: {e}");
        std::process::exit(1);
    }
}

type Error = Box<dyn std::error::Error>;

fn read(path: &Path) -> Result<Vec<Row>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(raw::parse(&text)?)
}

/// A file-name word for a workload: `/` → `hello`, `/cpu?us=100` → `cpu`.
fn slug(workload: &str) -> String {
    let path = workload.split('?').next().unwrap_or("").trim_matches('/');
    let word: String = path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    if word.is_empty() {
        "hello".to_owned()
    } else {
        word
    }
}

fn report(dir: &Path) -> Result<(), Error> {
    let raw_path = dir.join("raw.tsv");
    let rows = read(&raw_path)?;
    let text = std::fs::read_to_string(&raw_path)?;
    let mut md = String::from("# twinhttp: blocking versus event-driven\n\n");
    for comment in text.lines().filter_map(|l| l.strip_prefix("# ")) {
        let _ = writeln!(md, "- {comment}");
    }
    md.push_str(
        "\nMedians of the repetitions; the bars on the charts run from the lowest to the highest \
         repetition. Server CPU per request is the server process's user + system time over the \
         run (from `/proc/PID/stat`) divided by the requests wrk completed.\n\n",
    );
    let mut images = Vec::new();
    for workload in workloads(&rows, "load") {
        let word = slug(&workload);
        let charts = [
            ("throughput", "rps", "requests per second", false),
            ("p99", "p99_ms", "p99 latency, ms (log)", true),
            ("cpu", "cpu_us", "server CPU per request, µs", false),
        ];
        for (name, column, y_desc, y_log) in charts {
            let lines = series(&rows, "load", &workload, metric(column));
            if lines.is_empty() {
                continue;
            }
            let file = format!("{name}-{word}.svg");
            let chart = Chart {
                title: format!("{y_desc}: GET {workload}"),
                x_desc: "concurrent connections (wrk -c, log)",
                y_desc,
                x_log: true,
                y_log,
                scale: 1.0,
            };
            charts::draw(&dir.join(&file), &chart, &lines)?;
            images.push((format!("{name}, `{workload}`"), file));
        }
    }
    for (column, file, y_desc, scale) in [
        ("rss_kib", "idle-rss.svg", "server RSS, MiB", 1.0 / 1024.0),
        ("threads", "idle-threads.svg", "server threads", 1.0),
    ] {
        let mut lines = Vec::new();
        for workload in workloads(&rows, "idle") {
            for (server, points) in series(&rows, "idle", &workload, metric(column)) {
                lines.push((format!("{server} ({workload})"), points));
            }
        }
        if lines.is_empty() {
            continue;
        }
        let chart = Chart {
            title: format!("{y_desc} against idle connections"),
            x_desc: "idle connections held",
            y_desc,
            x_log: false,
            y_log: false,
            scale,
        };
        charts::draw(&dir.join(file), &chart, &lines)?;
        images.push((y_desc.to_owned(), file.to_owned()));
    }
    for (alt, file) in &images {
        let _ = writeln!(md, "![{alt}]({file})\n");
    }
    md.push_str(&summary::tables(&rows));
    std::fs::write(dir.join("summary.md"), md)?;
    println!(
        "{} charts and summary.md in {}",
        images.len(),
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::slug;

    #[test]
    fn slugs() {
        assert_eq!(slug("/"), "hello");
        assert_eq!(slug("/cpu?us=100"), "cpu");
        assert_eq!(slug("/sleep?ms=10"), "sleep");
    }
}
