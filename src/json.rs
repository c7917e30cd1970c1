//! JSON bodies (feature `json`): a response from any `Serialize`, and a request body read into
//! any `DeserializeOwned` within the body limit, refused with 415, 400 or 422 (as axum's `Json`
//! extractor answers) rather than a panic.

use std::fmt;
use std::io;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::error::Category;

use crate::http::response::KnownType;
use crate::{Request, Response};

/// Why [`Request::read_json`] refused a request, and the answer to give: [`JsonError::status`],
/// or the whole response with `Response::from(err)` (`err.into()` where a [`Response`] is
/// expected).
///
/// | kind | status | when |
/// |---|---|---|
/// | [`JsonErrorKind::ContentType`] | 415, with `Accept: application/json` | no `Content-Type`, more than one, or not JSON |
/// | [`JsonErrorKind::Syntax`] | 400 | not JSON: a syntax error, a body cut short, an empty body, bytes after the value, text that is not UTF-8 |
/// | [`JsonErrorKind::Data`] | 422 | JSON, but not of the type asked for: a wrong type, a missing field, an unknown variant |
/// | [`JsonErrorKind::Body`] | as the server answers the body: 413 over [`Limits::max_body_bytes`](crate::Limits::max_body_bytes), 400 for bad chunked framing, 408 when too slow | the body could not be read |
///
/// Its response is `text/plain` and says what was wrong (serde_json's message, with line and
/// column); the server engine replaces it with its own answer when the body itself failed
/// (that connection is closed).
pub struct JsonError {
    failure: Failure,
}

/// What [`JsonError`] holds: the kind, with the error that says more.
enum Failure {
    ContentType,
    Body(io::Error),
    Json(serde_json::Error),
}

/// What kind of [`JsonError`] this is, as returned by [`JsonError::kind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonErrorKind {
    /// The request's `Content-Type` is not JSON (`application/json`, or `application/…+json`
    /// such as `application/merge-patch+json`, parameters allowed): 415.
    ContentType,
    /// The body could not be read: over the body limit (413), badly framed (400), too slow
    /// (408), or the peer went away.
    Body,
    /// The body is not valid JSON, or ends before its value does: 400.
    Syntax,
    /// The body is valid JSON, but not of the type asked for: 422.
    Data,
}

impl JsonError {
    /// What kind of error this is.
    pub fn kind(&self) -> JsonErrorKind {
        match &self.failure {
            Failure::ContentType => JsonErrorKind::ContentType,
            Failure::Body(_) => JsonErrorKind::Body,
            Failure::Json(e) => match e.classify() {
                Category::Data => JsonErrorKind::Data,
                Category::Syntax | Category::Eof | Category::Io => JsonErrorKind::Syntax,
            },
        }
    }

    /// The status code to answer with: 415, 400 or 422, or for a body that could not be read
    /// the status the server answers that body with (413, 400, 408).
    pub fn status(&self) -> u16 {
        match (&self.failure, self.kind()) {
            (Failure::Body(e), _) => crate::error::body_status(e),
            (_, JsonErrorKind::ContentType) => 415,
            (_, JsonErrorKind::Data) => 422,
            _ => 400,
        }
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind() {
            JsonErrorKind::ContentType => "the request's Content-Type is not application/json",
            JsonErrorKind::Body => "the request body could not be read",
            JsonErrorKind::Syntax => "malformed JSON",
            JsonErrorKind::Data => "JSON of the wrong shape",
        })
    }
}

impl fmt::Debug for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonError")
            .field("kind", &self.kind())
            .field("status", &self.status())
            .field("source", &std::error::Error::source(self))
            .finish()
    }
}

impl std::error::Error for JsonError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.failure {
            Failure::ContentType => None,
            Failure::Body(e) => Some(e),
            Failure::Json(e) => Some(e),
        }
    }
}

/// The answer to a request whose JSON body was refused: the status of [`JsonError::status`],
/// a `text/plain` body saying what was wrong, and `Accept: application/json` on a 415.
#[cfg_attr(docsrs, doc(cfg(feature = "json")))]
impl From<JsonError> for Response {
    fn from(err: JsonError) -> Response {
        let text = match std::error::Error::source(&err) {
            Some(detail) => format!("{err}: {detail}\n"),
            None => format!("{err}\n"),
        };
        let response = Response::new(err.status())
            .with_known_content_type(KnownType::TEXT)
            .with_body(text);
        match err.failure {
            Failure::ContentType => response.with_header("Accept", "application/json"),
            _ => response,
        }
    }
}

/// Whether a `Content-Type` value names JSON: `application/json` or `application/…+json`, in
/// any case, with any parameters (RFC 9110 §8.3.1; RFC 6839 §3.1 for the `+json` suffix).
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("");
    let Some((kind, subtype)) = essence.trim_matches([' ', '\t']).split_once('/') else {
        return false;
    };
    let suffix = subtype
        .len()
        .checked_sub(5)
        .filter(|&at| at > 0)
        .and_then(|at| subtype.as_bytes().get(at..));
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json")
            || suffix.is_some_and(|s| s.eq_ignore_ascii_case(b"+json")))
}

