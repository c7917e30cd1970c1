//! A handler that opts in with `twinhttp::streaming` reads its request body as it arrives: on
//! the thread-pool server its worker reads the socket, so it runs before the body is complete
//! (and a slow client holds that worker, as documented), `100 Continue` goes out when it
//! first reads, a body slower than the minimum rate is answered `408`, a malformed one `400`,
//! and one it leaves unread closes the connection. On the reactor the same handler gets its
//! body whole. A handler that does not opt in never holds a worker for its body.
mod support;
use std::io::Read;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use support::{Client, Config, Engine, start_with};
use twinhttp::{MinRate, Request, Response, Router, handler_fn, streaming};

/// A route that streams (`/stream`, which says on `tx` when its first bytes came, then reads
/// the rest), one that streams and reads nothing (`/ignore`), and one that does not (`/whole`).
fn routes(tx: Sender<usize>) -> Router {
    let tx = Mutex::new(tx);
    Router::new()
        .route_to(
            "/stream",
            &["POST"],
            streaming(handler_fn(move |req: &mut Request<'_>| {
                let mut first = [0u8; 5];
                let n = match req.body().read(&mut first) {
                    Ok(n) => n,
                    Err(e) => return Response::text(e.kind().to_string()).with_status(500),
                };
                let _ = tx.lock().map(|tx| tx.send(n));
                let mut rest = Vec::new();
                match req.body().read_to_end(&mut rest) {
                    Ok(_) => {
                        let mut all = first[..n].to_vec();
                        all.extend(rest);
                        Response::new(200).with_body(all)
                    }
                    Err(e) => Response::text(e.kind().to_string()).with_status(500),
                }
            })),
        )
        .route_to(
            "/ignore",
            &["POST"],
            streaming(handler_fn(|_: &mut Request<'_>| Response::text("ignored"))),
        )
        .post("/whole", |req: &mut Request<'_>| match req.read_body() {
            Ok(body) => Response::new(200).with_body(body),
            Err(_) => Response::new(400),
        })
        .get("/", |_: &mut Request<'_>| Response::text("hi"))
}

fn start(engine: Engine, workers: usize) -> (support::TestServer, Receiver<usize>) {
    let (tx, rx) = channel();
    let srv = start_with(
        engine,
        Config {
            workers,
            body_rate: Some(MinRate::new(100, Duration::from_secs(1))),
            ..Config::default()
        },
        routes(tx),
    );
    (srv, rx)
}

fn is_server(engine: Engine) -> bool {
    !engine.is_reactor()
}

fn the_handler_reads_the_body_as_it_arrives(engine: Engine) {
    let (srv, first) = start(engine, 2);
    let mut c = Client::new(srv.addr);
    c.send(b"POST /stream HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello");
    if is_server(engine) {
        // The handler runs with half the body sent, and has read it.
        assert_eq!(first.recv_timeout(Duration::from_secs(5)), Ok(5));
    }
    c.send(b"world");
    let r = c.response();
    assert_eq!((r.status, r.text().as_str()), (200, "helloworld"));
    // Chunked, and the connection in sync after it.
    c.send(b"POST /stream HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    if is_server(engine) {
        assert_eq!(first.recv_timeout(Duration::from_secs(5)), Ok(3));
    }
    c.send(b"4\r\ndefg\r\n0\r\n\r\n");
    let r = c.response();
    assert_eq!((r.status, r.text().as_str()), (200, "abcdefg"));
    assert_eq!(c.request("GET /", "").text(), "hi");
}

/// The documented cost: on the server engine, a slow upload to a streaming route holds its
/// worker; the same upload to a route that reads its body whole does not.
#[cfg(feature = "server")]
fn a_slow_streaming_upload_holds_its_worker(engine: Engine) {
    let (srv, first) = start(engine, 1);
    let mut whole = Client::new(srv.addr);
    whole.send(b"POST /whole HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello");
    let mut other = Client::new(srv.addr);
    assert_eq!(
        other.request("GET /", "").text(),
        "hi",
        "a buffered upload holds nothing"
    );

    let mut slow = Client::new(srv.addr);
    slow.send(b"POST /stream HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello");
    assert_eq!(first.recv_timeout(Duration::from_secs(5)), Ok(5));
    // The only worker is in the streaming handler, waiting for the rest.
    other.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    other.read_timeout(Duration::from_millis(300));
    assert!(
        other.read_response(false).is_none(),
        "another client is served while the worker waits on the slow upload"
    );
    slow.send(b"world");
    assert_eq!(slow.response().text(), "helloworld");
    whole.send(b"world");
    assert_eq!(whole.response().text(), "helloworld");
}

fn continue_is_sent_when_the_handler_first_reads(engine: Engine) {
    let (srv, _first) = start(engine, 2);
    let mut c = Client::new(srv.addr);
    c.send(
        b"POST /stream HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    );
    let interim = c.response();
    assert_eq!(interim.status, 100);
    c.send(b"abcd");
    assert_eq!(c.response().text(), "abcd");
}

fn a_body_the_handler_leaves_unread_closes_the_connection(engine: Engine) {
    let (srv, _first) = start(engine, 2);
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(b"POST /ignore HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nabcd");
    assert_eq!(r.text(), "ignored");
    // On the reactor the body was read whole before the handler: the connection stays.
    assert_eq!(r.closes(), is_server(engine));
}

fn a_stalled_streamed_body_is_answered_408_at_its_deadline(engine: Engine) {
    let (srv, first) = start(engine, 2);
    let mut c = Client::new(srv.addr);
    let sent = Instant::now();
    c.send(b"POST /stream HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nhello");
    if is_server(engine) {
        assert_eq!(first.recv_timeout(Duration::from_secs(5)), Ok(5));
    }
    let r = c.response();
    let took = sent.elapsed();
    assert_eq!(r.status, 408);
    assert!(r.closes());
    // The rate's grace is 1 s from when the read first waited.
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "answered after {took:?}"
    );
}

fn a_malformed_streamed_body_is_answered_400(engine: Engine) {
    let (srv, _first) = start(engine, 2);
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(
        b"POST /stream HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
    );
    assert_eq!(r.status, 400);
    assert!(r.closes());
}

engine_tests!(
    the_handler_reads_the_body_as_it_arrives,
    continue_is_sent_when_the_handler_first_reads,
    a_body_the_handler_leaves_unread_closes_the_connection,
    a_stalled_streamed_body_is_answered_408_at_its_deadline,
    a_malformed_streamed_body_is_answered_400,
);

#[cfg(feature = "server")]
#[test]
fn a_slow_streaming_upload_holds_its_worker_on_the_server_engine() {
    a_slow_streaming_upload_holds_its_worker(Engine::Server);
}
