//! The response a handler returns.

use std::borrow::Cow;
use std::fmt;
use std::io::Read;

use crate::http::session::Takeover;
use crate::upgraded::Upgraded;

/// A header name or value: borrowed `'static` text costs no allocation.
pub type HeaderText = Cow<'static, str>;

/// An HTTP response: status, header fields and a [`Body`].
///
/// Framing fields (`Content-Length`, `Transfer-Encoding`) are derived from the body and the request
/// by the server; set ones are ignored. `Date` is added unless set. A `Connection: close` field
/// closes the connection after the response.
///
/// ```
/// use twinhttp::{Body, Response};
/// let r = Response::text("hi").with_header("Cache-Control", "no-store");
/// assert_eq!(r.status(), 200);
/// let r = Response::new(404);
/// assert_eq!(r.status(), 404);
/// let _streamed = Response::new(200).with_body(Body::reader(std::io::empty()));
/// ```
pub struct Response {
    status: u16,
    /// `Content-Type`, held apart so that the common response allocates nothing for its
    /// fields; to users it is an ordinary field.
    content_type: ContentType,
    headers: Vec<(HeaderText, HeaderText)>,
    body: Body,
    /// For a `304` from [`Response::file`]: what its `200` would have been. Never sent; read
    /// by the compression layer only.
    #[cfg(feature = "compression")]
    not_modified_of: Option<Box<Representation>>,
}

/// What a `304 Not Modified` stands for: the content type and length the `200` to the same
/// request would have had. The 304 sends neither (RFC 9110 §15.4.5), but it must carry the
/// `ETag` and `Vary` that 200 would, so a layer that changes them in a 200 (compression makes
/// the tag weak) needs them to tell whether it would have.
#[cfg(feature = "compression")]
pub(crate) struct Representation {
    pub(crate) content_type: HeaderText,
    pub(crate) len: u64,
    /// The `Content-Encoding` the 200 would have had: a precompressed copy's coding, which a
    /// layer leaves as it is (and its strong tag with it). `None`: the file's own bytes.
    pub(crate) content_encoding: Option<&'static str>,
}

impl Response {
    /// An empty response with this status. Codes outside 100–999 are made 500 here. A 1xx is
    /// an interim response the server sends itself (`100 Continue`), never a handler's final
    /// answer: a handler that returns one gets the 500 of a panic sent instead (no body; the
    /// connection closes), its own body and fields dropped unsent, and an error logged.
    pub fn new(status: u16) -> Response {
        Response {
            status: if (100..1000).contains(&status) {
                status
            } else {
                500
            },
            content_type: ContentType::Unset,
            headers: Vec::new(),
            body: Body::empty(),
            #[cfg(feature = "compression")]
            not_modified_of: None,
        }
    }

    /// 200 with a `text/plain; charset=utf-8` body.
    pub fn text(body: impl Into<Body>) -> Response {
        Response::ok(KnownType::TEXT, body.into())
    }

    /// 200 with a `text/html; charset=utf-8` body.
    pub fn html(body: impl Into<Body>) -> Response {
        Response::ok(KnownType::HTML, body.into())
    }

    /// 200 with one of the crate's own content types, built whole (nothing made to be replaced
    /// and dropped: the common response's constructor).
    pub(crate) fn ok(content_type: KnownType, body: Body) -> Response {
        Response {
            status: 200,
            content_type: ContentType::Known(content_type),
            headers: Vec::new(),
            body,
            #[cfg(feature = "compression")]
            not_modified_of: None,
        }
    }

    #[cfg(feature = "compression")]
    /// Records what this `304` stands for (never sent): see [`Representation`].
    pub(crate) fn not_modified_of(mut self, representation: Representation) -> Response {
        self.not_modified_of = Some(Box::new(representation));
        self
    }

    #[cfg(feature = "compression")]
    /// This `304` stands for a 200 that would have been sent with `Content-Encoding: coding`
    /// (a precompressed copy's): see [`Representation::content_encoding`].
    pub(crate) fn stands_for_coding(mut self, coding: &'static str) -> Response {
        if let Some(r) = self.not_modified_of.as_deref_mut() {
            r.content_encoding = Some(coding);
        }
        self
    }

    #[cfg(feature = "compression")]
    /// What this `304` stands for, when its maker said.
    pub(crate) fn representation(&self) -> Option<&Representation> {
        self.not_modified_of.as_deref()
    }

