//! The router over real sockets on every engine configuration: routes and parameters, `HEAD`
//! answered by `GET` routes without a body, `405` with `Allow`, `404`, nesting, fallbacks, and
//! parameters that are not valid percent-encoding answered 400 by the handler, never a panic.
mod support;

use support::{Client, Engine, start};
use twinhttp::{Body, Request, Response, Router};

/// Answers with the method, the path and every parameter as sent.
fn show(req: &mut Request<'_>) -> Response {
    let params: Vec<String> = req.params().map(|(k, v)| format!("{k}={v}")).collect();
    Response::text(format!(
        "{} {} [{}]",
        req.method(),
        req.path(),
        params.join(",")
    ))
}

fn app() -> Router {
    let api = Router::new()
        .get("/", |_| Response::text("api root"))
        .get("/items/{id}", show)
        .delete("/items/{id}", |_| Response::new(204))
        .fallback(|req| Response::new(404).with_body(format!("no api route {}", req.path())));
    Router::new()
        .get("/", |_| Response::text("Hello, World!"))
        .get("/users/{id}", show)
        .delete("/users/{id}", show)
        .get("/users/{id}/posts/{post}", show)
        .get("/orders/{id}.json", show)
        .get("/orders/{id}/lines", show)
        .get("/images/img-{id}.png", show)
        .post("/users/{id}/avatar", |req| {
            // The parameter is held while the body is read from the socket.
            let id = req.param("id").unwrap_or_default();
            match req.read_body() {
                Ok(body) => Response::text(format!("{id}: {} bytes", body.len())),
                Err(_) => Response::new(400),
            }
        })
        .get("/files/{*path}", |req| match req.param_decoded("path") {
            Some(Ok(path)) => Response::text(format!("file {path}")),
            Some(Err(e)) => Response::new(e.status().unwrap_or(400)),
            None => Response::new(500),
        })
        .get("/stream", |_| {
            Response::text(Body::chunks((1..=3).map(|i| format!("{i};").into_bytes())))
        })
        .route("/form", &["GET", "POST"], |req| {
            Response::text(format!("form {}", req.method()))
        })
        .nest("/api", api)
}

fn with_fallback() -> Router {
    app().fallback(|req| Response::new(404).with_body(format!("fallback {}", req.path())))
}

