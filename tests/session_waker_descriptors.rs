//! With parking off, a WebSocket whose thread cannot get the descriptor that wakes it (the
//! process is out of descriptors) closes: its handler, handler code, is dropped on the worker
//! that answered the upgrade with a panic in its `Drop` caught and counted, and the worker
//! goes on serving. Alone in its test binary: it lowers the whole process's descriptor limit
//! for a moment.
#![cfg(all(feature = "server", target_os = "linux"))]
mod support;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::time::Duration;

use rustix::process::Resource;
use support::{Client, Engine, start};
use twinhttp::Request;
use twinhttp::ws::{RequestExt, WsHandler, WsMessage, WsSender};

/// A WebSocket handler whose `Drop` panics.
struct PanicsWhenDropped;

impl WsHandler for PanicsWhenDropped {
    fn on_message(&mut self, _: &WsSender, _: WsMessage) {}
}

impl Drop for PanicsWhenDropped {
    fn drop(&mut self) {
        panic!("a websocket handler panics when dropped");
    }
}

#[test]
fn a_websocket_with_no_descriptor_for_its_thread_drops_its_handler_caught() {
    let srv = start(Engine::ServerNoPark, |req: &mut Request<'_>| {
        match req.upgrade_websocket() {
            Ok(u) => u.accept(PanicsWhenDropped),
            Err(_) => twinhttp::Response::text("ok"),
        }
    });
    // Accepted and served first: the connection has its descriptor.
    let mut c = Client::new(srv.addr);
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    c.read_timeout(Duration::from_secs(10));
    // No descriptor can be made: the limit is the lowest free one.
    let lowest_free = std::fs::File::open("/dev/null")
        .expect("a probe")
        .as_raw_fd();
    let lowered = support::lower_limit(Resource::Nofile, lowest_free as u64);
    c.send(
        b"GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    let mut rest = Vec::new();
    let read = c.reader.read_to_end(&mut rest);
    drop(lowered);
    read.expect("closed by the server");
    assert!(rest.starts_with(b"HTTP/1.1 101"), "{rest:?}");
    srv.stats_until("the handler's panic counted", |st| st.panics == 1);
    // The workers go on.
    for i in 0..4 {
        let r = Client::new(srv.addr).roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.status, 200, "request {i}");
    }
    assert_eq!(srv.stats().panics, 1);
}
