//! Request-head parsing: httparse in place, then the RFC 9112 framing rules.

use std::mem::MaybeUninit;

use crate::http::request_head::{BodyFraming, RequestHead, Span, Version, absolute_parts};
use crate::limits::Limits;

/// Why a request was refused. `Copy`, so it can be matched and passed around freely.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// The request line or a header field is malformed (including obs-fold and whitespace before
    /// the colon, which httparse rejects in requests).
    Malformed,
    /// The request-target is longer than the limit.
    TargetTooLong,
    /// The method is longer than any the server implements ([`MAX_METHOD_BYTES`]).
    MethodTooLong,
    /// The head is larger than the limit, or has more fields than the limit.
    HeadTooLarge,
    /// The HTTP version is not 1.0 or 1.1.
    UnsupportedVersion,
    /// HTTP/1.1 request without a Host field, or with more than one.
    BadHost,
    /// Content-Length is not a valid number, or duplicates disagree.
    BadContentLength,
    /// Both Content-Length and Transfer-Encoding: a smuggling attempt.
    LengthAndEncoding,
    /// Transfer-Encoding other than a single final `chunked`.
    UnsupportedEncoding,
    /// Transfer-Encoding that lists `chunked` wrongly (twice, not last, or in HTTP/1.0).
    BadEncoding,
    /// An `Expect` other than `100-continue`.
    UnsupportedExpectation,
    /// The body is larger than the limit.
    BodyTooLarge,
    /// A chunked body is malformed.
    BadChunk,
}

impl ParseError {
    /// The status code this error is answered with.
    pub(crate) fn status(self) -> u16 {
        match self {
            ParseError::TargetTooLong => 414,
            ParseError::HeadTooLarge => 431,
            ParseError::UnsupportedVersion => 505,
            ParseError::UnsupportedEncoding | ParseError::MethodTooLong => 501,
            ParseError::UnsupportedExpectation => 417,
            ParseError::BodyTooLarge => 413,
            ParseError::Malformed
            | ParseError::BadHost
            | ParseError::BadContentLength
            | ParseError::LengthAndEncoding
            | ParseError::BadEncoding
            | ParseError::BadChunk => 400,
        }
    }
}

/// The longest method taken: every registered method fits (the longest, `UPDATEREDIRECTREF`,
/// has 17 bytes). A longer one is longer than any the server implements, and gets `501`
/// (RFC 9112 §3), decided as soon as its first `MAX_METHOD_BYTES + 1` bytes have come.
pub(crate) const MAX_METHOD_BYTES: usize = 20;

/// Room on the request line beside its target: the longest method, its space, and
/// `" HTTP/1.1\r\n"`. A line longer than the target limit plus this, whose method fits, has a
/// target over the limit: used to tell a long target (414) from a long head (431) while the
/// request line is still incomplete.
const REQUEST_LINE_SLACK: usize = MAX_METHOD_BYTES + " ".len() + " HTTP/1.1\r\n".len();

/// Parses one request head from the front of `buf` into `head`.
///
/// Returns `Ok(Some(n))` with the head's length when complete, `Ok(None)` when more bytes are
/// needed (incomplete input is a state, not an error), and `Err` for bytes that can never become a
/// valid request.
pub(crate) fn parse_head(
    buf: &[u8],
    limits: &Limits,
    head: &mut RequestHead,
) -> Result<Option<usize>, ParseError> {
    // Empty until the request line passes: a refusal after that point (a field, the framing
    // rules) leaves the parsed head for the access log.
    head.clear();
    if let Some(too_long) = too_long(buf, limits) {
        return Err(too_long);
    }
    let mut slots =
        [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; Limits::MAX_HEADERS_CAP];
    let mut req = httparse::Request::new(&mut []);
    let status = req.parse_with_uninit_headers(buf, &mut slots[..limits.header_slots()]);
    if !matches!(status, Ok(httparse::Status::Complete(_))) {
        if let Some(long) = method_rule(buf, limits) {
            return Err(long);
        }
    }
    let len = match status {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return partial(buf, limits).map(|()| None),
        Err(httparse::Error::TooManyHeaders) => return Err(ParseError::HeadTooLarge),
        Err(httparse::Error::Version) => return other_version(buf, limits, head),
        Err(_) => return Err(ParseError::Malformed),
    };
    if len > limits.max_head_bytes {
        return Err(ParseError::HeadTooLarge);
    }
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(ParseError::Malformed);
    };
    if method.len() > MAX_METHOD_BYTES {
        return Err(ParseError::MethodTooLong);
    }
    if target.len() > limits.max_target_bytes {
        return Err(ParseError::TargetTooLong);
    }
    if !target_fits_method(method, target) {
        return Err(ParseError::Malformed);
    }
    if !target.starts_with('/') && !valid_absolute(target) {
        return Err(ParseError::Malformed);
    }
    let version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };

    head.buf.extend_from_slice(&buf[..len]);
    let base = buf.as_ptr() as usize;
    let span = |s: &[u8]| Span::of(s.as_ptr() as usize - base, s.len());
    head.set_line(method, target);
    head.version = version;

    let mut rules = FramingRules::default();
    for h in req.headers.iter() {
        head.headers.push((span(h.name.as_bytes()), span(h.value)));
        rules.see(h.name, h.value, head)?;
    }
    head.body = rules.finish(version, limits)?;
    // RFC 9110 §10.1.1: a server MUST ignore a 100-continue expectation in an HTTP/1.0 request
    // (a 1.0 client knows no interim responses).
    head.expect_continue &= version == Version::Http11;
    Ok(Some(len))
}

