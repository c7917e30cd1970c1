//! Testing a handler without a socket: [`TestRequest`] builds a request (method, target,
//! fields, body, peer), parses its head with the server's own parser and limits, calls any
//! [`Handler`] with it (a router with its layers included) and gives the response back as a
//! [`TestResponse`], whose body reads as bytes whatever kind it is (fixed, streamed, a file).
//!
//! ```
//! use twinhttp::testing::TestRequest;
//! use twinhttp::{Response, Router};
//!
//! let app = Router::new().post("/echo", |req| match req.read_body() {
//!     Ok(body) => Response::text(body),
//!     Err(_) => Response::new(400),
//! });
//! let response = TestRequest::post("/echo").body("hi").call(&app);
//! assert_eq!(response.status(), 200);
//! assert_eq!(response.text().unwrap(), "hi");
//! assert_eq!(TestRequest::get("/nowhere").call(&app).status(), 404);
//! ```

use std::io::{self, Read};

use crate::http::address::Address;
use crate::http::origin::{self, Hop, Relay};
use crate::http::parse::parse_head;
use crate::http::request_head::RequestHead;
use crate::http::response::BodyKind;
use crate::{Handler, Limits, Request, Response};

/// A request to call a handler with, built field by field.
#[derive(Clone, Debug)]
pub struct TestRequest {
    method: String,
    target: String,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
    peer: Option<Address>,
    limits: Limits,
}

impl TestRequest {
    /// A request with `method` for `target` (`/path?query`), HTTP/1.1, with a `Host` field
    /// (`test`) unless one is given, no body, and no peer.
    pub fn new(method: &str, target: &str) -> TestRequest {
        TestRequest {
            method: method.to_owned(),
            target: target.to_owned(),
            fields: Vec::new(),
            body: Vec::new(),
            peer: None,
            limits: Limits::default(),
        }
    }

    /// A `GET` request.
    pub fn get(target: &str) -> TestRequest {
        TestRequest::new("GET", target)
    }

    /// A `POST` request.
    pub fn post(target: &str) -> TestRequest {
        TestRequest::new("POST", target)
    }

    /// Adds a field (`name: value`).
    pub fn header(mut self, name: &str, value: &str) -> TestRequest {
        self.fields.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The body, sent with its `Content-Length`.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> TestRequest {
        self.body = body.into();
        self
    }

    /// The peer's address ([`Request::peer`], [`Request::client_ip`]).
    pub fn peer(mut self, peer: impl Into<Address>) -> TestRequest {
        self.peer = Some(peer.into());
        self
    }

    /// The limits the head is parsed under. Default: [`Limits::default`].
    pub fn limits(mut self, limits: Limits) -> TestRequest {
        self.limits = limits;
        self
    }

    /// The request as the client sends it: the head, then the body.
    fn head_bytes(&self) -> Vec<u8> {
        let mut raw = format!("{} {} HTTP/1.1\r\n", self.method, self.target).into_bytes();
        if !self
            .fields
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("host"))
        {
            raw.extend_from_slice(b"Host: test\r\n");
        }
        for (name, value) in &self.fields {
            raw.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        let declared = self
            .fields
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"));
        if !self.body.is_empty() && !declared {
            raw.extend_from_slice(format!("Content-Length: {}\r\n", self.body.len()).as_bytes());
        }
        raw.extend_from_slice(b"\r\n");
        raw
    }

    /// Calls `handler` with the request, as an engine would once the request arrived whole:
    /// its head parsed under the limits (a head the server refuses gets the response the
    /// server would send, `400`, `431`, `505`…, and the handler is not called). A panic in the
    /// handler is the caller's, as in any test.
    pub fn call<H: Handler + ?Sized>(&self, handler: &H) -> TestResponse {
        let raw = self.head_bytes();
        let mut head = RequestHead::default();
        match parse_head(&raw, &self.limits, &mut head) {
            Ok(Some(_)) => {}
            Ok(None) => return TestResponse::of(Response::new(400), &head),
            Err(e) => return TestResponse::of(Response::new(e.status()), &head),
        }
        head.origin = origin::locate(&head, Hop::of(self.peer.as_ref()), None, &Relay::default());
        let mut body: &[u8] = &self.body;
        let response = handler.handle(&mut Request::new(&head, &mut body, self.peer.as_ref()));
        TestResponse::of(response, &head)
    }
}

/// What a handler answered a [`TestRequest`].
#[derive(Debug)]
pub struct TestResponse {
    response: Response,
    /// A `HEAD` request's response has no body on the wire.
    head_request: bool,
}

impl TestResponse {
    fn of(response: Response, head: &RequestHead) -> TestResponse {
        TestResponse {
            response,
            head_request: head.is_head(),
        }
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.response.status()
    }

