//! A panicking handler costs one 500, not the server; over max connections new ones get 503.
mod support;
use support::{Client, Config, Engine, app, start_with};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

/// A server whose handler answers `path` with a `200` whose body `body` makes (handler code
/// that may panic), and `ok` to anything else.
fn serving(
    engine: Engine,
    workers: usize,
    path: &'static str,
    body: fn() -> twinhttp::Body,
) -> support::TestServer {
    use twinhttp::{Request, Response};
    let cfg = Config {
        workers,
        ..Config::default()
    };
    start_with(engine, cfg, move |req: &mut Request<'_>| {
        if req.path() == path {
            Response::new(200).with_body(body())
        } else {
            Response::text("ok")
        }
    })
}

fn panic_is_a_500_and_server_lives(engine: Engine) {
    let srv = start_with(
        engine,
        Config {
            workers: 2,
            ..Config::default()
        },
        app,
    );
    for _ in 0..10 {
        let mut c = Client::new(srv.addr);
        let r = c.roundtrip(b"GET /panic HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.status, 500);
        assert!(r.closes());
    }
    // Ten panics on two workers: both workers must still be alive to serve two at once.
    // (Not on inline dispatch: a blocking handler holds its event loop by design.)
    if engine == Engine::ReactorInline {
        assert_eq!(
            Client::new(srv.addr)
                .roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                .status,
            200
        );
        return;
    }
    let mut a = Client::new(srv.addr);
    let mut b = Client::new(srv.addr);
    a.send(b"GET /sleep?ms=200 HTTP/1.1\r\nHost: t\r\n\r\n");
    b.send(b"GET /sleep?ms=200 HTTP/1.1\r\nHost: t\r\n\r\n");
    let started = std::time::Instant::now();
    assert_eq!(a.response().status, 200);
    assert_eq!(b.response().status, 200);
    assert!(
        started.elapsed() < std::time::Duration::from_millis(390),
        "served in parallel"
    );
}

fn over_max_connections_gets_503(engine: Engine) {
    let srv = start_with(
        engine,
        Config {
            max_connections: 3,
            ..Config::default()
        },
        app,
    );
    let mut held: Vec<Client> = (0..3).map(|_| Client::new(srv.addr)).collect();
    for c in &mut held {
        assert_eq!(c.roundtrip(GET).status, 200);
    }
    let mut extra = Client::new(srv.addr);
    let r = extra.response();
    assert_eq!(r.status, 503);
    assert!(r.closes());
    // The core's own error page, as every refusal: dated, worth retrying soon.
    assert!(
        r.header("date").is_some_and(|d| d.ends_with(" GMT")),
        "{r:?}"
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.text(), "Service Unavailable");
    drop((held, extra));
    // Once the server has seen the held connections close, a new one is served again.
    srv.until_none_open();
    assert_eq!(Client::new(srv.addr).roundtrip(GET).status, 200);
}

fn garbage_never_kills_a_worker(engine: Engine) {
    let srv = start_with(
        engine,
        Config {
            workers: 1,
            ..Config::default()
        },
        app,
    );
    let junk: &[&[u8]] = &[
        b"\x00\x01\x02\r\n\r\n",
        b"\r\n\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\n\x7f: x\r\n\r\n",
        &[0xff; 2000],
    ];
    for j in junk {
        let mut c = Client::new(srv.addr);
        if c.try_send(j) {
            let _ = c.read_response(false);
        }
    }
    assert_eq!(Client::new(srv.addr).roundtrip(GET).status, 200);
}

/// An endless response body whose `Drop` panics: handler code, run wherever the connection's
/// end drops it.
struct PanicsWhenDropped;

impl std::io::Read for PanicsWhenDropped {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        buf.fill(b'x');
        Ok(buf.len())
    }
}

impl Drop for PanicsWhenDropped {
    fn drop(&mut self) {
        panic!("a response body panics when dropped");
    }
}

