//! Command-line options shared by the examples.
#![allow(dead_code)]

use std::time::Duration;

/// Options every example takes.
pub struct Args {
    /// `--addr HOST:PORT`, default 127.0.0.1:8080.
    pub addr: String,
    /// `--threads N`: worker threads for the server engine.
    pub threads: Option<usize>,
    /// `--no-park`: keep a worker on each idle connection (thread-per-connection).
    pub no_park: bool,
    /// `--park-linger-us N`: wait this long for the next request before parking.
    pub park_linger: Option<Duration>,
}

impl Args {
    pub fn parse() -> Args {
        let mut args = Args {
            addr: "127.0.0.1:8080".to_owned(),
            threads: None,
            no_park: false,
            park_linger: None,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
            };
            match flag.as_str() {
                "--addr" => args.addr = value(),
                "--threads" => args.threads = Some(number(&value())),
                "--no-park" => args.no_park = true,
                "--park-linger-us" => {
                    args.park_linger = Some(Duration::from_micros(number(&value()) as u64))
                }
                "-h" | "--help" => usage(""),
                other => usage(&format!("unknown option {other}")),
            }
        }
        args
    }

    /// A server builder with these options applied.
    pub fn server(&self) -> twinhttp::server::Builder {
        let mut b = twinhttp::server::Server::builder().park_idle(!self.no_park);
        if let Some(n) = self.threads {
            b = b.workers(n);
        }
        if let Some(t) = self.park_linger {
            b = b.park_linger(t);
        }
        b
    }
}

fn number(s: &str) -> usize {
    s.parse()
        .unwrap_or_else(|_| usage(&format!("not a number: {s}")))
}

fn usage(problem: &str) -> ! {
    if !problem.is_empty() {
        eprintln!("error: {problem}");
    }
    eprintln!(
        "options: --addr HOST:PORT (127.0.0.1:8080)  --threads N  --no-park  --park-linger-us N"
    );
    std::process::exit(2)
}

/// The value of `key` in a query string, parsed as a number.
pub fn query_number(query: Option<&str>, key: &str) -> Option<u64> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}
