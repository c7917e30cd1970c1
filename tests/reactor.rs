//! Reactor-specific behaviour, in both dispatch modes: backpressure under a slow reader and
//! input one byte at a time. (Idle connections: `reactor_idle.rs`.)
mod support;
use std::io::Read;
use std::time::Duration;

use support::{Client, Config, Engine, app, start_with};
use twinhttp::{Body, Request, Response};

/// This process's resident memory, from /proc (Linux only: the test that reads it is gated).
#[cfg(target_os = "linux")]
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmRSS:")
                    .and_then(|v| v.split_whitespace().next()?.parse().ok())
            })
        })
        .unwrap_or(0)
}

#[cfg(target_os = "linux")]
fn slow_reader_does_not_grow_memory(engine: Engine) {
    // 512 MiB streamed to a client that reads almost nothing: the reactor must produce the body
    // only as the socket takes it.
    let big = |req: &mut Request<'_>| match req.path() {
        "/big" => Response::new(200).with_body(Body::reader(std::io::repeat(b'x').take(512 << 20))),
        _ => Response::text("ok"),
    };
    let srv = start_with(engine, Config::default(), big);
    let before = rss_kib();
    let mut slow = Client::new(srv.addr);
    slow.send(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    let mut first = [0u8; 4096];
    slow.reader
        .read_exact(&mut first)
        .expect("the response starts");
    std::thread::sleep(Duration::from_millis(700));
    let grown = rss_kib().saturating_sub(before);
    assert!(
        grown < 32 * 1024,
        "RSS grew {grown} KiB while the client was not reading"
    );
    // The loop is not stuck on the slow connection.
    let mut other = Client::new(srv.addr);
    assert_eq!(
        other.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").text(),
        "ok"
    );
}

fn one_byte_per_wake_up(engine: Engine) {
    let srv = start_with(engine, Config::default(), app);
    let mut c = Client::new(srv.addr);
    let req = b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n";
    for b in req {
        c.send(&[*b]);
        std::thread::sleep(Duration::from_micros(300));
    }
    assert_eq!(c.response().text(), "abcd");
    assert_eq!(c.response().text(), "Hello, World!");
}

mod reactor_inline {
    #[cfg(target_os = "linux")]
    #[test]
    fn slow_reader_does_not_grow_memory() {
        super::slow_reader_does_not_grow_memory(super::Engine::ReactorInline)
    }
    #[test]
    fn one_byte_per_wake_up() {
        super::one_byte_per_wake_up(super::Engine::ReactorInline)
    }
}

mod reactor_pool {
    #[cfg(target_os = "linux")]
    #[test]
    fn slow_reader_does_not_grow_memory() {
        super::slow_reader_does_not_grow_memory(super::Engine::ReactorPool)
    }
    #[test]
    fn one_byte_per_wake_up() {
        super::one_byte_per_wake_up(super::Engine::ReactorPool)
    }
}

#[test]
fn acceptor_thread_mode_serves_refuses_and_shuts_down() {
    use twinhttp::reactor::{Accept, Reactor};
    let reactor = Reactor::builder()
        .loops(2)
        .accept(Accept::Thread)
        .max_connections(4)
        .serve("127.0.0.1:0", app)
        .expect("reactor starts");
    let addr = reactor.local_addr();
    let mut held: Vec<Client> = (0..4).map(|_| Client::new(addr)).collect();
    for c in &mut held {
        assert_eq!(
            c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").text(),
            "Hello, World!"
        );
    }
    assert_eq!(
        Client::new(addr).response().status,
        503,
        "over max_connections"
    );
    drop(held);
    reactor.shutdown(Duration::from_secs(5)).expect("shutdown");
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "no longer accepting"
    );
}

