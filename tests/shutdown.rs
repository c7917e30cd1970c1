//! Graceful shutdown: stop accepting, finish in-flight requests, close idle connections, join.
//! Shutdown begins only once the requests it must finish are in their handlers (a channel from
//! the handler says so), not after a sleep.
mod support;
use std::net::TcpStream;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{
    Client, Config, Engine, TestServer, app, connect, read_head, send, start, start_with,
};
use tungstenite::protocol::frame::coding::CloseCode;
use twinhttp::ws::{CloseFrame, RequestExt, WsHandler, WsMessage, WsSender};
use twinhttp::{Request, Response};

/// The test app, telling `entered` each time a handler for `/echo` or `/sleep` starts.
fn signalling(entered: Sender<()>) -> impl Fn(&mut Request<'_>) -> Response + Send + Sync {
    let entered = Mutex::new(entered);
    move |req: &mut Request<'_>| {
        if matches!(req.path(), "/echo" | "/sleep") {
            if let Ok(tx) = entered.lock() {
                let _ = tx.send(());
            }
        }
        app(req)
    }
}

/// Waits (bounded) for `n` handlers to have started.
fn wait_entered(entered: &Receiver<()>, n: usize) {
    for i in 0..n {
        entered
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("only {i} of {n} handlers started"));
    }
}

fn in_flight_finish_idle_close(engine: Engine) {
    let (tx, entered) = channel();
    let srv = start_with(
        engine,
        // Thread per connection holds a worker on each of the nine connections below.
        Config {
            workers: 12,
            ..Config::default()
        },
        signalling(tx),
    );
    let addr = srv.addr;
    // Idle keep-alive connections.
    let mut idle: Vec<Client> = (0..3).map(|_| Client::new(addr)).collect();
    for c in &mut idle {
        assert_eq!(
            c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
            200
        );
    }
    // In flight on every engine: a request whose body is still arriving when shutdown begins.
    // Its `100 Continue` shows the server has its head (sent once the head is parsed: the body
    // is read before its handler runs); the rest of the body goes out once
    // `witness`, an idle connection, has been closed: shutdown has begun.
    let mut witness = Client::new(addr);
    assert_eq!(
        witness
            .roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            .status,
        200
    );
    let (has_head, head_read) = channel();
    let arriving = std::thread::spawn(move || {
        let mut c = Client::new(addr);
        c.send(
            b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n",
        );
        assert_eq!(c.response().status, 100);
        c.send(b"01234");
        let _ = has_head.send(());
        assert!(witness.is_closed(), "idle connections close at shutdown");
        c.send(b"56789");
        let r = c.response();
        (r.status, r.closes(), r.text())
    });
    head_read
        .recv_timeout(Duration::from_secs(10))
        .expect("the server read the head");
    // In flight where handlers may block (not inline dispatch): slow handlers.
    let slow = if engine == Engine::ReactorInline {
        0
    } else {
        4
    };
    let inflight: Vec<_> = (0..slow)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Client::new(addr);
                let r = c.roundtrip(b"GET /sleep?ms=400 HTTP/1.1\r\nHost: t\r\n\r\n");
                (r.status, r.closes())
            })
        })
        .collect();
    // The slow ones are in their handlers (the body arriving is read before its handler runs).
    wait_entered(&entered, slow);
    let started = Instant::now();
    srv.shutdown(Duration::from_secs(5))
        .expect("shutdown within its deadline");
    let took = started.elapsed();
    for t in inflight {
        let (status, closes) = t.join().expect("client thread");
        assert_eq!(status, 200, "in-flight request finished");
        assert!(closes, "and was told the connection closes");
    }
    let (status, closes, text) = arriving.join().expect("client thread");
    assert_eq!(
        (status, text.as_str()),
        (200, "0123456789"),
        "request still arriving was finished"
    );
    assert!(closes);
    for c in &mut idle {
        assert!(c.is_closed(), "idle connection closed");
    }
    assert!(took < Duration::from_secs(3), "shutdown took {took:?}");
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "no longer accepting"
    );
}

