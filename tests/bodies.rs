//! Request bodies streamed both ways: Content-Length and chunked in, fixed, chunked, sized and
//! close-delimited out; unread bodies drained or the connection closed.
mod support;
use support::{Client, Engine, app, start};

fn content_length_body_echoed(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let body = vec![b'x'; 300_000];
    c.send(
        format!(
            "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    c.send(&body);
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, body);
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200,
        "still in sync"
    );
}

fn chunked_body_read_in_small_pieces(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    c.send(b"POST /len HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    let mut total = 0;
    for i in 1..50 {
        let chunk = vec![b'a'; i * 37];
        total += chunk.len();
        c.send(format!("{:x};ext=v\r\n", chunk.len()).as_bytes());
        c.send(&chunk);
        c.send(b"\r\n");
    }
    // Sizes with leading zeros, as many as a chunk line holds (refused past 16 digits before
    // a user's trial found it).
    c.send(b"000000000000000000000000003\r\nabc\r\n");
    total += 3;
    c.send(b"0\r\nX-Trailer: yes\r\n\r\n");
    let r = c.response();
    assert_eq!((r.status, r.text()), (200, total.to_string()));
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200,
        "still in sync"
    );
}

fn chunked_response_to_http11(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    for path in ["/stream", "/reader"] {
        let r = c.roundtrip(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        assert_eq!(r.header("transfer-encoding"), Some("chunked"), "{path}");
        assert_eq!(r.header("content-length"), None);
    }
    let r = c.roundtrip(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.text(), "part1;part2;part3;");
}

fn close_delimited_response_to_http10(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    // Even when the 1.0 client asks for keep-alive, an unknown length forces close-delimiting.
    let r = c.roundtrip(b"GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(r.header("transfer-encoding"), None);
    assert!(r.closes());
    assert_eq!(r.text(), "part1;part2;part3;");
}

fn sized_reader_gets_content_length(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(b"GET /sized HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.header("content-length"), Some("10"));
    assert_eq!(r.text(), "0123456789");
    // A sized reader that comes up short cannot complete its message: the connection closes.
    c.send(b"GET /short HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response(false);
    assert!(
        r.is_none(),
        "short body: the client sees a truncated message, then EOF"
    );
}

fn unread_small_body_is_drained(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(
        b"POST /ignore-body HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n0123456789",
    );
    assert_eq!(r.status, 200);
    assert!(!r.closes());
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").text(),
        "Hello, World!"
    );
}

/// A malformed body is 400 on every configuration, whether or not the handler would read it: it
/// is read before the handler runs, which then never does.
fn unread_malformed_body_is_400(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(
        b"POST /ignore-body HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n",
    );
    assert_eq!(r.status, 400);
    assert!(r.closes());
    assert!(c.is_closed());
}

/// A body is read whole before its handler runs, on every engine (its handler never waits on
/// the client), so a handler that leaves even a large body unread keeps the connection in sync.
fn a_large_body_is_read_before_its_handler(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let n = 1_000_000;
    c.send(
        format!("POST /ignore-body HTTP/1.1\r\nHost: t\r\nContent-Length: {n}\r\n\r\n").as_bytes(),
    );
    c.send(&vec![b'b'; n]);
    let r = c.response();
    assert_eq!(r.status, 200);
    assert!(!r.closes());
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
}

/// Chunk extensions are bounded per body (16 KiB, as hyper), not only per line: seventeen
/// one-byte chunks with 1,000 bytes of extensions each are refused with 400 and a close, and
/// sixteen are served.
fn chunk_extensions_are_bounded_per_body(engine: Engine) {
    let srv = start(engine, app);
    let chunked = |chunks: usize| {
        let mut req =
            b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..chunks {
            req.extend_from_slice(format!("1;{}\r\nx\r\n", "e".repeat(1000)).as_bytes());
        }
        req.extend_from_slice(b"0\r\n\r\n");
        req
    };
    let r = Client::new(srv.addr).roundtrip(&chunked(16));
    assert_eq!((r.status, r.text()), (200, "x".repeat(16)));
    let r = Client::new(srv.addr).roundtrip(&chunked(17));
    assert_eq!(r.status, 400);
    assert!(r.closes());
}

engine_tests!(
    chunk_extensions_are_bounded_per_body,
    unread_malformed_body_is_400,
    content_length_body_echoed,
    chunked_body_read_in_small_pieces,
    chunked_response_to_http11,
    close_delimited_response_to_http10,
    sized_reader_gets_content_length,
    unread_small_body_is_drained,
    a_large_body_is_read_before_its_handler,
);
