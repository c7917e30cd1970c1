//! The fuzz harness's oracle: what the core wrote, read back as a client would (with
//! httparse), held against what each request's handler gave.

use crate::http::body::Decoder;
use crate::http::request_head::BodyFraming;

/// What the checker expects of one response, in order.
#[derive(Debug)]
pub(super) struct Expected {
    pub(super) status: u16,
    /// A `HEAD` request: no body whatever the head says.
    pub(super) head_request: bool,
    /// `100 Continue` may come first.
    pub(super) interim: bool,
    /// The body may stop short (the core aborted the connection).
    pub(super) may_be_cut: bool,
    /// The core closes the connection after it: the response must say so (or be
    /// close-delimited, cut, or a `101`); and a response that says so is the core's last.
    pub(super) last: bool,
    /// The request was HTTP/1.0: its response is never chunked.
    pub(super) http10: bool,
    /// The body the handler gave, as the client must read it (`None`: not checked).
    pub(super) body: Option<Vec<u8>>,
}

/// `out` without interim `100 Continue` responses (whether one is due depends on whether the
/// body came with its head) and without `Date` fields (the clock may tick between two runs).
pub(super) fn normalized(out: &[u8]) -> Vec<u8> {
    const INTERIM: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    let mut kept = Vec::with_capacity(out.len());
    let mut rest = out;
    while !rest.is_empty() {
        if rest.starts_with(INTERIM) {
            rest = &rest[INTERIM.len()..];
        } else if rest.starts_with(b"\r\nDate: ") {
            let end = rest[2..]
                .windows(2)
                .position(|w| w == b"\r\n")
                .map_or(rest.len(), |p| p + 2);
            rest = &rest[end..];
        } else {
            kept.push(rest[0]);
            rest = &rest[1..];
        }
    }
    kept
}

/// The checker alone, for the tests that show it can fail: `expected` lists each response's
/// status and whether 100 Continue may come first.
pub fn check_output(out: &[u8], expected: &[(u16, bool)]) {
    let expected: Vec<Expected> = expected
        .iter()
        .map(|&(status, interim)| Expected {
            status,
            head_request: false,
            interim,
            may_be_cut: false,
            last: false,
            http10: false,
            body: None,
        })
        .collect();
    check(out, &expected, false);
}

/// Reads `out` back as a client would and holds it against `expected`; `awaiting`: the last
/// request's body is still awaited after its 100 Continue, which then ends the output.
pub(super) fn check(out: &[u8], expected: &[Expected], awaiting: bool) {
    let mut rest = out;
    for (i, want) in expected.iter().enumerate() {
        let last = i + 1 == expected.len();
        let (mut status, mut fields, mut len) = response_head(rest);
        if status == 100 {
            assert!(want.interim, "an unasked 100 Continue before response {i}");
            rest = &rest[len..];
            (status, fields, len) = response_head(rest);
        }
        assert_eq!(status, want.status, "response {i} of {expected:?}");
        rest = &rest[len..];
        let closes = fields.close;
        let bodyless = want.head_request || status == 204 || status == 304 || status == 101;
        let delimited = !bodyless && fields.length.is_none() && !fields.chunked;
        if want.last && !want.may_be_cut && status != 101 {
            assert!(
                closes || delimited,
                "response {i} is the last, yet does not say Connection: close"
            );
        }
        assert!(
            !(want.http10 && fields.chunked),
            "response {i} to an HTTP/1.0 request is chunked"
        );
        if want.may_be_cut {
            assert!(last, "a cut response {i} is not the last");
            return;
        }
        let (body_len, payload) = if bodyless {
            (0, Vec::new())
        } else if let Some(n) = fields.length {
            assert!(n <= rest.len(), "response {i}: body shorter than framed");
            (n, rest[..n].to_vec())
        } else if fields.chunked {
            chunked(rest)
        } else {
            assert!(last, "a close-delimited response {i} is not the last");
            (rest.len(), rest.to_vec())
        };
        if let Some(given) = &want.body {
            assert_eq!(
                &payload, given,
                "response {i}: not the body its handler gave"
            );
        }
        rest = &rest[body_len..];
        if closes || status == 101 {
            assert!(last, "response {i} said close, yet more responses followed");
        }
        if closes {
            assert!(
                want.last,
                "response {i} says Connection: close while the core keeps the connection"
            );
        }
    }
    if awaiting && !rest.is_empty() {
        let (status, _, len) = response_head(rest);
        assert_eq!(status, 100, "the answer to a request whose body is awaited");
        rest = &rest[len..];
    }
    assert!(
        rest.is_empty(),
        "{} bytes after the last response",
        rest.len()
    );
}

/// The framing fields of a response head.
struct Fields {
    length: Option<usize>,
    chunked: bool,
    close: bool,
}

/// Parses one response head: its status, framing and length.
fn response_head(bytes: &[u8]) -> (u16, Fields, usize) {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        other => panic!("not a whole response head: {other:?}"),
    };
    let mut fields = Fields {
        length: None,
        chunked: false,
        close: false,
    };
    for h in resp.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("");
        if h.name.eq_ignore_ascii_case("content-length") {
            assert!(fields.length.is_none(), "two Content-Length fields");
            fields.length = value.parse().ok();
            assert!(fields.length.is_some(), "a bad Content-Length: {value}");
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            fields.chunked = value.eq_ignore_ascii_case("chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            // A list of options (`upgrade, close` on a 426 naming its protocol).
            fields.close = value
                .split(',')
                .any(|option| option.trim().eq_ignore_ascii_case("close"));
        }
    }
    assert!(
        !(fields.chunked && fields.length.is_some()),
        "both a length and chunked"
    );
    (resp.code.unwrap_or(0), fields, len)
}

/// The chunked body at the front of `bytes`, which must be whole: its length on the wire and
/// its payload.
fn chunked(bytes: &[u8]) -> (usize, Vec<u8>) {
    let mut decoder = Decoder::new(BodyFraming::Chunked, u64::MAX);
    let (mut pos, mut payload) = (0, Vec::new());
    while !decoder.is_done() {
        match decoder.decode(&bytes[pos..], usize::MAX) {
            Ok(d) if d.consumed > 0 => {
                payload.extend_from_slice(&bytes[pos..][d.data]);
                pos += d.consumed;
            }
            other => panic!("a chunked body that does not end: {:?}", other.is_ok()),
        }
    }
    (pos, payload)
}
