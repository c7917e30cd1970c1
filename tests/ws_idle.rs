//! 1,000 idle WebSockets cost no threads, on the reactor in both dispatch modes and on the
//! thread-pool server with parking on, and each is still served afterwards. The only test in this binary, so the process thread count is its own.
#![cfg(feature = "server")]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;

use support::{Config, Engine, connect, raise_fd_limit, start_with, thread_count};
use twinhttp::ws::{WsMessage, WsSender};
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
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).expect("101");
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101 "));
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

#[test]
fn idle_websockets_cost_no_threads() {
    idle_websockets(Engine::ReactorInline);
    idle_websockets(Engine::ReactorPool);
    idle_websockets(Engine::Server);
}
