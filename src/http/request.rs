//! The request a handler receives.

use std::any::Any;
use std::fmt;
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr};

use crate::http::address::Address;
use crate::http::budget::Budget;
use crate::http::origin::Scheme;
use crate::http::request_head::{BodyFraming, RequestHead, Version};

/// Path parameters a handler in front of the one that answers matched for it (a
/// [`Router`](crate::Router)'s): names borrowed from the routes, values from the request's path.
/// Defined here, not in the router, so that the core depends on no handler built on it.
pub(crate) type RouteParams<'a> = matchit::Params<'a, 'a>;

/// An HTTP request as a handler sees it: the head, and the body as a [`Read`].
///
/// The body has arrived whole (up to [`crate::Limits::max_body_bytes`]) before the handler runs,
/// on every engine: reading it never waits on the client, and a body the handler leaves unread
/// costs the connection nothing. A body over [`crate::Limits::max_body_in_memory`] is read from
/// an anonymous temporary file, gone after the exchange.
///
/// The accessors return the request's own data (`&'a str`, `Cow<'a, str>`), not a borrow of the
/// `Request`, so a value read from the head can be held while the body is read. The head has
/// already passed the limits and framing checks of [`crate::Limits`]; what a handler reads is
/// well-formed.
///
/// # Examples
///
/// ```
/// use twinhttp::{Request, Response};
///
/// fn upload(req: &mut Request<'_>) -> Response {
///     let path = req.path(); // held across the body read below
///     let name = req.query_param("name").unwrap_or("anonymous".into());
///     let kind = req.header("content-type").unwrap_or("application/octet-stream");
///     match req.read_body() {
///         // Over `max_body_bytes`, malformed or too slow: the engine answers 413/400/408 itself.
///         Err(_) => Response::new(400),
///         Ok(body) => Response::text(format!("{name} sent {} bytes of {kind} to {path}", body.len())),
///     }
/// }
/// # let _ = twinhttp::handler_fn(upload);
/// ```
pub struct Request<'a> {
    head: &'a RequestHead,
    body: RequestBody<'a>,
    peer: Option<&'a Address>,
    /// The path parameters of the route a [`Router`](crate::Router) matched; `None` (one word,
    /// no allocation) for a request no router has matched.
    params: Option<&'a RouteParams<'a>>,
    /// Values layers put on the request for the handler (none: no allocation).
    extensions: ::http::Extensions,
    /// The application state of the innermost [`Router`](crate::Router) with one.
    state: Option<&'a State>,
    /// The server's memory budget, for what a layer holds beyond the response (an encoder's
    /// state); `None` outside a server (a [`TestRequest`](crate::testing::TestRequest)).
    budget: Option<&'a Budget>,
}

/// Application state, as a router holds it: any value, shared by every request.
pub(crate) type State = dyn Any + Send + Sync;

