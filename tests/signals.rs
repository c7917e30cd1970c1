//! The examples shut down gracefully on SIGINT and SIGTERM, on every engine configuration: a
//! request under way is answered, then the process exits 0 within two seconds; a WebSocket peer
//! that never answers the close frame is let go within the grace.
#![cfg(feature = "server")]
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use support::Client;

fn graceful(signal: Signal, flags: &[&str]) {
    let mut cmd = Command::new(child::example_for_test("demo"));
    cmd.args(["--addr", "127.0.0.1:0"]).args(flags);
    let mut server = child::ChildServer::spawn(cmd);
    let mut c = Client::new(server.addr);
    // A request under way when the signal comes: its `100 Continue` shows that the server holds
    // it (the reactor sends it once the head is parsed, the server engine once the handler reads
    // the body), and its body is sent only after the signal.
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    let interim = c.read_response(false).expect("100 Continue");
    assert_eq!(interim.status, 100, "{flags:?}");
    kill_process(Pid::from_child(&server.child), signal).expect("signal the example");
    c.send(b"hello");
    let r = c.response();
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "hello"),
        "{flags:?}: the request under way is answered"
    );
    assert!(c.is_closed(), "{flags:?}: then the connection closes");
    // The process ends by itself, with status 0 (polled: a child's exit raises no event here).
    let deadline = Instant::now() + Duration::from_secs(2);
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("wait for the example") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "{flags:?}: still running 2 s after {signal:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{flags:?}: {status:?}");
}

#[test]
fn sigterm_shuts_down_gracefully() {
    for flags in child::EVERY_CONFIGURATION {
        graceful(Signal::TERM, flags);
    }
}

#[test]
fn sigint_shuts_down_gracefully() {
    for flags in child::EVERY_CONFIGURATION {
        graceful(Signal::INT, flags);
    }
}

/// A WebSocket peer that never answers the server's close frame is let go at the closing
/// handshake's timeout (5 s), within the examples' grace (7 s): the exit status is 0 and does not
/// depend on which of the two ends first (they were both 5 s, and the status was 0 or 1 from run
/// to run). Every configuration at once, each with its own example.
#[test]
fn a_websocket_that_never_answers_the_close_does_not_fail_the_shutdown() {
    let runs: Vec<_> = child::EVERY_CONFIGURATION
        .iter()
        .map(|flags| std::thread::spawn(move || silent_websocket_at_shutdown(flags)))
        .collect();
    for run in runs {
        run.join().expect("a configuration's run");
    }
}

fn silent_websocket_at_shutdown(flags: &[&str]) {
    let mut cmd = Command::new(child::example_for_test("demo"));
    cmd.args(["--addr", "127.0.0.1:0"]).args(flags);
    let mut server = child::ChildServer::spawn(cmd);
    let addr = server.addr;
    let (mut ws, resp) =
        tungstenite::client(format!("ws://{addr}/ws"), support::connect(addr)).expect("handshake");
    assert_eq!(resp.status(), 101);
    // An echo: the session is running (not still being handed over) when the signal comes.
    ws.send(tungstenite::Message::text("up")).expect("send");
    assert_eq!(
        ws.read().expect("the echo"),
        tungstenite::Message::text("up")
    );
    let signalled = Instant::now();
    kill_process(Pid::from_child(&server.child), Signal::TERM).expect("signal the example");
    // The peer holds its socket open and reads nothing: the close frame is never answered.
    let deadline = signalled + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("wait for the example") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "{flags:?}: still running after 10 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = signalled.elapsed();
    drop(ws);
    assert!(status.success(), "{flags:?}: {status:?} after {took:?}");
    assert!(
        took >= Duration::from_millis(4500) && took < Duration::from_secs(7),
        "{flags:?}: exited after {took:?} (close timeout 5 s, grace 7 s)"
    );
}
