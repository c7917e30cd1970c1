//! 1,000 idle WebSockets, and 300 idle event streams, cost no threads, on the reactor in both
//! dispatch modes and on the thread-pool server with parking on, and each is still served
//! afterwards; with `Parking::Http` each WebSocket has a thread. The only test in this binary, so the process thread count is its own.
// Counts threads from /proc: Linux only.
#![cfg(all(feature = "server", target_os = "linux"))]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{Config, Engine, connect, raise_fd_limit, read_head, start_with, thread_count};
use twinhttp::sse::{Event, SseSender};
use twinhttp::ws::{RequestExt, WsMessage, WsSender};
use twinhttp::{Request, Response};

fn echo(req: &mut Request<'_>) -> Response {
    match req.upgrade_websocket() {
        Ok(u) => u.accept(|ws: &WsSender, msg: WsMessage| {
            let _ = ws.send(msg);
        }),
        Err(r) => r,
    }
}

fn open(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = connect(addr);
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .expect("send");
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101 "));
    s
}

fn echo_once(s: &mut TcpStream) {
    s.write_all(&[0x82, 0x83, 0, 0, 0, 0, 1, 2, 3])
        .expect("frame");
    let mut frame = [0u8; 5];
    s.read_exact(&mut frame).expect("echo");
    assert_eq!(frame, [0x82, 3, 1, 2, 3]);
}

fn idle_websockets(engine: Engine) {
    raise_fd_limit();
    let srv = start_with(
        engine,
        Config {
            max_connections: 5000,
            ..Config::default()
        },
        echo,
    );
    let mut first = open(srv.addr);
    echo_once(&mut first);
    let threads_before = thread_count();
    let mut idle: Vec<TcpStream> = (0..1000).map(|_| open(srv.addr)).collect();
    assert_eq!(srv.open_connections(), 1001);
    assert_eq!(thread_count(), threads_before, "no thread per WebSocket");
    for s in &mut idle {
        echo_once(s);
    }
    assert_eq!(thread_count(), threads_before);
}

/// Reads from `s` until `want` has arrived (10 s at most).
fn read_until(s: &mut TcpStream, want: &[u8]) {
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while !got.windows(want.len()).any(|w| w == want) {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed before {:?}", String::from_utf8_lossy(want));
        got.extend_from_slice(&buf[..n]);
    }
}

fn idle_event_streams(engine: Engine) {
    let senders: Arc<Mutex<Vec<SseSender>>> = Arc::default();
    let keep = senders.clone();
    let srv = start_with(engine, Config::default(), move |_: &mut Request<'_>| {
        let (resp, sender) = Response::event_stream();
        keep.lock().expect("lock").push(sender);
        resp
    });
    let open = || {
        let mut s = connect(srv.addr);
        s.write_all(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
            .expect("send");
        read_until(&mut s, b"\r\n\r\n");
        s
    };
    let mut first = open();
    let threads_before = thread_count();
    let mut idle: Vec<TcpStream> = (0..300).map(|_| open()).collect();
    assert_eq!(thread_count(), threads_before, "no thread per event stream");
    for sender in senders.lock().expect("lock").iter() {
        sender.send(Event::data("tick")).expect("push");
    }
    read_until(&mut first, b"data: tick\n\n");
    for s in &mut idle {
        read_until(s, b"data: tick\n\n");
    }
    assert_eq!(thread_count(), threads_before);
}

/// `Parking::Http`: WebSockets get a thread each (idle HTTP connections still parked).
fn websockets_on_threads_when_asked() {
    let srv = twinhttp::server::Server::builder()
        .parking(twinhttp::server::Parking::Http)
        .serve("127.0.0.1:0", echo)
        .expect("server");
    let addr = srv.local_addr();
    let mut first = open(addr);
    echo_once(&mut first);
    let threads_before = thread_count();
    let mut more: Vec<TcpStream> = (0..20).map(|_| open(addr)).collect();
    for s in &mut more {
        echo_once(s);
    }
    assert_eq!(
        thread_count(),
        threads_before + 20,
        "a thread per WebSocket"
    );
    drop(more);
    drop(first);
    srv.shutdown(Duration::from_secs(5)).expect("shutdown");
}

#[test]
fn idle_websockets_and_event_streams_cost_no_threads() {
    idle_websockets(Engine::ReactorInline);
    idle_websockets(Engine::ReactorPool);
    idle_websockets(Engine::Server);
    idle_event_streams(Engine::ReactorInline);
    idle_event_streams(Engine::ReactorPool);
    idle_event_streams(Engine::Server);
    websockets_on_threads_when_asked();
}
