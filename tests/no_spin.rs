//! While a handler blocks, what its connection's client does meanwhile — sends its next request,
//! half-closes, or resets — must not make the engine spin: the process uses next to no CPU
//! until the handler returns. Each case checks the CPU time of the whole process over the wait,
//! so this is the only test in its binary.
mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use support::{Client, Engine, app, connect, start};

const SLOW: &[u8] = b"GET /sleep?ms=400 HTTP/1.1\r\nHost: t\r\n\r\n";
const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

/// CPU time (user + system) this process has used.
fn cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Runs `during` right after a slow request was sent, then asserts the process stayed nearly
/// idle for the rest of the handler's 400 ms.
fn quiet_while(engine: Engine, what: &str, during: impl FnOnce(TcpStream) -> Option<TcpStream>) {
    let srv = start(engine, app);
    // Warm up: threads started, buffers allocated.
    assert_eq!(Client::new(srv.addr).roundtrip(GET).status, 200);
    let mut s = connect(srv.addr);
    s.write_all(SLOW).expect("request");
    std::thread::sleep(Duration::from_millis(50));
    let held = during(s);
    let before = cpu();
    std::thread::sleep(Duration::from_millis(300));
    let used = cpu() - before;
    assert!(
        used < Duration::from_millis(100),
        "{engine:?}, {what}: {used:?} of CPU in 300 ms while a handler slept"
    );
    drop(held);
}

fn no_spin(engine: Engine) {
    quiet_while(engine, "next request sent", |mut s| {
        s.write_all(GET).expect("second request");
        Some(s)
    });
    quiet_while(engine, "half-closed", |s| {
        s.shutdown(Shutdown::Write).expect("half-close");
        Some(s)
    });
    quiet_while(engine, "reset", |s| {
        // Closing with a zero linger time sends a reset.
        rustix::net::sockopt::set_socket_linger(&s, Some(Duration::ZERO)).expect("linger 0");
        drop(s);
        None
    });
    // A connection that pipelines while the handler blocks is still answered in order.
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    c.send(SLOW);
    std::thread::sleep(Duration::from_millis(50));
    c.send(GET);
    assert_eq!(c.response().text(), "slept");
    assert_eq!(c.response().text(), "Hello, World!");
    let mut rest = Vec::new();
    c.reader
        .get_mut()
        .set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    assert!(c.reader.read_to_end(&mut rest).is_err() && rest.is_empty());
}

#[test]
fn a_blocked_handler_leaves_the_engine_idle() {
    for engine in Engine::all() {
        no_spin(engine);
    }
}