    /// Sets the status.
    pub fn with_status(mut self, status: u16) -> Response {
        self.status = Response::new(status).status;
        self
    }

    /// Sets `Content-Type`: the same as [`Response::with_header`] with that name.
    pub fn with_content_type(mut self, value: impl Into<HeaderText>) -> Response {
        self.content_type = ContentType::Set(HeaderText::Borrowed("Content-Type"), value.into());
        self
    }

    /// Sets `Content-Type` to one of the crate's own values, which need no check when written.
    pub(crate) fn with_known_content_type(mut self, value: KnownType) -> Response {
        self.content_type = ContentType::Known(value);
        self
    }

    /// Sets a header field, replacing any field of the same name (names compare
    /// case-insensitively): `Response::text("{}").with_header("content-type",
    /// "application/json")` sends one `Content-Type`. For a field that may be sent several times
    /// (`Set-Cookie`), use [`Response::with_added_header`]. Names and values containing CR, LF or
    /// NUL are dropped when the response is written, so a handler echoing peer input cannot split
    /// the response. The framing is the server's: `Content-Length` and `Transfer-Encoding` set
    /// here are not sent (the body decides them; said at `debug` as they are set), and
    /// `Connection` counts for its `close` only.
    ///
    /// ```
    /// let r = twinhttp::Response::text("{}").with_header("content-type", "application/json");
    /// assert_eq!(r.header("Content-Type"), Some("application/json"));
    /// assert_eq!(r.headers().count(), 1);
    /// ```
    pub fn with_header(
        mut self,
        name: impl Into<HeaderText>,
        value: impl Into<HeaderText>,
    ) -> Response {
        let name = name.into();
        if name.eq_ignore_ascii_case("content-type") {
            self.content_type = ContentType::Set(name, value.into());
            return self;
        }
        framing_field(&name);
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
        self.headers.push((name, value.into()));
        self
    }

    /// Adds a header field, keeping those of the same name: for fields sent several times, such
    /// as `Set-Cookie`. (`Content-Type` is never repeated: it is set as by
    /// [`Response::with_header`].)
    pub fn with_added_header(
        mut self,
        name: impl Into<HeaderText>,
        value: impl Into<HeaderText>,
    ) -> Response {
        let name = name.into();
        if name.eq_ignore_ascii_case("content-type") {
            return self.with_header(name, value);
        }
        framing_field(&name);
        self.headers.push((name, value.into()));
        self
    }

    /// Sets the body.
    pub fn with_body(mut self, body: impl Into<Body>) -> Response {
        self.body = body.into();
        self
    }

    /// A generic protocol switch: `101 Switching Protocols` with `Upgrade: protocol`, after which
    /// `then` gets the connection ([`Upgraded`]) on a thread of its own, on either engine. The
    /// request must carry `Connection: upgrade` and list `protocol` in its `Upgrade` field
    /// (RFC 9110 §7.8; else 426 is sent instead, naming `protocol`). The `101` carries the
    /// fields set on the response but its framing (`Content-Length`, `Transfer-Encoding`:
    /// a 1xx has no content). Its status is the `101` it sends:
    ///
    /// ```
    /// let r = twinhttp::Response::upgrade("echo", |_conn| {});
    /// assert_eq!(r.status(), 101);
    /// ```
    pub fn upgrade(protocol: &str, then: impl FnOnce(Upgraded) + Send + 'static) -> Response {
        Response::new(101)
            .with_header("Upgrade", protocol.to_owned())
            .with_body(Body {
                kind: BodyKind::Switch(Switch::Thread(Box::new(then))),
            })
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The `Content-Type` field, if set.
    pub fn content_type(&self) -> Option<&str> {
        self.header("content-type")
    }

    /// The header fields: `Content-Type` first, then the others in the order they were set.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.content_type
            .field()
            .into_iter()
            .chain(self.headers.iter().map(|(n, v)| (&**n, &**v)))
    }

    /// `Content-Type`, apart from the other fields.
    pub(crate) fn content_type_field(&self) -> &ContentType {
        &self.content_type
    }