fn shutdown_under_load(engine: Engine) {
    let srv = start_with(
        engine,
        Config {
            workers: 4,
            ..Config::default()
        },
        app,
    );
    let addr = srv.addr;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (served, first) = channel();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let stop = stop.clone();
            let served = served.clone();
            std::thread::spawn(move || {
                let (mut ok, mut bad) = (0u32, 0u32);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && ok + bad < 100_000 {
                    let Ok(s) = std::net::TcpStream::connect(addr) else {
                        break;
                    };
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut c = Client {
                        reader: std::io::BufReader::new(s),
                    };
                    for _ in 0..20 {
                        // The server may close this connection at any point once shutdown begins.
                        if !c.try_send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n") {
                            break;
                        }
                        match c.read_response(false) {
                            Some(r) if r.status == 200 => {
                                if ok == 0 {
                                    let _ = served.send(());
                                }
                                ok += 1;
                            }
                            Some(_) => bad += 1,
                            None => break,
                        }
                    }
                }
                (ok, bad)
            })
        })
        .collect();
    // Every client has been answered at least once: the load is on.
    wait_entered(&first, 8);
    srv.shutdown(Duration::from_secs(5))
        .expect("shutdown under load within its deadline");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for c in clients {
        let (ok, bad) = c.join().expect("client");
        assert_eq!(bad, 0, "every answer before shutdown was a 200");
        total += ok;
    }
    assert!(total > 0);
}

fn shutdown_deadline_is_reported(engine: Engine) {
    let (tx, entered) = channel();
    let srv = start_with(engine, Config::default(), signalling(tx));
    let addr = srv.addr;
    let t = std::thread::spawn(move || {
        Client::new(addr)
            .roundtrip(b"GET /sleep?ms=1500 HTTP/1.1\r\nHost: t\r\n\r\n")
            .status
    });
    wait_entered(&entered, 1);
    let err = srv
        .shutdown(Duration::from_millis(200))
        .expect_err("a handler outlives the grace period");
    assert!(err.is_timeout());
    assert_eq!(
        t.join().expect("client"),
        200,
        "the request still completes"
    );
}

/// A connection accepted before the shutdown whose first request comes just after it began (a
/// hand-over to another process races so) is answered, told the connection closes; one that
/// sends nothing is closed a moment later: not at once, not at its head deadline.
fn a_fresh_connection_gets_a_moment_for_its_first_request(engine: Engine) {
    let srv = start_with(engine, Config::default(), app);
    let mut early = Client::new(srv.addr);
    let mut silent = Client::new(srv.addr);
    support::wait_open(&srv, 2);
    srv.shutdown_handle().shutdown();
    let began = Instant::now();
    let r = early.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, r.closes()), (200, true));
    assert!(silent.is_closed(), "the silent connection closes");
    let took = began.elapsed();
    assert!(took >= Duration::from_millis(900), "closed after {took:?}");
    assert!(took < Duration::from_secs(3), "closed after {took:?}");
    srv.shutdown(Duration::from_secs(5))
        .expect("shutdown within its deadline");
}

