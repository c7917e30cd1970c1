//! File responses: Content-Length, single byte ranges (206/416), `ETag` with `If-Match` (412)
//! and `If-None-Match` (304), `Last-Modified` with `If-Unmodified-Since` (412) and
//! `If-Modified-Since` (304), `If-Range`, a content type from the extension.

use std::borrow::Cow;
use std::fs::{File, Metadata};
use std::io::{self, ErrorKind, Seek, SeekFrom};
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::http::request::Request;
use crate::http::response::Response;
use crate::http::response::{Body, BodyKind, HeaderText};

impl Response {
    /// Serves the file at `path` as the answer to `req`:
    ///
    /// - `200` with `Content-Length`, `ETag`, `Last-Modified`, `Accept-Ranges: bytes` and a
    ///   content type from the extension (the `mime_guess` table; `text/*` as UTF-8);
    /// - `206 Partial Content` with `Content-Range` for one satisfiable `Range: bytes=…` (a
    ///   request for several ranges, or a malformed one, gets the whole file, as RFC 9110
    ///   allows); `416` with `Content-Range: bytes */LEN` for an unsatisfiable one; an
    ///   `If-Range` that is neither the `ETag` nor the `Last-Modified` date gets the whole file;
    /// - `412 Precondition Failed` when `If-Match` does not name the file's `ETag` (strong
    ///   comparison; `*` matches), or, without `If-Match`, when the file changed after
    ///   `If-Unmodified-Since`;
    /// - `304 Not Modified` when `If-None-Match` names the file's `ETag` (or is `*`), or, without
    ///   `If-None-Match`, when `If-Modified-Since` is not older than the file (RFC 9110 §13.2.2);
    /// - `404` when there is no such file, `403` when it cannot be read, `405` for methods other
    ///   than GET and HEAD.
    ///
    /// Both engines send the bytes with `sendfile(2)` on Linux over plain TCP and Unix sockets.
    /// Over TLS they are read in 16 KiB pieces: on a worker of the thread-pool engine, on the
    /// loop of the reactor whatever its dispatch (fine for files in the page cache; a cold
    /// disk blocks the loop, so serve big cold files over TLS from the thread-pool engine).
    ///
    /// The `ETag` is made from the file's length and modification time (as nginx makes it), so
    /// it changes when the file is rewritten; it is strong: a range of it is a range of the same
    /// bytes.
    ///
    /// # Security
    ///
    /// `path` is opened as given: it must be a path you trust. **To serve files a request
    /// names, use [`ServeDir`](crate::ServeDir)**: never join a request's path to a folder as it
    /// comes (`Path::join` with an absolute path, `GET /static//etc/passwd`, replaces the folder;
    /// `..` climbs out of it, `%2e%2e` is `..` once decoded, and a symbolic link inside the
    /// folder may point anywhere). Only regular files are served (a FIFO or a device is a `404`,
    /// and is opened without waiting for a writer).
    pub fn file(req: &Request<'_>, path: impl AsRef<Path>) -> Response {
        if req.method() != "GET" && req.method() != "HEAD" {
            return Response::new(405).with_header("Allow", "GET, HEAD");
        }
        match open_regular(path.as_ref()) {
            Ok((file, meta)) => Response::file_opened(req, file, &meta, path.as_ref()),
            Err(e) if e.kind() == ErrorKind::NotFound => Response::new(404),
            Err(e) if e.kind() == ErrorKind::PermissionDenied => Response::new(403),
            Err(_) => Response::new(500),
        }
    }

