//! A generic upgrade whose thread cannot be started (the process is out of address space for
//! its stack): its callback, handler code, is dropped unrun on the event loop that answered
//! the upgrade, with a panic in its `Drop` caught and counted, and the loop goes on serving.
//! Alone in its test binary: it lowers the whole process's address-space limit for a moment.
#![cfg(target_os = "linux")]
mod support;
use std::io::Read;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{Client, Engine, connect, start};
use twinhttp::{Request, Response};

/// Handler code whose `Drop` panics.
struct PanicsWhenDropped;

impl Drop for PanicsWhenDropped {
    fn drop(&mut self) {
        panic!("an upgrade's callback panics when dropped");
    }
}

#[test]
fn an_upgrade_whose_thread_cannot_start_drops_its_callback_caught() {
    let (ran, runs) = mpsc::channel::<()>();
    let ran = Arc::new(Mutex::new(ran));
    let srv = start(Engine::ReactorInline, move |req: &mut Request<'_>| {
        if req.path() != "/up" {
            return Response::text("ok");
        }
        let held = PanicsWhenDropped;
        let ran = ran.clone();
        Response::upgrade("x-hold", move |_| {
            if let Ok(ran) = ran.lock() {
                let _ = ran.send(());
            }
            std::mem::forget(held);
        })
    });
    let mut c = connect(srv.addr);
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    // Room for the upgrade's buffers, not for a thread's 2 MiB stack. (No thread of this
    // process has exited, so glibc has no cached stack to give the new one without a mapping.)
    let mut rest = Vec::new();
    let read = support::with_address_space(1024 * 1024, || {
        std::io::Write::write_all(
            &mut c,
            b"GET /up HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: x-hold\r\n\r\n",
        )
        .expect("upgrade");
        c.read_to_end(&mut rest)
    });
    read.expect("closed by the server");
    assert!(rest.starts_with(b"HTTP/1.1 101"), "{rest:?}");
    srv.stats_until("the callback's panic counted", |st| st.panics == 1);
    assert!(runs.try_recv().is_err(), "the callback never ran");
    // The loops go on (fresh clients, spread over them).
    for i in 0..4 {
        let r = Client::new(srv.addr).roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.status, 200, "request {i}");
    }
    assert_eq!(srv.stats().panics, 1);
}
