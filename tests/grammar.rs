//! Request-line and field grammar, the same on every engine configuration: a Host that is not
//! `host[:port]` and whitespace inside the request-target are 400 (not 505); `HTTP/1.x` with a
//! higher minor version is served as HTTP/1.1; a target whose form does not fit its method is 400.
mod support;
use support::{Engine, app, probe, start};

fn refused_400(engine: Engine) {
    let srv = start(engine, app);
    for req in [
        &b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: user@a\r\n\r\n",
        b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET * HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET a/b HTTP/1.1\r\nHost: a\r\n\r\n",
    ] {
        let (r, mut c) = probe(srv.addr, req);
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(req));
        assert!(r.closes());
        assert!(c.is_closed());
    }
}

fn a_higher_minor_version_is_served_as_1_1(engine: Engine) {
    let srv = start(engine, app);
    let (r, mut c) = probe(srv.addr, b"GET / HTTP/1.2\r\nHost: a\r\n\r\n");
    assert_eq!((r.status, r.text()), (200, "Hello, World!".to_owned()));
    assert!(!r.closes(), "kept alive, as HTTP/1.1");
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.9\r\nHost: a\r\n\r\n").status,
        200
    );
    let (r, _) = probe(srv.addr, b"GET / HTTP/2.0\r\nHost: a\r\n\r\n");
    assert_eq!(r.status, 505);
}

/// Bytes that can never become a request (a TLS ClientHello, say) are answered 400 as soon as
/// they come, not 408 at the header deadline, even before any blank line.
fn garbage_is_400_at_once(engine: Engine) {
    let srv = start(engine, app);
    let mut c = support::Client::new(srv.addr);
    let started = std::time::Instant::now();
    c.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n");
    let r = c.response();
    assert_eq!(r.status, 400);
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(2),
        "400 after {took:?}"
    );
}

/// An unsupported version is 505 however the request line arrives: here it comes cut right after
/// the major digit (the server has read `GET / HTTP/2` when the rest comes), which was answered
/// 400 before (found by the fuzz target's split oracle).
fn a_version_cut_after_its_major_digit_is_505(engine: Engine) {
    let srv = start(engine, app);
    let mut c = support::Client::new(srv.addr);
    c.send(b"GET / HTTP/2");
    // The server holds a partial head before the rest is sent.
    srv.stats_until("never read the partial line", |s| s.reading > 0);
    c.send(b".0\r\nHost: a\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 505);
    assert!(r.closes());
}

engine_tests!(
    a_version_cut_after_its_major_digit_is_505,
    refused_400,
    a_higher_minor_version_is_served_as_1_1,
    garbage_is_400_at_once
);