#[test]
fn with_pool_dispatch_a_streamed_body_is_produced_on_a_worker_not_the_loop() {
    use crossbeam_channel::bounded;
    use twinhttp::reactor::{Dispatch, Reactor};
    // The body's first piece waits for the test's word; where it runs is told back.
    let (release, released) = bounded::<()>(0);
    let (ran_on, producing) = bounded::<String>(1);
    let handler = move |req: &mut Request<'_>| match req.path() {
        "/held" => {
            let (released, ran_on) = (released.clone(), ran_on.clone());
            let mut first = true;
            Response::new(200).with_body(Body::chunks(std::iter::from_fn(move || {
                if !std::mem::take(&mut first) {
                    return None;
                }
                let thread = std::thread::current().name().unwrap_or("").to_owned();
                let _ = ran_on.send(thread);
                let _ = released.recv();
                Some(b"released".to_vec())
            })))
        }
        _ => Response::text("Hello, World!"),
    };
    // One loop: both clients are on it.
    let reactor = Reactor::builder()
        .loops(1)
        .dispatch(Dispatch::Pool(2))
        .serve("127.0.0.1:0", handler)
        .expect("reactor starts");
    let addr = reactor.local_addr();
    let mut held = Client::new(addr);
    held.send(b"GET /held HTTP/1.1\r\nHost: t\r\n\r\n");
    let thread = producing
        .recv_timeout(Duration::from_secs(10))
        .expect("the body's producer ran");
    assert!(thread.starts_with("twinhttp-pool-"), "produced on {thread}");
    // While it is held, the loop serves another client.
    let mut other = Client::new(addr);
    other.read_timeout(Duration::from_secs(10));
    assert_eq!(
        other.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").text(),
        "Hello, World!",
        "served while the body's producer is held"
    );
    release.send(()).expect("the producer waits");
    let r = held.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "released");
    // The connection goes on after the streamed response.
    assert_eq!(
        held.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").text(),
        "Hello, World!"
    );
    reactor.shutdown(Duration::from_secs(5)).expect("shutdown");
}

#[test]
fn a_fast_reader_of_an_endless_body_does_not_keep_the_loop_from_the_others() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use twinhttp::reactor::{Dispatch, Reactor};
    const PIECE: usize = 16 << 10;
    // `/endless` streams 16 KiB pieces for ever and counts them; `/` says how many had been
    // made when it ran.
    let made = Arc::new(AtomicUsize::new(0));
    let (going, begun) = crossbeam_channel::bounded::<()>(1);
    let counted = made.clone();
    let handler = move |req: &mut Request<'_>| match req.path() {
        "/endless" => {
            let (made, going) = (counted.clone(), going.clone());
            Response::new(200).with_body(Body::chunks(std::iter::from_fn(move || {
                if made.fetch_add(1, Ordering::Relaxed) == 128 {
                    let _ = going.try_send(());
                }
                Some(vec![b'x'; PIECE])
            })))
        }
        _ => Response::text(counted.load(Ordering::Relaxed).to_string()),
    };
    // One loop, handlers inline: both clients are on it, and the body is produced on it.
    let reactor = Reactor::builder()
        .loops(1)
        .dispatch(Dispatch::Inline)
        .serve("127.0.0.1:0", handler)
        .expect("reactor starts");
    let addr = reactor.local_addr();
    let mut fast = support::connect(addr);
    support::send(&mut fast, b"GET /endless HTTP/1.1\r\nHost: t\r\n\r\n");
    let hang_up = fast.try_clone().expect("a second handle");
    // The reader starts on the test's word, then reads as fast as it can and says when 128 MiB
    // came.
    let (go, went) = crossbeam_channel::bounded::<()>(1);
    let (flowing, flows) = crossbeam_channel::bounded::<()>(1);
    let reader = std::thread::spawn(move || {
        let _ = went.recv();
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0usize;
        while let Ok(n @ 1..) = fast.read(&mut buf) {
            got += n;
            if got >= 128 << 20 {
                let _ = flowing.try_send(());
            }
        }
    });
    begun
        .recv_timeout(Duration::from_secs(10))
        .expect("the body begins");
    // Meanwhile the loop fills both sockets' buffers and waits to write: its registration is
    // armed for writing, and stays so while the fast reader takes all it is sent. (Without the
    // pause, the same, only less often.)
    std::thread::sleep(Duration::from_millis(300));
    go.send(()).expect("the reader waits");
    flows
        .recv_timeout(Duration::from_secs(30))
        .expect("the body flows");
    let asked = made.load(Ordering::Relaxed);
    let mut other = Client::new(addr);
    other.read_timeout(Duration::from_secs(30));
    other.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let at: usize = other.response().text().parse().expect("a count");
    // A turn ends after 1 MiB (64 pieces); the connection is queued to run again once, though
    // its writable events give it a turn too; the other connection is accepted at one wait and
    // read at the next. So a few turns, counted in pieces whatever the machine's speed. Without
    // the turn's share, the body went on until the socket was full; with a connection queued
    // again at every writable event, the queue held dozens of it (349-1,105 pieces here).
    assert!(
        at - asked <= 10 * 64,
        "answered after {} more pieces of the endless body",
        at - asked
    );
    // The endless body ends when its reader goes.
    let _ = hang_up.shutdown(std::net::Shutdown::Both);
    reader.join().expect("the reader");
    reactor.shutdown(Duration::from_secs(5)).expect("shutdown");
}