impl<'a> Request<'a> {
    /// The parsed head, for protocols built on the request (the WebSocket handshake).
    pub(crate) fn head(&self) -> &'a RequestHead {
        self.head
    }

    pub(crate) fn new(
        head: &'a RequestHead,
        body: &'a mut dyn Read,
        peer: Option<&'a Address>,
    ) -> Self {
        Request {
            head,
            body: RequestBody { inner: body },
            peer,
            params: None,
            extensions: ::http::Extensions::new(),
            state: None,
            budget: None,
        }
    }

    /// This request as a server's: what it holds beyond its response counts to `budget`.
    pub(crate) fn within(mut self, budget: &'a Budget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The server's memory budget (`None` outside a server).
    #[cfg_attr(not(feature = "compression"), allow(dead_code))]
    pub(crate) fn budget(&self) -> Option<&'a Budget> {
        self.budget
    }

    /// This request, reborrowed with the path parameters of a matched route and the router's
    /// state (or the state it had): what a [`Router`](crate::Router) hands the route's handler.
    /// The body is the same reader; the extensions move over (see
    /// [`Request::return_extensions`]).
    pub(crate) fn routed<'b>(
        &'b mut self,
        params: Option<&'b RouteParams<'b>>,
        state: Option<&'b State>,
    ) -> Request<'b> {
        Request {
            head: self.head,
            body: RequestBody {
                inner: &mut *self.body.inner,
            },
            peer: self.peer,
            params: params.or(self.params),
            extensions: std::mem::take(&mut self.extensions),
            state: state.or(self.state),
            budget: self.budget,
        }
    }

    /// The extensions of a [routed](Request::routed) request, back on this one once its
    /// handler returned (what the handler added is seen by the layers outside the router).
    pub(crate) fn return_extensions(&mut self, extensions: ::http::Extensions) {
        self.extensions = extensions;
    }

    /// The body's reader, as the engine gave it (for readers built on it: multipart).
    #[cfg_attr(not(feature = "multipart"), allow(dead_code))]
    pub(crate) fn body_reader(&mut self) -> &mut dyn Read {
        &mut *self.body.inner
    }

    /// This request's extensions, taken.
    pub(crate) fn take_extensions(&mut self) -> ::http::Extensions {
        std::mem::take(&mut self.extensions)
    }

    /// The value of type `T` a layer put on the request ([`Request::insert_extension`]), if
    /// one did.
    pub fn extension<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.extensions.get::<T>()
    }

    /// The value of type `T` a layer put on the request, to change.
    pub fn extension_mut<T: Send + Sync + 'static>(&mut self) -> Option<&mut T> {
        self.extensions.get_mut::<T>()
    }

    /// Puts `value` on the request for the handlers and layers after this one to read with
    /// [`Request::extension`]: one value per type (a newtype names it: `struct UserId(u64)`).
    /// Returns the value of the type it had. The first costs one allocation; a request with
    /// none allocates nothing.
    pub fn insert_extension<T: Clone + Send + Sync + 'static>(&mut self, value: T) -> Option<T> {
        self.extensions.insert(value)
    }

    /// Takes the value of type `T` off the request.
    pub fn remove_extension<T: Send + Sync + 'static>(&mut self) -> Option<T> {
        self.extensions.remove::<T>()
    }

    /// The application state of the innermost [`Router`](crate::Router) that routed this
    /// request and has one ([`Router::with_state`](crate::Router::with_state)), if it is an
    /// `S`: shared by every request, cloned for none.
    pub fn state<S: Send + Sync + 'static>(&self) -> Option<&'a S> {
        self.state.and_then(|s| s.downcast_ref::<S>())
    }

    /// The path parameters of the route a router matched, if any.
    pub(crate) fn route_params(&self) -> Option<&'a RouteParams<'a>> {
        self.params
    }

    /// The `Last-Event-ID` field: the id of the last server-sent event a reconnecting client
    /// received (see [`Response::event_stream`](crate::Response::event_stream)).
    pub fn last_event_id(&self) -> Option<&'a str> {
        self.head.header("last-event-id")
    }

    /// The method, e.g. `"GET"`.
    ///
    /// This and the other accessors return data that lives as long as the request, not a
    /// borrow of it, so the body can be read while they are held:
    ///
    /// ```
    /// use twinhttp::{Request, Response};
    ///
    /// fn upload(req: &mut Request<'_>) -> Response {
    ///     let (method, path) = (req.method(), req.path());
    ///     let accepts: Vec<&str> = req.header_all("accept").collect();
    ///     let fields = req.headers().count();
    ///     match req.read_body() {
    ///         Ok(body) => Response::text(format!(
    ///             "{method} {path}: {} bytes, {fields} fields, accepts {accepts:?}",
    ///             body.len()
    ///         )),
    ///         Err(_) => Response::new(400),
    ///     }
    /// }
    /// # let _ = upload;
    /// ```
    pub fn method(&self) -> &'a str {
        self.head.method()
    }

    /// The request-target as sent, e.g. `"/search?q=rust"`.
    pub fn target(&self) -> &'a str {
        self.head.target()
    }

    /// The path: the target up to any `?`, e.g. `"/search"`, with scheme and authority removed
    /// from an absolute-form target (`http://example.com/search` → `"/search"`), and any
    /// fragment a client sent (`#...`, which a target does not carry) dropped. Not
    /// percent-decoded.
    pub fn path(&self) -> &'a str {
        self.head.path()
    }

    /// The target after the first `?`, if any, up to any fragment (`#...`). Not percent-decoded.
    pub fn query(&self) -> Option<&'a str> {
        self.head.query()
    }

    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.head.version
    }

    /// The host (and port, if any) the request is for, e.g. `"example.com:8080"`: the
    /// authority of an absolute-form target (`GET http://example.com/ HTTP/1.1`, as sent to
    /// proxies), for which a server ignores the `Host` field (RFC 9112 §3.2.2); otherwise the
    /// `Host` field. `None` for an HTTP/1.0 request without one.
    pub fn host(&self) -> Option<&'a str> {
        self.head.host()
    }

    /// The first header field with this name (case-insensitive), if its value is UTF-8.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.head.header(name)
    }

    /// The first header field with this name (case-insensitive), as raw bytes.
    pub fn header_bytes(&self, name: &str) -> Option<&'a [u8]> {
        self.head.header_bytes(name)
    }

    /// Every header field in order, names as sent, values as raw bytes.
    pub fn headers(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> + use<'a> {
        let head: &'a RequestHead = self.head;
        head.headers_raw()
    }

    /// Every value of the fields with this name (case-insensitive), in order, that is UTF-8
    /// (a repeated field such as `Accept` or `Cookie`; [`Request::header`] gives the first).
    pub fn header_all<'n>(&self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        let head: &'a RequestHead = self.head;
        head.values_of(name)
            .filter_map(|v| std::str::from_utf8(v).ok())
    }

    /// The declared body length, if the request has a `Content-Length` (0 for no body).
    pub fn content_length(&self) -> Option<u64> {
        match self.head.body {
            BodyFraming::Empty => Some(0),
            BodyFraming::Length(n) => Some(n),
            BodyFraming::Chunked => None,
        }
    }

    /// The peer's address, TCP or Unix, when the engine knows it: the socket's other end
    /// (behind a proxy, the proxy; the client is [`Request::client_ip`]).
    pub fn peer(&self) -> Option<&'a Address> {
        self.peer
    }

    /// The peer's TCP address (`None` for a peer on a Unix domain socket: see
    /// [`Request::peer`]).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer.and_then(Address::tcp)
    }

    /// The client's IP address. The nearest hop is the peer, or with the engine's
    /// `proxy_protocol` on, the client its PROXY protocol header named. When that hop is one of
    /// the engine's `trusted_proxies`, the forwarded header they write names the client
    /// (walked from the right, past other trusted proxies); otherwise the hop is the client.
    /// `None` for a peer on a Unix domain socket that no proxy reported a client for, and when
    /// a trusted proxy's forwarded header names nobody believable (an entry that is not an
    /// address before any untrusted one: the rest is anyone's to write).
    pub fn client_ip(&self) -> Option<IpAddr> {
        self.head.origin.client.ip(self.peer_addr().map(|a| a.ip()))
    }

    /// The scheme the client used: `https` over TLS, or as a trusted proxy's `Forwarded`
    /// (`proto=`) or `X-Forwarded-Proto` says; otherwise `http`.
    pub fn scheme(&self) -> Scheme {
        self.head.origin.scheme
    }

    /// The body, to read. Reading past a body limit or a malformed chunk returns an error of kind
    /// [`io::ErrorKind::InvalidData`] wrapping a [`crate::Error`]; the server then answers 413 or
    /// 400 itself and closes the connection, whatever the handler returns.
    pub fn body(&mut self) -> &mut RequestBody<'a> {
        &mut self.body
    }

    /// Reads the whole body into a `Vec` (bounded by [`crate::Limits::max_body_bytes`]).
    ///
    /// # Errors
    ///
    /// As [`Request::body`]: a body over the limit, a malformed chunk, a timeout or a closed peer.
    pub fn read_body(&mut self) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.body.read_to_end(&mut out)?;
        Ok(out)
    }
}