impl Request<'_> {
    /// Reads the body as JSON into a `T`, after checking that the request says it is JSON.
    ///
    /// The `Content-Type` must be `application/json` or `application/…+json` (parameters such as
    /// `charset=utf-8` allowed), else the body is left unread and the error is a 415. The
    /// connection then stays open (the body was read before the handler ran). The body is read
    /// as by [`Request::read_body`], so it is bounded by
    /// [`Limits::max_body_bytes`](crate::Limits::max_body_bytes), chunked or not.
    ///
    /// # Errors
    ///
    /// A [`JsonError`] whose [`JsonError::status`] is the answer: 415 for a `Content-Type` that
    /// is not JSON, 400 for malformed or truncated JSON, 422 for JSON that does not
    /// deserialize into `T` (wrong types, missing fields), 413 for a body over the limit. It
    /// converts into that [`Response`].
    ///
    /// # Examples
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    /// use twinhttp::{Request, Response};
    ///
    /// #[derive(Deserialize)]
    /// struct NewItem {
    ///     name: String,
    ///     count: u32,
    /// }
    ///
    /// #[derive(Serialize)]
    /// struct Item {
    ///     id: u64,
    ///     name: String,
    ///     count: u32,
    /// }
    ///
    /// fn create(req: &mut Request<'_>) -> Response {
    ///     let new: NewItem = match req.read_json() {
    ///         Ok(v) => v,
    ///         Err(e) => return e.into(), // 415, 400, 422 or 413, with a short text body
    ///     };
    ///     let item = Item { id: 7, name: new.name, count: new.count };
    ///     Response::json(&item).with_status(201)
    /// }
    /// # let _ = create;
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "json")))]
    pub fn read_json<T: DeserializeOwned>(&mut self) -> Result<T, JsonError> {
        let mut types = self.header_all("content-type");
        match (types.next(), types.next()) {
            (Some(one), None) if is_json(one) => {}
            _ => {
                return Err(JsonError {
                    failure: Failure::ContentType,
                });
            }
        }
        let body = self.read_body().map_err(|e| JsonError {
            failure: Failure::Body(e),
        })?;
        serde_json::from_slice(&body).map_err(|e| JsonError {
            failure: Failure::Json(e),
        })
    }
}

