//! The request head as the core holds it: parsed, owned, reused from request to request; its
//! version, how its body is framed, what it asks of the connection, its target's forms.

use std::fmt;

use crate::http::origin::Origin;

/// The HTTP version of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Version {
    /// HTTP/1.0: the connection closes after each exchange unless the client asks otherwise.
    Http10,
    /// HTTP/1.1.
    #[default]
    Http11,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        })
    }
}

/// How the request body is framed on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum BodyFraming {
    /// No body.
    #[default]
    Empty,
    /// `Content-Length: n`, n > 0.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A byte range into [`RequestHead::buf`]. (Two `usize`s: a head's ranges are taken from
/// slices of it, so they need no conversion and no overflow check.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    start: usize,
    end: usize,
}

impl Span {
    /// `len` bytes from `start`, both of a slice of the head (so `start + len` is at most its
    /// length, far from overflowing).
    pub(crate) fn of(start: usize, len: usize) -> Span {
        Span {
            start,
            end: start.saturating_add(len),
        }
    }

    fn get(self, buf: &[u8]) -> &[u8] {
        buf.get(self.start..self.end).unwrap_or(&[])
    }
}

/// The most head storage kept for another request, in bytes.
const MAX_KEPT_HEAD: usize = 64 * 1024;

/// What a request's `Connection` field asks of the connection after its exchange.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// Neither option: the version's default.
    #[default]
    Unsaid,
    /// `keep-alive` (and not `close`).
    KeepAlive,
    /// `close`, whatever else the field lists.
    Close,
}

impl Persistence {
    /// The field lists `close`: that wins over anything.
    pub(crate) fn close(&mut self) {
        *self = Persistence::Close;
    }

    /// The field lists `keep-alive`: unless it also lists `close`.
    pub(crate) fn keep_alive(&mut self) {
        if *self == Persistence::Unsaid {
            *self = Persistence::KeepAlive;
        }
    }
}

/// A parsed request head, owned, with its bytes copied out of the read buffer so the buffer can be
/// reused for the body. Engines keep one per connection slot and reuse it: no allocation per
/// request once warm.
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestHead {
    /// The head's bytes, which the field spans index.
    pub(crate) buf: Vec<u8>,
    /// The method, then the target, as text: httparse checked both (a token, and UTF-8), so
    /// their accessors need no check of their own on every call.
    line: String,
    /// Where the method ends in `line`.
    method_end: usize,
    pub(crate) version: Version,
    pub(crate) headers: Vec<(Span, Span)>,
    pub(crate) body: BodyFraming,
    /// What its `Connection` field asks of the connection after this exchange.
    pub(crate) persistence: Persistence,
    /// Its `Connection` field lists `upgrade`.
    pub(crate) conn_upgrade: bool,
    /// It expects `100-continue` (HTTP/1.1 only).
    pub(crate) expect_continue: bool,
    /// Who the request comes from, behind proxies (set when the head is whole).
    pub(crate) origin: Origin,
}

impl RequestHead {
    /// True once a request line was parsed into this head (it is cleared at each parse).
    pub(crate) fn has_line(&self) -> bool {
        !self.line.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        self.line.clear();
        self.method_end = 0;
        self.headers.clear();
        self.body = BodyFraming::Empty;
        self.persistence = Persistence::Unsaid;
        self.conn_upgrade = false;
        self.expect_continue = false;
    }

    /// Sets the request line's method and target.
    pub(crate) fn set_line(&mut self, method: &str, target: &str) {
        self.line.clear();
        self.line.push_str(method);
        self.line.push_str(target);
        self.method_end = method.len();
    }

    pub(crate) fn method(&self) -> &str {
        self.line.get(..self.method_end).unwrap_or("")
    }

    pub(crate) fn is_head(&self) -> bool {
        self.method() == "HEAD"
    }

    /// (The length first: every response asks, and a method of another length is not read.)
    #[inline]
    pub(crate) fn is_connect(&self) -> bool {
        self.method_end == "CONNECT".len() && self.method() == "CONNECT"
    }

    pub(crate) fn target(&self) -> &str {
        self.line.get(self.method_end..).unwrap_or("")
    }

    /// Whether its storage is of a size worth keeping for another request (one grown large by
    /// a big head is let go).
    pub(crate) fn worth_keeping(&self) -> bool {
        self.buf.capacity().saturating_add(self.line.capacity()) <= MAX_KEPT_HEAD
    }

