//! The WebSocket, SSE and file examples as users run them: `ws_echo`, `chat`, `sse` and the
//! `demo` routes `/ws`, `/sse`, `/file`, each binary started on every engine configuration and
//! driven over real sockets.
#![cfg(feature = "server")]
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;
mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use child::ChildServer;
use support::{Client, connect};
use tungstenite::{Message, WebSocket};

const CONFIGS: [&[&str]; 3] = [
    &["--engine", "server"],
    &["--engine", "reactor", "--dispatch", "inline"],
    &["--engine", "reactor", "--dispatch", "pool"],
];

/// Starts the example `name` (built by `cargo test --features server`) with `flags`.
fn example(name: &str, flags: &[&str]) -> ChildServer {
    let mut cmd = Command::new(child::example_for_test(name));
    cmd.args(["--addr", "127.0.0.1:0"]).args(flags);
    ChildServer::spawn(cmd)
}

fn ws(server: &ChildServer, path: &str) -> WebSocket<TcpStream> {
    let url = format!("ws://{}{path}", server.addr);
    tungstenite::client(url, connect(server.addr))
        .expect("handshake")
        .0
}

fn text(ws: &mut WebSocket<TcpStream>) -> String {
    loop {
        match ws.read().expect("message") {
            Message::Text(t) => return t.as_str().to_owned(),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("expected text, got {other:?}"),
        }
    }
}

#[test]
fn ws_echo_echoes_on_every_engine() {
    for flags in CONFIGS {
        let server = example("ws_echo", flags);
        let mut c = ws(&server, "/any/path");
        c.send(Message::text("héllo")).expect("send");
        assert_eq!(text(&mut c), "héllo", "{flags:?}");
        c.send(Message::binary(vec![0u8, 255, 7])).expect("send");
        assert_eq!(c.read().expect("echo"), Message::binary(vec![0u8, 255, 7]));
        // Plain HTTP gets told to upgrade.
        let r = Client::new(server.addr).roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.status, 426, "{flags:?}");
        server.stop();
    }
}

#[test]
fn chat_broadcasts_between_clients() {
    for flags in CONFIGS {
        let server = example("chat", flags);
        let page = Client::new(server.addr).roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(page.text().contains("new WebSocket"), "{flags:?}");
        let mut a = ws(&server, "/ws");
        assert_eq!(text(&mut a), "* user1 joined");
        let mut b = ws(&server, "/ws");
        assert_eq!(text(&mut a), "* user2 joined");
        assert_eq!(text(&mut b), "* user2 joined");
        a.send(Message::text("hi all")).expect("send");
        assert_eq!(text(&mut a), "user1: hi all");
        assert_eq!(text(&mut b), "user1: hi all");
        b.close(None).expect("close");
        assert_eq!(text(&mut a), "* user2 left", "{flags:?}");
        server.stop();
    }
}

/// Opens an event stream and returns a line reader over its (chunked) body.
fn event_lines(server: &ChildServer, path: &str, extra: &str) -> BufReader<TcpStream> {
    let mut s = connect(server.addr);
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").as_bytes())
        .expect("send");
    let mut r = BufReader::new(s);
    let mut head = String::new();
    while !head.ends_with("\r\n\r\n") {
        assert!(r.read_line(&mut head).expect("head") > 0, "{head}");
    }
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    r
}

/// The `id:` lines of the next `n` events (chunk-size lines are skipped).
fn ids(r: &mut BufReader<TcpStream>, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    while ids.len() < n {
        let mut line = String::new();
        assert!(r.read_line(&mut line).expect("line") > 0, "stream ended");
        if let Some(id) = line.strip_prefix("id: ") {
            ids.push(id.trim().to_owned());
        }
    }
    ids
}

#[test]
fn sse_example_pushes_the_clock() {
    for flags in CONFIGS {
        let server = example("sse", flags);
        let mut r = event_lines(&server, "/events", "");
        let started = Instant::now();
        let got = ids(&mut r, 2);
        let first: u64 = got[0].parse().expect("numeric id");
        assert_eq!(got[1], (first + 1).to_string(), "{flags:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        server.stop();
    }
}

/// The demo's event ids count on past `u64::MAX` (wrapping to 0) whatever `Last-Event-ID` a
/// client resumes from: one at the top of the range used to overflow the ticker's `id += 1`,
/// which panicked (debug build), and its thread died: no stream got an event again.
#[test]
fn demo_sse_ids_wrap_at_the_top_of_the_range() {
    for flags in CONFIGS {
        let server = example("demo", flags);
        let mut r = event_lines(&server, "/sse", "Last-Event-ID: 18446744073709551614\r\n");
        assert_eq!(ids(&mut r, 2), ["18446744073709551615", "0"], "{flags:?}");
        let mut r = event_lines(&server, "/sse", "Last-Event-ID: 18446744073709551615\r\n");
        assert_eq!(ids(&mut r, 1), ["0"], "{flags:?}");
        // The ticker lives on for every stream.
        let mut r = event_lines(&server, "/sse", "");
        assert_eq!(ids(&mut r, 2), ["1", "2"], "{flags:?}");
        server.stop();
    }
}

#[test]
fn demo_ws_sse_and_file_routes() {
    for flags in CONFIGS {
        let server = example("demo", flags);
        let mut c = ws(&server, "/ws");
        c.send(Message::text("demo")).expect("send");
        assert_eq!(text(&mut c), "demo");

        let mut r = event_lines(&server, "/sse", "");
        assert_eq!(ids(&mut r, 2), ["1", "2"], "{flags:?}");
        let mut r = event_lines(&server, "/sse", "Last-Event-ID: 41\r\n");
        assert_eq!(ids(&mut r, 1), ["42"], "{flags:?}");

        let mut h = Client::new(server.addr);
        let f = h.roundtrip(b"GET /file HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(f.status, 200);
        assert!(
            f.text().contains("fn demo(stats: StatsHandle) -> Router"),
            "serves its own source"
        );
        let part = h.roundtrip(b"GET /file HTTP/1.1\r\nHost: t\r\nRange: bytes=0-2\r\n\r\n");
        assert_eq!((part.status, part.text().as_str()), (206, "//!"));
        server.stop();
    }
}