/// The reactor's shutdown pass drives every connection once, so that a request already in a
/// socket is answered, told the connection closes, rather than dropped unread. Here it came on
/// a connection whose last read had found the socket drained, while an inline handler held the
/// one event loop, and shutdown began before the loop was let go. The driver does not read a
/// drained stream again in a turn no readable event began; the shutdown pass is such a turn,
/// and it reads.
#[test]
fn a_request_that_came_while_the_loop_was_held_is_answered_at_shutdown() {
    let (tell_entered, entered) = channel();
    let (release, released) = channel::<()>();
    let (tell_entered, released) = (Mutex::new(tell_entered), Mutex::new(released));
    let reactor = twinhttp::reactor::Reactor::builder()
        .loops(1)
        .dispatch(twinhttp::reactor::Dispatch::Inline)
        .serve(
            "127.0.0.1:0",
            twinhttp::handler_fn(move |req| {
                if req.path() == "/hold" {
                    if let Ok(tx) = tell_entered.lock() {
                        let _ = tx.send(());
                    }
                    if let Ok(rx) = released.lock() {
                        let _ = rx.recv_timeout(Duration::from_secs(10));
                    }
                    // Holding the loop a while past the shutdown's start, as a blocking
                    // handler does (longer than a tick of the clock that times it).
                    std::thread::sleep(Duration::from_millis(30));
                }
                Response::text("ok")
            }),
        )
        .expect("reactor starts");
    let addr = reactor.local_addr();
    let mut drained = Client::new(addr);
    let get = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    assert_eq!(drained.roundtrip(get).status, 200);
    let mut holder = Client::new(addr);
    holder.send(b"GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
    wait_entered(&entered, 1);
    drained.send(get);
    reactor.shutdown_handle().shutdown();
    let _ = release.send(());
    // Answered after shutdown began, while its handler held the loop: the last on its
    // connection.
    let r = holder.response();
    assert_eq!((r.status, r.closes()), (200, true), "the held request");
    let r = drained.response();
    assert_eq!(
        (r.status, r.closes()),
        (200, true),
        "the request in the socket is answered"
    );
    assert!(drained.is_closed(), "and the connection closes");
    reactor
        .shutdown(Duration::from_secs(5))
        .expect("shutdown within its deadline");
}

/// Clients part-way through a head when shutdown begins wait for it in the server, never on a
/// worker: with two workers and six such clients (their head deadline 2 s), a seventh whose
/// head comes whole after shutdown began is answered at once, told the connection closes, and
/// the shutdown ends about the slow ones' deadline after it began, not one deadline per worker's
/// turn at them. (With parking: without it every connection has a worker of its own.)
fn clients_part_way_through_a_head_at_shutdown_hold_no_worker(engine: Engine) {
    const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    let srv = start_with(
        engine,
        Config {
            workers: 2,
            header_read_timeout: Duration::from_secs(2),
            ..Config::default()
        },
        app,
    );
    let part_way = |srv: &support::TestServer| {
        let mut c = Client::new(srv.addr);
        assert_eq!(c.roundtrip(GET).status, 200);
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
        c
    };
    // The late one last: the shutdown pass meets it after the slow ones.
    let _slow: Vec<Client> = (0..6).map(|_| part_way(&srv)).collect();
    let mut late = part_way(&srv);
    srv.stats_until("seven part-way heads", |s| s.reading >= 7);
    srv.shutdown_handle().shutdown();
    let began = Instant::now();
    late.send(b"\r\n");
    let r = late.response();
    assert_eq!((r.status, r.closes()), (200, true));
    let answered = began.elapsed();
    assert!(
        answered < Duration::from_secs(1),
        "answered after {answered:?}"
    );
    srv.shutdown(Duration::from_secs(20))
        .expect("shutdown within its deadline");
    let took = began.elapsed();
    assert!(took < Duration::from_millis(4500), "shutdown took {took:?}");
}

/// A keep-alive connection its worker lingers on for the next request (`park_linger`) when
/// shutdown begins is closed at once, not parked with its idle deadline (60 s here): the
/// shutdown ends within its grace.
#[cfg(feature = "server")]
#[test]
fn a_keep_alive_connection_lingering_on_its_worker_at_shutdown_closes_at_once() {
    let srv = twinhttp::server::Server::builder()
        .workers(2)
        .idle_timeout(Duration::from_secs(60))
        .park_linger(Duration::from_millis(500))
        .serve("127.0.0.1:0", app)
        .expect("a server");
    let mut c = Client::new(srv.local_addr());
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let began = Instant::now();
    srv.shutdown(Duration::from_secs(5))
        .expect("shutdown within its grace");
    let took = began.elapsed();
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
    assert!(c.is_closed(), "the idle connection closed");
}

#[cfg(feature = "server")]
#[test]
fn on_the_server_engine_clients_part_way_through_a_head_at_shutdown_hold_no_worker() {
    clients_part_way_through_a_head_at_shutdown_hold_no_worker(Engine::Server);
}

#[test]
fn on_the_reactor_inline_clients_part_way_through_a_head_at_shutdown_hold_no_worker() {
    clients_part_way_through_a_head_at_shutdown_hold_no_worker(Engine::ReactorInline);
}

#[test]
fn on_the_reactor_pool_clients_part_way_through_a_head_at_shutdown_hold_no_worker() {
    clients_part_way_through_a_head_at_shutdown_hold_no_worker(Engine::ReactorPool);
}

/// What happened, in the order it happened, from the threads that did it.
type Order = Arc<Mutex<Vec<&'static str>>>;

fn note(order: &Order, what: &'static str) {
    order.lock().unwrap_or_else(|e| e.into_inner()).push(what);
}

/// Begins `srv`'s shutdown and calls its `wait` on a thread of its own, which notes when `wait`
/// returned; the receiver hears of it too.
fn shut_down_and_wait(
    srv: TestServer,
    order: &Order,
) -> (Receiver<()>, std::thread::JoinHandle<()>) {
    let handle = srv.shutdown_handle();
    let (returned, waited) = channel();
    let order = order.clone();
    let waiter = std::thread::spawn(move || {
        srv.wait();
        note(&order, "wait returned");
        let _ = returned.send(());
    });
    handle.shutdown();
    (waited, waiter)
}

/// How long `wait` is given to return too early (it returned at once, before the change that
/// made it wait for session threads).
const TOO_EARLY: Duration = Duration::from_millis(500);

/// A server with one upgraded connection whose callback runs until it is released: the sender
/// releases it; the callback notes in `order` when it returned.
fn holding_an_upgrade(engine: Engine, order: &Order) -> (TestServer, TcpStream, Sender<()>) {
    let (upgraded, running) = channel::<()>();
    let (release, released) = channel::<()>();
    let once = Mutex::new(Some((upgraded, released)));
    let noted = order.clone();
    let srv = start(engine, move |_: &mut Request<'_>| {
        let taken = once.lock().ok().and_then(|mut o| o.take());
        let Some((upgraded, released)) = taken else {
            return Response::new(404);
        };
        let noted = noted.clone();
        Response::upgrade("x-hold", move |_up| {
            let _ = upgraded.send(());
            let _ = released.recv();
            note(&noted, "callback returned");
        })
    });
    let mut c = connect(srv.addr);
    send(
        &mut c,
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: x-hold\r\n\r\n",
    );
    assert!(read_head(&mut c).starts_with("HTTP/1.1 101 "));
    running
        .recv_timeout(Duration::from_secs(10))
        .expect("the callback runs");
    (srv, c, release)
}