    /// The target without scheme and authority when it is in absolute-form
    /// (`http://host/p?q` → `/p?q`, RFC 9112 §3.2.2); other forms as sent.
    fn origin_target(&self) -> &str {
        let t = self.target();
        if t.starts_with('/') {
            // Origin-form, nearly every request's.
            return t;
        }
        without_authority(t)
    }

    /// The host (and port) the request is for: an absolute-form target's authority, for which
    /// the `Host` field is ignored (RFC 9112 §3.2.2), else the `Host` field.
    pub(crate) fn host(&self) -> Option<&str> {
        absolute_parts(self.target()).map_or_else(|| self.header("host"), |(a, _)| Some(a))
    }

    /// The path: up to the query, or to a fragment a client sent though the target has none
    /// (RFC 9112 §3.2; dropped, as hyper and nginx drop it).
    pub(crate) fn path(&self) -> &str {
        let t = self.origin_target();
        // A byte scan: targets are short, and `?` and `#` are ASCII, so `i` is a character
        // boundary.
        match t.bytes().position(|b| b == b'?' || b == b'#') {
            Some(0) => "/",
            Some(i) => &t[..i],
            None => t,
        }
    }

    /// The query, without a fragment.
    pub(crate) fn query(&self) -> Option<&str> {
        let t = self.origin_target();
        let t = t.split_once('#').map_or(t, |(before, _)| before);
        t.bytes().position(|b| b == b'?').map(|i| &t[i + 1..])
    }

    /// The values of the fields named `name` (case-insensitive), in order. Names are compared
    /// as bytes: a lookup checks no field's name as text (a check of 70-odd instructions a
    /// field, counted by callgrind, which every lookup made of every field before it).
    pub(crate) fn values_of<'h, 'n>(
        &'h self,
        name: &'n str,
    ) -> impl DoubleEndedIterator<Item = &'h [u8]> + use<'h, 'n> {
        self.headers
            .iter()
            .filter(move |(n, _)| n.get(&self.buf).eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v.get(&self.buf))
    }

    pub(crate) fn header_bytes(&self, name: &str) -> Option<&[u8]> {
        self.values_of(name).next()
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.header_bytes(name)
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    pub(crate) fn headers_raw(&self) -> impl DoubleEndedIterator<Item = (&str, &[u8])> {
        self.headers
            .iter()
            // httparse checked a field name is a token, so it is ASCII.
            .map(|&(n, v)| {
                (
                    std::str::from_utf8(n.get(&self.buf)).unwrap_or(""),
                    v.get(&self.buf),
                )
            })
    }

    /// The head of `raw`, which must be one whole request head (for unit tests).
    #[cfg(test)]
    pub(crate) fn parsed(raw: &[u8]) -> RequestHead {
        let mut head = RequestHead::default();
        let parsed =
            crate::http::parse::parse_head(raw, &crate::limits::Limits::default(), &mut head);
        assert!(
            matches!(parsed, Ok(Some(_))),
            "{parsed:?}: {}",
            String::from_utf8_lossy(raw)
        );
        head
    }

    /// Whether the client allows the connection to stay open after this exchange.
    pub(crate) fn wants_keep_alive(&self) -> bool {
        match (self.persistence, self.version) {
            (Persistence::Close, _) => false,
            (Persistence::KeepAlive, _) => true,
            // Persistent by default in HTTP/1.1 only (RFC 9112 §9.3).
            (Persistence::Unsaid, version) => version == Version::Http11,
        }
    }
}

/// An absolute-form target without its scheme and authority; another form as it is.
#[cold]
fn without_authority(target: &str) -> &str {
    match absolute_parts(target) {
        // `http://host` has an empty path, which is `/`.
        Some((_, "")) => "/",
        // (`http://host?q`: the query is still found by `?`.)
        Some((_, rest)) => rest,
        None => target,
    }
}