    /// The fields other than `Content-Type`, in the order they were set.
    pub(crate) fn other_fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.headers.iter().map(|(n, v)| (&**n, &**v))
    }

    /// The first header field with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The body.
    pub fn body(&self) -> &Body {
        &self.body
    }

    pub(crate) fn take_body(&mut self) -> Body {
        std::mem::replace(&mut self.body, Body::empty())
    }

    /// The body, the rest dropped (once the head is written).
    #[inline]
    pub(crate) fn into_body(self) -> Body {
        self.body
    }

    /// Removes the header fields named `name` (any case).
    #[cfg_attr(not(feature = "compression"), allow(dead_code))]
    pub(crate) fn without_header(mut self, name: &str) -> Response {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self
    }
}

/// A response's `Content-Type`.
pub(crate) enum ContentType {
    Unset,
    /// One of the crate's own values (`text/plain; charset=utf-8` for [`Response::text`]...),
    /// written without the checks a field set by an application gets.
    Known(KnownType),
    /// Set by the application (the name as set, and the value): checked when written.
    Set(HeaderText, HeaderText),
}

/// One of the crate's own content types: its value, and its whole field line, written as one
/// copy.
#[derive(Clone, Copy)]
pub(crate) struct KnownType {
    pub(crate) value: &'static str,
    pub(crate) line: &'static str,
}

/// A [`KnownType`] from its value (a literal).
macro_rules! known_type {
    ($value:literal) => {
        KnownType {
            value: $value,
            line: concat!("Content-Type: ", $value, "\r\n"),
        }
    };
}

impl KnownType {
    pub(crate) const TEXT: KnownType = known_type!("text/plain; charset=utf-8");
    pub(crate) const HTML: KnownType = known_type!("text/html; charset=utf-8");
    #[cfg_attr(not(feature = "json"), allow(dead_code))]
    pub(crate) const JSON: KnownType = known_type!("application/json");
    pub(crate) const EVENT_STREAM: KnownType = known_type!("text/event-stream");
}

impl ContentType {
    /// The field as a name and a value.
    pub(crate) fn field(&self) -> Option<(&str, &str)> {
        match self {
            ContentType::Unset => None,
            ContentType::Known(known) => Some(("Content-Type", known.value)),
            ContentType::Set(name, value) => Some((name, value)),
        }
    }
}

impl fmt::Debug for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("headers", &self.headers().collect::<Vec<_>>())
            .field("body", &self.body)
            .finish()
    }
}

/// A response body: bytes known up front, or a stream written as it is produced.
pub struct Body {
    pub(crate) kind: BodyKind,
}

pub(crate) enum BodyKind {
    Static(&'static [u8]),
    Bytes(Vec<u8>),
    /// A reader; `Some(len)` sends exactly `len` bytes with Content-Length, `None` sends chunked
    /// (or close-delimited to an HTTP/1.0 client).
    Reader(Box<dyn Read + Send>, Option<u64>),
    /// Chunks from an iterator, each written to the socket as soon as it is produced.
    Chunks(Box<dyn Iterator<Item = Vec<u8>> + Send>),
    /// `101 Switching Protocols`, then the connection belongs to another protocol.
    Switch(Switch),
    /// `len` bytes of a file from its current position ([`Response::file`]).
    File(std::fs::File, u64),
    /// A session (an event stream) takes the connection over once the head is out: what
    /// it writes is the body, framed by the response's encoder.
    Session(Box<dyn Takeover>),
}

/// Who takes a connection over after its `101 Switching Protocols`.
pub(crate) enum Switch {
    /// A session the engine drives (WebSocket).
    Session(Box<dyn Takeover>),
    /// A callback on a thread of its own, with the blocking socket ([`Response::upgrade`]).
    Thread(Box<dyn FnOnce(Upgraded) + Send>),
}

impl Body {
    /// No body.
    pub fn empty() -> Body {
        Body {
            kind: BodyKind::Static(b""),
        }
    }

    /// A body streamed from a reader, length unknown: sent chunked to HTTP/1.1 clients and
    /// close-delimited to HTTP/1.0 clients. Each `read` result is written out as it comes.
    pub fn reader(reader: impl Read + Send + 'static) -> Body {
        Body {
            kind: BodyKind::Reader(Box::new(reader), None),
        }
    }

