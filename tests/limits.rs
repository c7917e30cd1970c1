//! Every limit has its status, and the connection is closed after it.
mod support;
use support::{Client, Config, Engine, app, probe, start_with};
use twinhttp::Limits;

fn small() -> Config {
    let mut limits = Limits::default();
    limits.max_target_bytes = 100;
    limits.max_head_bytes = 1024;
    limits.max_headers = 10;
    limits.max_body_bytes = 1000;
    Config {
        limits,
        ..Config::default()
    }
}

fn assert_refused(engine: Engine, req: &[u8], status: u16) {
    let srv = start_with(engine, small(), app);
    let (r, mut c) = probe(srv.addr, req);
    assert_eq!(
        r.status,
        status,
        "{}",
        String::from_utf8_lossy(&req[..req.len().min(80)])
    );
    assert!(r.closes());
    assert!(c.is_closed());
}

fn target_too_long_414(engine: Engine) {
    assert_refused(
        engine,
        format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(150)).as_bytes(),
        414,
    );
}

/// RFC 9112 §3: a method longer than any the server implements gets 501 (Not Implemented),
/// not 414: the target is short, the method is what is too long. The longest method the core
/// takes is 20 bytes (every registered method fits: `UPDATEREDIRECTREF` is 17).
fn method_too_long_501(engine: Engine) {
    assert_refused(
        engine,
        format!("{} / HTTP/1.1\r\nHost: t\r\n\r\n", "A".repeat(40_000)).as_bytes(),
        501,
    );
    assert_refused(
        engine,
        format!("{} / HTTP/1.1\r\nHost: t\r\n\r\n", "A".repeat(21)).as_bytes(),
        501,
    );
    // Both too long: the method comes first on the line, and decides.
    assert_refused(
        engine,
        format!(
            "{} /{} HTTP/1.1\r\nHost: t\r\n\r\n",
            "A".repeat(400),
            "a".repeat(150)
        )
        .as_bytes(),
        501,
    );
    // Twenty bytes is a method the handler gets.
    let srv = start_with(engine, small(), app);
    let r = Client::new(srv.addr)
        .roundtrip(format!("{} / HTTP/1.1\r\nHost: t\r\n\r\n", "A".repeat(20)).as_bytes());
    assert_ne!(r.status, 501);
    assert_ne!(r.status, 414);
}

fn head_too_large_431(engine: Engine) {
    assert_refused(
        engine,
        format!(
            "GET / HTTP/1.1\r\nHost: t\r\nX: {}\r\n\r\n",
            "a".repeat(2000)
        )
        .as_bytes(),
        431,
    );
}

fn too_many_headers_431(engine: Engine) {
    assert_refused(
        engine,
        format!("GET / HTTP/1.1\r\nHost: t\r\n{}\r\n", "X: 1\r\n".repeat(10)).as_bytes(),
        431,
    );
}

fn default_limits_take_browser_sized_heads(engine: Engine) {
    // 64 fields and 16 KiB of head must pass with the defaults (browsers send such heads).
    let srv = support::start(engine, app);
    let mut req = String::from("GET / HTTP/1.1\r\nHost: t\r\n");
    for i in 0..63 {
        req.push_str(&format!("X-Field-{i}: {}\r\n", "v".repeat(260)));
    }
    req.push_str("\r\n");
    assert!(req.len() > 16 * 1024);
    assert_eq!(Client::new(srv.addr).roundtrip(req.as_bytes()).status, 200);
}

fn content_length_over_limit_413(engine: Engine) {
    assert_refused(
        engine,
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n",
        413,
    );
}

fn chunked_over_limit_413(engine: Engine) {
    let mut req = b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        req.extend_from_slice(b"190\r\n");
        req.extend_from_slice(&[b'z'; 400]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    assert_refused(engine, &req, 413);
}

fn chunk_size_overflow_400(engine: Engine) {
    let mut cfg = small();
    cfg.limits.max_body_bytes = u64::MAX;
    let srv = start_with(engine, cfg, app);
    let (r, _) = probe(srv.addr, b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1FFFFFFFFFFFFFFFF\r\n");
    assert_eq!(r.status, 400);
    assert!(r.closes());
}

/// A client that sends its whole request before reading gets the error response intact: the
/// server closes lingering (reads and drops what still comes) instead of resetting the
/// connection under the client's writes. 8 MB is more than loopback's socket buffers hold, so
/// the server answers while the client is still writing.
fn a_huge_head_gets_its_431_intact(engine: Engine) {
    let srv = start_with(engine, Config::default(), app);
    let mut c = Client::new(srv.addr);
    let mut req = b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: ".to_vec();
    req.resize(8 << 20, b'a');
    assert!(c.try_send(&req), "the whole 8 MB head was taken, not reset");
    let r = c.response();
    assert_eq!(r.status, 431);
    assert!(r.closes());
    assert!(c.is_closed());
}

/// A head longer than a working buffer (16 KiB) waits charged to the memory budget: with a
/// budget of 64 KiB, four such heads wait (their buffers, grown to 32 KiB, hold 16 KiB each
/// past the allowance), the fifth is told to try again (503), and once one of the four is
/// whole and answered there is room for another.
fn long_heads_that_wait_count_to_the_memory_budget(engine: Engine) {
    use std::io::Write;
    use std::net::TcpStream;
    use twinhttp::stats::Refusal;
    let srv = start_with(
        engine,
        Config {
            memory_budget: 64 * 1024,
            // Without parking a waiting head holds its worker: room for all six here.
            workers: 8,
            ..Config::default()
        },
        app,
    );
    let part = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Long: {}\r\n",
        "x".repeat(24 * 1024)
    );
    let held_reaches = |bytes: u64| {
        srv.stats_until("memory held", |s| s.memory_held == bytes);
    };
    let mut waiting: Vec<TcpStream> = Vec::new();
    for n in 1..=4u64 {
        let mut s = support::connect(srv.addr);
        s.write_all(part.as_bytes()).expect("send");
        waiting.push(s);
        held_reaches(n * 16 * 1024);
    }
    let (r, _) = probe(srv.addr, part.as_bytes());
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    let refused = srv.stats().refused;
    assert!(
        refused.contains(&(Refusal::HeadOverBudget, 1)),
        "{refused:?}"
    );
    let mut first = Client::of(waiting.remove(0));
    first.send(b"\r\n");
    assert_eq!(first.response().status, 200);
    held_reaches(3 * 16 * 1024);
    let mut fifth = support::connect(srv.addr);
    fifth.write_all(part.as_bytes()).expect("send");
    held_reaches(4 * 16 * 1024);
}

engine_tests!(
    long_heads_that_wait_count_to_the_memory_budget,
    a_huge_head_gets_its_431_intact,
    target_too_long_414,
    method_too_long_501,
    head_too_large_431,
    too_many_headers_431,
    default_limits_take_browser_sized_heads,
    content_length_over_limit_413,
    chunked_over_limit_413,
    chunk_size_overflow_400,
);
