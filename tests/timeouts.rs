//! Deadlines: a slow-trickled head gets 408 and a close (Slowloris); an idle keep-alive
//! connection is closed after the idle timeout; a silent new connection is dropped.
mod support;
use std::time::{Duration, Instant};

use support::{Client, Config, Engine, app, start_with};

fn cfg() -> Config {
    Config {
        header_read_timeout: Duration::from_millis(400),
        idle_timeout: Duration::from_millis(400),
        ..Config::default()
    }
}

fn trickled_head_gets_408(engine: Engine) {
    let srv = start_with(engine, cfg(), app);
    let mut c = Client::new(srv.addr);
    let started = Instant::now();
    // One byte every 50 ms: each read succeeds, but the whole head never arrives in time.
    let head = b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let writer = {
        let mut s = c.reader.get_ref().try_clone().expect("clone");
        std::thread::spawn(move || {
            for b in head {
                if std::io::Write::write_all(&mut s, &[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let r = c.response();
    assert_eq!(r.status, 408);
    assert!(r.closes());
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "408 after {took:?}");
    let _ = writer.join();
}

fn idle_keep_alive_is_closed(engine: Engine) {
    let srv = start_with(engine, cfg(), app);
    let mut c = Client::new(srv.addr);
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let started = Instant::now();
    assert!(c.is_closed(), "closed by the server");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "closed after {took:?}"
    );
}

/// Engines keep deadlines lazily (a keep-alive response leaves the connection's timer entry
/// where it was): requests 150 ms apart keep a connection open well past its first idle
/// deadline (400 ms), and it closes at the idle timeout from its last response.
fn idle_deadline_counts_from_the_last_response(engine: Engine) {
    let srv = start_with(engine, cfg(), app);
    let mut c = Client::new(srv.addr);
    let first = Instant::now();
    for i in 0..6 {
        if i > 0 {
            // The pace of a client, the thing under test: not a wait for the server.
            std::thread::sleep(Duration::from_millis(150));
        }
        let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(
            r.status,
            200,
            "request {i}, {:?} after the first",
            first.elapsed()
        );
    }
    let last = Instant::now();
    assert!(c.is_closed(), "closed by the server");
    let took = last.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "closed {took:?} after the last response (idle timeout 400 ms; the first response was \
         {:?} before it)",
        last - first
    );
}

fn silent_connection_is_dropped(engine: Engine) {
    let srv = start_with(engine, cfg(), app);
    let mut c = Client::new(srv.addr);
    assert!(
        c.is_closed(),
        "a connection that never sends is closed at the header deadline"
    );
    // The server still serves.
    assert_eq!(
        Client::new(srv.addr)
            .roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            .status,
        200
    );
}

/// `Duration::MAX` is how a user says "never": every timeout set to it, the server serves and
/// shuts down (deadlines saturate; nothing overflows an `Instant` and panics an engine thread).
fn never_is_a_timeout(engine: Engine) {
    let srv = start_with(
        engine,
        Config {
            header_read_timeout: Duration::MAX,
            idle_timeout: Duration::MAX,
            body_rate: Some(twinhttp::MinRate::new(240, Duration::MAX)),
            response_rate: Some(twinhttp::MinRate::new(240, Duration::MAX)),
            ..Config::default()
        },
        app,
    );
    let mut c = Client::new(srv.addr);
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab");
    c.send(b"cd");
    assert_eq!(c.response().text(), "abcd");
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    drop(c);
    let mut idle = Client::new(srv.addr);
    assert_eq!(
        idle.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    srv.shutdown(Duration::MAX).expect("shut down");
}

/// The deadline policy the core holds for both engines (`http::due`), with the header-read and
/// idle timeouts far apart so that which one closed is told by when.
fn policy() -> Config {
    Config {
        header_read_timeout: Duration::from_millis(400),
        idle_timeout: Duration::from_secs(4),
        ..Config::default()
    }
}

/// A new connection that sends nothing is due its first head from the accept: it is closed at
/// the header-read timeout, not the (ten times longer) idle timeout.
fn first_head_is_due_from_the_accept(engine: Engine) {
    let srv = start_with(engine, policy(), app);
    let started = Instant::now();
    let mut c = Client::new(srv.addr);
    assert!(c.is_closed(), "closed by the server");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "a silent new connection closed after {took:?} (header-read timeout 400 ms, idle 4 s)"
    );
}

/// After a response, a later head is due from its first byte: part of one, then nothing, is
/// answered 408 at the header-read timeout from that byte, not at the idle timeout.
fn a_later_head_is_due_from_its_first_byte(engine: Engine) {
    let srv = start_with(engine, policy(), app);
    let mut c = Client::new(srv.addr);
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let started = Instant::now();
    c.send(b"GET / HTTP/1.1\r\nHo");
    let r = c.response();
    let took = started.elapsed();
    assert_eq!(r.status, 408);
    assert!(r.closes());
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "408 after {took:?} (header-read timeout 400 ms, idle 4 s)"
    );
}

engine_tests!(
    first_head_is_due_from_the_accept,
    a_later_head_is_due_from_its_first_byte,
    never_is_a_timeout,
    trickled_head_gets_408,
    idle_keep_alive_is_closed,
    idle_deadline_counts_from_the_last_response,
    silent_connection_is_dropped,
);

/// A worker that lingers on an idle connection for its next request (`park_linger`) lingers no
/// longer than the idle timeout: with one worker and a 10 s linger, the idle connection closes
/// at its 400 ms idle timeout, and another client is answered by then, not after the linger.
#[cfg(feature = "server")]
#[test]
fn park_linger_ends_at_the_idle_timeout() {
    use twinhttp::server::Server;
    let srv = Server::builder()
        .workers(1)
        .idle_timeout(Duration::from_millis(400))
        .park_linger(Duration::from_secs(10))
        .serve("127.0.0.1:0", app)
        .expect("serve");
    let mut a = Client::new(srv.local_addr());
    assert_eq!(a.request("GET /", "").status, 200);
    let started = Instant::now();
    let mut b = Client::new(srv.local_addr());
    assert_eq!(b.request("GET /", "Connection: close\r\n").status, 200);
    let answered = started.elapsed();
    assert!(a.is_closed(), "the idle connection is closed by the server");
    let closed = started.elapsed();
    assert!(
        answered < Duration::from_secs(2),
        "the other client was answered after {answered:?}"
    );
    assert!(
        closed >= Duration::from_millis(300) && closed < Duration::from_secs(2),
        "the idle connection closed after {closed:?} (idle timeout 400 ms, linger 10 s)"
    );
    srv.shutdown(Duration::from_secs(5)).expect("shutdown");
}
