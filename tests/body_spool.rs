//! A request body over `Limits::max_body_in_memory` waits for its handler in an anonymous
//! temporary file: it arrives intact (Content-Length and chunked), the handler reads it the
//! same way, and the file is gone after the exchange, after a panicking handler and after a
//! client that left halfway. Below the threshold, or with the threshold raised, no file is made.
//!
//! The files are counted in /proc/self/fd (the server runs in this process), so the
//! configurations run one at a time.
#![cfg(target_os = "linux")]
mod support;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use support::{Client, Config, Engine, start_with};
use twinhttp::{Limits, Request, Response};

/// Spool files are counted process-wide: one configuration at a time.
static COUNTING: Mutex<()> = Mutex::new(());

/// Open descriptors of unnamed files in the temporary folder (an `O_TMPFILE` file reads
/// `/tmp/#123 (deleted)`; an unlinked one `/tmp/.tmpXYZ (deleted)`).
fn spool_files() -> usize {
    let tmp = std::env::temp_dir();
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter(|p| p.starts_with(&tmp) && p.to_string_lossy().ends_with(" (deleted)"))
                .count()
        })
        .unwrap_or(0)
}

/// Waits (bounded) until `want` spool files are open; returns how long it took.
fn until_spool_files(want: usize) -> Duration {
    let started = Instant::now();
    while spool_files() != want {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{} spool files open, waiting for {want}",
            spool_files()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    started.elapsed()
}

/// The byte at `i` of a test body: a pattern that shows a byte lost or moved.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// Reads the body, checks it against the pattern, answers how many spool files were open
/// while it ran and its length; `/panic` panics after reading.
fn check(req: &mut Request<'_>) -> Response {
    let open = spool_files();
    let body = match req.read_body() {
        Ok(b) => b,
        Err(e) => return Response::text(e.to_string()).with_status(400),
    };
    if req.path() == "/panic" {
        panic!("a handler panics after reading its body");
    }
    let intact = body == pattern(body.len());
    Response::text(format!("files={open} len={} intact={intact}", body.len()))
}

fn chunked(body: &[u8], piece: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for c in body.chunks(piece) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

fn post(c: &mut Client, path: &str, body: &[u8]) -> String {
    c.send(
        format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    c.send(body);
    let r = c.response();
    assert_eq!(r.status, 200, "{}", r.text());
    r.text()
}

fn config(in_memory: usize) -> Config {
    let mut limits = Limits::default();
    limits.max_body_in_memory = in_memory;
    Config {
        limits,
        ..Config::default()
    }
}

fn large_bodies_wait_in_a_file_that_goes(engine: Engine) {
    let _one = COUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let srv = start_with(engine, config(64 * 1024), check);
    let before = spool_files();
    let mut c = Client::new(srv.addr);

    let big = pattern(1 << 20);
    assert_eq!(
        post(&mut c, "/", &big),
        format!("files={} len={} intact=true", before + 1, big.len())
    );
    until_spool_files(before);

    // Chunked, in pieces smaller than the threshold: moved to a file once they pass it.
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    c.send(&chunked(&big, 10_000));
    let r = c.response();
    assert_eq!(
        r.text(),
        format!("files={} len={} intact=true", before + 1, big.len())
    );
    until_spool_files(before);

    // At the threshold exactly, and below it: memory only.
    let at = pattern(64 * 1024);
    assert_eq!(
        post(&mut c, "/", &at),
        format!("files={before} len={} intact=true", at.len())
    );

    // A handler that panics: one 500, and its body's file goes with its exchange.
    c.send(
        format!(
            "POST /panic HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            big.len()
        )
        .as_bytes(),
    );
    c.send(&big);
    assert_eq!(c.response().status, 500);
    until_spool_files(before);

    // A client that leaves halfway: the file goes when the engine sees it gone.
    let mut leaving = Client::new(srv.addr);
    leaving.send(
        format!(
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            big.len()
        )
        .as_bytes(),
    );
    leaving.send(&big[..big.len() / 2]);
    until_spool_files(before + 1);
    drop(leaving);
    let took = until_spool_files(before);
    assert!(
        took < Duration::from_secs(2),
        "the file went {took:?} after the client"
    );

    // The engine goes on serving.
    let mut fresh = Client::new(srv.addr);
    assert_eq!(
        post(&mut fresh, "/", b""),
        format!("files={before} len=0 intact=true")
    );
}

fn a_raised_threshold_keeps_bodies_in_memory(engine: Engine) {
    let _one = COUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let srv = start_with(engine, config(usize::MAX), check);
    let before = spool_files();
    let big = pattern(1 << 20);
    assert_eq!(
        post(&mut Client::new(srv.addr), "/", &big),
        format!("files={before} len={} intact=true", big.len())
    );
}

engine_tests!(
    large_bodies_wait_in_a_file_that_goes,
    a_raised_threshold_keeps_bodies_in_memory
);