fn routes_and_params(engine: Engine) {
    let srv = start(engine, app());
    let mut c = Client::new(srv.addr);
    let cases: &[(&str, u16, &str)] = &[
        ("GET /", 200, "Hello, World!"),
        ("GET /users/7", 200, "GET /users/7 [id=7]"),
        ("GET /users/7?tab=posts", 200, "GET /users/7 [id=7]"),
        ("DELETE /users/7", 200, "DELETE /users/7 [id=7]"),
        (
            "GET /users/7/posts/9",
            200,
            "GET /users/7/posts/9 [id=7,post=9]",
        ),
        // Matched as sent: a %2F does not end a segment, and the value is raw.
        ("GET /users/a%2Fb", 200, "GET /users/a%2Fb [id=a%2Fb]"),
        (
            "GET /files/docs/read%20me.txt",
            200,
            "file docs/read me.txt",
        ),
        // A parameter with a suffix beside the same parameter with segments after it.
        ("GET /orders/7.json", 200, "GET /orders/7.json [id=7]"),
        ("GET /orders/7/lines", 200, "GET /orders/7/lines [id=7]"),
        // A parameter with a prefix and a suffix in its segment.
        (
            "GET /images/img-42.png",
            200,
            "GET /images/img-42.png [id=42]",
        ),
        ("POST /form", 200, "form POST"),
        ("GET /form", 200, "form GET"),
    ];
    for (line, status, body) in cases {
        let r = c.request(line, "");
        assert_eq!((r.status, r.text().as_str()), (*status, *body), "{line}");
    }
    // A body read by a routed handler, with Content-Length and chunked, on one connection.
    let r =
        c.roundtrip(b"POST /users/3/avatar HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(r.text(), "3: 5 bytes");
    let r = c.roundtrip(
        b"POST /users/4/avatar HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n",
    );
    assert_eq!(r.text(), "4: 7 bytes");
}

fn head_is_answered_by_get_without_a_body(engine: Engine) {
    let srv = start(engine, app());
    let mut c = Client::new(srv.addr);
    let get = c.roundtrip(b"GET /users/42 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(get.text(), "GET /users/42 [id=42]");
    // HEAD, then GET pipelined behind it: a body after the HEAD response would be read as the
    // GET's status line.
    c.send(b"HEAD /users/42 HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let head = c.read_response(true).expect("a HEAD response");
    assert_eq!(head.status, 200);
    // The GET handler ran for HEAD (its method shows in the length: "HEAD" is one byte more).
    let len = "HEAD /users/42 [id=42]".len().to_string();
    assert_eq!(head.header("content-length"), Some(len.as_str()));
    assert_eq!(
        head.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(c.response().text(), "Hello, World!");
    // A streamed GET body: HEAD gets none of its chunks.
    c.send(b"HEAD /stream HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let head = c.read_response(true).expect("a HEAD response");
    assert_eq!(head.status, 200);
    assert_eq!(c.response().text(), "Hello, World!");
}

fn wrong_method_is_405_with_allow(engine: Engine) {
    let srv = start(engine, with_fallback());
    let mut c = Client::new(srv.addr);
    let cases: &[(&str, &str)] = &[
        ("PUT /users/7", "GET, HEAD, DELETE"),
        ("POST /", "GET, HEAD"),
        ("OPTIONS /users/7/posts/1", "GET, HEAD"),
        ("GET /users/7/avatar", "POST"),
        ("DELETE /form", "GET, HEAD, POST"),
        ("POST /api/items/1", "GET, HEAD, DELETE"),
        // Methods are case-sensitive.
        ("get /", "GET, HEAD"),
    ];
    for (line, allow) in cases {
        let r = c.request(line, "Content-Length: 0\r\n");
        assert_eq!((r.status, r.header("allow")), (405, Some(*allow)), "{line}");
        // Not the fallback: the path exists.
        assert!(!r.text().contains("fallback"), "{line}");
        assert!(!r.closes(), "{line}: the connection stays open");
    }
}

fn unknown_paths_are_404(engine: Engine) {
    let srv = start(engine, app());
    let mut c = Client::new(srv.addr);
    for path in [
        "/nope",
        "/users",
        "/users/",
        "/users/7/posts",
        "/files/",
        "/apix",
        "/images/img-42.jpg",
        "/images/img-.png",
    ] {
        let r = c.request(&format!("GET {path}"), "");
        assert_eq!(r.status, 404, "{path}");
    }
}

fn nested_routes_and_fallbacks(engine: Engine) {
    let srv = start(engine, with_fallback());
    let mut c = Client::new(srv.addr);
    let cases: &[(&str, u16, &str)] = &[
        ("GET /api", 200, "api root"),
        ("GET /api/items/5", 200, "GET /api/items/5 [id=5]"),
        ("DELETE /api/items/5", 204, ""),
        // Under the prefix: the nested router's fallback; elsewhere: the top one.
        ("GET /api/", 404, "no api route /api/"),
        ("GET /api/other/thing", 404, "no api route /api/other/thing"),
        ("GET /apix", 404, "fallback /apix"),
        ("GET /nope", 404, "fallback /nope"),
        ("POST /nope", 404, "fallback /nope"),
    ];
    for (line, status, body) in cases {
        let r = c.request(line, "Content-Length: 0\r\n");
        assert_eq!((r.status, r.text().as_str()), (*status, *body), "{line}");
    }
}

fn bad_percent_encoding_is_400_not_a_panic(engine: Engine) {
    let srv = start(engine, app());
    let mut c = Client::new(srv.addr);
    for path in [
        "/files/%zz",
        "/files/100%",
        "/files/a%2",
        "/files/%FF",
        "/files/%C3%28",
    ] {
        let r = c.request(&format!("GET {path}"), "");
        assert_eq!(r.status, 400, "{path}");
        assert!(
            !r.closes(),
            "{path}: a handler's 400, the connection stays open"
        );
    }
    // Raw values are served as sent, whatever they hold.
    let r = c.roundtrip(b"GET /users/%zz%FF HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.text(), "GET /users/%zz%FF [id=%zz%FF]");
}

engine_tests!(
    routes_and_params,
    head_is_answered_by_get_without_a_body,
    wrong_method_is_405_with_allow,
    unknown_paths_are_404,
    nested_routes_and_fallbacks,
    bad_percent_encoding_is_400_not_a_panic,
);