impl fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method())
            .field("target", &self.target())
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

/// The body of a [`Request`], read with [`std::io::Read`]. With `Expect: 100-continue`, the
/// `100 Continue` interim response is sent on the first read.
pub struct RequestBody<'a> {
    inner: &'a mut dyn Read,
}

impl Read for RequestBody<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf)
    }
}

impl fmt::Debug for RequestBody<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestBody")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::parse::parse_head;
    use crate::limits::Limits;

    #[test]
    fn every_value_of_a_repeated_field_in_order() {
        let raw = b"GET / HTTP/1.1\r\nHost: h\r\nAccept: text/html\r\nX-Other: 1\r\naccept: application/json\r\nACCEPT: \xff\r\n\r\n";
        let mut head = RequestHead::default();
        let parsed = parse_head(raw, &Limits::default(), &mut head);
        assert!(matches!(parsed, Ok(Some(_))), "{parsed:?}");
        let mut body: &[u8] = b"";
        let req = Request::new(&head, &mut body, None);
        let all: Vec<&str> = req.header_all("Accept").collect();
        // Case-insensitive, in order; a value that is not UTF-8 is left out.
        assert_eq!(all, ["text/html", "application/json"]);
        assert_eq!(req.header("accept"), Some("text/html"));
        assert_eq!(req.headers().count(), 5);
        // Names compared whole, as bytes, in any case; the last first from the right.
        assert_eq!(req.header_bytes("x-OTHER"), Some(&b"1"[..]));
        assert_eq!(req.header("Accep"), None);
        assert_eq!(req.header("Accept-"), None);
        let last: Vec<&[u8]> = head.values_of("accept").rev().take(2).collect();
        assert_eq!(last, [&b"\xff"[..], &b"application/json"[..]]);
    }
}