/// httparse knows HTTP/1.0 and 1.1 only, and reads a space inside the target as the start of
/// the version. Decided on the request line: more than two spaces is a malformed line (400,
/// not 505); `HTTP/1.x` with any other digit x is served as HTTP/1.1 (RFC 9110 §2.5: a
/// recipient of a higher minor version answers in the highest it conforms to); another
/// `HTTP/d.d` is an unsupported version (505); anything else is malformed.
fn other_version(
    buf: &[u8],
    limits: &Limits,
    head: &mut RequestHead,
) -> Result<Option<usize>, ParseError> {
    let line_end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
    let line = buf[..line_end]
        .strip_suffix(b"\r")
        .unwrap_or(&buf[..line_end]);
    // Empty lines before the request line are skipped, as the parser does.
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(0);
    if start > 0 {
        return match other_version(&buf[start..], limits, head)? {
            Some(n) => Ok(Some(n + start)),
            None => Ok(None),
        };
    }
    let mut parts = line.split(|&b| b == b' ');
    let (Some(_), Some(_), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ParseError::Malformed);
    };
    // httparse refuses a version it does not know as soon as it sees its first digit, before
    // the line ends: the same line cut elsewhere must get the same answer, so an unfinished
    // line that may still become `HTTP/d.d` waits for more (within the head's limits).
    if line_end == buf.len() {
        if !may_become_a_version(version) {
            return Err(ParseError::Malformed);
        }
        return partial(buf, limits).map(|()| None);
    }
    match version {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', d] if d.is_ascii_digit() => {
            let at = line.len() - 1;
            let mut as_11 = buf.to_vec();
            as_11[at] = b'1';
            parse_head(&as_11, limits, head)
        }
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Err(ParseError::UnsupportedVersion)
        }
        _ => Err(ParseError::Malformed),
    }
}

/// True when `v` is the start of `HTTP/d.d`.
fn may_become_a_version(v: &[u8]) -> bool {
    const SHAPE: &[u8] = b"HTTP/0.0";
    v.len() <= SHAPE.len()
        && v.iter().zip(SHAPE).all(|(&b, &s)| match s {
            b'0' => b.is_ascii_digit(),
            s => b == s,
        })
}

/// The request-target's form must fit the method (RFC 9112 §3.2): `*` only for OPTIONS, the
/// authority form (`host:port`) only for CONNECT, otherwise a path (origin form) or an absolute
/// URI (`http://host/path`, as sent to proxies). A path, the common case, is one comparison.
fn target_fits_method(method: &str, target: &str) -> bool {
    let origin = target.starts_with('/');
    match method {
        "CONNECT" => !origin && target != "*" && !absolute(target),
        "OPTIONS" => origin || target == "*" || absolute(target),
        _ => origin || absolute(target),
    }
}

/// `scheme "://"` at the start: an absolute URI.
fn absolute(target: &str) -> bool {
    target.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
    })
}

