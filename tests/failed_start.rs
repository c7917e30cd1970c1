//! An engine whose start fails part-way (a thread cannot be started: the process is out of
//! address space for its stack) ends the threads it had started, unrun, closes what it opened,
//! and leaves nothing serving: `serve` returns the error, the process has the threads and
//! descriptors it had before, and the port refuses connections. Alone in its test binary, one
//! test: it lowers the whole process's address-space limit for a moment.
#![cfg(target_os = "linux")]
mod support;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use twinhttp::{Request, Response};

/// What a failed start logs when it had started threads (the part-way case).
const ENDED: &str = "the engine could not start: ending the threads it had started";

/// Workers asked for: more than the lowered limit leaves room for (2 MiB of stack each).
const MANY: usize = 64;

fn hello(_: &mut Request<'_>) -> Response {
    Response::text("never served")
}

/// Entries of a `/proc/self` directory: the process's threads or open descriptors.
fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).expect(dir).count()
}

/// Starts an engine on a fresh listener with room for a few thread stacks only, and checks
/// that it failed part-way and left nothing behind.
fn fails_part_way(
    name: &str,
    start: impl FnOnce(TcpListener) -> Result<Box<dyn FnOnce()>, twinhttp::Error>,
) {
    let ended_before = support::logs::lines()
        .iter()
        .filter(|l| l.as_str() == ENDED)
        .count();
    let (threads, fds) = (count("/proc/self/task"), count("/proc/self/fd"));
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("address");
    // Room for the start's buffers and a few stacks, not for the 64 workers'.
    let started = support::with_address_space(12 * 1024 * 1024, || start(listener));
    if let Ok(stop) = started {
        stop();
        panic!("{name}: started with {MANY} workers in a limited address space");
    }
    let ended = support::logs::lines()
        .iter()
        .filter(|l| l.as_str() == ENDED)
        .count();
    assert_eq!(
        ended,
        ended_before + 1,
        "{name}: failed after threads started"
    );
    // A joined thread's task can still be listed for a moment while the kernel reaps it.
    let reaped = Instant::now() + Duration::from_secs(5);
    while count("/proc/self/task") > threads && Instant::now() < reaped {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(count("/proc/self/task"), threads, "{name}: threads left");
    assert_eq!(count("/proc/self/fd"), fds, "{name}: descriptors left");
    let refused = TcpStream::connect(addr).map(drop);
    assert_eq!(
        refused.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionRefused),
        "{name}: its port is closed"
    );
}

#[test]
fn a_start_that_fails_part_way_leaves_nothing_behind() {
    support::logs::capture(log::Level::Error, "twinhttp");
    #[cfg(feature = "server")]
    for parking in [
        twinhttp::server::Parking::All,
        twinhttp::server::Parking::Off,
    ] {
        fails_part_way(&format!("server, {parking:?}"), |listener| {
            let srv = twinhttp::server::Server::builder()
                .workers(MANY)
                .parking(parking)
                .serve_listener(listener, hello)?;
            Ok(Box::new(move || {
                drop(srv.shutdown(std::time::Duration::ZERO))
            }))
        });
    }
    for (name, dispatch, loops) in [
        ("reactor, pool", twinhttp::reactor::Dispatch::Pool(MANY), 2),
        ("reactor, inline", twinhttp::reactor::Dispatch::Inline, MANY),
    ] {
        fails_part_way(name, |listener| {
            let reactor = twinhttp::reactor::Reactor::builder()
                .loops(loops)
                .dispatch(dispatch)
                .serve_listener(listener, hello)?;
            Ok(Box::new(move || drop(reactor.shutdown(Duration::ZERO))))
        });
    }
}
