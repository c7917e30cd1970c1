//! systemd: the examples serve the socket socket activation passed (`--systemd`), and report
//! `READY=1` once they serve and `STOPPING=1` when a signal starts their shutdown, on every
//! engine configuration.
#![cfg(all(feature = "systemd", feature = "server", target_os = "linux"))]
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;
mod support;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

/// One `GET /` with `Connection: close` to `addr`; the body of the answer.
fn hello_at(addr: &str) -> String {
    let addr = addr.parse().expect("an address");
    let r = support::Client::new(addr).request("GET /", "Connection: close\r\n");
    assert_eq!(r.status, 200);
    r.text()
}

/// Waits (polled: a child's exit raises no event here) for `child` to exit, within `limit`.
fn exits_within(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "{what}: still running");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Kills the child on the way out, whatever happened.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `systemd-socket-activate -l ADDR hello --systemd`: the socket is bound by the tool, passed
/// as descriptor 3, and served by `hello` (which the tool execs at the first connection).
/// Needs `systemd-socket-activate` (Debian's `systemd`; `.ci/run` installs it).
#[test]
#[ignore = "needs systemd-socket-activate: run by .ci/run's real-tools step"]
fn hello_serves_the_socket_systemd_passed() {
    let hello = child::example_for_test("hello");
    for flags in child::EVERY_CONFIGURATION {
        // A free port, let go for the tool to bind (nothing else here binds loopback ports).
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let mut tool = Command::new("systemd-socket-activate");
        tool.args(["-l", &addr])
            .arg(&hello)
            .arg("--systemd")
            .args(flags.iter().copied())
            .stderr(Stdio::piped());
        let mut child = Reaped(tool.spawn().expect("systemd-socket-activate is installed"));
        let mut stderr = BufReader::new(child.0.stderr.take().expect("stderr"));
        let mut line = String::new();
        stderr.read_line(&mut line).expect("the tool's first line");
        assert!(line.starts_with("Listening on"), "{flags:?}: {line}");
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        for _ in 0..3 {
            assert_eq!(hello_at(&addr), "Hello, World!", "{flags:?}");
        }
        kill_process(Pid::from_child(&child.0), Signal::TERM).expect("signal");
        let status = exits_within(&mut child.0, Duration::from_secs(5), "hello");
        assert!(status.success(), "{flags:?}: {status:?}");
    }
}

/// With `NOTIFY_SOCKET` set (a `Type=notify` unit), `READY=1` comes once the server serves and
/// `STOPPING=1` when SIGTERM starts its shutdown.
#[test]
fn readiness_and_stopping_are_reported() {
    let hello = child::example_for_test("hello");
    let dir = tempfile::tempdir().expect("a folder");
    for (i, flags) in child::EVERY_CONFIGURATION.iter().enumerate() {
        let path = dir.path().join(format!("notify-{i}"));
        let manager = UnixDatagram::bind(&path).expect("bind the notify socket");
        manager
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut cmd = Command::new(&hello);
        cmd.args(["--addr", "127.0.0.1:0"])
            .args(flags.iter().copied())
            .env("NOTIFY_SOCKET", &path);
        let mut server = child::ChildServer::spawn(cmd);
        let mut buf = [0u8; 256];
        let n = manager.recv(&mut buf).expect("READY=1 within 10 s");
        assert_eq!(&buf[..n], b"READY=1\n", "{flags:?}");
        assert_eq!(hello_at(&server.addr.to_string()), "Hello, World!");
        kill_process(Pid::from_child(&server.child), Signal::TERM).expect("signal");
        let n = manager.recv(&mut buf).expect("STOPPING=1 within 10 s");
        assert_eq!(&buf[..n], b"STOPPING=1\n", "{flags:?}");
        let status = exits_within(&mut server.child, Duration::from_secs(5), "hello");
        assert!(status.success(), "{flags:?}: {status:?}");
    }
}
