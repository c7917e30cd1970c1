//! Persistence: HTTP/1.1 keep-alive by default, HTTP/1.0 only when asked, `Connection: close`
//! honoured in both directions.
#![cfg(feature = "server")]
mod support;
use std::time::Duration;

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

engine_tests!(
    http11_keeps_the_connection,
    http10_closes_unless_keep_alive,
    client_connection_close_is_honoured,
    handler_connection_close_is_honoured,
    peer_close_between_requests_is_clean,
);
