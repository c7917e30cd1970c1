//! What idle WebSockets that once received or sent a large message keep, counted by the
//! process's allocator: tungstenite's input buffer grows to a frame's whole length and its
//! output buffer to a message's, and would keep those allocations for the connection's life;
//! the connection gives them back once the message is in (or out).
//! A counting global allocator follows the bytes live in this process; the client sends frames
//! from a static block and allocates almost nothing, so what grows is the server's. The only
//! test in this binary, so nothing else allocates meanwhile.
mod support;
use std::net::TcpStream;

use support::counting::{self, Counting};
use support::ws_raw::{self, BINARY, TEXT};
use support::{Config, Engine, start_with};

#[global_allocator]
static GLOBAL: Counting = Counting;

const CONNECTIONS: usize = 8;
const FRAME: usize = 4 << 20;

/// The server receives a `size`-byte message on `s` (and answers with its length).
fn receive(s: &mut TcpStream, size: usize) {
    ws_raw::send(s, BINARY, size);
    assert_eq!(ws_raw::read(s), (TEXT, size.to_string()));
}

/// The server sends a `size`-byte message on `s` (asked for by its length).
fn send(s: &mut TcpStream, size: usize) {
    ws_raw::send_text(s, &size.to_string());
    let (first, _, len) = ws_raw::skip(s);
    assert_eq!((first, len), (BINARY, size as u64));
}

/// Bytes the server holds more after `CONNECTIONS` WebSockets each had one `FRAME`-byte
/// message go by `exchange` and went idle than before they came.
fn kept_after(engine: Engine, exchange: fn(&mut TcpStream, usize)) -> i64 {
    let srv = start_with(
        engine,
        Config {
            // A worker for each connection, where the configuration holds one per connection.
            workers: CONNECTIONS + 2,
            ..Config::default()
        },
        ws_raw::lengths,
    );
    // One connection first, so pools and lazily made state exist before counting.
    let mut warm = ws_raw::open(srv.addr, "/");
    exchange(&mut warm, 100);
    let before = counting::live_bytes();
    let mut idle = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        let mut s = ws_raw::open(srv.addr, "/");
        exchange(&mut s, FRAME);
        // After the step that follows the message (when the buffers are given back).
        ws_raw::ping_pong(&mut s);
        idle.push(s);
    }
    let after = counting::live_bytes();
    assert_eq!(srv.stats().memory_held, 0, "nothing charged once idle");
    drop(idle);
    after - before
}

/// One test, so nothing else allocates while it counts: the buffers a large message took,
/// received and sent, on every configuration.
#[test]
fn idle_websockets_give_back_the_buffers_large_messages_took() {
    let mut report = String::new();
    let mut kept = Vec::new();
    for engine in Engine::all() {
        let received = kept_after(engine, receive);
        let sent = kept_after(engine, send);
        report.push_str(&format!(
            "{engine:?}: {CONNECTIONS} idle WebSockets keep {received} bytes after receiving a \
             {FRAME}-byte message each, {sent} after sending one\n"
        ));
        kept.extend([received, sent]);
    }
    println!("{report}");
    // Each would keep at least its message's 4 MiB; a connection's working buffers are some KiB.
    let bound = i64::try_from(CONNECTIONS * 256 * 1024).unwrap_or(i64::MAX);
    assert!(kept.iter().all(|&k| k < bound), "{report}");
}
