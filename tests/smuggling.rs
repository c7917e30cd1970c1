//! Framing that could desynchronise a proxy and this server is refused, and the connection
//! closed (RFC 9112 §6.1, §6.3, §5.2).
mod support;
use support::{Engine, app, probe, start};

const CASES: &[(&str, &[u8], u16)] = &[
    ("CL and TE together", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("TE and CL together", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n", 400),
    ("differing Content-Length", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde", 400),
    ("Content-Length list", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4, 5\r\n\r\nabcde", 400),
    ("signed Content-Length", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: +4\r\n\r\nabcd", 400),
    ("unknown coding", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    ("chunked not last (RFC 9112 §6.3)", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 400),
    ("chunked twice", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    ("TE in HTTP/1.0", b"POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("obs-fold", b"GET / HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n 2\r\n\r\n", 400),
    ("space before colon", b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length : 4\r\n\r\nabcd", 400),
    ("no Host in 1.1", b"GET / HTTP/1.1\r\n\r\n", 400),
    ("two Hosts", b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("HTTP/2 over 1.1 framing", b"GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505),
    ("bare LF in chunk size", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", 400),
    ("missing CRLF after chunk", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n", 400),
    ("a request line as a trailer field", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nGET /status/299 HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("a trailer line without a colon", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nbad trailer\r\n\r\n", 400),
    ("a space in a trailer's name", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX T: a\r\n\r\n", 400),
    ("NUL in a trailer's value", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: a\0b\r\n\r\n", 400),
    ("bad method token", b"G(T / HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("unknown expectation", b"GET / HTTP/1.1\r\nHost: t\r\nExpect: teapot\r\n\r\n", 417),
];

fn refused_with_status_and_closed(engine: Engine) {
    let srv = start(engine, app);
    for (what, req, status) in CASES {
        let (r, mut c) = probe(srv.addr, req);
        assert_eq!(r.status, *status, "{what}");
        assert!(r.closes(), "{what}: Connection: close");
        assert!(c.is_closed(), "{what}: connection closed");
    }
}

fn smuggled_request_is_never_answered(engine: Engine) {
    // A proxy using Content-Length would forward one request; one using chunked would see a
    // second. We must answer neither as two requests.
    let srv = start(engine, app);
    let req = b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /status/299 HTTP/1.1\r\nHost: t\r\n\r\n";
    let (r, mut c) = probe(srv.addr, req);
    assert_eq!(r.status, 400);
    assert!(c.read_response(false).is_none(), "no second response");
}

engine_tests!(
    refused_with_status_and_closed,
    smuggled_request_is_never_answered
);