/// A client that leaves while such a body streams to it: the connection's end drops the body
/// on whichever thread drove it (the thread-pool server's parker, an event loop), and the panic
/// costs that connection only: a keep-alive client parked meanwhile and a new one are served.
/// The panic is counted with the handlers' (it was only logged).
fn a_body_that_panics_when_dropped_costs_its_connection_only(engine: Engine) {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let srv = serving(engine, Config::default().workers, "/endless", || {
        twinhttp::Body::reader(PanicsWhenDropped)
    });
    let mut parked = Client::new(srv.addr);
    assert_eq!(parked.roundtrip(GET).status, 200);
    let mut leaving = support::connect(srv.addr);
    leaving
        .write_all(b"GET /endless HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("send");
    let mut some = [0u8; 4096];
    leaving.read_exact(&mut some).expect("the body streams");
    // Gone with unread bytes in its buffer: a reset, which the server's next write meets.
    drop(leaving);
    let deadline = Instant::now() + Duration::from_secs(10);
    while srv.open_connections() > 1 {
        assert!(
            Instant::now() < deadline,
            "the leaving connection never closed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    srv.stats_until("the panic counted", |st| st.panics == 1);
    assert_eq!(parked.roundtrip(GET).status, 200, "the parked client");
    assert_eq!(
        Client::new(srv.addr).roundtrip(GET).status,
        200,
        "a new one"
    );
    assert_eq!(srv.stats().panics, 1);
}

/// A `HEAD` answered with such a body never reads it: it is dropped after the head is written,
/// where the handler ran. With one worker (one loop inline), a panic there that killed the
/// thread would leave the next request unanswered. Each panic is counted.
fn a_head_response_body_that_panics_when_dropped_costs_nothing(engine: Engine) {
    let srv = serving(engine, 1, "/endless", || {
        twinhttp::Body::reader(PanicsWhenDropped)
    });
    for _ in 0..3 {
        // A client of its own each time, closed after (without parking, a kept connection
        // would hold the one worker).
        let mut c = Client::new(srv.addr);
        c.send(b"HEAD /endless HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let r = c.read_response(true).expect("the HEAD's response");
        assert_eq!(r.status, 200);
        assert_eq!(Client::new(srv.addr).roundtrip(GET).status, 200);
    }
    assert_eq!(srv.stats().panics, 3);
}

/// A response body whose read panics after its first pieces: the response is cut (no last
/// chunk), the panic is counted with the handlers', and the server goes on, on whichever thread
/// produced it (a worker, an event loop inline, the reactor's pool).
struct PanicsAfter(usize);

impl std::io::Read for PanicsAfter {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        assert!(self.0 > 0, "a response body panics while it is read");
        let n = buf.len().min(self.0);
        buf[..n].fill(b'x');
        self.0 -= n;
        Ok(n)
    }
}

fn a_body_that_panics_while_read_is_cut_and_counted(engine: Engine) {
    use std::io::Read;
    let srv = serving(engine, Config::default().workers, "/panics", || {
        twinhttp::Body::reader(PanicsAfter(40_000))
    });
    let mut c = support::connect(srv.addr);
    std::io::Write::write_all(&mut c, b"GET /panics HTTP/1.1\r\nHost: t\r\n\r\n").expect("send");
    let mut got = Vec::new();
    // The connection ends (cut short: perhaps a reset) once the body panicked.
    let _ = c.read_to_end(&mut got);
    assert!(
        !got.ends_with(b"0\r\n\r\n"),
        "no last chunk: the body is cut"
    );
    srv.stats_until("the panic counted", |st| st.panics == 1);
    assert_eq!(Client::new(srv.addr).roundtrip(GET).status, 200);
    assert_eq!(srv.stats().panics, 1);
}

/// A fresh client's request is answered, within 5 s (a dead engine thread leaves it unanswered).
fn answered(addr: std::net::SocketAddr) -> bool {
    let mut c = Client::new(addr);
    c.read_timeout(std::time::Duration::from_secs(5));
    c.try_send(GET) && matches!(c.read_response(false), Some(r) if r.status == 200)
}

/// An upgrade the request does not allow (no `Connection: upgrade`, the client's choice) is
/// answered 426 and its callback dropped, handler code whose `Drop` may panic: the panic is
/// caught and counted, and the thread that dropped it goes on (found by review: it killed the
/// worker or the event loop, and the 426 never went out).
fn a_refused_upgrade_whose_callback_panics_when_dropped_costs_nothing(engine: Engine) {
    use twinhttp::{Request, Response};
    let srv = start_with(
        engine,
        Config {
            workers: 1,
            ..Config::default()
        },
        |req: &mut Request<'_>| match req.path() {
            "/up" => {
                let state = PanicsWhenDropped;
                Response::upgrade("x-hold", move |_| drop(state))
            }
            _ => Response::text("ok"),
        },
    );
    for _ in 0..2 {
        let mut c = Client::new(srv.addr);
        c.read_timeout(std::time::Duration::from_secs(5));
        c.send(b"GET /up HTTP/1.1\r\nHost: t\r\nUpgrade: x-hold\r\n\r\n");
        let r = c.read_response(false).expect("an answer");
        assert_eq!(r.status, 426);
    }
    // Fresh clients, spread over the reactor's loops.
    for i in 0..4 {
        assert!(answered(srv.addr), "request {i} after the refusals");
    }
    assert_eq!(srv.stats().panics, 2);
}

/// An upgraded connection's callback is handler code on a thread of its own: a panic there
/// ends that thread and its connection, and is counted with the handlers' panics (it was not).
fn an_upgraded_connections_callback_that_panics_is_counted(engine: Engine) {
    use twinhttp::{Request, Response};
    let srv = start_with(
        engine,
        Config::default(),
        |req: &mut Request<'_>| match req.path() {
            "/up" => Response::upgrade("x-boom", |_| panic!("an upgraded callback panics")),
            _ => Response::text("ok"),
        },
    );
    let mut c = Client::new(srv.addr);
    c.read_timeout(std::time::Duration::from_secs(5));
    c.send(b"GET /up HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: x-boom\r\n\r\n");
    let r = c.read_response(false).expect("an answer");
    assert_eq!(r.status, 101);
    assert!(c.is_closed(), "the connection ends with its callback");
    srv.stats_until("the panic counted", |st| st.panics == 1);
    for i in 0..4 {
        assert!(answered(srv.addr), "request {i} after it");
    }
    assert_eq!(srv.stats().panics, 1);
}

/// A handler that panics with a payload (`panic_any`) whose own `Drop` panics: the payload is
/// handler code too, dropped caught; the request is answered 500 and the thread that ran the
/// handler goes on (found by review: the payload was dropped outside the catch, and the second
/// panic killed the worker or the event loop; on the reactor's pool the loop then waited for
/// ever at shutdown for the answer that never came).
fn a_panic_whose_payload_panics_when_dropped_costs_one_500(engine: Engine) {
    use twinhttp::{Request, Response};
    let cfg = Config {
        workers: 1,
        ..Config::default()
    };
    let srv = start_with(engine, cfg, |req: &mut Request<'_>| match req.path() {
        "/bomb" => std::panic::panic_any(PanicsWhenDropped),
        _ => Response::text("ok"),
    });
    let r = Client::new(srv.addr).roundtrip(b"GET /bomb HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 500);
    for i in 0..4 {
        assert!(answered(srv.addr), "request {i} after it");
    }
    assert_eq!(srv.stats().panics, 1);
    assert!(srv.shutdown(std::time::Duration::from_secs(10)).is_ok());
}

/// A body that panics while it is read and again when it is dropped (the state the first panic
/// left) is one panic, counted once (found by review: counted twice).
struct PanicsReadAndDropped;

impl std::io::Read for PanicsReadAndDropped {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        panic!("a response body panics when read");
    }
}

