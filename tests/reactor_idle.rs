//! 1,000 idle keep-alive connections on the reactor cost no threads, next to a pipelining
//! client, in both dispatch modes. The only test in this binary, so the process thread count is
//! its own.
// Counts threads from /proc: Linux only.
#![cfg(target_os = "linux")]
mod support;
use support::{Client, Config, Engine, app, raise_fd_limit, start_with, thread_count};

fn idle_connections_and_a_pipelining_client(engine: Engine) {
    raise_fd_limit();
    let srv = start_with(
        engine,
        Config {
            max_connections: 5000,
            ..Config::default()
        },
        app,
    );
    let threads_before = thread_count();
    let mut idle: Vec<Client> = (0..1000).map(|_| Client::new(srv.addr)).collect();
    for c in &mut idle {
        assert_eq!(
            c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
            200
        );
    }
    let mut piper = Client::new(srv.addr);
    let batch = b"GET /status/202 HTTP/1.1\r\nHost: t\r\n\r\n".repeat(500);
    piper.send(&batch);
    for _ in 0..500 {
        assert_eq!(piper.response().status, 202);
    }
    assert_eq!(srv.open_connections(), 1001);
    assert_eq!(thread_count(), threads_before, "no thread per connection");
    for c in idle.iter_mut().step_by(50) {
        assert_eq!(
            c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
            200
        );
    }
}

#[test]
fn idle_connections_and_a_pipelining_client_both_dispatch_modes() {
    idle_connections_and_a_pipelining_client(Engine::ReactorInline);
    idle_connections_and_a_pipelining_client(Engine::ReactorPool);
}
