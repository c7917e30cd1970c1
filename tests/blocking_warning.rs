//! A handler that blocks its event loop is warned of: with inline dispatch, a call that holds
//! the loop past the threshold (100 ms by default) logs one warning naming its method and path
//! and is counted in `Stats::blocking_handlers`, and so is a streamed body whose next piece
//! waits, a WebSocket callback that sleeps and an `on_close` that does; a fast handler is not,
//! and neither the server engine nor pool dispatch warns (their handlers and bodies hold no
//! loop).
mod support;
use std::time::Duration;

use support::{Client, Engine, app, start};
use twinhttp::{Body, Request, Response};

fn warnings() -> Vec<String> {
    support::logs::lines()
}

/// The blocking warnings logged since `before` lines.
fn held_warnings(before: usize) -> Vec<String> {
    warnings()[before..]
        .iter()
        .filter(|l| l.contains("held its event loop"))
        .cloned()
        .collect()
}

/// One test, so that the engines run one after the other and each one's warnings are told
/// apart by when they came.
#[test]
fn a_blocking_inline_handler_is_warned_of_once_and_counted() {
    support::logs::capture(log::Level::Warn, "twinhttp");
    for engine in Engine::all() {
        let before = warnings().len();
        let srv = start(engine, app);
        let mut c = Client::new(srv.addr);
        // Fast: no warning.
        assert_eq!(
            c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
            200
        );
        // 200 ms asleep in the handler.
        let r = c.roundtrip(b"GET /sleep?ms=200 HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.status, 200);
        // The warning is logged before the response is queued: it is there now.
        let new = held_warnings(before);
        let counted = srv.stats().blocking_handlers;
        if engine == Engine::ReactorInline {
            assert_eq!(new.len(), 1, "{engine:?}: {new:?}");
            assert!(
                new[0].contains("GET /sleep") && !new[0].contains("ms=200"),
                "the method and path, not the query: {}",
                new[0]
            );
            assert_eq!(counted, 1, "{engine:?}");
            // A second one within 10 s is counted, not logged again.
            c.roundtrip(b"GET /sleep?ms=150 HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(srv.stats().blocking_handlers, 2);
            assert_eq!(held_warnings(before).len(), 1, "rate-limited");
        } else {
            assert!(new.is_empty(), "{engine:?} warned: {new:?}");
            assert_eq!(counted, 0, "{engine:?}");
        }
    }
    // A streamed body whose next piece waits holds an inline loop too: warned of and counted.
    let before = warnings().len();
    let srv = start(Engine::ReactorInline, |_req: &mut Request<'_>| {
        let mut pieces = 0;
        Response::new(200).with_body(Body::chunks(std::iter::from_fn(move || {
            pieces += 1;
            match pieces {
                1 => Some(b"first".to_vec()),
                2 => {
                    std::thread::sleep(Duration::from_millis(200));
                    Some(b" second".to_vec())
                }
                _ => None,
            }
        })))
    });
    let r = Client::new(srv.addr).roundtrip(b"GET /body HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.text(), "first second");
    let new = held_warnings(before);
    assert_eq!(new.len(), 1, "{new:?}");
    assert!(new[0].contains("streamed response body"), "{}", new[0]);
    assert_eq!(srv.stats().blocking_handlers, 1);
    a_blocking_websocket_callback_is_warned_of_and_counted();
}

/// A WebSocket's callback that sleeps holds an inline loop too: its turn is warned of and
/// counted, a quick one is not; and so is an `on_close` that sleeps, run as its connection goes
/// (the peer left without a close frame).
fn a_blocking_websocket_callback_is_warned_of_and_counted() {
    use support::ws_raw::{self, BINARY, TEXT};
    use twinhttp::ws::{CloseFrame, RequestExt, WsHandler, WsMessage, WsSender};
    struct Slow;
    impl WsHandler for Slow {
        fn on_message(&mut self, ws: &WsSender, msg: WsMessage) {
            // A message of 200 bytes sleeps 200 ms; others answer at once.
            if msg.len() == 200 {
                std::thread::sleep(Duration::from_millis(200));
            }
            let _ = ws.send(msg.len().to_string());
        }
        fn on_close(&mut self, _frame: Option<CloseFrame>) {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let srv = start(Engine::ReactorInline, |req: &mut Request<'_>| {
        match req.upgrade_websocket() {
            Ok(u) => u.accept(Slow),
            Err(refusal) => refusal,
        }
    });
    // Counted when the turn that ran it ends, which may be after its answer went out.
    let counted = |n: u64| {
        let limit = std::time::Instant::now() + Duration::from_secs(5);
        while srv.stats().blocking_handlers < n && std::time::Instant::now() < limit {
            std::thread::sleep(Duration::from_millis(5));
        }
        srv.stats().blocking_handlers
    };
    let mut ws = ws_raw::open(srv.addr, "/");
    ws_raw::send(&mut ws, BINARY, 10);
    assert_eq!(ws_raw::read(&mut ws), (TEXT, "10".to_string()));
    assert_eq!(srv.stats().blocking_handlers, 0, "a quick callback");
    let before = warnings().len();
    ws_raw::send(&mut ws, BINARY, 200);
    assert_eq!(ws_raw::read(&mut ws), (TEXT, "200".to_string()));
    assert_eq!(counted(1), 1);
    let new = held_warnings(before);
    assert_eq!(new.len(), 1, "{new:?}");
    assert!(new[0].contains("WebSocket"), "{}", new[0]);
    // The peer goes: `on_close` runs on the loop as it closes the connection (counted; its
    // warning within 10 s of the first is not logged again).
    drop(ws);
    assert_eq!(counted(2), 2, "on_close");
    assert_eq!(held_warnings(before).len(), 1, "rate-limited");
}
