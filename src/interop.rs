//! Conversions to and from the `http` crate's types (feature `http`), for handlers ported from
//! hyper or axum and for code that already speaks `http`: an `http::Response<B>` or a
//! `StatusCode` becomes a [`Response`], a [`Request`] is seen as an `http::Request<()>`.
//!
//! `http`'s own comparisons need nothing here: `req.method() == http::Method::POST` and
//! `response.status() == http::StatusCode::OK` compile as they are.

use ::http::header::{HeaderName, HeaderValue};
use ::http::{HeaderMap, Method, StatusCode, Uri};

use crate::{Body, Error, ErrorKind, Request, Response, Version};

/// An `http::Response` as a [`Response`]: its status, every header field in order (repeated
/// names kept) and its body, anything that converts into a [`Body`] (`String`, `Vec<u8>`,
/// `&'static str`, `()`, `bytes::Bytes`, a [`Body`] itself).
///
/// Field names are sent as `http` holds them (lower case). A value that is not UTF-8 (`http`
/// allows obsolete non-ASCII bytes) cannot be held by a [`Response`]: that field is left out
/// and a warning logged. The version and extensions are not used; framing fields
/// (`Content-Length`, `Transfer-Encoding`) are derived from the body as for any response, and a
/// 1xx status is sent as 500, as from any handler.
///
/// ```
/// use http::{StatusCode, header};
/// use twinhttp::Response;
///
/// let ported = http::Response::builder()
///     .status(StatusCode::CREATED)
///     .header(header::CONTENT_TYPE, "application/json")
///     .header(header::SET_COOKIE, "a=1")
///     .header(header::SET_COOKIE, "b=2")
///     .body(r#"{"id":7}"#.to_owned())
///     .expect("a valid response");
/// let r = Response::from(ported);
/// assert_eq!(r.status(), 201);
/// assert_eq!(r.content_type(), Some("application/json"));
/// assert_eq!(r.headers().filter(|(n, _)| *n == "set-cookie").count(), 2);
/// assert_eq!(r.body().len(), Some(8));
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
impl<B: Into<Body>> From<::http::Response<B>> for Response {
    fn from(res: ::http::Response<B>) -> Response {
        let (parts, body) = res.into_parts();
        let mut out = Response::new(parts.status.as_u16()).with_body(body);
        for (name, value) in &parts.headers {
            match std::str::from_utf8(value.as_bytes()) {
                Ok(value) => {
                    out = out.with_added_header(name.as_str().to_owned(), value.to_owned())
                }
                Err(_) => log::warn!("http::Response field {name} is not UTF-8: left out"),
            }
        }
        out
    }
}

/// A bare status as a [`Response`] with no body, as axum's `StatusCode::into_response`:
/// `return StatusCode::NOT_FOUND.into();`. A 1xx status is sent as 500, as from any handler.
///
/// ```
/// use http::StatusCode;
/// use twinhttp::Response;
///
/// let r = Response::from(StatusCode::NO_CONTENT);
/// assert_eq!(r.status(), StatusCode::NO_CONTENT);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
impl From<StatusCode> for Response {
    fn from(status: StatusCode) -> Response {
        Response::new(status.as_u16())
    }
}

/// `bytes::Bytes` (the body type of `http::Response<Bytes>`) as a [`Body`] with
/// `Content-Length`; its bytes are moved, not copied, when the `Bytes` is the only handle to
/// them.
///
/// ```
/// let body = twinhttp::Body::from(bytes::Bytes::from_static(b"hello"));
/// assert_eq!(body.len(), Some(5));
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
impl From<bytes::Bytes> for Body {
    fn from(bytes: bytes::Bytes) -> Body {
        Body::from(Vec::from(bytes))
    }
}

/// The version as `http` names it.
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
impl From<Version> for ::http::Version {
    fn from(version: Version) -> ::http::Version {
        match version {
            Version::Http10 => ::http::Version::HTTP_10,
            Version::Http11 => ::http::Version::HTTP_11,
        }
    }
}