    /// The answer to `req` from a regular file already open, its content type from `name`.
    pub(crate) fn file_opened(
        req: &Request<'_>,
        mut file: File,
        meta: &Metadata,
        name: &Path,
    ) -> Response {
        if req.method() != "GET" && req.method() != "HEAD" {
            return Response::new(405).with_header("Allow", "GET, HEAD");
        }
        let validators = Validators::of(meta);
        // A 304 carries the validators only (RFC 9110 §15.4.5); the others describe the bytes.
        let validated = |status: u16| {
            let r = Response::new(status).with_header("ETag", validators.etag.clone());
            match &validators.last_modified {
                Some(lm) => r.with_header("Last-Modified", lm.clone()),
                None => r,
            }
        };
        if validators.precondition_fails(req) {
            return validated(412);
        }
        if validators.not_modified(req) {
            // What the 304 stands for, for the compression layer (it decides the tag).
            #[cfg(feature = "compression")]
            return validated(304).not_modified_of(crate::http::response::Representation {
                content_type: content_type(name),
                len: meta.len(),
                content_encoding: None,
            });
            #[cfg(not(feature = "compression"))]
            return validated(304);
        }
        let base = |status: u16| {
            validated(status)
                .with_content_type(content_type(name))
                .with_header("Accept-Ranges", "bytes")
        };
        let len = meta.len();
        // Two `Range` fields make one value that is no range (RFC 9110 §5.3, §14.2): ignored.
        // So is a HEAD's: range handling is defined for GET only (§14.2).
        let mut ranges = req.header_all("range").filter(|_| req.method() == "GET");
        let range = ranges
            .next()
            .filter(|_| ranges.next().is_none())
            .filter(|_| validators.if_range_holds(req))
            .map(|r| parse_range(r, len));
        let (status, start, count) = match range {
            None | Some(Range::Ignore) => (200, 0, len),
            Some(Range::Unsatisfiable) => {
                return base(416).with_header("Content-Range", format!("bytes */{len}"));
            }
            Some(Range::Bytes(start, end)) => (206, start, end - start + 1),
        };
        if start > 0 && file.seek(SeekFrom::Start(start)).is_err() {
            return Response::new(500);
        }
        let mut r = base(status);
        if status == 206 {
            r = r.with_header(
                "Content-Range",
                format!("bytes {start}-{}/{len}", start + count - 1),
            );
        }
        r.with_body(Body {
            kind: BodyKind::File(file, count),
        })
    }
}

/// What a client may hold of a file to ask whether it changed: its entity tag and date.
struct Validators {
    /// A strong tag, `"LEN-SECS.NANOS"` in hex.
    etag: String,
    modified: Option<SystemTime>,
    last_modified: Option<String>,
    /// Whether the date is a strong validator: a file changed within the second it names could
    /// change again within it unseen (RFC 9110 §8.8.2.2).
    date_strength: Strength,
}

/// Whether a validator changes whenever the bytes do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Strength {
    Strong,
    Weak,
}

impl Validators {
    fn of(meta: &Metadata) -> Validators {
        let modified = meta.modified().ok();
        let since_epoch = modified
            .and_then(|m| m.duration_since(SystemTime::UNIX_EPOCH).ok())
            .unwrap_or_default();
        Validators {
            etag: format!(
                "\"{:x}-{:x}.{:x}\"",
                meta.len(),
                since_epoch.as_secs(),
                since_epoch.subsec_nanos()
            ),
            modified,
            last_modified: modified.map(httpdate::fmt_http_date),
            date_strength: match modified.map(|m| SystemTime::now().duration_since(m)) {
                Some(Ok(age)) if age >= Duration::from_secs(1) => Strength::Strong,
                _ => Strength::Weak,
            },
        }
    }

    /// Whether the request's precondition fails (`412`): `If-Match` decides when present
    /// (strong comparison: a weak tag never matches; `*` matches the file), else
    /// `If-Unmodified-Since` (ignored when it is not a date). RFC 9110 §13.2.2, steps 1 and 2.
    fn precondition_fails(&self, req: &Request<'_>) -> bool {
        let mut if_match = req.header_all("if-match").peekable();
        if if_match.peek().is_some() {
            return !if_match
                .any(|list| list.trim() == "*" || entity_tags(list).any(|t| t == self.etag));
        }
        match (req.header("if-unmodified-since"), self.modified) {
            (Some(ius), Some(m)) => {
                httpdate::parse_http_date(ius).is_ok_and(|ius| seconds(m) > seconds(ius))
            }
            _ => false,
        }
    }