/// An absolute-form `http` or `https` target split into its authority and what follows it
/// (`http://h:1/p?q` → (`h:1`, `/p?q`)); `None` for any other form.
pub(crate) fn absolute_parts(target: &str) -> Option<(&str, &str)> {
    let rest = match target.get(..8) {
        Some(s) if s.eq_ignore_ascii_case("https://") => &target[8..],
        _ => match target.get(..7) {
            Some(s) if s.eq_ignore_ascii_case("http://") => &target[7..],
            _ => return None,
        },
    };
    Some(rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::parse::parse_head;
    use crate::limits::Limits;

    #[test]
    fn persistence_by_version_and_connection_options() {
        let cases: &[(&str, &str, bool)] = &[
            ("1.1", "", true),
            ("1.1", "Connection: close\r\n", false),
            ("1.1", "Connection: keep-alive\r\n", true),
            ("1.1", "Connection: keep-alive, close\r\n", false),
            (
                "1.1",
                "Connection: close\r\nConnection: keep-alive\r\n",
                false,
            ),
            ("1.1", "Connection: Upgrade\r\n", true),
            ("1.0", "", false),
            ("1.0", "Connection: Keep-Alive\r\n", true),
            ("1.0", "Connection: keep-alive, close\r\n", false),
            ("1.0", "Connection: close, keep-alive\r\n", false),
        ];
        for (version, fields, keeps) in cases {
            let raw = format!("GET / HTTP/{version}\r\nHost: h\r\n{fields}\r\n");
            let mut head = RequestHead::default();
            let parsed = parse_head(raw.as_bytes(), &Limits::default(), &mut head);
            assert!(matches!(parsed, Ok(Some(_))), "{parsed:?}");
            assert_eq!(head.wants_keep_alive(), *keeps, "{raw:?}");
        }
    }

    #[test]
    fn target_forms() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("/a/b?x=1", "/a/b", Some("x=1")),
            ("/", "/", None),
            ("http://example.com/a?x", "/a", Some("x")),
            ("HTTPS://example.com:8443/a/b", "/a/b", None),
            ("http://example.com", "/", None),
            ("http://example.com?q=1", "/", Some("q=1")),
            ("*", "*", None),
            ("example.com:443", "example.com:443", None),
        ];
        for (target, path, query) in cases {
            // The authority form is CONNECT's alone (RFC 9112 3.2.3).
            let method = if target.starts_with('/') || target.contains("://") || *target == "*" {
                "OPTIONS"
            } else {
                "CONNECT"
            };
            let req = format!("{method} {target} HTTP/1.1\r\nHost: example.com\r\n\r\n");
            let mut head = RequestHead::default();
            assert!(
                matches!(
                    parse_head(req.as_bytes(), &Limits::default(), &mut head),
                    Ok(Some(_))
                ),
                "{target}"
            );
            assert_eq!((head.path(), head.query()), (*path, *query), "{target}");
        }
    }

    #[test]
    fn a_reused_head_holds_only_its_last_request_line_and_a_grown_one_is_let_go() {
        let limits = Limits {
            max_target_bytes: 60 * 1024,
            max_head_bytes: 100 * 1024,
            ..Limits::default()
        };
        let long = format!("/{}", "a".repeat(40 * 1024));
        let mut head = RequestHead::default();
        let requests = [
            ("PATCH", long.as_str()),
            ("GET", "/"),
            ("OPTIONS", "*"),
            ("DELETE", "/x?y"),
        ];
        for (method, target) in requests {
            let raw = format!("{method} {target} HTTP/1.1\r\nHost: h\r\nX-Long: {long}\r\n\r\n");
            assert!(matches!(
                parse_head(raw.as_bytes(), &limits, &mut head),
                Ok(Some(_))
            ));
            assert_eq!((head.method(), head.target()), (method, target));
            assert_eq!(head.is_head(), method == "HEAD");
        }
        // 40 KiB of target and 80 KiB of head are past the 64 KiB worth keeping.
        assert!(!head.worth_keeping());
        // So is a head of 40 KiB whose request line is kept beside it.
        let mut grown = RequestHead::default();
        let raw = format!("GET {long} HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(matches!(
            parse_head(raw.as_bytes(), &limits, &mut grown),
            Ok(Some(_))
        ));
        assert!(grown.buf.capacity() < MAX_KEPT_HEAD);
        assert!(!grown.worth_keeping());
        let mut small = RequestHead::default();
        assert!(matches!(
            parse_head(b"HEAD /a HTTP/1.1\r\nHost: h\r\n\r\n", &limits, &mut small),
            Ok(Some(_))
        ));
        assert!(small.is_head());
        assert!(small.worth_keeping());
        // A refusal after the request line leaves that line for the access log; one in the
        // request line leaves none (nothing of the request before it either).
        let refused = b"POST /r HTTP/1.1\r\nHost: h\r\nContent-Length: x\r\n\r\n";
        assert!(parse_head(refused, &limits, &mut small).is_err());
        assert!(small.has_line());
        assert_eq!((small.method(), small.target()), ("POST", "/r"));
        assert!(parse_head(b"G@T / HTTP/1.1\r\nHost: h\r\n\r\n", &limits, &mut small).is_err());
        assert!(!small.has_line());
        assert_eq!((small.method(), small.target()), ("", ""));
    }
}