impl Drop for PanicsReadAndDropped {
    fn drop(&mut self) {
        panic!("and again when dropped");
    }
}

fn a_body_that_panics_when_read_and_dropped_is_counted_once(engine: Engine) {
    use std::io::Read;
    let srv = serving(engine, Config::default().workers, "/twice", || {
        twinhttp::Body::reader(PanicsReadAndDropped)
    });
    let mut c = support::connect(srv.addr);
    std::io::Write::write_all(&mut c, b"GET /twice HTTP/1.1\r\nHost: t\r\n\r\n").expect("send");
    let _ = c.read_to_end(&mut Vec::new());
    srv.until_none_open();
    assert!(answered(srv.addr), "the server goes on");
    assert_eq!(srv.stats().panics, 1);
}

/// A server with pool dispatch whose handler waits for its release and then answers with a
/// body that panics when dropped; a client sent it a request and left (with a reset) while the
/// handler ran, and the loop closed its connection. The sender releases the handler.
fn a_client_left_while_its_handler_ran() -> (support::TestServer, std::sync::mpsc::Sender<()>) {
    use std::sync::Mutex;
    use std::sync::mpsc::channel;
    use std::time::Duration;
    use twinhttp::{Body, Request, Response};
    let (entered, handler_runs) = channel::<()>();
    let (release, released) = channel::<()>();
    let waits = Mutex::new((entered, released));
    let srv = start_with(
        Engine::ReactorPool,
        Config::default(),
        move |req: &mut Request<'_>| match req.path() {
            "/left" => {
                if let Ok(w) = waits.lock() {
                    let _ = w.0.send(());
                    let _ = w.1.recv_timeout(Duration::from_secs(20));
                }
                Response::new(200).with_body(Body::reader(PanicsWhenDropped))
            }
            _ => Response::text("ok"),
        },
    );
    let mut c = support::connect(srv.addr);
    std::io::Write::write_all(&mut c, b"GET /left HTTP/1.1\r\nHost: t\r\n\r\n").expect("send");
    handler_runs
        .recv_timeout(Duration::from_secs(10))
        .expect("the handler runs");
    // Gone with a reset: the loop closes the connection while the handler is away.
    socket2::SockRef::from(&c)
        .set_linger(Some(Duration::ZERO))
        .expect("linger");
    drop(c);
    srv.until_none_open();
    (srv, release)
}

