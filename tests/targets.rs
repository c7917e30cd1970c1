//! Request-target forms: an absolute-form target routes by its path (RFC 9112 §3.2.2).
mod support;
use support::{Client, Engine, app, start};

fn absolute_form_routes_by_path(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let r =
        c.roundtrip(b"GET http://example.com/status/203?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!(r.status, 203);
    let r = c.roundtrip(b"GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!(r.text(), "Hello, World!");
}

engine_tests!(absolute_form_routes_by_path);