impl Response {
    /// 200 with `value` serialized as a JSON body, `Content-Type: application/json`.
    ///
    /// A value that does not serialize (a map whose keys are not strings, a `Serialize` impl
    /// that fails) gives an empty 500, and the error is logged (`log::error!`): never a panic.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use twinhttp::Response;
    ///
    /// let r = Response::json(&BTreeMap::from([("a", 1), ("b", 2)]));
    /// assert_eq!((r.status(), r.content_type()), (200, Some("application/json")));
    /// assert_eq!(r.body().len(), Some(13)); // {"a":1,"b":2}
    ///
    /// let created = Response::json(&["x", "y"]).with_status(201);
    /// assert_eq!(created.status(), 201);
    ///
    /// // JSON object keys are strings: this map does not serialize.
    /// let bad = Response::json(&BTreeMap::from([((1, 2), "pair")]));
    /// assert_eq!(bad.status(), 500);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "json")))]
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Response {
        match serde_json::to_vec(value) {
            Ok(bytes) => Response::new(200)
                .with_known_content_type(KnownType::JSON)
                .with_body(bytes),
            Err(e) => {
                log::error!("Response::json: the value did not serialize: {e}");
                Response::new(500)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request_head::RequestHead;
    use std::collections::BTreeMap;

    #[test]
    fn json_content_types() {
        let cases: &[(&str, bool)] = &[
            ("application/json", true),
            ("Application/JSON", true),
            ("application/json; charset=utf-8", true),
            ("application/json;charset=UTF-8", true),
            (" application/json ", true),
            ("application/merge-patch+json", true),
            ("application/vnd.api+JSON; ext=x", true),
            ("application/+json", false),
            ("application/jsonx", false),
            ("application/x-json-like", false),
            ("text/json", false),
            ("text/plain", false),
            ("application/x-www-form-urlencoded", false),
            ("json", false),
            ("", false),
            ("application/é+json", true),
            ("applicationé/json", false),
        ];
        for (value, json) in cases {
            assert_eq!(is_json(value), *json, "{value:?}");
        }
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Point {
        x: i32,
        y: i32,
    }

    /// `read_json` over a request made of `raw` (head and body).
    fn read<T: DeserializeOwned>(raw: &[u8]) -> Result<T, JsonError> {
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(raw.len(), |at| at + 4);
        let head = RequestHead::parsed(&raw[..end]);
        let mut body = &raw[end..];
        let mut req = Request::new(&head, &mut body, None);
        req.read_json()
    }

    #[test]
    fn statuses_by_input() {
        let post = |content_type: &str, body: &str| {
            format!(
                "POST / HTTP/1.1\r\nHost: h\r\n{content_type}Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let json = "Content-Type: application/json\r\n";
        type Outcome = Result<Point, (JsonErrorKind, u16)>;
        let cases: &[(String, Outcome)] = &[
            (post(json, r#"{"x":1,"y":-2}"#), Ok(Point { x: 1, y: -2 })),
            (
                post(json, r#" {"y":2, "x":1, "z":[]} "#),
                Ok(Point { x: 1, y: 2 }),
            ),
            (
                post("", r#"{"x":1,"y":2}"#),
                Err((JsonErrorKind::ContentType, 415)),
            ),
            (
                post("Content-Type: text/plain\r\n", r#"{"x":1,"y":2}"#),
                Err((JsonErrorKind::ContentType, 415)),
            ),
            (
                post(
                    "Content-Type: application/json\r\nContent-Type: text/plain\r\n",
                    "{}",
                ),
                Err((JsonErrorKind::ContentType, 415)),
            ),
            (
                post(json, r#"{"x":1,"y":}"#),
                Err((JsonErrorKind::Syntax, 400)),
            ),
            (
                post(json, r#"{"x":1,"y":2"#),
                Err((JsonErrorKind::Syntax, 400)),
            ),
            (post(json, ""), Err((JsonErrorKind::Syntax, 400))),
            (
                post(json, r#"{"x":1,"y":2} {}"#),
                Err((JsonErrorKind::Syntax, 400)),
            ),
            (
                post(json, r#"{"x":1,"y":"2"}"#),
                Err((JsonErrorKind::Data, 422)),
            ),
            (post(json, r#"{"x":1}"#), Err((JsonErrorKind::Data, 422))),
            (post(json, "[1]"), Err((JsonErrorKind::Data, 422))),
            (post(json, r#""point""#), Err((JsonErrorKind::Data, 422))),
            (
                post(json, r#"{"x":1,"y":99999999999}"#),
                Err((JsonErrorKind::Data, 422)),
            ),
        ];
        for (raw, want) in cases {
            let got = read::<Point>(raw.as_bytes()).map_err(|e| (e.kind(), e.status()));
            assert_eq!(&got, want, "{raw}");
        }
        // Not UTF-8 inside a string: a syntax error.
        let mut raw = post(json, r#"{"s":".."}"#).into_bytes();
        let at = raw.len() - 3;
        raw[at] = 0xff;
        let err = read::<BTreeMap<String, String>>(&raw).map_err(|e| (e.kind(), e.status()));
        assert_eq!(err, Err((JsonErrorKind::Syntax, 400)));
    }

    #[test]
    fn refusals_become_text_responses() {
        let err = read::<Point>(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}")
            .map(|_| ())
            .map_err(Response::from);
        let Err(r) = err else {
            panic!("accepted without a Content-Type")
        };
        assert_eq!(r.status(), 415);
        assert_eq!(r.header("accept"), Some("application/json"));
        assert_eq!(r.content_type(), Some("text/plain; charset=utf-8"));

        let err = read::<Point>(
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"x\":1}",
        );
        let Err(err) = err else {
            panic!("a missing field accepted")
        };
        assert!(std::error::Error::source(&err).is_some());
        assert_eq!(err.to_string(), "JSON of the wrong shape");
        let r = Response::from(err);
        assert_eq!(r.status(), 422);
        assert_eq!(r.header("accept"), None);
        assert_eq!(
            text(&r),
            "JSON of the wrong shape: missing field `y` at line 1 column 7\n"
        );
    }

    fn text(r: &Response) -> String {
        match &r.body().kind {
            crate::http::response::BodyKind::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            _ => panic!("not a body of bytes: {r:?}"),
        }
    }

    #[test]
    fn a_body_error_keeps_its_status() {
        let wrapped = |kind| io::Error::new(io::ErrorKind::InvalidData, crate::Error::new(kind));
        let too_large = wrapped(crate::ErrorKind::BodyTooLarge);
        assert_eq!(crate::error::body_status(&too_large), 413);
        let bad_chunk = wrapped(crate::ErrorKind::BadRequest);
        assert_eq!(crate::error::body_status(&bad_chunk), 400);
        let slow = io::Error::from(io::ErrorKind::TimedOut);
        assert_eq!(crate::error::body_status(&slow), 408);
        let gone = wrapped(crate::ErrorKind::ConnectionClosed);
        assert_eq!(crate::error::body_status(&gone), 400);
    }

    #[test]
    fn serialize_failure_is_a_500() {
        let map = BTreeMap::from([((1, 2), 3)]);
        assert_eq!(Response::json(&map).status(), 500);
        let ok = Response::json("text");
        assert_eq!(ok.body().len(), Some(6));
    }
}