/// With pool dispatch, a client that leaves while its handler runs: the handler's response
/// comes back to the loop for a connection that is gone, and its body (handler code) is dropped
/// there, a panic in its `Drop` caught and counted (found by review: it killed the loop).
#[test]
fn on_the_reactor_pool_a_response_whose_client_left_is_dropped_caught() {
    let (srv, release) = a_client_left_while_its_handler_ran();
    release.send(()).expect("the handler waits");
    srv.stats_until("the panic counted", |st| st.panics == 1);
    for i in 0..4 {
        assert!(answered(srv.addr), "request {i} after it");
    }
}

/// A streaming handler whose request body fails (a malformed chunk: the client's choice)
/// answers with a body that panics when dropped: the body's failure is the answer (400), and the
/// handler's is dropped caught and counted (found by review: dropped uncaught, it killed the
/// worker, and the 400 never went out).
fn a_streaming_handlers_answer_to_a_failed_body_is_dropped_caught(engine: Engine) {
    use std::io::Read;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use twinhttp::{Body, Request, Response, Router, handler_fn, streaming};
    let ran = Arc::new(AtomicU64::new(0));
    let runs = ran.clone();
    let router = Router::new()
        .route_to(
            "/up",
            &["POST"],
            streaming(handler_fn(move |req: &mut Request<'_>| {
                runs.fetch_add(1, Ordering::Relaxed);
                let _ = req.body().read_to_end(&mut Vec::new());
                Response::new(200).with_body(Body::reader(PanicsWhenDropped))
            })),
        )
        .get("/", |_: &mut Request<'_>| Response::text("ok"));
    let cfg = Config {
        workers: 1,
        ..Config::default()
    };
    let srv = start_with(engine, cfg, router);
    let mut c = Client::new(srv.addr);
    c.read_timeout(std::time::Duration::from_secs(5));
    c.send(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n");
    let r = c.read_response(false).expect("an answer");
    assert_eq!(r.status, 400);
    drop(c);
    srv.until_none_open();
    for i in 0..4 {
        assert!(answered(srv.addr), "request {i} after it");
    }
    // The thread-pool engine runs the handler as the body starts; the reactor reads this one
    // (all of it came at once) and answers its failure without running the handler.
    let ran = ran.load(Ordering::Relaxed);
    if !engine.is_reactor() {
        assert_eq!(ran, 1, "the handler ran");
    }
    assert_eq!(srv.stats().panics, ran);
}

engine_tests!(
    a_panic_whose_payload_panics_when_dropped_costs_one_500,
    an_upgraded_connections_callback_that_panics_is_counted,
    a_streaming_handlers_answer_to_a_failed_body_is_dropped_caught,
    a_refused_upgrade_whose_callback_panics_when_dropped_costs_nothing,
    a_body_that_panics_when_read_and_dropped_is_counted_once,
    a_body_that_panics_when_dropped_costs_its_connection_only,
    a_head_response_body_that_panics_when_dropped_costs_nothing,
    a_body_that_panics_while_read_is_cut_and_counted,
    panic_is_a_500_and_server_lives,
    over_max_connections_gets_503,
    garbage_never_kills_a_worker
);

/// The reactor's pool answers a request whose client left while its handler ran, after
/// shutdown began: the loop waits for the answer (it stays until every job it sent the pool is
/// back) and drops it caught. (Found by review: the loop, with no connection left, ended; the
/// answer was dropped uncaught with the loop's inbox on the pool worker, which died, and the
/// panic of its body's `Drop` went uncounted.)
#[test]
fn an_answer_for_a_client_that_left_as_the_shutdown_began_is_dropped_caught() {
    use std::time::{Duration, Instant};
    let (srv, release) = a_client_left_while_its_handler_ran();
    srv.shutdown_handle().shutdown();
    // A loop with nothing open and nothing away ends at once; this one has an answer away and
    // stays. Had it ended too, no loop would be left, at most the pool's workers: wait for
    // that, or for a second (bounded: with the loop staying, the count never falls that far).
    // (Not any thread's end: the other loop ends at once.)
    let workers = Config::default().workers as u64;
    let deadline = Instant::now() + Duration::from_secs(1);
    while srv.stats().threads > workers && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    release.send(()).expect("the handler waits for its release");
    srv.stats_until("the body's panic counted", |st| st.panics == 1);
    assert!(srv.shutdown(Duration::from_secs(10)).is_ok());
}

/// A handler whose `streams_body` (handler code, asked where the server engine drives the
/// connection: the parker or a worker) panics: caught, logged and counted, and the body is read
/// whole before the handler runs, as by default; the thread that asked goes on (found by
/// review: the worker or the parker died).
#[cfg(feature = "server")]
#[test]
fn a_handler_whose_streams_body_panics_costs_nothing_else() {
    use twinhttp::{Handler, Request, Response};
    struct AsksAndPanics;
    impl Handler for AsksAndPanics {
        fn handle(&self, req: &mut Request<'_>) -> Response {
            let mut body = String::new();
            let _ = std::io::Read::read_to_string(req.body(), &mut body);
            Response::text(body)
        }
        fn streams_body(&self, req: &Request<'_>) -> bool {
            if req.path() == "/bomb" {
                panic!("streams_body panics");
            }
            false
        }
    }
    for engine in [Engine::Server, Engine::ServerNoPark] {
        let cfg = Config {
            workers: 1,
            ..Config::default()
        };
        let srv = start_with(engine, cfg, AsksAndPanics);
        let mut c = Client::new(srv.addr);
        let r = c.roundtrip(b"POST /bomb HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
        assert_eq!((r.status, r.text().as_str()), (200, "abc"), "{engine:?}");
        // (Without parking, a connection holds its worker: the one worker is free once it goes.)
        drop(c);
        for i in 0..4 {
            assert!(answered(srv.addr), "{engine:?}: request {i} after it");
        }
        assert_eq!(srv.stats().panics, 1, "{engine:?}");
    }
}
