//! Slow and silent clients cost memory, never a worker: thousands of connections that sent
//! nothing, half a head, or half of their next request, a client sending its body slowly and one
//! reading its response slowly do not keep a new client from being served, on the server engine
//! (parking on) and on both reactor configurations. A partial head is
//! answered `408` at its deadline, not before and not much after.
//!
//! The server engine with parking off (a worker per connection, kept for comparison) is stopped
//! by as many silent connections as it has workers: that is its shape, said in the README.
mod support;
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use support::{Client, Config, Engine, app, connect, raise_fd_limit, send, start_with, wait_open};

/// Each held-connections test holds thousands of descriptors: one at a time.
static HOLDING: Mutex<()> = Mutex::new(());

const SILENT: usize = 2000;
const HALF_HEAD: usize = 2000;
const HALF_NEXT: usize = 200;

fn slow_clients_do_not_stop_a_new_one(engine: Engine) {
    let _one = HOLDING.lock().unwrap_or_else(|e| e.into_inner());
    raise_fd_limit();
    let srv = start_with(
        engine,
        Config {
            max_connections: 10_000,
            header_read_timeout: Duration::from_secs(10),
            ..Config::default()
        },
        app,
    );
    let silent: Vec<TcpStream> = (0..SILENT).map(|_| connect(srv.addr)).collect();
    let half: Vec<TcpStream> = (0..HALF_HEAD)
        .map(|_| {
            let mut s = connect(srv.addr);
            send(&mut s, b"GET / HTTP/1.1\r\nHost: t\r\nX-Half: ");
            s
        })
        .collect();
    let mut next: Vec<Client> = (0..HALF_NEXT)
        .map(|_| {
            let mut c = Client::new(srv.addr);
            assert_eq!(
                c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
                200
            );
            c.send(b"GET /status/202 HTTP/1.1\r\nHo");
            c
        })
        .collect();
    wait_open(&srv, SILENT + HALF_HEAD + HALF_NEXT);

    let started = Instant::now();
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let took = started.elapsed();
    assert_eq!(r.status, 200);
    assert!(
        took < Duration::from_secs(1),
        "a new client waited {took:?}"
    );

    // The keep-alive connections kept their half request: the rest completes it.
    for c in &mut next {
        c.send(b"st: t\r\n\r\n");
        assert_eq!(c.response().status, 202);
    }
    drop((silent, half));
}

fn partial_head_gets_408_at_its_deadline(engine: Engine) {
    let timeout = Duration::from_millis(600);
    let srv = start_with(
        engine,
        Config {
            header_read_timeout: timeout,
            ..Config::default()
        },
        app,
    );
    // A second connection, kept alive, sends half of its next request after a first one.
    let mut kept = Client::new(srv.addr);
    assert_eq!(
        kept.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let mut fresh = Client::new(srv.addr);
    let started = Instant::now();
    fresh.send(b"GET / HTTP/1.1\r\nHost: t\r\nX-Half: ");
    kept.send(b"GET / HTTP/1.1\r\nHo");
    for c in [&mut fresh, &mut kept] {
        let r = c.response();
        let took = started.elapsed();
        assert_eq!(r.status, 408);
        assert!(r.closes());
        assert!(
            took >= timeout - Duration::from_millis(50) && took < timeout * 3,
            "408 after {took:?} for a {timeout:?} deadline"
        );
        assert!(c.is_closed(), "closed after the 408");
    }
}

/// The first head is due from the accept on every engine, not from its first byte.
fn first_head_is_due_from_the_accept(engine: Engine) {
    let timeout = Duration::from_millis(1000);
    let srv = start_with(
        engine,
        Config {
            header_read_timeout: timeout,
            ..Config::default()
        },
        app,
    );
    let mut c = Client::new(srv.addr);
    let accepted = Instant::now();
    // The first byte comes late in the deadline: counted from it, the 408 would come at 1.6 s.
    std::thread::sleep(Duration::from_millis(600));
    c.send(b"GET / HTTP/1.1\r\nHost");
    let r = c.response();
    let took = accepted.elapsed();
    assert_eq!(r.status, 408);
    assert!(
        took >= timeout - Duration::from_millis(50) && took < Duration::from_millis(1400),
        "408 after {took:?}, due {timeout:?} after the accept"
    );
}

/// A new client is answered within 1 s while the slow one waits.
fn another_client_is_served_at_once(addr: std::net::SocketAddr) {
    let started = Instant::now();
    let mut other = Client::new(addr);
    assert_eq!(
        other.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "another client waited {took:?}"
    );
}

/// A body that comes slowly is read without a worker: a client that sent part of its body and
/// waits does not hold the only worker from another client, and is answered once the rest
/// comes.
fn a_slow_body_does_not_hold_a_worker(engine: Engine) {
    let srv = start_with(
        engine,
        Config {
            workers: 1,
            ..Config::default()
        },
        app,
    );
    let mut slow = Client::new(srv.addr);
    slow.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 20\r\n\r\n0123456789");
    another_client_is_served_at_once(srv.addr);
    slow.send(b"abcdefghij");
    let r = slow.response();
    assert_eq!((r.status, r.text().as_str()), (200, "0123456789abcdefghij"));
}

/// A client that reads its response slowly holds no worker either: the worker writes what the
/// socket takes and hands the rest to the I/O side (the parker, on the server engine), so the only
/// worker serves another client at once; the slow one gets its whole response once it reads.
fn a_slow_reader_does_not_hold_a_worker(engine: Engine) {
    const BIG: usize = 32 << 20;
    let srv = start_with(
        engine,
        Config {
            workers: 1,
            ..Config::default()
        },
        |req: &mut twinhttp::Request<'_>| match req.path() {
            "/big" => twinhttp::Response::new(200).with_body(vec![b'x'; BIG]),
            _ => app(req),
        },
    );
    let mut slow = Client::new(srv.addr);
    slow.send(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    another_client_is_served_at_once(srv.addr);
    let r = slow.response();
    assert_eq!((r.status, r.body.len()), (200, BIG));
}

engine_tests!(
    partial_head_gets_408_at_its_deadline,
    first_head_is_due_from_the_accept
);

parking_tests!(
    a_slow_body_does_not_hold_a_worker,
    a_slow_reader_does_not_hold_a_worker,
    slow_clients_do_not_stop_a_new_one,
);