/// Whether a target not in origin-form is `*` or an authority (where the method allows them),
/// or an `http` or `https` URI whose authority names a host (RFC 9110 §4.2.1), without userinfo
/// (§4.2.4): it is the request's authority (RFC 9112 §3.2.2), checked as a `Host` value is. A
/// URI of another scheme names nothing an HTTP server serves: the handler would have taken it
/// whole for its path.
#[cold]
fn valid_absolute(target: &str) -> bool {
    match absolute_parts(target) {
        // (`valid_host` takes an empty name, which a `Host` field may have: not here, with or
        // without a port.)
        Some((authority, _)) => {
            !authority.is_empty() && !authority.starts_with(':') && valid_host(authority.as_bytes())
        }
        None => !absolute(target),
    }
}

/// Bytes a `Host` name may hold outside brackets, before its port: unreserved, sub-delims and
/// `%` (of a pct-encoding).
const HOST_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b'%'
            );
        b += 1;
    }
    t
};

/// Whether a `Host` value is an authority without userinfo (RFC 9110 §7.2, RFC 3986 §3.2):
/// a registered name, an IPv4 address or a bracketed IP literal, then an optional `:port`. An
/// empty value is allowed (a target that has no authority). Every request passes here, so the
/// common case is one pass: the port's digits from the end, then one table lookup per byte of
/// the name, folded without an early exit. (Always inlined: the hot call is the `Host` field's,
/// and a call out of line cost 10–15 instructions a request.)
#[inline(always)]
fn valid_host(value: &[u8]) -> bool {
    if value.first() == Some(&b'[') {
        return valid_ip_literal_host(value);
    }
    // The port is the digits after the name's `:`; the name holds no `:`, so a value whose
    // last `:` is followed by anything but digits is refused below, with its `:` in the name.
    let digits = value
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let name = match value.len().checked_sub(digits + 1) {
        Some(colon) if value[colon] == b':' => &value[..colon],
        _ => value,
    };
    let (allowed, pct) = name.iter().fold((true, false), |(ok, pct), &b| {
        (ok & HOST_BYTES[b as usize], pct | (b == b'%'))
    });
    allowed && (!pct || pct_encoded(name))
}

