//! Response fields: setting a field replaces one of the same name (one `Content-Type`, not two),
//! and every field the crate writes itself is named in one convention (Title-Case, as in RFC 9110:
//! `Content-Type`, `Accept-Ranges`, `Sec-WebSocket-Accept`), on every engine configuration.
mod support;
use std::net::TcpStream;

use support::{Client, Engine, connect, read_head, send, start};
use twinhttp::{Request, Response};

fn app(req: &mut Request<'_>) -> Response {
    match req.path() {
        "/json" => Response::text("{}").with_header("content-type", "application/json"),
        "/file" => Response::file(req, file!()),
        "/events" => Response::event_stream().0,
        "/ws" => support::echo_websocket(req),
        _ => support::app(req),
    }
}

/// Each `-`-separated part of the name starts with a capital letter.
fn title_case(name: &str) -> bool {
    name.split('-')
        .all(|part| part.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
}

fn names(head: &str) -> Vec<String> {
    head.lines()
        .skip(1)
        .filter_map(|l| l.split_once(':').map(|(n, _)| n.to_owned()))
        .collect()
}

fn setting_a_field_replaces_it(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(b"GET /json HTTP/1.1\r\nHost: t\r\n\r\n");
    let types: Vec<_> = r
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        .collect();
    assert_eq!(types.len(), 1, "{:?}", r.headers);
    assert_eq!(types[0].1, "application/json");
}

fn fields_the_crate_writes_are_title_case(engine: Engine) {
    let srv = start(engine, app);
    let requests: [&[u8]; 6] = [
        b"GET / HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /file HTTP/1.1\r\nHost: t\r\nRange: bytes=0-3\r\n\r\n",
        b"POST /file HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
        b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
    ];
    for req in requests {
        let mut s: TcpStream = connect(srv.addr);
        send(&mut s, req);
        let head = read_head(&mut s);
        assert!(head.starts_with("HTTP/1.1 "), "{head}");
        let names = names(&head);
        assert!(names.len() >= 2, "{head}");
        for name in names {
            assert!(title_case(&name), "{name} in {head}");
        }
    }
}

engine_tests!(
    setting_a_field_replaces_it,
    fields_the_crate_writes_are_title_case
);
