//! With parking off, a WebSocket whose thread cannot be started (the process is out of address
//! space for its stack) still gets its `on_close`, on the worker that answered its upgrade, and
//! the server goes on serving. Alone in its test binary: it lowers the whole process's
//! address-space limit for a moment.
#![cfg(all(feature = "server", target_os = "linux"))]
mod support;
use std::io::Read;
use std::sync::mpsc;
use std::time::Duration;

use support::ws_raw::{self, BINARY, TEXT};
use support::{Engine, start};
use twinhttp::Request;
use twinhttp::ws::{CloseFrame, RequestExt, WsHandler, WsMessage, WsSender};

/// Echoes each message's length; tells the test of each `on_close`.
struct Reporting(mpsc::Sender<&'static str>);

impl WsHandler for Reporting {
    fn on_message(&mut self, ws: &WsSender, msg: WsMessage) {
        let _ = ws.send(msg.len().to_string());
    }
    fn on_close(&mut self, _frame: Option<CloseFrame>) {
        let _ = self.0.send("closed");
    }
}

#[test]
fn a_session_whose_thread_cannot_start_gets_its_on_close() {
    let (tx, closes) = mpsc::channel();
    let srv = start(
        Engine::ServerNoPark,
        move |req: &mut Request<'_>| match req.upgrade_websocket() {
            Ok(u) => u.accept(Reporting(tx.clone())),
            Err(refusal) => refusal,
        },
    );
    // A WebSocket on a thread of its own, as usual.
    let mut first = ws_raw::open(srv.addr, "/");
    ws_raw::send(&mut first, BINARY, 3);
    assert_eq!(ws_raw::read(&mut first), (TEXT, "3".to_string()));

    // Room for the upgrade's buffers, not for a thread's 2 MiB stack. (No thread of this
    // process has exited, so glibc has no cached stack to give the new one without a mapping.)
    let (mut second, closed) = support::with_address_space(1024 * 1024, || {
        let mut second = support::connect(srv.addr);
        let upgrade = b"GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
            Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        std::io::Write::write_all(&mut second, upgrade).expect("upgrade");
        (second, closes.recv_timeout(Duration::from_secs(10)))
    });
    assert_eq!(
        closed,
        Ok("closed"),
        "on_close of the session with no thread"
    );
    // Its connection is closed after the 101.
    let mut rest = Vec::new();
    second
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    second.read_to_end(&mut rest).expect("closed by the server");
    assert!(rest.starts_with(b"HTTP/1.1 101"), "{rest:?}");

    // The first session and the server go on.
    ws_raw::send(&mut first, BINARY, 4);
    assert_eq!(ws_raw::read(&mut first), (TEXT, "4".to_string()));
    let mut third = ws_raw::open(srv.addr, "/");
    ws_raw::send(&mut third, BINARY, 5);
    assert_eq!(ws_raw::read(&mut third), (TEXT, "5".to_string()));
    assert!(closes.try_recv().is_err(), "no other session closed");
}