/// `[` IP literal `]` then an optional `:port`.
fn valid_ip_literal_host(value: &[u8]) -> bool {
    let Some(end) = value.iter().position(|&b| b == b']') else {
        return false;
    };
    // RFC 3986 §3.2.2: an IPv6 address, or IPvFuture (`v` HEXDIG+ `.` then unreserved,
    // sub-delims and `:`).
    let literal = &value[1..end];
    let literal_ok = match literal {
        [b'v' | b'V', rest @ ..] => match rest.iter().position(|&b| b == b'.') {
            Some(dot) if dot > 0 => {
                rest[..dot].iter().all(u8::is_ascii_hexdigit)
                    && rest.len() > dot + 1
                    && rest[dot + 1..]
                        .iter()
                        .all(|&b| b == b':' || unreserved(b) || sub_delim(b))
            }
            _ => false,
        },
        _ => std::str::from_utf8(literal).is_ok_and(|l| l.parse::<std::net::Ipv6Addr>().is_ok()),
    };
    let port_ok = match &value[end + 1..] {
        [] => true,
        [b':', digits @ ..] => digits.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    literal_ok && port_ok
}

/// Every `%` in `s` starts a pct-encoding (two hex digits).
fn pct_encoded(s: &[u8]) -> bool {
    s.iter().enumerate().all(|(i, &b)| {
        b != b'%'
            || (s.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

/// The length rules [`partial`] holds a partial head to, and the method's, decided on the
/// prefix where they first apply: input that reaches past it is refused for its length if that
/// prefix was a valid start of a head, whatever follows and however the input was cut (a
/// client that sent a 400-byte target gets 414 whether the invalid byte after it came in the
/// same read or a later one; one that sent a 400-byte method, 501).
fn too_long(buf: &[u8], limits: &Limits) -> Option<ParseError> {
    let line_cap = limits.max_target_bytes.saturating_add(REQUEST_LINE_SLACK);
    let line_at = (buf.len() > line_cap && !buf[..=line_cap].contains(&b'\n'))
        .then(|| line_cap.saturating_add(1));
    let head_at = (buf.len() >= limits.max_head_bytes).then_some(limits.max_head_bytes);
    // A head within the length limits (every request of a busy server) costs two comparisons
    // here: the method's rule is then the parse's to apply ([`method_rule`], and the complete
    // head's method length).
    if line_at.is_none() && head_at.is_none() {
        return None;
    }
    let method_at = method_too_long_at(buf);
    let at = [method_at, line_at, head_at].into_iter().flatten().min()?;
    let prefix = &buf[..at];
    let mut slots =
        [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; Limits::MAX_HEADERS_CAP];
    let mut req = httparse::Request::new(&mut []);
    match req.parse_with_uninit_headers(prefix, &mut slots[..limits.header_slots()]) {
        Ok(httparse::Status::Partial) if method_at == Some(at) => Some(ParseError::MethodTooLong),
        Ok(httparse::Status::Partial) => partial(prefix, limits).err(),
        _ => None,
    }
}

/// The method's rule on input that is not a complete head: `MethodTooLong` when its first
/// `MAX_METHOD_BYTES + 1` bytes are a method not yet ended and a valid start of a head.
#[cold]
#[inline(never)]
fn method_rule(buf: &[u8], limits: &Limits) -> Option<ParseError> {
    let at = method_too_long_at(buf)?;
    let mut slots =
        [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; Limits::MAX_HEADERS_CAP];
    let mut req = httparse::Request::new(&mut []);
    match req.parse_with_uninit_headers(&buf[..at], &mut slots[..limits.header_slots()]) {
        Ok(httparse::Status::Partial) => Some(ParseError::MethodTooLong),
        _ => None,
    }
}

/// Where the method rule applies: the end of the first `MAX_METHOD_BYTES + 1` bytes after the
/// empty lines a request may start with, when they are all token bytes (a method that has not
/// ended yet). Whether the prefix up to there is a valid start of a head is the caller's check.
fn method_too_long_at(buf: &[u8]) -> Option<usize> {
    let start = buf.iter().position(|&b| b != b'\r' && b != b'\n')?;
    let end = start.checked_add(MAX_METHOD_BYTES + 1)?;
    buf.get(start..end)?
        .iter()
        .all(|&b| is_tchar(b))
        .then_some(end)
}

/// Decides whether a partial head can still become a valid one.
fn partial(buf: &[u8], limits: &Limits) -> Result<(), ParseError> {
    let line_done = buf.contains(&b'\n');
    if !line_done && buf.len() > limits.max_target_bytes.saturating_add(REQUEST_LINE_SLACK) {
        return Err(ParseError::TargetTooLong);
    }
    if buf.len() >= limits.max_head_bytes {
        return Err(if line_done {
            ParseError::HeadTooLarge
        } else {
            ParseError::TargetTooLong
        });
    }
    Ok(())
}

/// Whether `b` may appear in a token (RFC 9110 §5.6.2): a field name, a method.
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The header fields that decide message framing and persistence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Host,
    ContentLength,
    TransferEncoding,
    Connection,
    Expect,
}

impl Framing {
    /// Which of them `name` is (any case): told apart by length first, so that every other
    /// field costs one comparison.
    fn of(name: &str) -> Option<Framing> {
        let (field, lower): (Framing, &[u8]) = match name.len() {
            4 => (Framing::Host, b"host"),
            6 => (Framing::Expect, b"expect"),
            10 => (Framing::Connection, b"connection"),
            14 => (Framing::ContentLength, b"content-length"),
            17 => (Framing::TransferEncoding, b"transfer-encoding"),
            _ => return None,
        };
        is_named(name.as_bytes(), lower).then_some(field)
    }
}

/// Whether a field name (a token, as httparse checked) is `lower` in any case, where `lower`
/// holds only lowercase letters and `-`. Setting bit 0x20 folds a letter to lowercase and
/// leaves `-` as it is; the only other byte it takes to one of them is CR (to `-`), which is no
/// token byte.
fn is_named(name: &[u8], lower: &[u8]) -> bool {
    name.len() == lower.len() && name.iter().zip(lower).all(|(&n, &l)| n | 0x20 == l)
}

/// Collects the header fields that decide message framing and persistence.
#[derive(Default)]
struct FramingRules {
    hosts: u32,
    content_length: Option<u64>,
    chunked: u32,
    other_coding: bool,
    has_te: bool,
}

impl FramingRules {
    /// Takes one field into account. `value` is as httparse gives it, without the whitespace
    /// around it (RFC 9112 §5.1), so only the items of a list are trimmed here.
    fn see(&mut self, name: &str, value: &[u8], head: &mut RequestHead) -> Result<(), ParseError> {
        match Framing::of(name) {
            Some(Framing::Host) => {
                self.hosts += 1;
                if !valid_host(value) {
                    return Err(ParseError::BadHost);
                }
            }
            Some(Framing::ContentLength) => {
                for item in value.split(|&b| b == b',') {
                    let n = parse_decimal(trim(item)).ok_or(ParseError::BadContentLength)?;
                    match self.content_length {
                        Some(prev) if prev != n => return Err(ParseError::BadContentLength),
                        _ => self.content_length = Some(n),
                    }
                }
            }
            Some(Framing::TransferEncoding) => {
                self.has_te = true;
                for coding in value.split(|&b| b == b',').map(trim) {
                    if coding.is_empty() {
                        continue;
                    }
                    if self.chunked > 0 {
                        // Anything after `chunked` means chunked is not the final coding.
                        return Err(ParseError::BadEncoding);
                    }
                    if coding.eq_ignore_ascii_case(b"chunked") {
                        self.chunked += 1;
                    } else {
                        self.other_coding = true;
                    }
                }
            }
            Some(Framing::Connection) => {
                for token in value.split(|&b| b == b',').map(trim) {
                    if token.eq_ignore_ascii_case(b"close") {
                        head.persistence.close();
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        head.persistence.keep_alive();
                    } else if token.eq_ignore_ascii_case(b"upgrade") {
                        head.conn_upgrade = true;
                    }
                }
            }
            // A list (RFC 9110 §10.1.1, §5.6.1: empty elements are no expectation): each one
            // is `100-continue`, or 417.
            Some(Framing::Expect) => {
                for expectation in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                    match expectation {
                        b"" => {}
                        e if e.eq_ignore_ascii_case(b"100-continue") => head.expect_continue = true,
                        _ => return Err(ParseError::UnsupportedExpectation),
                    }
                }
            }
            None => {}
        }
        Ok(())
    }

    fn finish(self, version: Version, limits: &Limits) -> Result<BodyFraming, ParseError> {
        if version == Version::Http11 && self.hosts != 1 || self.hosts > 1 {
            return Err(ParseError::BadHost);
        }
        if self.has_te {
            if self.content_length.is_some() {
                return Err(ParseError::LengthAndEncoding);
            }
            if self.other_coding {
                return Err(ParseError::UnsupportedEncoding);
            }
            if version == Version::Http10 || self.chunked != 1 {
                return Err(ParseError::BadEncoding);
            }
            return Ok(BodyFraming::Chunked);
        }
        match self.content_length {
            Some(n) if n > limits.max_body_bytes => Err(ParseError::BodyTooLarge),
            Some(0) | None => Ok(BodyFraming::Empty),
            Some(n) => Ok(BodyFraming::Length(n)),
        }
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// `1*DIGIT` as a u64, or `None` when empty, not all digits, or overflowing.
pub(crate) fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> Result<Option<usize>, ParseError> {
        parse_head(input, &Limits::default(), &mut RequestHead::default())
    }

    #[test]
    fn valid_heads_parse_whole_and_split_at_every_byte() {
        let cases: &[(&[u8], BodyFraming)] = &[
            (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", BodyFraming::Empty),
            (b"GET /p?q=1 HTTP/1.0\r\n\r\n", BodyFraming::Empty),
            (b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", BodyFraming::Empty),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
                BodyFraming::Length(5),
            ),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n",
                BodyFraming::Length(5),
            ),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
                BodyFraming::Empty,
            ),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
                BodyFraming::Chunked,
            ),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n",
                BodyFraming::Chunked,
            ),
        ];
        for (input, framing) in cases {
            let mut head = RequestHead::default();
            let n = parse_head(input, &Limits::default(), &mut head);
            assert_eq!(
                n,
                Ok(Some(input.len())),
                "{:?}",
                String::from_utf8_lossy(input)
            );
            assert_eq!(head.body, *framing);
            for cut in 0..input.len() {
                assert_eq!(parse(&input[..cut]), Ok(None), "cut {cut} of {input:?}");
            }
        }
    }

    #[test]
    fn fields_are_exposed() {
        let mut head = RequestHead::default();
        let input = b"PUT /a/b?x=y HTTP/1.1\r\nHost: ex\r\nX-Two: 2\r\nConnection: Keep-Alive, Upgrade\r\n\r\nBODY";
        assert_eq!(
            parse_head(input, &Limits::default(), &mut head),
            Ok(Some(input.len() - 4))
        );
        assert_eq!(head.method(), "PUT");
        assert_eq!(head.target(), "/a/b?x=y");
        assert_eq!(head.path(), "/a/b");
        assert_eq!(head.query(), Some("x=y"));
        assert_eq!(head.header("x-two"), Some("2"));
        assert_eq!(head.header("HOST"), Some("ex"));
        assert!(head.conn_upgrade);
        assert_eq!(
            head.persistence,
            crate::http::request_head::Persistence::KeepAlive
        );
    }

    #[test]
    fn invalid_heads_get_their_status() {
        let long_target = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(9000));
        let many = format!(
            "GET / HTTP/1.1\r\nHost: a\r\n{}\r\n",
            "X: y\r\n".repeat(101)
        );
        let big = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
            "y".repeat(33 * 1024)
        );
        let cases: &[(&[u8], u16)] = &[
            (b"GET / HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
            (b"GET / HTTP/3.1\r\nHost: a\r\n\r\n", 505),
            (b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET example.com:80 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET a/b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET http:///p HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET http://:80/p HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET http://:/p HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET http://?q HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET HTTPS:// HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET http://a:b/p HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET http://[::1/p HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET http://u:p@a/p HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET http://e%zz/p HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET ftp://a/p HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"OPTIONS ws://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"CONNECT /p HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET /a  HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET /a b HTTP/2.0\r\nHost: a\r\n\r\n", 400),
            (b"GET / HTTP/1.1 x\r\nHost: a\r\n\r\n", 400),
            (b"GET / FTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET / HTTP/1.2\r\nHost: a b\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400),
            // An IP literal is an IPv6 address or IPvFuture (RFC 3986 §3.2.2).
            (b"GET / HTTP/1.1\r\nHost: [not-an-ip]\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: [1.2.3.4]\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: [v.x]\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: [v1.]\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a%2\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
            (b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
            (b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            (b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nX: y\r\n  folded\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nX : y\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nExpect: something\r\n\r\n", 417),
            (b"G\x01T / HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 20000000\r\n\r\n", 413),
            (long_target.as_bytes(), 414),
            (&long_target.as_bytes()[..8300], 414),
            (many.as_bytes(), 431),
            (big.as_bytes(), 431),
        ];
        for (input, status) in cases {
            let got = parse(input).map_err(ParseError::status);
            let shown: String = String::from_utf8_lossy(input).chars().take(120).collect();
            assert_eq!(got, Err(*status), "{shown:?}");
        }
    }

    /// RFC 9110 §10.1.1: `Expect: 100-continue` is kept for HTTP/1.1 and ignored in a 1.0
    /// request (whose client knows no interim response); another expectation is 417 in both.
    #[test]
    fn a_continue_expectation_is_kept_for_http11_only() {
        let cases: &[(&[u8], Result<bool, u16>)] = &[
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n",
                Ok(true),
            ),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect: 100-Continue \r\n\r\n",
                Ok(true),
            ),
            (
                b"POST / HTTP/1.0\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n",
                Ok(false),
            ),
            (
                b"POST / HTTP/1.0\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
                Ok(false),
            ),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n",
                Ok(false),
            ),
            (b"POST / HTTP/1.0\r\nExpect: other\r\n\r\n", Err(417)),
            (b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue, other\r\n\r\n", Err(417)),
            // Empty list elements are no expectation.
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect: 100-continue,\r\n\r\n",
                Ok(true),
            ),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect: , 100-continue\r\n\r\n",
                Ok(true),
            ),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect:\r\n\r\n",
                Ok(false),
            ),
        ];
        for (input, want) in cases {
            let mut head = RequestHead::default();
            let got = parse_head(input, &Limits::default(), &mut head)
                .map(|_| head.expect_continue)
                .map_err(|e| e.status());
            assert_eq!(&got, want, "{}", String::from_utf8_lossy(input));
        }
    }

    /// `Framing::of` knows its five names in any case, and nothing else: every name that
    /// differs from one of them in one byte (any byte httparse takes in a name) is another field.
    #[test]
    fn framing_fields_are_told_by_name_in_any_case() {
        let names = [
            ("host", Framing::Host),
            ("expect", Framing::Expect),
            ("connection", Framing::Connection),
            ("content-length", Framing::ContentLength),
            ("transfer-encoding", Framing::TransferEncoding),
        ];
        let token = is_tchar;
        for (name, field) in names {
            assert_eq!(Framing::of(name), Some(field));
            assert_eq!(Framing::of(&name.to_ascii_uppercase()), Some(field));
            let mut bytes = name.as_bytes().to_vec();
            for at in 0..bytes.len() {
                let was = bytes[at];
                for b in (0..=255u8).filter(|&b| token(b)) {
                    bytes[at] = b;
                    let Ok(other) = std::str::from_utf8(&bytes) else {
                        continue;
                    };
                    let same = b.eq_ignore_ascii_case(&was);
                    assert_eq!(Framing::of(other) == Some(field), same, "{other}");
                }
                bytes[at] = was;
            }
        }
        assert_eq!(Framing::of("hostx"), None);
        assert_eq!(Framing::of("content-type"), None);
    }

    /// The one-pass `valid_host` against the rule as first written (every byte allowed, the
    /// port the digits after the first `:`), over every value of up to five bytes from an
    /// alphabet of each kind of byte.
    #[test]
    fn host_validation_agrees_with_the_rule_on_every_short_value() {
        fn rule(value: &[u8]) -> bool {
            if value.first() == Some(&b'[') {
                return valid_ip_literal_host(value);
            }
            let allowed = value
                .iter()
                .all(|&b| b == b':' || b == b'%' || unreserved(b) || sub_delim(b));
            let pct = value.contains(&b'%');
            let (host, port) = match value.iter().position(|&b| b == b':') {
                Some(i) => (&value[..i], &value[i + 1..]),
                None => (value, &value[value.len()..]),
            };
            allowed && port.iter().all(u8::is_ascii_digit) && (!pct || pct_encoded(host))
        }
        const ALPHABET: &[u8] = b"a1:%F.@ []";
        let mut value = Vec::new();
        let mut checked = 0;
        for len in 0..=5u32 {
            for mut n in 0..ALPHABET.len().pow(len) {
                value.clear();
                for _ in 0..len {
                    value.push(ALPHABET[n % ALPHABET.len()]);
                    n /= ALPHABET.len();
                }
                assert_eq!(
                    valid_host(&value),
                    rule(&value),
                    "{:?}",
                    String::from_utf8_lossy(&value)
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 111_111);
    }

    #[test]
    fn hosts_and_minor_versions_that_are_served() {
        let ok: &[&[u8]] = &[
            b"GET / HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: [2001:db8::7]\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: [::ffff:192.0.2.1]:8080\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: [v1.a:b]\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: \r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a%2Db\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a:\r\n\r\n",
            b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
            b"GET http://a/p?q HTTP/1.1\r\nHost: a\r\n\r\n",
            // Whitespace around a value is no part of it (httparse leaves it out, so the rules
            // do not trim a whole value again).
            b"GET / HTTP/1.1\r\nHost: \t a.b:80 \t\r\nExpect:  100-continue\t\r\n\r\n",
        ];
        for input in ok {
            assert_eq!(parse(input), Ok(Some(input.len())), "{input:?}");
        }
        // An unsupported version is 505 however the line is cut (it was 400 when the read
        // ended right after the major digit: found by the fuzz target's split oracle).
        let v20 = b"GET / HTTP/2.0\r\nHost: a\r\n\r\n";
        let line = b"GET / HTTP/2.0\r\n".len();
        for cut in 0..line {
            assert_eq!(parse(&v20[..cut]), Ok(None), "cut {cut}");
        }
        for cut in line..=v20.len() {
            let got = parse(&v20[..cut]).map_err(ParseError::status);
            assert_eq!(got, Err(505), "cut {cut}: the line is whole");
        }
        assert_eq!(
            parse(b"GET / HTTP/2x").map_err(ParseError::status),
            Err(400),
            "a line that can no longer become a version is malformed at once"
        );
        for input in [
            &b"GET /v HTTP/1.2\r\nHost: a\r\n\r\n"[..],
            b"\r\nGET /v HTTP/1.9\r\nHost: a\r\n\r\n",
        ] {
            let mut head = RequestHead::default();
            assert_eq!(
                parse_head(input, &Limits::default(), &mut head),
                Ok(Some(input.len()))
            );
            assert_eq!((head.version, head.path()), (Version::Http11, "/v"));
            for cut in 0..input.len() {
                assert_eq!(parse(&input[..cut]), Ok(None), "cut {cut} of {input:?}");
            }
        }
    }

    /// Found by the fuzz target: a request line that outgrew its limit before it went wrong
    /// was 414 when it came in pieces and 400 when it came at once. The length rule is decided
    /// on the prefix where it applies, so every cut of the input gets the same answer.
    #[test]
    fn a_line_too_long_before_it_goes_wrong_is_414_however_it_arrives() {
        let limits = Limits {
            max_target_bytes: 256,
            ..Limits::default()
        };
        let parse = |input: &[u8]| parse_head(input, &limits, &mut RequestHead::default());
        let mut input = b"GET /".to_vec();
        input.extend_from_slice(&[b'a'; 400]);
        input.extend_from_slice(b" \rQQQQ");
        let whole = parse(&input);
        assert_eq!(whole, Err(ParseError::TargetTooLong));
        for cut in 1..input.len() {
            let first = parse(&input[..cut]);
            let answer = if first == Ok(None) { whole } else { first };
            assert_eq!(answer, whole, "cut at {cut}");
        }
        // Wrong before it grew too long: 400, also when the rest is long.
        let mut early = b"GET /\x01".to_vec();
        early.extend_from_slice(&[b'a'; 400]);
        assert_eq!(parse(&early), Err(ParseError::Malformed));
    }

    /// RFC 9112 §3: a method longer than any the server implements is 501, not 414 (the
    /// input the test above used to send, a 400-byte method, is one). The rule is decided on
    /// the method's first `MAX_METHOD_BYTES + 1` bytes, so every cut of the input gets the
    /// same answer, also when the line goes wrong later or the target is too long as well.
    #[test]
    fn a_method_longer_than_any_implemented_is_501_however_it_arrives() {
        let limits = Limits {
            max_target_bytes: 256,
            ..Limits::default()
        };
        let parse = |input: &[u8]| parse_head(input, &limits, &mut RequestHead::default());
        let long = |method_len: usize, rest: &[u8]| {
            let mut input = vec![b'Q'; method_len];
            input.extend_from_slice(rest);
            input
        };
        for input in [
            long(400, b" /d \rQQQQ"),
            long(40_000, b" / HTTP/1.1\r\nHost: a\r\n\r\n"),
            long(MAX_METHOD_BYTES + 1, b" / HTTP/1.1\r\nHost: a\r\n\r\n"),
            long(300, &[b'a'; 300]),
            [&b"\r\n\r\n"[..], &long(300, b" / HTTP/1.1\r\n\r\n")].concat(),
        ] {
            let whole = parse(&input);
            assert_eq!(whole, Err(ParseError::MethodTooLong));
            assert_eq!(whole.map_err(ParseError::status), Err(501));
            for cut in 1..input.len().min(1000) {
                let first = parse(&input[..cut]);
                let answer = if first == Ok(None) { whole } else { first };
                assert_eq!(answer, whole, "cut at {cut}");
            }
        }
        // The longest method taken, and the longest registered one (RFC 4437).
        for method in ["Q".repeat(MAX_METHOD_BYTES), "UPDATEREDIRECTREF".to_owned()] {
            let input = format!("{method} / HTTP/1.1\r\nHost: a\r\n\r\n");
            let mut head = RequestHead::default();
            assert_eq!(
                parse_head(input.as_bytes(), &limits, &mut head),
                Ok(Some(input.len()))
            );
            assert_eq!(head.method(), method);
        }
        // A method that goes wrong before it is too long: 400.
        assert_eq!(
            parse(&long(5, b"\x01QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ")),
            Err(ParseError::Malformed)
        );
    }

    #[test]
    fn decimal() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_decimal(b"18446744073709551616"), None);
        assert_eq!(parse_decimal(b""), None);
        assert_eq!(parse_decimal(b"1a"), None);
    }
}