/// `wait` does not wait for an upgraded connection's callback, which the shutdown does not
/// interrupt (a client holding a tunnel open would keep a program that exits after `wait` from
/// ever exiting; Go's `net/http` leaves hijacked connections alike).
fn wait_does_not_wait_for_an_upgraded_connections_callback(engine: Engine) {
    let order = Order::default();
    let (srv, _client, release) = holding_an_upgrade(engine, &order);
    let (waited, waiter) = shut_down_and_wait(srv, &order);
    waited
        .recv_timeout(Duration::from_secs(10))
        .expect("wait returns while the callback runs");
    waiter.join().expect("waiter");
    assert_eq!(
        *order.lock().unwrap_or_else(|e| e.into_inner()),
        ["wait returned"]
    );
    release
        .send(())
        .expect("the callback waits for its release");
}

/// `shutdown` waits for it up to its grace, and says when it is still running then.
fn shutdown_waits_for_an_upgraded_connections_callback_up_to_its_grace(engine: Engine) {
    let order = Order::default();
    let (srv, _client, release) = holding_an_upgrade(engine, &order);
    let started = Instant::now();
    let result = srv.shutdown(TOO_EARLY);
    let took = started.elapsed();
    assert_eq!(
        result.map_err(|e| e.kind()),
        Err(twinhttp::ErrorKind::ShutdownTimedOut)
    );
    assert!(took >= TOO_EARLY, "gave up after {took:?}");
    release
        .send(())
        .expect("the callback waits for its release");
}

/// An upgraded connection's callback learns that the shutdown began from its
/// `ShutdownSignal` and ends its connection its own way: `shutdown(grace)` returns once it has,
/// well within its grace.
fn an_upgraded_connections_callback_learns_that_the_shutdown_began(engine: Engine) {
    use std::io::{Read, Write};
    let (seen, began_at_first) = channel::<bool>();
    let seen = Mutex::new(seen);
    let srv = start(engine, move |_: &mut Request<'_>| {
        let seen = seen.lock().ok().map(|s| s.clone());
        Response::upgrade("x-hold", move |mut up| {
            let signal = up.shutdown_signal();
            if let Some(seen) = seen {
                let _ = seen.send(signal.began());
            }
            signal.wait();
            let _ = up.write_all(b"going away");
        })
    });
    let mut c = connect(srv.addr);
    send(
        &mut c,
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: x-hold\r\n\r\n",
    );
    assert!(read_head(&mut c).starts_with("HTTP/1.1 101 "));
    let began = began_at_first.recv_timeout(Duration::from_secs(10));
    assert_eq!(began, Ok(false), "the callback runs, before any shutdown");
    let grace = Duration::from_secs(30);
    let started = Instant::now();
    let result = srv.shutdown(grace);
    let took = started.elapsed();
    assert!(result.is_ok(), "{result:?}");
    assert!(took < grace / 2, "took {took:?}");
    let mut rest = Vec::new();
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    c.read_to_end(&mut rest).expect("read to the end");
    assert_eq!(rest, b"going away");
}

