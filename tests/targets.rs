//! Request-target forms: an absolute-form target routes by its path and names the request's
//! host (RFC 9112 §3.2.2); an `http` target without a valid host is refused.
mod support;
use support::{Client, Engine, app, probe, start};
use twinhttp::{Request, Response};

fn absolute_form_routes_by_path(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let r =
        c.roundtrip(b"GET http://example.com/status/203?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!(r.status, 203);
    let r = c.roundtrip(b"GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!(r.text(), "Hello, World!");
}

fn the_host_is_the_absolute_form_target_s_authority(engine: Engine) {
    let srv = start(engine, |req: &mut Request<'_>| {
        Response::text(req.host().unwrap_or("(none)").to_owned())
    });
    let mut c = Client::new(srv.addr);
    let host = |c: &mut Client, req: &[u8]| c.roundtrip(req).text();
    // RFC 9112 §3.2.2: the target's authority, the `Host` field ignored.
    let r = b"GET http://other.example:8080/p HTTP/1.1\r\nHost: t\r\n\r\n";
    assert_eq!(host(&mut c, r), "other.example:8080");
    let r = b"GET HTTPS://Other.Example?q HTTP/1.1\r\nHost: t\r\n\r\n";
    assert_eq!(host(&mut c, r), "Other.Example");
    assert_eq!(
        host(&mut c, b"GET /p HTTP/1.1\r\nHost: t:81\r\n\r\n"),
        "t:81"
    );
    let r = b"GET http://[::1]:8080/ HTTP/1.1\r\nHost: t\r\n\r\n";
    assert_eq!(host(&mut c, r), "[::1]:8080");
    // RFC 3986 allows an empty port.
    let r = b"GET http://h:/ HTTP/1.1\r\nHost: t\r\n\r\n";
    assert_eq!(host(&mut c, r), "h:");
    assert_eq!(
        host(&mut c, b"GET /p HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
        "(none)"
    );
}

fn an_http_target_without_a_valid_host_is_refused(engine: Engine) {
    // RFC 9110 §4.2.1: an `http` URI with an empty host is invalid; the authority is checked
    // as a `Host` value is (no userinfo, a numeric port, a whole IP literal).
    let srv = start(engine, app);
    for target in [
        "http:///status/203",
        "http://:80/status/203",
        "http://a:b/status/203",
        "http://[::1/status/203",
        "http://u:p@a/status/203",
    ] {
        let req = format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n");
        let (r, mut c) = probe(srv.addr, req.as_bytes());
        assert_eq!(r.status, 400, "{target}");
        assert!(c.is_closed(), "{target}: closed");
    }
}

/// A fragment a client sent (a target has none, RFC 9112 §3.2) is not part of the path or the
/// query: dropped, as hyper and nginx drop it.
fn a_fragment_is_dropped_from_path_and_query(engine: Engine) {
    let srv = start(engine, |req: &mut Request<'_>| {
        Response::text(format!("{} {:?}", req.path(), req.query()))
    });
    let mut c = Client::new(srv.addr);
    for (target, seen) in [
        ("/info?x=1#frag", "/info Some(\"x=1\")"),
        ("/info#frag", "/info None"),
        ("/info#frag?x=1", "/info None"),
        ("/#", "/ None"),
        ("http://example.com/a?b#c", "/a Some(\"b\")"),
    ] {
        let r =
            c.roundtrip(format!("GET {target} HTTP/1.1\r\nHost: example.com\r\n\r\n").as_bytes());
        assert_eq!(r.text(), seen, "{target}");
    }
}

engine_tests!(
    absolute_form_routes_by_path,
    the_host_is_the_absolute_form_target_s_authority,
    an_http_target_without_a_valid_host_is_refused,
    a_fragment_is_dropped_from_path_and_query,
);
