//! A zero-downtime restart, as a user runs it: `hello` under continuous load gets SIGUSR2,
//! starts a copy of itself on its own listening sockets (feature `systemd`:
//! `systemd::hand_over`), waits until the copy serves, then shuts down gracefully and exits 0;
//! then the copy is restarted the same way. Every request of the load, each on a new
//! connection, is answered: none refused or reset; and a connection the old process accepted
//! whose request comes only after the hand-over is answered too. On every engine configuration
//! (the reactor hands over a listener per loop).
#![cfg(all(feature = "systemd", target_os = "linux"))]
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use child::{EVERY_CONFIGURATION, example_for_test};

/// A process this test caused and cannot wait for (a successor), stopped by its PID when
/// dropped.
struct Pid(u32);

impl Drop for Pid {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", &self.0.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

/// A child this test started: killed when dropped unless it was waited for.
struct Started(Option<std::process::Child>);

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One `GET /` on a new connection: true when it was answered 200 in full.
fn served(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    if s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut got = String::new();
    s.read_to_string(&mut got).is_ok()
        && got.starts_with("HTTP/1.1 200")
        && got.ends_with("Hello, World!")
}

/// Waits for a line of the server's standard error that contains `what`.
fn line_with(lines: &Receiver<String>, what: &str) -> String {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no line with {what:?}"));
        if line.contains(what) {
            return line;
        }
    }
}

/// The PID a "handed over to PID N" line names.
fn successor_of(line: &str) -> u32 {
    line.rsplit(' ')
        .next()
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no PID in {line:?}"))
}

/// A connection accepted before a restart whose request is sent only after the hand-over.
fn opened(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s
}

/// Its request, sent now: answered in full.
fn answered(mut s: TcpStream) -> bool {
    let sent = s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let mut got = String::new();
    sent.is_ok() && s.read_to_string(&mut got).is_ok() && got.ends_with("Hello, World!")
}

fn restart_under_load(config: &[&str]) {
    let mut old = Command::new(example_for_test("hello"))
        .args(["--addr", "127.0.0.1:0"])
        .args(config)
        .env("RUST_LOG", "off")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hello");
    let (tx, lines) = channel();
    let stderr = BufReader::new(old.stderr.take().expect("stderr"));
    let mut first_pid = old.id();
    let mut started = Started(Some(old));
    // The successors inherit the same standard error: their lines come here too.
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = line_with(&lines, "listening on");
    let addr: SocketAddr = first
        .split("://")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let counter = if served(addr) { &ok } else { &failed };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let wait_for = |n: u64| {
        let until = ok.load(Ordering::Relaxed) + n;
        while ok.load(Ordering::Relaxed) < until {
            assert_eq!(
                failed.load(Ordering::Relaxed),
                0,
                "{config:?}: a request failed"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let mut successors = Vec::new();
    wait_for(200);
    for generation in 0..2 {
        // Accepted by the process about to hand over (the only one listening), its request
        // sent once the hand-over is done.
        let early = opened(addr);
        let usr2 = Command::new("kill")
            .args(["-USR2", &first_pid.to_string()])
            .status()
            .expect("kill -USR2");
        assert!(usr2.success());
        let successor = successor_of(&line_with(&lines, "handed over to PID"));
        successors.push(Pid(successor));
        assert!(
            answered(early),
            "{config:?}: the early connection's request, generation {generation}"
        );
        match started.0.take() {
            Some(mut old) => {
                let status = old.wait().expect("the old process ends");
                assert!(
                    status.success(),
                    "{config:?}: the old process exited with {status}"
                );
            }
            // A successor is not this test's child: its exit is the end of its PID.
            None => wait_gone(first_pid),
        }
        first_pid = successor;
        wait_for(200);
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().expect("a client");
    }
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!("{config:?}: {ok} answered over two restarts, {failed} failed");
    assert_eq!(failed, 0, "{config:?}");
}

/// Waits until no process has `pid` (one this test does not own, so cannot wait for).
fn wait_gone(pid: u32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(std::time::Instant::now() < deadline, "{pid} is still there");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigusr2_hands_the_sockets_over_and_no_request_fails() {
    for config in EVERY_CONFIGURATION {
        restart_under_load(config);
    }
}
