//! The routes every HTTP hello peer serves, the same ones as twinhttp's `hello` example, so the
//! peers can stand on the blocking-versus-event-driven charts (`bench/report.sh`):
//!
//! - `/` → `Hello, World!`
//! - `/cpu?us=N` → N µs of CPU work on the thread or task that serves the request (default 100)
//! - `/sleep?ms=N` → a wait of N ms, a stand-in for a database call (default 10); each peer waits
//!   its library's own way (a timer on async runtimes, a blocked thread on blocking servers)
//!
//! Anything else is `NotFound`. Also what every peer reads from its command line: the port (its
//! first argument, else `PORT`, else 8080) and its knobs.

use std::time::{Duration, Instant};

/// The body of `/`.
pub const HELLO: &str = "Hello, World!";

/// What a request target asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/`
    Hello,
    /// `/cpu?us=N`: spin for this long.
    Cpu(Duration),
    /// `/sleep?ms=N`: wait this long.
    Sleep(Duration),
    /// Any other path.
    NotFound,
}

impl Route {
    /// The route of a request target (`/path?query`, as sent).
    pub fn of(target: &str) -> Route {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        match path {
            "/" => Route::Hello,
            "/cpu" => Route::Cpu(Duration::from_micros(number(query, "us").unwrap_or(100))),
            "/sleep" => Route::Sleep(Duration::from_millis(number(query, "ms").unwrap_or(10))),
            _ => Route::NotFound,
        }
    }

    /// The response body: `Hello, World!`, `done` (cpu), `slept` (sleep), `not found`.
    pub fn body(self) -> &'static str {
        match self {
            Route::Hello => HELLO,
            Route::Cpu(_) => "done",
            Route::Sleep(_) => "slept",
            Route::NotFound => "not found",
        }
    }
}

/// Busy work for `d` on the calling thread, as twinhttp's `hello` does for `/cpu`.
pub fn spin(d: Duration) {
    let until = Instant::now() + d;
    let mut x = 0u64;
    while Instant::now() < until {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// The port to listen on: the first argument, else `PORT`, else 8080.
pub fn port() -> u16 {
    std::env::args()
        .nth(1)
        .or_else(|| std::env::var("PORT").ok())
        .and_then(|p| p.parse().ok())
        .unwrap_or(8080)
}

/// The environment variable `name` as a number, else `default` (the peers' thread knobs).
pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The argument at `index` (1 is the port) as a number, if given (the echo peers' buffer size).
pub fn arg_number(index: usize) -> Option<usize> {
    std::env::args().nth(index).and_then(|v| v.parse().ok())
}

/// Whether the environment variable `name` is `1` (the peers' opt-in knobs).
pub fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

fn number(query: &str, name: &str) -> Option<u64> {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let table = [
            ("/", Route::Hello),
            ("/?x=1", Route::Hello),
            ("/cpu?us=250", Route::Cpu(Duration::from_micros(250))),
            ("/cpu", Route::Cpu(Duration::from_micros(100))),
            ("/sleep?a=b&ms=3", Route::Sleep(Duration::from_millis(3))),
            ("/sleep?ms=x", Route::Sleep(Duration::from_millis(10))),
            ("/other", Route::NotFound),
        ];
        for (target, want) in table {
            assert_eq!(Route::of(target), want, "{target}");
        }
    }
}
