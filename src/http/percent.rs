//! Percent-decoding of the request path (RFC 3986 §2.1), strictly: a `%` must start a
//! `%XX` escape and the decoded bytes must be UTF-8, or the path is refused.

use std::borrow::Cow;

use crate::error::{Error, ErrorKind};
use crate::http::request::Request;

/// Decodes every `%XX` escape in `s`. Borrows `s` when it has no escape.
///
/// # Errors
///
/// An error of kind [`ErrorKind::BadRequest`] when a `%` is not followed by two hexadecimal
/// digits, or when the decoded bytes are not UTF-8.
pub(crate) fn decode(s: &str) -> Result<Cow<'_, str>, Error> {
    if !well_formed(s.as_bytes()) {
        return Err(Error::new(ErrorKind::BadRequest));
    }
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map_err(|_| Error::new(ErrorKind::BadRequest))
}

/// Whether every `%` in `bytes` starts a `%XX` escape. (`percent-encoding` passes a stray `%`
/// through as it is; a path holding one is not a URI path, RFC 3986 §2.1.)
fn well_formed(bytes: &[u8]) -> bool {
    let mut i = 0;
    while let Some(at) = bytes[i..].iter().position(|&b| b == b'%') {
        let escape = i + at;
        match bytes.get(escape + 1..escape + 3) {
            Some([hi, lo]) if hi.is_ascii_hexdigit() && lo.is_ascii_hexdigit() => i = escape + 3,
            _ => return false,
        }
    }
    true
}

impl<'a> Request<'a> {
    /// The path, percent-decoded: `/caf%C3%A9/a%20b` → `"/café/a b"`. Borrowed from the request
    /// when it has no `%`.
    ///
    /// Every escape is decoded, `%2F` included, so `/a%2Fb` and `/a/b` decode alike: to tell a
    /// `/` that was sent as `%2F` from one that separates segments, split [`Request::path`]
    /// first (a [`Router`](crate::Router) matches on it, so a `{param}` never spans a `%2F`).
    /// Nothing else is done: `+` stays `+` (it means a space in a query, not in a path), and dot
    /// segments (`..`) and characters such as NUL are left for the caller to refuse — a path
    /// that names a file must be confined to its folder.
    ///
    /// # Errors
    ///
    /// An error of kind [`ErrorKind::BadRequest`] ([`Error::status`] 400) when a `%` is not
    /// followed by two hexadecimal digits (`/100%`, `/%zz`), or when the decoded bytes are not
    /// UTF-8 (`/%FF`).
    ///
    /// # Examples
    ///
    /// ```
    /// use twinhttp::{Request, Response};
    ///
    /// fn show(req: &mut Request<'_>) -> Response {
    ///     match req.path_decoded() {
    ///         Ok(path) => Response::text(format!("you asked for {path}")),
    ///         Err(e) => Response::new(e.status().unwrap_or(400)),
    ///     }
    /// }
    /// # let _ = show;
    /// ```
    pub fn path_decoded(&self) -> Result<Cow<'a, str>, Error> {
        decode(self.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes_and_refuses_bad_ones() {
        let cases: &[(&str, Option<&str>)] = &[
            ("/plain/path", Some("/plain/path")),
            ("/a%20b", Some("/a b")),
            ("/caf%C3%A9", Some("/café")),
            ("/caf%c3%a9", Some("/café")),
            ("/a%2Fb", Some("/a/b")),
            ("/a+b", Some("/a+b")),
            ("/%2e%2e/x", Some("/../x")),
            ("/nul%00", Some("/nul\0")),
            ("/%", None),
            ("/100%", None),
            ("/%2", None),
            ("/%zz", None),
            ("/%2g", None),
            ("/%%41", None),
            ("/%FF", None),
            ("/%C3", None),
            ("/%C3%28", None),
        ];
        for (raw, want) in cases {
            let got = decode(raw);
            match want {
                Some(w) => assert_eq!(got.ok().as_deref(), Some(*w), "{raw}"),
                None => {
                    let err = got.err();
                    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::BadRequest), "{raw}");
                }
            }
        }
    }

    #[test]
    fn borrows_when_nothing_is_escaped() {
        assert!(matches!(decode("/a/b"), Ok(Cow::Borrowed("/a/b"))));
        assert!(matches!(decode("/a%41"), Ok(Cow::Owned(_))));
    }

    #[test]
    fn never_panics_on_any_short_input() {
        // Every string of up to four pieces from an alphabet of the interesting ones.
        let alphabet = ["%", "2", "F", "f", "g", "/", "é", "\u{0}"];
        let mut inputs = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = inputs
                .iter()
                .flat_map(|s| alphabet.iter().map(move |a| format!("{s}{a}")))
                .collect();
            inputs = longer;
            for s in &inputs {
                let _ = decode(s);
            }
        }
    }
}
