//! The live counters over real sockets, on every engine configuration: 1,000 idle keep-alive
//! connections and 100 idle WebSockets held are counted as exactly that; refusals are counted
//! by reason; a panicking handler is counted.
mod support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use support::{
    Client, Config, Engine, app, connect, echo_websocket, probe, raise_fd_limit, read_head,
    start_with,
};
use twinhttp::stats::{Refusal, Stats};
use twinhttp::{Limits, MinRate, Request, Response};

const IDLE: usize = 1000;
const SOCKETS: usize = 100;

/// The test application, and a WebSocket echo at `/ws`.
fn app_and_ws(req: &mut Request<'_>) -> Response {
    match req.path() {
        "/ws" => echo_websocket(req),
        _ => app(req),
    }
}

/// Every open connection is doing exactly one thing.
fn doing(s: &Stats) -> u64 {
    s.waiting
        + s.reading
        + s.queued
        + s.writing
        + s.closing
        + s.websockets
        + s.event_streams
        + s.upgraded
}

fn open_websocket(addr: SocketAddr) -> TcpStream {
    let mut s = connect(addr);
    s.write_all(
        b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .expect("send");
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101 "));
    s
}

fn held_connections_are_counted(engine: Engine) {
    raise_fd_limit();
    let workers = match engine {
        // A worker waits on each open connection.
        Engine::ServerNoPark => IDLE + 8,
        _ => 4,
    };
    let srv = start_with(
        engine,
        Config {
            max_connections: 5000,
            workers,
            ..Config::default()
        },
        app_and_ws,
    );
    let mut idle = Vec::new();
    for _ in 0..IDLE {
        let mut c = Client::new(srv.addr);
        assert_eq!(c.request("GET /", "").status, 200);
        idle.push(c);
    }
    let sockets: Vec<TcpStream> = (0..SOCKETS).map(|_| open_websocket(srv.addr)).collect();
    let held = (IDLE + SOCKETS) as u64;
    // A WebSocket's first turn may still be on a worker for a moment after its 101.
    let parked = if engine == Engine::Server { held } else { 0 };
    let s = srv.stats_until("1,000 idle and 100 WebSockets", |s| {
        s.active == held
            && s.waiting == IDLE as u64
            && s.websockets == SOCKETS as u64
            && doing(s) == s.active
            && s.parked == parked
    });
    assert_eq!((s.accepted, s.handled, s.requests), (held, held, held));
    assert_eq!((s.reading, s.queued, s.writing, s.closing), (0, 0, 0, 0));
    assert_eq!((s.event_streams, s.upgraded, s.panics), (0, 0, 0));
    assert_eq!(s.refusals_total(), 0, "{:?}", s.refused);
    match engine {
        Engine::Server => {
            assert_eq!(
                s.parked, held,
                "idle connections and WebSockets wait parked"
            );
            assert!(s.per_loop.is_empty());
            assert_eq!(s.threads, 4 + 2, "workers, the parker and the acceptor");
        }
        Engine::ServerNoPark => {
            assert_eq!(s.parked, 0);
            let threads = (workers + 1 + SOCKETS) as u64;
            assert_eq!(
                s.threads, threads,
                "workers, the acceptor, a thread per WebSocket"
            );
        }
        Engine::ReactorInline | Engine::ReactorPool => {
            assert_eq!(s.parked, 0);
            assert_eq!(s.per_loop.len(), 2);
            assert_eq!(s.per_loop.iter().sum::<u64>(), held);
            let pool = if engine == Engine::ReactorPool { 4 } else { 0 };
            assert_eq!(s.threads, 2 + pool, "the loops and the pool");
        }
    }
    // One of them asks again: a request more, and still all idle after it.
    assert_eq!(idle[0].request("GET /", "").status, 200);
    srv.stats_until("the one served goes back to waiting", |s| {
        s.requests == held + 1 && s.waiting == IDLE as u64 && s.writing == 0
    });
    drop(idle);
    drop(sockets);
    let s = srv.stats_until("everything closed", |s| {
        s.active == 0 && doing(s) == 0 && s.parked == 0 && s.per_loop.iter().all(|&n| n == 0)
    });
    assert_eq!(s.accepted, held);
}

/// Starts a server with `cfg`, runs `client` against it, and waits until its connections are
/// closed.
fn refused(engine: Engine, cfg: Config, client: impl FnOnce(SocketAddr)) -> Stats {
    let srv = start_with(engine, cfg, app);
    client(srv.addr);
    srv.stats_until("connections closed", |s| s.active == 0)
}

fn refusals_by_reason(engine: Engine) {
    // Over max_connections: 503.
    let srv = start_with(
        engine,
        Config {
            max_connections: 1,
            ..Config::default()
        },
        app,
    );
    let mut first = Client::new(srv.addr);
    assert_eq!(first.request("GET /", "").status, 200);
    let (r, _) = probe(srv.addr, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 503);
    let s = srv.stats_until("one refused", |s| s.refusals(Refusal::OverCapacity) == 1);
    assert_eq!((s.accepted, s.handled, s.active), (2, 1, 1));
    drop(first);
    drop(srv);

    // A head not in by the header-read deadline: 408.
    let s = refused(
        engine,
        Config {
            header_read_timeout: Duration::from_millis(200),
            ..Config::default()
        },
        |addr| {
            let (r, _) = probe(addr, b"GET / HTTP/1.1\r\nHost: t\r\n");
            assert_eq!(r.status, 408);
        },
    );
    assert_eq!(s.refusals(Refusal::HeaderTimeout), 1, "{:?}", s.refused);
    assert_eq!(s.refusals_total(), 1);

    // A body slower than its minimum rate: 408.
    let s = refused(
        engine,
        Config {
            body_rate: Some(MinRate::new(1000, Duration::from_millis(200))),
            ..Config::default()
        },
        |addr| {
            let (r, _) = probe(
                addr,
                b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nab",
            );
            assert_eq!(r.status, 408);
        },
    );
    assert_eq!(s.refusals(Refusal::TooSlow), 1, "{:?}", s.refused);

    // The statuses the engine answers itself: 400, 413, 414, 431.
    let mut limits = Limits::default();
    limits.max_target_bytes = 100;
    limits.max_head_bytes = 1024;
    limits.max_body_bytes = 10;
    let s = refused(
        engine,
        Config {
            limits,
            ..Config::default()
        },
        |addr| {
            let long = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(150));
            let large = format!(
                "GET / HTTP/1.1\r\nHost: t\r\nX: {}\r\n\r\n",
                "a".repeat(2000)
            );
            for (req, status) in [
                (
                    b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n".to_vec(),
                    400,
                ),
                (
                    b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n".to_vec(),
                    413,
                ),
                (long.into_bytes(), 414),
                (large.into_bytes(), 431),
            ] {
                assert_eq!(probe(addr, &req).0.status, status);
            }
        },
    );
    for status in [400, 413, 414, 431] {
        assert_eq!(s.refusals(Refusal::Status(status)), 1, "{:?}", s.refused);
    }
    assert_eq!(s.refusals_total(), 4, "{:?}", s.refused);
    assert_eq!(s.requests, 0, "no head was read in full");

    // A handler that panics: 500, counted.
    let s = refused(engine, Config::default(), |addr| {
        assert_eq!(
            probe(addr, b"GET /panic HTTP/1.1\r\nHost: t\r\n\r\n")
                .0
                .status,
            500
        );
        assert_eq!(
            probe(addr, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").0.status,
            200
        );
    });
    assert_eq!((s.panics, s.requests, s.refusals_total()), (1, 2, 0));
}

/// A client that stops reading a large response is cut off at the minimum response rate, and
/// counted as too slow.
fn a_client_too_slow_to_read_is_counted(engine: Engine) {
    let big = |_: &mut Request<'_>| Response::new(200).with_body(vec![b'x'; 32 << 20]);
    let srv = start_with(
        engine,
        Config {
            response_rate: Some(MinRate::new(1000, Duration::from_millis(200))),
            ..Config::default()
        },
        big,
    );
    let mut c = connect(srv.addr);
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("send");
    // Nothing is read: the socket buffers fill, the server waits, then gives up.
    let s = srv.stats_until("cut off as too slow", |s| {
        s.refusals(Refusal::TooSlow) == 1 && s.active == 0
    });
    assert_eq!(s.refusals_total(), 1, "{:?}", s.refused);
    drop(c);
}

/// Review 17: a file response its client does not read is cut off at the minimum response
/// rate, and counted as too slow, as a full or a streamed body is.
fn a_client_too_slow_to_read_a_file_is_counted(engine: Engine) {
    let dir = std::env::temp_dir().join(format!(
        "twinhttp-review17-file-{}-{engine:?}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("a folder");
    let path = dir.join("big.bin");
    std::fs::write(&path, vec![b'x'; 32 << 20]).expect("a file");
    let file = path.clone();
    let srv = start_with(
        engine,
        Config {
            response_rate: Some(MinRate::new(1000, Duration::from_millis(200))),
            ..Config::default()
        },
        move |req: &mut Request<'_>| Response::file(req, &file),
    );
    let mut c = connect(srv.addr);
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("send");
    // Nothing is read: the socket buffers fill, the server waits, then gives up.
    let s = srv.stats_until("cut off", |s| s.requests == 1 && s.active == 0);
    assert_eq!(s.refusals(Refusal::TooSlow), 1, "{:?}", s.refused);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Review 17: every way a connection ends brings the gauges back to zero, and a hidden
/// negative gauge (shown as 0 by the snapshot) would show up as a miscount of the next one.
fn counters_return_to_zero_after_every_kind_of_end(engine: Engine) {
    use std::io::Read;
    let handler = |req: &mut Request<'_>| match req.path() {
        "/ws" => echo_websocket(req),
        "/sse" => {
            let (resp, sender) = Response::event_stream();
            std::mem::forget(sender);
            resp
        }
        "/upgrade" => Response::upgrade("x-test", |mut up| {
            let mut b = [0u8; 1];
            let _ = up.read(&mut b);
        }),
        _ => app(req),
    };
    let srv = start_with(
        engine,
        Config {
            header_read_timeout: Duration::from_millis(1500),
            max_connections: 6,
            workers: 16,
            ..Config::default()
        },
        handler,
    );
    // A WebSocket closed by its client's close frame, one dropped.
    let mut ws = open_websocket(srv.addr);
    ws.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    ws.write_all(&[0x88, 0x82, 1, 2, 3, 4, 0x03 ^ 1, 0xe8 ^ 2])
        .expect("close frame");
    let mut rest = Vec::new();
    let _ = ws.read_to_end(&mut rest);
    drop(open_websocket(srv.addr));
    // An event stream its client leaves.
    let mut sse = connect(srv.addr);
    sse.write_all(b"GET /sse HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("send");
    assert!(read_head(&mut sse).starts_with("HTTP/1.1 200 "));
    srv.stats_until("an event stream", |s| s.event_streams == 1);
    drop(sse);
    // A generic upgrade whose thread ends.
    let mut up = connect(srv.addr);
    up.write_all(
        b"GET /upgrade HTTP/1.1\r\nHost: t\r\nUpgrade: x-test\r\nConnection: upgrade\r\n\r\n",
    )
    .expect("send");
    assert!(read_head(&mut up).starts_with("HTTP/1.1 101 "));
    up.write_all(b"x").expect("send");
    drop(up);
    // A refusal that lingers while its client goes on sending, a panic, a partial head.
    let (r, mut c) = probe(
        srv.addr,
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\nmore",
    );
    assert_eq!(r.status, 400);
    let _ = c.try_send(b"and more");
    drop(c);
    assert_eq!(
        probe(srv.addr, b"GET /panic HTTP/1.1\r\nHost: t\r\n\r\n")
            .0
            .status,
        500
    );
    assert_eq!(
        probe(srv.addr, b"GET / HTTP/1.1\r\nHost: t\r\n").0.status,
        408
    );
    // Over capacity: 503.
    srv.stats_until("all closed before", |s| s.active == 0);
    let held: Vec<Client> = (0..6)
        .map(|_| {
            let mut c = Client::new(srv.addr);
            assert_eq!(c.request("GET /", "").status, 200);
            c
        })
        .collect();
    srv.stats_until("six open", |s| s.active == 6);
    assert_eq!(
        probe(srv.addr, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            .0
            .status,
        503
    );
    drop(held);
    let s = srv.stats_until("everything closed", |s| s.active == 0);
    assert_eq!(doing(&s), 0, "{s:#?}");
    assert_eq!(s.parked, 0, "{s:#?}");
    assert!(s.per_loop.iter().all(|&n| n == 0), "{s:#?}");
    // A gauge below zero is shown as 0: one new idle connection must count exactly once.
    let mut one = Client::new(srv.addr);
    assert_eq!(one.request("GET /", "").status, 200);
    let s = srv.stats_until("one idle", |s| s.active == 1 && s.writing == 0);
    assert_eq!((s.waiting, doing(&s)), (1, 1), "{s:#?}");
    let mut partial = connect(srv.addr);
    partial.write_all(b"GET / HT").expect("send");
    let s = srv.stats_until("one reading", |s| s.active == 2 && s.reading == 1);
    assert_eq!((s.waiting, doing(&s)), (1, 2), "{s:#?}");
}

engine_tests!(
    held_connections_are_counted,
    refusals_by_reason,
    a_client_too_slow_to_read_is_counted,
    a_client_too_slow_to_read_a_file_is_counted,
    counters_return_to_zero_after_every_kind_of_end
);

/// Review 17: a builder cloned after `stats_handle()` carries the same handle, and the first of
/// the two engines to serve takes it: the handle made from one builder reads the other engine.
#[test]
fn a_stats_handle_reads_the_engine_of_its_builder() {
    let mut b = twinhttp::reactor::Reactor::builder().loops(1);
    let handle = b.stats_handle();
    let other = b.clone();
    let first = other.serve("127.0.0.1:0", app).expect("the clone serves");
    let mine = b.serve("127.0.0.1:0", app).expect("the builder serves");
    let mut c = Client::new(mine.local_addr());
    assert_eq!(c.request("GET /", "").status, 200);
    assert_eq!(mine.stats().requests, 1);
    assert_eq!(first.stats().requests, 0);
    assert_eq!(
        handle.stats().requests,
        1,
        "the handle made from `b` reads the engine `b` started"
    );
}

/// Review 17: with parking off, a connection waiting in the worker queue has sent nothing, yet
/// it is counted as `queued` ("a whole head buffered"), not `waiting` ("nothing of its next
/// request yet").
#[cfg(feature = "server")]
#[test]
fn a_silent_connection_in_the_queue_is_waiting() {
    let srv = start_with(
        Engine::ServerNoPark,
        Config {
            workers: 1,
            ..Config::default()
        },
        app,
    );
    let mut first = Client::new(srv.addr);
    assert_eq!(first.request("GET /", "").status, 200);
    let _silent = connect(srv.addr);
    // The first response reaches the client before its worker counts the connection as waiting
    // again: wait for that too (as `held_connections_are_counted` does), not only for the second
    // connection.
    let s = srv.stats_until("two open, none writing", |s| {
        s.active == 2 && s.writing == 0
    });
    assert_eq!((s.waiting, s.queued), (2, 0), "{s:#?}");
}