    /// Whether a GET or HEAD gets `304`: `If-None-Match` decides when present (weak comparison,
    /// `*` matches), else `If-Modified-Since`.
    fn not_modified(&self, req: &Request<'_>) -> bool {
        let mut none_match = req.header_all("if-none-match").peekable();
        if none_match.peek().is_some() {
            return none_match.any(|list| {
                list.trim() == "*" || entity_tags(list).any(|t| opaque(t) == opaque(&self.etag))
            });
        }
        match (req.header("if-modified-since"), self.modified) {
            (Some(ims), Some(m)) => {
                httpdate::parse_http_date(ims).is_ok_and(|ims| seconds(m) <= seconds(ims))
            }
            _ => false,
        }
    }

    /// Whether an `If-Range` lets the `Range` through: absent, the `ETag` itself (strong
    /// comparison), or the `Last-Modified` date exactly when that date is strong (RFC 9110
    /// §13.1.5).
    fn if_range_holds(&self, req: &Request<'_>) -> bool {
        match req.header("if-range").map(str::trim) {
            None => true,
            Some(v) if v.starts_with('"') => v == self.etag,
            Some(v) => {
                self.date_strength == Strength::Strong && self.last_modified.as_deref() == Some(v)
            }
        }
    }
}

/// The entity tags of an `If-None-Match` list, each as sent (`W/"x"` or `"x"`); a malformed
/// rest of the list ends it.
pub(crate) fn entity_tags(list: &str) -> impl Iterator<Item = &str> {
    let mut rest = list;
    std::iter::from_fn(move || {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        let body = rest.strip_prefix("W/").unwrap_or(rest);
        let start = rest.len() - body.len();
        let inner = body.strip_prefix('"')?;
        let end = inner.find('"')?;
        // `start`, the quote, the tag, the closing quote.
        let (tag, after) = rest.split_at(start + end + 2);
        rest = after;
        Some(tag)
    })
}

/// A tag without its weakness: weak comparison (RFC 9110 §8.8.3.2).
fn opaque(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag)
}

/// Opens `path` for reading if it is a regular file, without waiting on a FIFO's writer.
pub(crate) fn open_regular(path: &Path) -> io::Result<(File, Metadata)> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    regular(File::from(rustix::fs::open(path, flags, Mode::empty())?))
}

/// `file` and its metadata if it is a regular file; `NotFound` otherwise (a folder, a FIFO, a
/// device: nothing a file response can send).
pub(crate) fn regular(file: File) -> io::Result<(File, Metadata)> {
    let meta = file.metadata()?;
    match meta.is_file() {
        true => Ok((file, meta)),
        false => Err(ErrorKind::NotFound.into()),
    }
}

fn seconds(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[derive(Debug, PartialEq, Eq)]
enum Range {
    /// Serve the whole file (no usable single range).
    Ignore,
    Unsatisfiable,
    /// First and last byte, inclusive.
    Bytes(u64, u64),
}

/// One `bytes=` range against a file of `len` bytes (RFC 9110 §14.1.2). The unit is compared
/// case-insensitively (RFC 9110 §14.1). A suffix range with a non-zero length is satisfiable
/// on an empty file too (§14.1.1), and names its whole (empty) content, which no `206` can
/// describe: it is ignored, and the file sent whole.
fn parse_range(header: &str, len: u64) -> Range {
    let Some((unit, spec)) = header.trim().split_once('=') else {
        return Range::Ignore;
    };
    if !unit.eq_ignore_ascii_case("bytes") {
        return Range::Ignore;
    }
    if spec.contains(',') {
        return Range::Ignore;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return Range::Ignore;
    };
    // A position is digits (RFC 9110 §14.1.2), of any length: one past `u64::MAX` is past the
    // end of any file, so it saturates (a first position there is unsatisfiable, a last one or
    // a suffix that long takes the whole file).
    let num = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().unwrap_or(u64::MAX))
    };
    let (first, last) = (first.trim(), last.trim());
    match (first.is_empty(), num(first), last.is_empty(), num(last)) {
        // bytes=-N: the last N bytes.
        (true, _, _, Some(0)) => Range::Unsatisfiable,
        (true, _, _, Some(_)) if len == 0 => Range::Ignore,
        (true, _, _, Some(n)) => Range::Bytes(len.saturating_sub(n), len - 1),
        // A last position before the first makes the range invalid (§14.1.1): ignored.
        (false, Some(a), _, Some(b)) if b < a => Range::Ignore,
        (false, Some(a), true, None) | (false, Some(a), _, Some(_)) if a >= len => {
            Range::Unsatisfiable
        }
        (false, Some(a), true, None) => Range::Bytes(a, len - 1),
        (false, Some(a), _, Some(b)) => Range::Bytes(a, b.min(len - 1)),
        _ => Range::Ignore,
    }
}