/// A blocking WebSocket (`accept_blocking`) learns it from its socket's signal too, and closes
/// with 1001 its own way.
fn a_blocking_websocket_learns_that_the_shutdown_began(engine: Engine) {
    let srv = start(engine, |req: &mut Request<'_>| {
        match req.upgrade_websocket() {
            Ok(u) => u.accept_blocking(|mut ws| {
                ws.get_ref().shutdown_signal().wait();
                let away = tungstenite::protocol::CloseFrame {
                    code: CloseCode::Away,
                    reason: "shutting down".into(),
                };
                let _ = ws.close(Some(away));
                while ws.read().is_ok() {}
            }),
            Err(refusal) => refusal,
        }
    });
    let socket = TcpStream::connect(srv.addr).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let (mut ws, _) =
        tungstenite::client::client(format!("ws://{}/ws", srv.addr), socket).expect("handshake");
    let handle = srv.shutdown_handle();
    let shutting_down = std::thread::spawn(move || srv.shutdown(Duration::from_secs(30)));
    handle.shutdown();
    let code = loop {
        match ws.read() {
            Ok(tungstenite::Message::Close(frame)) => break frame.map(|f| f.code),
            Ok(_) => {}
            Err(e) => panic!("no close frame: {e}"),
        }
    };
    assert_eq!(code, Some(CloseCode::Away));
    while ws.read().is_ok() {}
    let result = shutting_down.join().expect("the shutdown");
    assert!(result.is_ok(), "{result:?}");
}

/// A WebSocket that notes when its `on_close` ran.
struct Closing(Order);

impl WsHandler for Closing {
    fn on_message(&mut self, _: &WsSender, _: WsMessage) {}

    fn on_close(&mut self, _: Option<CloseFrame>) {
        note(&self.0, "on_close ran");
    }
}

/// And a WebSocket's: `wait` returns after its closing handshake and its `on_close` (with
/// parking off the server engine runs it on a thread of its own, whose end `wait` did not wait
/// for).
fn wait_returns_after_a_websockets_closing_handshake(engine: Engine) {
    let order = Order::default();
    let noted = order.clone();
    let srv = start(engine, move |req: &mut Request<'_>| {
        match req.upgrade_websocket() {
            Ok(u) => u.accept(Closing(noted.clone())),
            Err(refusal) => refusal,
        }
    });
    let (mut ws, _) = tungstenite::client::client(
        format!("ws://{}/ws", srv.addr),
        TcpStream::connect(srv.addr).expect("connect"),
    )
    .expect("handshake");
    let (waited, waiter) = shut_down_and_wait(srv, &order);
    // The client answers the server's close only after the wait was given its chance.
    assert!(
        waited.recv_timeout(TOO_EARLY).is_err(),
        "wait returned before the WebSocket's closing handshake"
    );
    match ws.read() {
        Ok(tungstenite::Message::Close(Some(f))) => assert_eq!(f.code, CloseCode::Away),
        other => panic!("expected a 1001, got {other:?}"),
    }
    // The reply to the close goes out; the server then closes the connection.
    while ws.read().is_ok() {}
    waited
        .recv_timeout(Duration::from_secs(10))
        .expect("wait returns once the WebSocket closed");
    waiter.join().expect("waiter");
    assert_eq!(
        *order.lock().unwrap_or_else(|e| e.into_inner()),
        ["on_close ran", "wait returned"]
    );
}

engine_tests!(
    a_blocking_websocket_learns_that_the_shutdown_began,
    an_upgraded_connections_callback_learns_that_the_shutdown_began,
    wait_does_not_wait_for_an_upgraded_connections_callback,
    shutdown_waits_for_an_upgraded_connections_callback_up_to_its_grace,
    wait_returns_after_a_websockets_closing_handshake,
    a_fresh_connection_gets_a_moment_for_its_first_request,
    in_flight_finish_idle_close,
    shutdown_under_load,
    shutdown_deadline_is_reported
);
