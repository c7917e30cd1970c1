//! File responses: Content-Length, single byte ranges (206/416), Last-Modified and
//! If-Modified-Since (304), a content type from the extension.

use std::fs::File;
use std::io::{ErrorKind, Seek, SeekFrom};
use std::path::Path;
use std::time::SystemTime;

use crate::http::response::{Body, BodyKind};
use crate::{Request, Response};

impl Response {
    /// Serves the file at `path` as the answer to `req`:
    ///
    /// - `200` with `Content-Length`, `Last-Modified`, `Accept-Ranges: bytes` and a content type
    ///   guessed from the extension;
    /// - `206 Partial Content` with `Content-Range` for one satisfiable `Range: bytes=…` (a
    ///   request for several ranges, or a malformed one, gets the whole file, as RFC 9110
    ///   allows); `416` with `Content-Range: bytes */LEN` for an unsatisfiable one; an
    ///   `If-Range` that does not match `Last-Modified` gets the whole file;
    /// - `304 Not Modified` when `If-Modified-Since` is not older than the file;
    /// - `404` when there is no such file, `403` when it cannot be read, `405` for methods other
    ///   than GET and HEAD.
    ///
    /// The thread-pool engine sends the bytes with `sendfile(2)` on Linux; the reactor reads
    /// them in pieces on its loop (fine for files in the page cache; use pool dispatch for
    /// cold disks).
    ///
    /// # Security
    ///
    /// `path` is opened as given: it must be a path you trust. Never join a request's path to a
    /// folder as it comes: `Path::join` with an absolute path (`GET /static//etc/passwd`)
    /// replaces the folder, `..` climbs out of it, `%2e%2e` is `..` once decoded, and a
    /// symbolic link inside the folder may point anywhere. A way that refuses all of these:
    ///
    /// ```no_run
    /// use std::path::{Component, Path};
    /// use twinhttp::{Request, Response};
    ///
    /// /// `GET /static/…` from `root`, an absolute, canonical folder
    /// /// (`Path::new("public").canonicalize()?`).
    /// fn static_file(req: &mut Request<'_>, root: &Path) -> Response {
    ///     let Ok(path) = req.path_decoded() else {
    ///         return Response::new(400);
    ///     };
    ///     let Some(rest) = path.strip_prefix("/static/") else {
    ///         return Response::new(404);
    ///     };
    ///     // Plain names only: no root, no `..`, no `.`, no NUL.
    ///     let relative = Path::new(rest);
    ///     let plain = relative.components().all(|c| matches!(c, Component::Normal(_)));
    ///     if !plain || rest.contains('\0') {
    ///         return Response::new(404);
    ///     }
    ///     // A symbolic link may lead out of the folder: resolve it, and check again.
    ///     match root.join(relative).canonicalize() {
    ///         Ok(real) if real.starts_with(root) => Response::file(req, real),
    ///         _ => Response::new(404),
    ///     }
    /// }
    /// # let _ = static_file;
    /// ```
    pub fn file(req: &Request<'_>, path: impl AsRef<Path>) -> Response {
        if req.method() != "GET" && req.method() != "HEAD" {
            return Response::new(405).with_header("Allow", "GET, HEAD");
        }
        let opened = File::open(path.as_ref()).and_then(|f| {
            let meta = f.metadata()?;
            if meta.is_dir() {
                return Err(ErrorKind::NotFound.into());
            }
            Ok((f, meta))
        });
        let (mut file, meta) = match opened {
            Ok(ok) => ok,
            Err(e) if e.kind() == ErrorKind::NotFound => return Response::new(404),
            Err(e) if e.kind() == ErrorKind::PermissionDenied => return Response::new(403),
            Err(_) => return Response::new(500),
        };
        let len = meta.len();
        let modified = meta.modified().ok();
        let last_modified = modified.map(httpdate::fmt_http_date);
        let base = |status: u16| {
            let mut r = Response::new(status)
                .with_content_type(content_type(path.as_ref()))
                .with_header("Accept-Ranges", "bytes");
            if let Some(lm) = &last_modified {
                r = r.with_header("Last-Modified", lm.clone());
            }
            r
        };
        if let (Some(ims), Some(m)) = (req.header("if-modified-since"), modified) {
            if let Ok(ims) = httpdate::parse_http_date(ims) {
                if seconds(m) <= seconds(ims) {
                    return base(304);
                }
            }
        }
        let if_range_ok = match req.header("if-range") {
            None => true,
            Some(v) => last_modified.as_deref() == Some(v.trim()),
        };
        let range = req
            .header("range")
            .filter(|_| if_range_ok)
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

/// One `bytes=` range against a file of `len` bytes (RFC 9110 §14.1.2).
fn parse_range(header: &str, len: u64) -> Range {
    let Some(spec) = header.trim().strip_prefix("bytes=") else {
        return Range::Ignore;
    };
    if spec.contains(',') {
        return Range::Ignore;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return Range::Ignore;
    };
    let num = |s: &str| -> Option<u64> {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (first.trim().is_empty(), num(first), num(last)) {
        // bytes=-N: the last N bytes.
        (true, _, Some(n)) if n > 0 && len > 0 => Range::Bytes(len.saturating_sub(n), len - 1),
        (true, _, Some(_)) => Range::Unsatisfiable,
        (false, Some(a), _) if a >= len => Range::Unsatisfiable,
        (false, Some(a), None) if last.trim().is_empty() => Range::Bytes(a, len - 1),
        (false, Some(a), Some(b)) if b >= a => Range::Bytes(a, b.min(len - 1)),
        _ => Range::Ignore,
    }
}

fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("json") => "application/json",
        Some("txt" | "rs" | "md" | "toml") => "text/plain; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("ico") => "image/x-icon",
        Some("wasm") => "application/wasm",
        Some("pdf") => "application/pdf",
        _ => "application/octet-stream",
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
            ("bytes=4-2", 10, Range::Ignore),
            ("bytes=0-1,4-5", 10, Range::Ignore),
            ("items=0-1", 10, Range::Ignore),
            ("bytes=a-b", 10, Range::Ignore),
            ("bytes=+1-2", 10, Range::Ignore),
        ];
        for (h, len, want) in cases {
            assert_eq!(parse_range(h, len), want, "{h} of {len}");
        }
    }
}
