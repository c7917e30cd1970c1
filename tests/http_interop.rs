//! `http` crate interop over real sockets on every engine configuration (feature `http`): a
//! handler that answers with an `http::Response` built by `http::Response::builder()` (status,
//! repeated fields, body types), a `StatusCode` as an answer, and the request seen as an
//! `http::Request` (method, URI, version, fields in order, the body beside it).
mod support;

use http::{Method, StatusCode, header};
use support::{Client, Engine, start};
use twinhttp::{Request, Response, handler_fn};

/// The handler being ported: written against `http` alone.
fn ported(req: http::Request<Vec<u8>>) -> http::Response<String> {
    let tags: Vec<&str> = req
        .headers()
        .get_all("x-tag")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let text = format!(
        "{} {} {:?} query={:?} host={:?} tags={tags:?} body={}",
        req.method(),
        req.uri().path(),
        req.version(),
        req.uri().query(),
        req.headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok()),
        String::from_utf8_lossy(req.body()),
    );
    let status = if req.method() == Method::POST {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    http::Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header(header::SET_COOKIE, "a=1")
        .header(header::SET_COOKIE, "b=2")
        .header("x-ported", "yes")
        .body(text)
        .unwrap_or_default()
}

fn app(req: &mut Request<'_>) -> Response {
    match req.path() {
        "/teapot" => http::Response::builder()
            .status(StatusCode::IM_A_TEAPOT)
            .header(header::CACHE_CONTROL, "no-store")
            .body(bytes::Bytes::from_static(b"short and stout"))
            .map_or(Response::new(500), Response::from),
        "/empty" => http::Response::builder()
            .status(StatusCode::NO_CONTENT)
            .header("x-empty", "1")
            .body(())
            .map_or(Response::new(500), Response::from),
        "/missing" => StatusCode::NOT_FOUND.into(),
        // An interim status cannot end an exchange: sent as 500.
        "/switch" => StatusCode::SWITCHING_PROTOCOLS.into(),
        // A method compared with http's Method as it is.
        "/method" if req.method() == Method::DELETE => Response::text("deleted"),
        _ => {
            let head = match req.to_http() {
                Ok(head) => head,
                Err(e) => return Response::new(e.status().unwrap_or(400)),
            };
            match req.read_body() {
                Ok(body) => ported(head.map(|()| body)).into(),
                Err(_) => StatusCode::BAD_REQUEST.into(),
            }
        }
    }
}

fn an_http_response_is_served(engine: Engine) {
    let srv = start(engine, handler_fn(app));
    let mut c = Client::new(srv.addr);
    let r = c.request("GET /teapot", "");
    assert_eq!(r.status, 418);
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(r.header("content-length"), Some("15"));
    assert_eq!(r.text(), "short and stout");
    let r = c.request("GET /empty", "");
    assert_eq!(r.status, 204);
    assert_eq!(r.header("x-empty"), Some("1"));
    assert!(r.body.is_empty());
    let r = c.request("GET /missing", "");
    assert_eq!((r.status, r.body.len()), (404, 0));
    // A 1xx from a handler is answered as a panic is: 500, no body, and the connection closes.
    let r = c.request("GET /switch", "");
    assert_eq!((r.status, r.body.len()), (500, 0));
    assert!(c.is_closed(), "closed after a handler's 1xx");
    let mut c = Client::new(srv.addr);
    let r = c.request("DELETE /method", "");
    assert_eq!(r.text(), "deleted");
    // The ported handler: its status, its repeated fields and its body, on the same connection.
    let r = c.request("GET /a/b?x=1", "X-Tag: one\r\nx-tag: two\r\n");
    assert_eq!(r.status, 200);
    let cookies: Vec<&str> = r
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
    assert_eq!(r.header("x-ported"), Some("yes"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(
        r.text(),
        r#"GET /a/b HTTP/1.1 query=Some("x=1") host=Some("t") tags=["one", "two"] body="#
    );
}

fn a_request_seen_as_http(engine: Engine) {
    let srv = start(engine, handler_fn(app));
    let mut c = Client::new(srv.addr);
    // A body with Content-Length, then chunked, then HTTP/1.0 with an absolute-form target.
    let r =
        c.roundtrip(b"POST /items HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(r.status, 201);
    assert_eq!(
        r.text(),
        r#"POST /items HTTP/1.1 query=None host=Some("example.com") tags=[] body=hello"#
    );
    let r = c.roundtrip(
        b"PUT /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nX-Tag: z\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    );
    assert_eq!(
        r.text(),
        r#"PUT /up HTTP/1.1 query=None host=Some("t") tags=["z"] body=abcde"#
    );
    let r = c.roundtrip(
        b"GET http://example.com/abs?q=%20 HTTP/1.0\r\nHost: example.com\r\nConnection: keep-alive\r\n\r\n",
    );
    assert_eq!(
        r.text(),
        r#"GET /abs HTTP/1.0 query=Some("q=%20") host=Some("example.com") tags=[] body="#
    );
    // A target the core takes and http::Uri refuses: 400 from the handler, not a panic, and
    // the connection goes on.
    let r = c.request("GET /a<b>", "");
    assert_eq!(r.status, 400);
    assert!(!r.closes());
    assert_eq!(c.request("GET /teapot", "").status, 418);
}

engine_tests!(an_http_response_is_served, a_request_seen_as_http);