    /// A body of exactly `len` bytes streamed from a reader, sent with `Content-Length`. A reader
    /// that ends early makes the server close the connection (the client sees a short body).
    pub fn sized_reader(reader: impl Read + Send + 'static, len: u64) -> Body {
        Body {
            kind: BodyKind::Reader(Box::new(reader), Some(len)),
        }
    }

    /// A body of chunks, each written to the socket as soon as the iterator yields it (for
    /// responses produced over time). Empty chunks are skipped.
    pub fn chunks(iter: impl Iterator<Item = Vec<u8>> + Send + 'static) -> Body {
        Body {
            kind: BodyKind::Chunks(Box::new(iter)),
        }
    }

    /// The length, when known before sending.
    pub fn len(&self) -> Option<u64> {
        match &self.kind {
            BodyKind::Static(b) => Some(b.len() as u64),
            BodyKind::Bytes(b) => Some(b.len() as u64),
            BodyKind::Reader(_, len) => *len,
            BodyKind::Chunks(_) => None,
            BodyKind::Switch(_) => Some(0),
            BodyKind::Session(_) => None,
            BodyKind::File(_, len) => Some(*len),
        }
    }

    /// True for a body known to be empty.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BodyKind::Static(b) => write!(f, "Body({} static bytes)", b.len()),
            BodyKind::Bytes(b) => write!(f, "Body({} bytes)", b.len()),
            BodyKind::Reader(_, Some(n)) => write!(f, "Body(reader, {n} bytes)"),
            BodyKind::Reader(_, None) => f.write_str("Body(reader)"),
            BodyKind::Chunks(_) => f.write_str("Body(chunks)"),
            BodyKind::Switch(_) => f.write_str("Body(upgrade)"),
            BodyKind::Session(_) => f.write_str("Body(session)"),
            BodyKind::File(_, n) => write!(f, "Body(file, {n} bytes)"),
        }
    }
}

/// No body: `()`, as in `http::Response<()>`.
impl From<()> for Body {
    fn from((): ()) -> Body {
        Body::empty()
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Body {
        Body {
            kind: BodyKind::Static(s.as_bytes()),
        }
    }
}

impl From<&'static [u8]> for Body {
    fn from(s: &'static [u8]) -> Body {
        Body {
            kind: BodyKind::Static(s),
        }
    }
}

impl From<String> for Body {
    fn from(s: String) -> Body {
        Body {
            kind: BodyKind::Bytes(s.into_bytes()),
        }
    }
}

impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Body {
        Body {
            kind: BodyKind::Bytes(v),
        }
    }
}
/// A framing field a handler set, which the server does not send: said at `debug`.
fn framing_field(name: &str) {
    if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding")
    {
        log::debug!("response field {name:?} is not sent: the body decides the framing");
    }
}

#[cfg(test)]
mod tests {
    use super::Response;
    use std::sync::Mutex;

    /// This module's debug records (the one logger of the library's test binary).
    struct Kept;

    static KEPT: Mutex<Vec<String>> = Mutex::new(Vec::new());

    impl log::Log for Kept {
        fn enabled(&self, m: &log::Metadata<'_>) -> bool {
            m.target() == module_path!().trim_end_matches("::tests")
        }
        fn log(&self, r: &log::Record<'_>) {
            if self.enabled(r.metadata()) {
                let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
                kept.push(r.args().to_string());
            }
        }
        fn flush(&self) {}
    }

    /// A framing field a handler sets is not sent, and saying so at `debug` is how the handler's
    /// author learns it (a new user's trial found it dropped without a word).
    #[test]
    fn a_framing_field_set_by_a_handler_is_said_at_debug() {
        let _ = log::set_logger(&Kept);
        log::set_max_level(log::LevelFilter::Debug);
        let _ = Response::text("hi")
            .with_header("X-Other", "1")
            .with_header("Content-Length", "5")
            .with_added_header("transfer-encoding", "chunked");
        // (Other tests of this binary may set such fields meanwhile: their records are kept
        // too, so each of these is looked for, not the whole list compared.)
        let kept = KEPT.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for said in [
            "response field \"Content-Length\" is not sent: the body decides the framing",
            "response field \"transfer-encoding\" is not sent: the body decides the framing",
        ] {
            assert!(kept.iter().any(|k| k == said), "{said}: {kept:?}");
        }
        assert!(!kept.iter().any(|k| k.contains("X-Other")), "{kept:?}");
    }
}
