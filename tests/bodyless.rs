//! HEAD, 1xx, 204, 205 and 304 carry no body; HEAD keeps the Content-Length a GET would have; a
//! 2xx to CONNECT has no framing fields.
mod support;
use support::{Client, Engine, app, start};

fn head_has_length_but_no_body(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    c.send(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response(true).expect("response");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("13"));
    // The next response must start right where the head ended: no stray body bytes.
    let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.text(), "Hello, World!");
    c.send(b"HEAD /stream HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response(true).expect("response");
    assert_eq!(
        r.header("transfer-encoding"),
        None,
        "no chunked framing without a body"
    );
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
}

fn no_body_statuses(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    for code in [204u16, 304] {
        let r = c.roundtrip(format!("GET /status/{code} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        assert_eq!(r.status, code);
        assert_eq!(r.header("content-length"), None);
        assert_eq!(r.header("transfer-encoding"), None);
    }
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").text(),
        "Hello, World!"
    );
}

fn date_header_is_present(engine: Engine) {
    let srv = start(engine, app);
    let r = Client::new(srv.addr).roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let date = r.header("date").expect("Date");
    assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
}

/// A 205 carries no content (RFC 9110 §15.3.6), whatever body its handler gave, and says so with
/// `Content-Length: 0`; the connection goes on in step.
fn reset_content_has_no_body(engine: Engine) {
    use twinhttp::{Body, Request, Response};
    let srv = start(engine, |req: &mut Request<'_>| match req.path() {
        "/bytes" => Response::text("not sent").with_status(205),
        "/streamed" => {
            Response::new(205).with_body(Body::chunks(vec![b"not sent".to_vec()].into_iter()))
        }
        _ => Response::text("next"),
    });
    let mut c = Client::new(srv.addr);
    for path in ["/bytes", "/streamed"] {
        let r = c.roundtrip(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        assert_eq!(r.status, 205, "{path}");
        assert_eq!(r.header("content-length"), Some("0"), "{path}");
        assert_eq!(r.header("transfer-encoding"), None, "{path}");
        assert!(r.body.is_empty(), "{path}");
        assert_eq!(
            c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").text(),
            "next"
        );
    }
}

/// A 2xx to CONNECT makes the connection a tunnel for the client, and has no `Content-Length`
/// or `Transfer-Encoding` (RFC 9110 §9.3.6): its body is the tunnel's bytes and the connection
/// closes after them. A refusal (4xx) is framed as any response, and the connection is kept.
fn a_2xx_to_connect_has_no_framing(engine: Engine) {
    let srv = start(engine, |req: &mut twinhttp::Request<'_>| {
        match (req.method(), req.header("host")) {
            ("CONNECT", Some("denied.example:443")) => {
                twinhttp::Response::new(403).with_body("denied")
            }
            ("CONNECT", Some("empty.example:204")) => twinhttp::Response::new(204),
            ("CONNECT", Some("empty.example:205")) => twinhttp::Response::new(205),
            ("CONNECT", _) => twinhttp::Response::new(200).with_body("tunnel bytes"),
            _ => app(req),
        }
    });
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(b"CONNECT denied.example:443 HTTP/1.1\r\nHost: denied.example:443\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (403, "denied"));
    assert_eq!(r.header("content-length"), Some("6"));
    let r = c.roundtrip(b"CONNECT ok.example:443 HTTP/1.1\r\nHost: ok.example:443\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.header("transfer-encoding"), None);
    // Read to the end of the connection: the body, then the close.
    assert_eq!(r.text(), "tunnel bytes");
    assert!(r.closes(), "Connection: close");
    // With no body (204, 205) too: no framing field, and the connection closes at once.
    for code in ["204", "205"] {
        let mut c = Client::new(srv.addr);
        let r = c.roundtrip(
            format!("CONNECT empty.example:{code} HTTP/1.1\r\nHost: empty.example:{code}\r\n\r\n")
                .as_bytes(),
        );
        assert_eq!(r.status.to_string(), code);
        assert_eq!(r.header("content-length"), None, "{code}");
        assert_eq!(r.header("transfer-encoding"), None, "{code}");
        assert!(c.is_closed(), "{code}: the connection closes");
    }
}

/// A handler that answers with a 1xx (interim: the server sends `100 Continue` itself, and no
/// 1xx ends an exchange) gets the 500 of a panic, closing: its body and fields are not sent
/// under the 500 (a new user's trial found `500` with the handler's body), nor any body to a
/// HEAD (the review of the first fix found its error page sent to HEAD).
fn an_interim_status_from_a_handler_is_the_500_of_a_panic(engine: Engine) {
    use twinhttp::{Body, Request, Response};
    let srv = start(engine, |req: &mut Request<'_>| match req.path() {
        "/101" => Response::new(101).with_body("body!"),
        "/103" => Response::new(103)
            .with_header("X-Handler", "yes")
            .with_body(Body::reader(std::io::Cursor::new(b"streamed".to_vec()))),
        _ => Response::text("ok"),
    });
    for method in ["GET", "HEAD"] {
        for path in ["/101", "/103"] {
            let mut c = Client::new(srv.addr);
            c.send(format!("{method} {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            let r = c.read_response(method == "HEAD").expect("a response");
            assert_eq!(r.status, 500, "{method} {path}");
            assert_eq!(r.header("content-length"), Some("0"), "{method} {path}");
            assert_eq!(r.header("x-handler"), None, "{method} {path}");
            assert!(r.body.is_empty(), "{method} {path}: {:?}", r.text());
            assert!(c.is_closed(), "{method} {path}: the connection closes");
        }
    }
    let mut c = Client::new(srv.addr);
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").text(),
        "ok"
    );
}

engine_tests!(
    an_interim_status_from_a_handler_is_the_500_of_a_panic,
    a_2xx_to_connect_has_no_framing,
    head_has_length_but_no_body,
    no_body_statuses,
    date_header_is_present,
    reset_content_has_no_body,
);