    /// The value of the field `name` (any case), if the response has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.response.header(name)
    }

    /// The response itself.
    pub fn response(&self) -> &Response {
        &self.response
    }

    /// The response, owned.
    pub fn into_response(self) -> Response {
        self.response
    }

    /// The body's bytes, read to its end: bytes, a reader's (up to its declared length), a
    /// stream's chunks or a file's. Empty for `HEAD` and for a protocol switch.
    ///
    /// # Errors
    ///
    /// What reading the body's reader or file fails with; `Unsupported` for an event stream,
    /// whose body never ends.
    pub fn bytes(mut self) -> io::Result<Vec<u8>> {
        if self.head_request {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        match self.response.take_body().kind {
            BodyKind::Static(b) => out.extend_from_slice(b),
            BodyKind::Bytes(b) => out = b,
            BodyKind::Reader(r, Some(len)) => {
                r.take(len).read_to_end(&mut out)?;
            }
            BodyKind::Reader(mut r, None) => {
                r.read_to_end(&mut out)?;
            }
            BodyKind::Chunks(chunks) => chunks.for_each(|c| out.extend_from_slice(&c)),
            BodyKind::File(f, len) => {
                f.take(len).read_to_end(&mut out)?;
            }
            BodyKind::Switch(_) => {}
            BodyKind::Session(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "an event stream's body never ends",
                ));
            }
        }
        Ok(out)
    }

    /// `response`'s body as text, read whatever the request's method (for tests that look at
    /// what a handler made for `HEAD`).
    #[cfg(test)]
    pub(crate) fn body_text(response: Response) -> String {
        TestResponse {
            response,
            head_request: false,
        }
        .text()
        .unwrap_or_default()
    }

    /// The body as text (bytes that are not UTF-8 replaced).
    ///
    /// # Errors
    ///
    /// As [`TestResponse::bytes`].
    pub fn text(self) -> io::Result<String> {
        self.bytes()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Body, handler_fn};

    #[test]
    fn every_kind_of_body_reads_as_bytes() {
        let handler = handler_fn(|req| match req.path() {
            "/reader" => Response::new(200).with_body(Body::reader(&b"streamed"[..])),
            "/sized" => Response::new(200).with_body(Body::sized_reader(&b"sized and more"[..], 5)),
            "/chunks" => Response::new(200)
                .with_body(Body::chunks(vec![b"a".to_vec(), b"b".to_vec()].into_iter())),
            _ => Response::text("fixed"),
        });
        let text = |r: TestRequest| r.call(&handler).text().expect("a body");
        assert_eq!(text(TestRequest::get("/")), "fixed");
        assert_eq!(text(TestRequest::get("/reader")), "streamed");
        assert_eq!(text(TestRequest::get("/sized")), "sized");
        assert_eq!(text(TestRequest::get("/chunks")), "ab");
        assert_eq!(text(TestRequest::new("HEAD", "/")), "");
    }

    #[test]
    fn the_request_is_what_was_built_and_a_bad_head_gets_the_servers_answer() {
        let handler = handler_fn(|req| {
            let peer = req.client_ip().map(|ip| ip.to_string()).unwrap_or_default();
            let field = req.header("x-a").unwrap_or("").to_owned();
            let body = req.read_body().unwrap_or_default();
            Response::text(format!(
                "{} {} {field} {peer} {}",
                req.method(),
                req.query().unwrap_or(""),
                String::from_utf8_lossy(&body)
            ))
        });
        let response = TestRequest::new("PUT", "/x?q=1")
            .header("X-A", "b")
            .peer(std::net::SocketAddr::from(([192, 0, 2, 1], 5000)))
            .body("data")
            .call(&handler);
        assert_eq!(response.text().expect("a body"), "PUT q=1 b 192.0.2.1 data");
        assert_eq!(TestRequest::new("GET", "/a b").call(&handler).status(), 400);
        let limits = Limits {
            max_target_bytes: 8,
            ..Limits::default()
        };
        let long = TestRequest::get("/a-long-target")
            .limits(limits)
            .call(&handler);
        assert_eq!(long.status(), 414);
    }
}
