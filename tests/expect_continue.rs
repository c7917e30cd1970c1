//! `Expect: 100-continue`: the interim response is sent when the body is first needed, which is
//! once the head is in (bodies are read before their handler runs), and only to HTTP/1.1.
mod support;
use std::io::Read;
use std::time::Duration;

use support::{Client, Engine, app, start};

fn continue_sent_when_handler_reads(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    let interim = c.response();
    assert_eq!(interim.status, 100);
    c.send(b"hello");
    let r = c.response();
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    assert!(!r.closes());
}

/// The body is read before the handler runs, so a client holding it back is asked for it as
/// soon as its head is in, whether or not the handler will read it.
fn continue_sent_before_the_handler_runs(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    c.send(b"POST /ignore-body HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    assert_eq!(c.response().status, 100);
    c.send(b"hello");
    let r = c.response();
    assert_eq!(r.status, 200);
    assert!(!r.closes());
}

fn no_continue_when_body_already_sent(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabc",
    );
    assert_eq!((r.status, r.text().as_str()), (200, "abc"));
    c.read_timeout(Duration::from_millis(200));
    let mut extra = [0u8; 1];
    assert!(
        c.reader.read(&mut extra).is_err(),
        "nothing after the response"
    );
}

/// RFC 9110 §10.1.1: a server MUST ignore `Expect: 100-continue` in an HTTP/1.0 request. The
/// client sends its head and waits: no interim response comes (a 1.1 client, above, gets one
/// without sending anything more), and once the body follows the final answer is the first
/// thing it reads.
fn no_continue_for_http10(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    c.send(b"POST /echo HTTP/1.0\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    c.read_timeout(Duration::from_millis(300));
    let mut first = [0u8; 1];
    assert!(
        c.reader.read(&mut first).is_err(),
        "nothing may come before the body: an HTTP/1.0 client is sent no 100 Continue"
    );
    c.read_timeout(Duration::from_secs(5));
    c.send(b"hello");
    let r = c.response();
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    assert!(r.closes(), "HTTP/1.0 without keep-alive closes");
}

engine_tests!(
    no_continue_for_http10,
    continue_sent_when_handler_reads,
    continue_sent_before_the_handler_runs,
    no_continue_when_body_already_sent,
);
