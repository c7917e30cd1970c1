//! What idle WebSockets that once received a large frame keep, counted by the process's
//! allocator: tungstenite's input buffer grows to a frame's whole length and would keep that
//! allocation for the connection's life; the connection gives it back once the message is out.
//! A counting global allocator follows the bytes live in this process; the client sends frames
//! from a static block and allocates almost nothing, so what grows is the server's. The only
//! test in this binary, so nothing else allocates meanwhile.
mod support;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

use support::ws_raw::{self, BINARY, TEXT};
use support::{Config, Engine, start_with};

struct Counting;

/// Bytes allocated and not yet freed.
static LIVE: AtomicI64 = AtomicI64::new(0);

fn grew(by: usize) {
    LIVE.fetch_add(i64::try_from(by).unwrap_or(i64::MAX), Ordering::Relaxed);
}

fn shrank(by: usize) {
    LIVE.fetch_sub(i64::try_from(by).unwrap_or(i64::MAX), Ordering::Relaxed);
}

// SAFETY: every call forwards to the system allocator unchanged; the counter is an atomic.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size);
        shrank(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CONNECTIONS: usize = 8;
const FRAME: usize = 4 << 20;

/// Bytes the server holds more after `CONNECTIONS` WebSockets each received one `FRAME`-byte
/// message and went idle than before they came.
fn kept_by_idle_websockets(engine: Engine) -> i64 {
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
    ws_raw::send(&mut warm, BINARY, 100);
    assert_eq!(ws_raw::read(&mut warm), (TEXT, "100".to_string()));
    let before = LIVE.load(Ordering::Relaxed);
    let mut idle = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        let mut s = ws_raw::open(srv.addr, "/");
        ws_raw::send(&mut s, BINARY, FRAME);
        assert_eq!(ws_raw::read(&mut s), (TEXT, FRAME.to_string()));
        // After the step that follows the message (when the buffer is given back).
        ws_raw::ping_pong(&mut s);
        idle.push(s);
    }
    let after = LIVE.load(Ordering::Relaxed);
    assert_eq!(srv.stats().memory_held, 0, "nothing charged once idle");
    drop(idle);
    after - before
}

#[test]
fn idle_websockets_give_back_the_buffer_a_large_frame_took() {
    let mut report = String::new();
    let mut kept = Vec::new();
    for engine in Engine::all() {
        let k = kept_by_idle_websockets(engine);
        report.push_str(&format!(
            "{engine:?}: {CONNECTIONS} idle WebSockets after a {FRAME}-byte message each keep {k} bytes\n"
        ));
        kept.push(k);
    }
    println!("{report}");
    // Each would keep at least its frame's 4 MiB; a connection's working buffers are some KiB.
    let bound = i64::try_from(CONNECTIONS * 256 * 1024).unwrap_or(i64::MAX);
    assert!(kept.iter().all(|&k| k < bound), "{report}");
}
