//! Persistence: HTTP/1.1 keep-alive by default, HTTP/1.0 only when asked, `Connection: close`
//! honoured in both directions.
mod support;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::{Duration, Instant};

use support::{Client, Engine, app, start};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

fn http11_keeps_the_connection(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    for _ in 0..5 {
        let r = c.roundtrip(GET);
        assert_eq!((r.status, r.text().as_str()), (200, "Hello, World!"));
        assert!(!r.closes());
    }
    c.read_timeout(Duration::from_millis(300));
    assert!(!c.is_closed(), "connection stays open");
}

fn http10_closes_unless_keep_alive(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(r.closes());
    assert!(c.is_closed());

    let mut c = Client::new(srv.addr);
    for _ in 0..3 {
        let r = c.roundtrip(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection"), Some("keep-alive"));
    }
}

fn client_connection_close_is_honoured(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(r.closes());
    assert!(c.is_closed());
}

fn handler_connection_close_is_honoured(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(b"GET /close HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "bye"));
    assert!(r.closes());
    assert!(c.is_closed());
}

fn peer_close_between_requests_is_clean(engine: Engine) {
    let srv = start(engine, app);
    for _ in 0..20 {
        let mut c = Client::new(srv.addr);
        assert_eq!(c.roundtrip(GET).status, 200);
    }
    // Every connection above was dropped by the client; the server still answers.
    assert_eq!(Client::new(srv.addr).roundtrip(GET).status, 200);
}

/// A client that sends its request and then shuts down its sending side (as `nc -N` and some
/// HTTP/1.0 clients do) gets its answer and then the end of the stream at once, not after the
/// idle timeout: the end of input must be noticed even when it arrives with the request.
fn a_half_closed_client_gets_its_answer_and_eof(engine: Engine) {
    let srv = start(engine, app);
    for _ in 0..20 {
        // A first request makes it a kept-alive connection the server has waited on before.
        let mut c = Client::new(srv.addr);
        assert_eq!(c.roundtrip(GET).status, 200);
        let mut s = c.reader.into_inner();
        s.write_all(GET).expect("request");
        s.shutdown(Shutdown::Write).expect("half-close");
        let started = Instant::now();
        let mut all = Vec::new();
        s.read_to_end(&mut all).expect("answer, then end of stream");
        assert!(all.starts_with(b"HTTP/1.1 200 "), "{all:?}");
        assert!(all.ends_with(b"Hello, World!"));
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the server closed only after {:?}",
            started.elapsed()
        );
    }
}

engine_tests!(
    a_half_closed_client_gets_its_answer_and_eof,
    http11_keeps_the_connection,
    http10_closes_unless_keep_alive,
    client_connection_close_is_honoured,
    handler_connection_close_is_honoured,
    peer_close_between_requests_is_clean,
);