/// The content type of a file from its extension (`mime_guess`); `text/*` is declared UTF-8.
fn content_type(path: &Path) -> HeaderText {
    match mime_guess::from_path(path).first_raw() {
        Some(t) if t.starts_with("text/") => Cow::Owned(format!("{t}; charset=utf-8")),
        Some(t) => Cow::Borrowed(t),
        None => Cow::Borrowed("application/octet-stream"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_table() {
        let cases = [
            ("bytes=0-4", 10, Range::Bytes(0, 4)),
            ("bytes=5-", 10, Range::Bytes(5, 9)),
            ("bytes=-3", 10, Range::Bytes(7, 9)),
            ("bytes=-30", 10, Range::Bytes(0, 9)),
            ("bytes=8-100", 10, Range::Bytes(8, 9)),
            ("bytes=10-", 10, Range::Unsatisfiable),
            ("bytes=-0", 10, Range::Unsatisfiable),
            ("bytes=0-0", 0, Range::Unsatisfiable),
            ("bytes=-5", 0, Range::Ignore),
            ("bytes=-0", 0, Range::Unsatisfiable),
            ("BYTES=0-1", 10, Range::Bytes(0, 1)),
            ("Bytes=-3", 10, Range::Bytes(7, 9)),
            ("bytes=4-2", 10, Range::Ignore),
            ("bytes=0-1,4-5", 10, Range::Ignore),
            ("items=0-1", 10, Range::Ignore),
            ("bytes=a-b", 10, Range::Ignore),
            ("bytes=+1-2", 10, Range::Ignore),
            // Positions past u64::MAX are past any file's end (found by a user's trial: the
            // first one overflowed and the file went whole, 200, instead of 416).
            ("bytes=99999999999999999999999-", 10, Range::Unsatisfiable),
            (
                "bytes=99999999999999999999999-99999999999999999999999",
                10,
                Range::Unsatisfiable,
            ),
            ("bytes=2-99999999999999999999999", 10, Range::Bytes(2, 9)),
            ("bytes=-99999999999999999999999", 10, Range::Bytes(0, 9)),
            // Invalid (last before first, or not a number): ignored, not unsatisfiable.
            ("bytes=20-5", 10, Range::Ignore),
            ("bytes=99999999999999999999999-5", 10, Range::Ignore),
            ("bytes=20-x", 10, Range::Ignore),
            ("bytes=-", 10, Range::Ignore),
            ("bytes= 2 - 3 ", 10, Range::Bytes(2, 3)),
        ];
        for (h, len, want) in cases {
            assert_eq!(parse_range(h, len), want, "{h} of {len}");
        }
    }

    #[test]
    fn entity_tag_lists() {
        fn tags(l: &str) -> Vec<&str> {
            entity_tags(l).collect()
        }
        assert_eq!(tags(r#""a""#), [r#""a""#]);
        assert_eq!(
            tags(r#"W/"a", "b,c" ,"d""#),
            [r#"W/"a""#, r#""b,c""#, r#""d""#]
        );
        assert_eq!(tags(r#""a", junk, "b""#), [r#""a""#]);
        assert_eq!(tags(r#""unterminated"#), Vec::<&str>::new());
        assert_eq!(tags(""), Vec::<&str>::new());
        assert_eq!(opaque(r#"W/"a""#), opaque(r#""a""#));
    }

    #[test]
    fn content_types() {
        let ct = |p: &str| content_type(Path::new(p)).into_owned();
        assert_eq!(ct("a.html"), "text/html; charset=utf-8");
        assert_eq!(ct("a.CSS"), "text/css; charset=utf-8");
        assert_eq!(ct("a.svg"), "image/svg+xml");
        assert_eq!(ct("a.wasm"), "application/wasm");
        assert_eq!(ct("a.json"), "application/json");
        assert_eq!(ct("a.unknownext"), "application/octet-stream");
        assert_eq!(ct("no_extension"), "application/octet-stream");
    }
}
