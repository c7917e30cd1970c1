//! The comparison shape: with parking off, each open connection holds a worker.
#![cfg(feature = "server")]
mod support;
use std::time::Duration;

use support::{Client, Config, Engine, app, start_with};

#[test]
fn without_parking_workers_are_held() {
    // The comparison shape: with parking off, two idle connections hold both workers, so a
    // third client waits until one of them goes away.
    let srv = start_with(
        Engine::ServerNoPark,
        Config {
            workers: 2,
            ..Config::default()
        },
        app,
    );
    let mut a = Client::new(srv.addr);
    let mut b = Client::new(srv.addr);
    assert_eq!(
        a.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    assert_eq!(
        b.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let mut c = Client::new(srv.addr);
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    c.read_timeout(Duration::from_millis(300));
    assert!(c.read_response(false).is_none(), "no worker free");
    drop(a);
    c.read_timeout(Duration::from_secs(5));
    assert_eq!(c.response().status, 200, "served once a worker is released");
}
