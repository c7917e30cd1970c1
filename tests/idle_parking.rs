//! Idle parking: 1,000 idle keep-alive connections on 2 workers, every one still served, and the
//! server's thread count does not grow with them. (The only test in this binary, so the process
//! thread count is this test's alone.)
// Counts threads from /proc: Linux only.
#![cfg(all(feature = "server", target_os = "linux"))]
mod support;
use std::time::Duration;

use support::{Client, Config, Engine, app, raise_fd_limit, start_with, thread_count};

#[test]
fn thousand_idle_connections_on_two_workers() {
    let srv = start_with(
        Engine::Server,
        Config {
            workers: 2,
            max_connections: 5000,
            ..Config::default()
        },
        app,
    );
    // 1,000 connections need 2,000 descriptors in this process (both ends).
    raise_fd_limit();
    let threads_before = thread_count();
    let mut clients: Vec<Client> = (0..1000).map(|_| Client::new(srv.addr)).collect();
    for c in &mut clients {
        assert_eq!(
            c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
            200
        );
    }
    // All 1,000 are now idle, open, and parked: two workers could not hold them.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(srv.open_connections(), 1000);
    assert_eq!(
        thread_count(),
        threads_before,
        "no thread per idle connection"
    );
    // Each one, in reverse order, is served again on its parked connection.
    for c in clients.iter_mut().rev() {
        let r = c.roundtrip(b"GET /status/201 HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.status, 201);
    }
    assert_eq!(srv.open_connections(), 1000);
}