impl Request<'_> {
    /// The request's head as an `http::Request<()>`: method, URI (the request-target as sent,
    /// so `/search?q=1` has no scheme or authority, as hyper's server gives it), version and
    /// every header field in order. For code written against `http` (a hyper or axum handler
    /// being ported, a helper taking `&http::HeaderMap`); the body stays with this request, to
    /// be read as usual and put beside the head with `http::Request::map`.
    ///
    /// # Errors
    ///
    /// An error of kind [`ErrorKind::BadRequest`] ([`Error::status`] 400) when a part this
    /// crate accepted is not valid for `http`: a request-target `http::Uri` refuses (one with a
    /// `<`, `>` or `` ` ``, or over its 65,534-byte limit), a method or field name it does not
    /// take.
    ///
    /// # Examples
    ///
    /// A handler written for `http` types, served as it is:
    ///
    /// ```
    /// use http::{Method, StatusCode, header};
    /// use twinhttp::{Request, Response, handler_fn};
    ///
    /// // The handler being ported, unchanged.
    /// fn ported(req: http::Request<Vec<u8>>) -> http::Response<String> {
    ///     let agent = req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok());
    ///     let text = match (req.method(), req.uri().path()) {
    ///         (&Method::POST, "/echo") => String::from_utf8_lossy(req.body()).into_owned(),
    ///         (method, path) => format!("{method} {path} from {agent:?}"),
    ///     };
    ///     http::Response::builder()
    ///         .status(StatusCode::OK)
    ///         .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
    ///         .body(text)
    ///         .unwrap_or_default()
    /// }
    ///
    /// fn adapter(req: &mut Request<'_>) -> Response {
    ///     let head = match req.to_http() {
    ///         Ok(head) => head,
    ///         Err(e) => return Response::new(e.status().unwrap_or(400)),
    ///     };
    ///     match req.read_body() {
    ///         Ok(body) => ported(head.map(|()| body)).into(),
    ///         Err(_) => StatusCode::BAD_REQUEST.into(),
    ///     }
    /// }
    /// let _handler = handler_fn(adapter);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn to_http(&self) -> Result<::http::Request<()>, Error> {
        fn bad<E>(_: E) -> Error {
            Error::new(ErrorKind::BadRequest)
        }
        let mut out = ::http::Request::new(());
        *out.method_mut() = Method::from_bytes(self.method().as_bytes()).map_err(bad)?;
        *out.uri_mut() = Uri::try_from(self.target()).map_err(bad)?;
        *out.version_mut() = self.version().into();
        let mut headers = HeaderMap::with_capacity(self.headers().count());
        for (name, value) in self.headers() {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(bad)?;
            let value = HeaderValue::from_bytes(value).map_err(bad)?;
            headers.append(name, value);
        }
        *out.headers_mut() = headers;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request_head::RequestHead;

    #[test]
    fn request_head_as_http() {
        let head = RequestHead::parsed(
            b"PATCH /items/7?full=1 HTTP/1.0\r\nHost: example.com\r\nX-Tag: a\r\nx-tag: b\r\nX-Raw: caf\xc3\xa9 \xff\r\n\r\n",
        );
        let mut body: &[u8] = b"";
        let req = Request::new(&head, &mut body, None);
        let http = req.to_http().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(http.method(), Method::PATCH);
        assert_eq!(http.uri().path(), "/items/7");
        assert_eq!(http.uri().query(), Some("full=1"));
        assert_eq!(http.version(), ::http::Version::HTTP_10);
        let tags: Vec<&[u8]> = http
            .headers()
            .get_all("x-tag")
            .iter()
            .map(HeaderValue::as_bytes)
            .collect();
        assert_eq!(tags, [b"a", b"b"]);
        assert_eq!(
            http.headers().get("x-raw").map(HeaderValue::as_bytes),
            Some(&b"caf\xc3\xa9 \xff"[..])
        );
        assert_eq!(http.headers().len(), 4);
    }

    #[test]
    fn target_forms_as_uris() {
        let cases: &[(&str, &str, &str)] = &[
            ("OPTIONS", "*", "*"),
            ("GET", "http://example.com/a?b", "http://example.com/a?b"),
            ("CONNECT", "example.com:443", "example.com:443"),
            ("GET", "/a%20b", "/a%20b"),
        ];
        for (method, target, uri) in cases {
            let raw = format!("{method} {target} HTTP/1.1\r\nHost: example.com\r\n\r\n");
            let head = RequestHead::parsed(raw.as_bytes());
            let mut body: &[u8] = b"";
            let req = Request::new(&head, &mut body, None);
            let http = req.to_http().unwrap_or_else(|e| panic!("{target}: {e}"));
            assert_eq!(http.uri().to_string(), *uri, "{target}");
            assert_eq!(http.method().as_str(), *method);
        }
    }

    #[test]
    fn what_http_refuses_is_a_bad_request_not_a_panic() {
        // httparse takes these targets; http::Uri does not.
        for target in ["/a<b", "/a>b", "/a`b"] {
            let raw = format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n");
            let head = RequestHead::parsed(raw.as_bytes());
            let mut body: &[u8] = b"";
            let req = Request::new(&head, &mut body, None);
            let err = req
                .to_http()
                .map(|_| ())
                .map_err(|e| (e.kind(), e.status()));
            assert_eq!(err, Err((ErrorKind::BadRequest, Some(400))), "{target}");
        }
    }

    #[test]
    fn http_responses_become_responses() {
        let res = ::http::Response::builder()
            .status(StatusCode::IM_A_TEAPOT)
            .header("x-a", "1")
            .header("content-type", "text/tea")
            .header(
                "x-b",
                HeaderValue::from_bytes(b"\xff").unwrap_or_else(|e| panic!("{e}")),
            )
            .header("x-a", "2")
            .header("x-utf8", "café")
            .body(())
            .unwrap_or_else(|e| panic!("{e}"));
        let r = Response::from(res);
        assert_eq!(r.status(), 418);
        let fields: Vec<(&str, &str)> = r.headers().collect();
        // Content-Type first (as every Response lists it), the field that is not UTF-8 left out.
        assert_eq!(
            fields,
            [
                ("content-type", "text/tea"),
                ("x-a", "1"),
                ("x-a", "2"),
                ("x-utf8", "café")
            ]
        );
        assert!(r.body().is_empty());

        let r = Response::from(
            ::http::Response::builder()
                .status(StatusCode::SWITCHING_PROTOCOLS)
                .body(bytes::Bytes::from_static(b"x"))
                .unwrap_or_else(|e| panic!("{e}")),
        );
        // Kept as given; the core sends a final 1xx as 500 (tests/http_interop.rs).
        assert_eq!(r.status(), 101);
        assert_eq!(r.body().len(), Some(1));
        assert_eq!(Response::from(StatusCode::NOT_FOUND).status(), 404);
    }
}
