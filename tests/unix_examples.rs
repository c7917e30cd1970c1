//! `hello`, `demo` and `ws_echo` as users run them with `--unix PATH`, on every engine
//! configuration: HTTP, a WebSocket echo and an event stream over the Unix domain socket.
#![cfg(feature = "server")]
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;
mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::Client;

/// An example binary serving on a Unix socket; killed (by PID) when dropped.
struct OnSocket {
    child: Child,
    path: PathBuf,
}

impl OnSocket {
    fn start(name: &str, flags: &[&str]) -> OnSocket {
        let bin = child::example_for_test(name);
        let path = std::env::temp_dir().join(format!(
            "twinhttp-{}-{name}-{}.sock",
            std::process::id(),
            flags.join("")
        ));
        let _ = std::fs::remove_file(&path);
        let mut child = Command::new(bin)
            .arg("--unix")
            .arg(&path)
            .args(flags)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the example");
        // The first line says where it listens, once it does.
        let mut line = String::new();
        BufReader::new(child.stderr.take().expect("stderr"))
            .read_line(&mut line)
            .expect("the listening line");
        let want = format!("listening on unix:{}", path.display());
        assert!(line.contains(&want), "{name} {flags:?}: {line}");
        OnSocket { child, path }
    }
}

impl Drop for OnSocket {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.path);
    }
}

fn hello_world(path: &Path) {
    let mut c = Client::unix(path);
    let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "Hello, World!"));
}

fn websocket_echo(path: &Path, route: &str) {
    let stream = UnixStream::connect(path).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let url = format!("ws://localhost{route}");
    let (mut ws, _) = tungstenite::client(url.as_str(), stream).expect("handshake");
    ws.send(tungstenite::Message::text("over the socket"))
        .expect("send");
    assert_eq!(
        ws.read().expect("echo"),
        tungstenite::Message::text("over the socket")
    );
}

/// The demo's `/sse` over the Unix socket.
fn event_ids(path: &Path) -> Vec<String> {
    let s = UnixStream::connect(path).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    support::event_ids(s)
}

#[test]
fn hello_serves_http_and_websocket_on_a_unix_socket() {
    for flags in child::EVERY_CONFIGURATION {
        let s = OnSocket::start("hello", flags);
        hello_world(&s.path);
        websocket_echo(&s.path, "/ws");
    }
}

#[test]
fn demo_serves_http_websocket_and_events_on_a_unix_socket() {
    for flags in child::EVERY_CONFIGURATION {
        let s = OnSocket::start("demo", flags);
        hello_world(&s.path);
        websocket_echo(&s.path, "/ws");
        assert_eq!(event_ids(&s.path), ["1", "2"], "{flags:?}");
    }
}

#[test]
fn ws_echo_serves_websocket_on_a_unix_socket() {
    for flags in child::EVERY_CONFIGURATION {
        let s = OnSocket::start("ws_echo", flags);
        websocket_echo(&s.path, "/");
    }
}
