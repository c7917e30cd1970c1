//! `multipart/form-data` bodies (uploads) read part by part, with limits on the number of parts,
//! each part's size and the whole. Parsing is `multer`'s (as axum's): an asynchronous parser,
//! driven here from the handler's own blocking reads of the body, which the engine already has
//! whole (in memory or its temporary file), so no part ever waits on the client.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use futures_core::Stream;

use crate::Response;
use crate::http::request::Request;

/// How much of the body is fed to the parser at once.
const FEED: usize = 64 * 1024;

/// Most bytes fed to the parser for one part's head (its boundary line and header fields; the
/// first's, the preamble before it too) without its end: past this the body is refused (400).
/// The parser keeps a head whole and looks for its end over all of it at each piece fed.
pub(crate) const MAX_PART_HEAD: u64 = 16 * 1024;

/// Limits on a multipart body, beyond the engine's body limit. Default: 64 parts, 16 MiB a
/// part, 64 MiB in all; the engine's body limit (`max_body_bytes`, 16 MiB by default) bounds
/// the whole first, so raise both for larger uploads. A part's head (its header fields) is
/// bounded too: one that has not ended once 16 KiB of it were fed to the parser is a malformed
/// body (400); the body is fed in pieces of up to 64 KiB, so a head that ends within the piece
/// that passed 16 KiB is still read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MultipartLimits {
    /// The most parts.
    pub parts: usize,
    /// The largest part, in bytes.
    pub part_bytes: u64,
    /// The whole body, in bytes.
    pub total_bytes: u64,
}

impl Default for MultipartLimits {
    fn default() -> Self {
        MultipartLimits {
            parts: 64,
            part_bytes: 16 << 20,
            total_bytes: 64 << 20,
        }
    }
}

/// Why a multipart body was refused: its `Content-Type` (415, or 400 without a boundary), a
/// limit (413), a malformed body (400), or the body could not be read (413, 400, 408).
pub struct MultipartError {
    status: u16,
    message: String,
}

impl MultipartError {
    fn new(status: u16, message: impl Into<String>) -> MultipartError {
        MultipartError {
            status,
            message: message.into(),
        }
    }

    /// The status code to answer with.
    pub fn status(&self) -> u16 {
        self.status
    }

    fn of(e: multer::Error, feed: &Feed) -> MultipartError {
        if let Some(status) = feed.failed {
            return MultipartError::new(status, "the request body could not be read");
        }
        let status = match e {
            multer::Error::FieldSizeExceeded { .. } | multer::Error::StreamSizeExceeded { .. } => {
                413
            }
            _ => 400,
        };
        MultipartError::new(status, e.to_string())
    }
}

impl fmt::Display for MultipartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for MultipartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultipartError")
            .field("status", &self.status)
            .field("message", &self.message)
            .finish()
    }
}

impl std::error::Error for MultipartError {}

/// The answer to a request whose multipart body was refused: its status and a text body.
impl From<MultipartError> for Response {
    fn from(err: MultipartError) -> Response {
        Response::text(format!("{err}\n")).with_status(err.status)
    }
}

/// What the parser has been fed and not yet taken, and whether the body ended.
#[derive(Default)]
struct Feed {
    chunks: VecDeque<Bytes>,
    ended: bool,
    /// The status of a body that could not be read.
    failed: Option<u16>,
}

/// The parser's side of the feed: what it was given, then the end; `Pending` while the handler
/// has not fed more.
struct Fed(Arc<Mutex<Feed>>);

impl Stream for Fed {
    type Item = Result<Bytes, io::Error>;

    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut feed = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match feed.chunks.pop_front() {
            Some(chunk) => Poll::Ready(Some(Ok(chunk))),
            None if feed.ended => Poll::Ready(None),
            None => Poll::Pending,
        }
    }
}

/// The body, fed to the parser as it asks for more.
struct Source<'r> {
    feed: Arc<Mutex<Feed>>,
    body: &'r mut dyn Read,
}

impl Source<'_> {
    fn feed(&self) -> std::sync::MutexGuard<'_, Feed> {
        self.feed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `poll` to its end, reading more of the body whenever it waits for it.
    fn drive<T>(
        &mut self,
        poll: impl FnMut(&mut Context<'_>) -> Poll<Result<T, multer::Error>>,
    ) -> Result<T, MultipartError> {
        self.drive_within(u64::MAX, poll)
    }

    /// [`Source::drive`], refused (400) once more than `most` bytes were fed to it and it
    /// still waits.
    fn drive_within<T>(
        &mut self,
        most: u64,
        mut poll: impl FnMut(&mut Context<'_>) -> Poll<Result<T, multer::Error>>,
    ) -> Result<T, MultipartError> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut fed = 0u64;
        loop {
            match poll(&mut cx) {
                Poll::Ready(Ok(value)) => return Ok(value),
                Poll::Ready(Err(e)) => return Err(MultipartError::of(e, &self.feed())),
                Poll::Pending if fed > most => {
                    return Err(MultipartError::new(
                        400,
                        format!("a part's head is over {most} bytes"),
                    ));
                }
                Poll::Pending => fed = fed.saturating_add(self.read_more()? as u64),
            }
        }
    }

    /// Feeds the next piece of the body, or its end: the bytes fed.
    fn read_more(&mut self) -> Result<usize, MultipartError> {
        if self.feed().ended {
            // Waiting with everything fed: the parser cannot go on.
            return Err(MultipartError::new(400, "the multipart body ends early"));
        }
        let mut piece = vec![0u8; FEED];
        let read = loop {
            match self.body.read(&mut piece) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => break other,
            }
        };
        let mut feed = self.feed();
        match read {
            Ok(0) => feed.ended = true,
            Ok(n) => {
                piece.truncate(n);
                feed.chunks.push_back(Bytes::from(piece));
                return Ok(n);
            }
            Err(e) => {
                let status = crate::error::body_status(&e);
                feed.failed = Some(status);
                feed.ended = true;
                return Err(MultipartError::new(
                    status,
                    "the request body could not be read",
                ));
            }
        }
        Ok(0)
    }
}

/// A `multipart/form-data` body, read a part at a time: [`Request::multipart`].
pub struct Multipart<'r> {
    parser: multer::Multipart<'static>,
    source: Source<'r>,
    /// The part last given out: what its reader left is skipped before the next head.
    current: Option<multer::Field<'static>>,
    parts: usize,
    limits: MultipartLimits,
}

impl<'r> Multipart<'r> {
    /// The next part, or `None` after the last. Reading it is reading the body; a part left
    /// unread is skipped.
    ///
    /// # Errors
    ///
    /// More parts than the limit (413), a part or the whole over its limit (413), a malformed
    /// body (400; a part's head over 16 KiB among them, and a part without
    /// `Content-Disposition: form-data`, RFC 7578 §4.2), or a body that could not be read.
    pub fn next_part(&mut self) -> Result<Option<Part<'_, 'r>>, MultipartError> {
        // What the last part's reader left is skipped first, so that what is fed next is the
        // next part's head, within its bound.
        if let Some(mut field) = self.current.take() {
            while self
                .source
                .drive(|cx| Pin::new(&mut field).poll_next(cx).map(Option::transpose))?
                .is_some()
            {}
        }
        let parser = &mut self.parser;
        let field = self
            .source
            .drive_within(MAX_PART_HEAD, |cx| parser.poll_next_field(cx))?;
        let Some(field) = field else {
            return Ok(None);
        };
        self.parts += 1;
        if self.parts > self.limits.parts {
            return Err(MultipartError::new(
                413,
                format!("more than {} parts", self.limits.parts),
            ));
        }
        // RFC 7578 §4.2: each part has a `Content-Disposition` of type `form-data` (a part
        // without one is no field of the form). Its `name` is not required here: multer reads
        // some valid ones as none (`Name=`, a `filename` before it that holds "name").
        if !is_form_data(&field) {
            return Err(MultipartError::new(
                400,
                "a part without Content-Disposition: form-data",
            ));
        }
        Ok(Some(Part {
            field: self.current.insert(field),
            source: &mut self.source,
            chunk: Bytes::new(),
        }))
    }
}

/// Whether a part's `Content-Disposition` is of type `form-data` (its bytes: browsers send a
/// file name as raw UTF-8, which is no header text).
fn is_form_data(field: &multer::Field<'static>) -> bool {
    field
        .headers()
        .get(::http::header::CONTENT_DISPOSITION)
        .and_then(|v| v.as_bytes().split(|&b| b == b';').next())
        .is_some_and(|kind| kind.trim_ascii().eq_ignore_ascii_case(b"form-data"))
}

/// One part of a multipart body: its field name, its file name and type for a file, and its
/// bytes, read as from any [`Read`].
pub struct Part<'m, 'r> {
    field: &'m mut multer::Field<'static>,
    source: &'m mut Source<'r>,
    /// What the parser gave and was not read out yet.
    chunk: Bytes,
}

impl Part<'_, '_> {
    /// The field's name (`name=` of its `Content-Disposition`).
    pub fn name(&self) -> Option<&str> {
        self.field.name()
    }

    /// The file's name, for a file (`filename=`), as the client sent it: never use it as a
    /// path.
    pub fn file_name(&self) -> Option<&str> {
        self.field.file_name()
    }

    /// The part's `Content-Type`, if it has one.
    pub fn content_type(&self) -> Option<&str> {
        self.field
            .headers()
            .get(::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }

    /// The part's next piece, as the parser gives it: `None` at its end.
    fn next_chunk(&mut self) -> Result<Option<Bytes>, MultipartError> {
        let field = &mut *self.field;
        self.source
            .drive(|cx| Pin::new(&mut *field).poll_next(cx).map(Option::transpose))
    }

    /// The whole part, in memory (within the part limit).
    ///
    /// # Errors
    ///
    /// As [`Multipart::next_part`].
    pub fn read_all(&mut self) -> Result<Vec<u8>, MultipartError> {
        let mut all = std::mem::take(&mut self.chunk).to_vec();
        while let Some(chunk) = self.next_chunk()? {
            all.extend_from_slice(&chunk);
        }
        Ok(all)
    }

    /// The whole part as text (bytes that are not UTF-8 replaced).
    ///
    /// # Errors
    ///
    /// As [`Multipart::next_part`].
    pub fn text(&mut self) -> Result<String, MultipartError> {
        self.read_all()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }
}

impl Read for Part<'_, '_> {
    /// The part's bytes; an error of the body (a limit, a malformed body) is `InvalidData`
    /// wrapping the [`MultipartError`].
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.chunk.is_empty() {
            match self.next_chunk() {
                Ok(Some(chunk)) => self.chunk = chunk,
                Ok(None) => return Ok(0),
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
        }
        let n = self.chunk.len().min(buf.len());
        buf[..n].copy_from_slice(&self.chunk[..n]);
        let _ = self.chunk.split_to(n);
        Ok(n)
    }
}

impl Request<'_> {
    /// Reads the body as `multipart/form-data` (a browser's upload, `curl -F`), a part at a
    /// time, within `limits` (and the engine's body limit).
    ///
    /// # Errors
    ///
    /// A `Content-Type` that is not `multipart/form-data` (415), or one without a boundary of 1
    /// to 70 characters (400, RFC 2046 §5.1.1). The parts' own errors come from
    /// [`Multipart::next_part`].
    ///
    /// ```
    /// use std::io::Read;
    /// use twinhttp::{MultipartLimits, Request, Response};
    ///
    /// fn upload(req: &mut Request<'_>) -> Response {
    ///     let mut form = match req.multipart(MultipartLimits::default()) {
    ///         Ok(form) => form,
    ///         Err(e) => return e.into(),
    ///     };
    ///     let mut report = String::new();
    ///     loop {
    ///         let mut part = match form.next_part() {
    ///             Ok(Some(part)) => part,
    ///             Ok(None) => break Response::text(report),
    ///             Err(e) => break e.into(), // 413 over a limit, 400 malformed
    ///         };
    ///         let name = part.name().unwrap_or("").to_owned();
    ///         let mut size = 0;
    ///         let mut chunk = [0u8; 8192];
    ///         while let Ok(n @ 1..) = part.read(&mut chunk) {
    ///             size += n; // or write it to a file
    ///         }
    ///         report.push_str(&format!("{name}: {size} bytes\n"));
    ///     }
    /// }
    /// # let _ = upload;
    /// ```
    pub fn multipart(&mut self, limits: MultipartLimits) -> Result<Multipart<'_>, MultipartError> {
        let content_type = self.header("content-type").unwrap_or("");
        let essence = content_type.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("multipart/form-data") {
            return Err(MultipartError::new(
                415,
                "the request's Content-Type is not multipart/form-data",
            ));
        }
        let boundary = multer::parse_boundary(content_type)
            .map_err(|e| MultipartError::new(400, e.to_string()))?;
        // RFC 2046 §5.1.1: 1 to 70 characters.
        if !(1..=70).contains(&boundary.len()) {
            return Err(MultipartError::new(
                400,
                "a multipart boundary has 1 to 70 characters",
            ));
        }
        let feed = Arc::new(Mutex::new(Feed::default()));
        let constraints = multer::Constraints::new().size_limit(
            multer::SizeLimit::new()
                .whole_stream(limits.total_bytes)
                .per_field(limits.part_bytes),
        );
        let parser = multer::Multipart::with_constraints(Fed(feed.clone()), boundary, constraints);
        Ok(Multipart {
            parser,
            source: Source {
                feed,
                body: self.body_reader(),
            },
            current: None,
            parts: 0,
            limits,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler_fn;
    use crate::testing::TestRequest;

    /// A body as a browser sends it: two fields and a file.
    fn browser_body() -> (String, Vec<u8>) {
        let boundary = "----WebKitFormBoundary7MA4YWxkTrZu0gW";
        let mut body = Vec::new();
        for (disposition, kind, content) in [
            ("name=\"title\"", None, &b"holiday"[..]),
            ("name=\"note\"", None, "caf\u{e9} \u{2615}".as_bytes()),
            (
                "name=\"photo\"; filename=\"a b.png\"",
                Some("image/png"),
                &[0x89, b'P', b'N', b'G', 0, 1, 2, 3, b'\r', b'\n', b'-', b'-'][..],
            ),
        ] {
            body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            body.extend_from_slice(
                format!("Content-Disposition: form-data; {disposition}\r\n").as_bytes(),
            );
            if let Some(kind) = kind {
                body.extend_from_slice(format!("Content-Type: {kind}\r\n").as_bytes());
            }
            body.extend_from_slice(b"\r\n");
            body.extend_from_slice(content);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        (format!("multipart/form-data; boundary={boundary}"), body)
    }

    fn report(limits: MultipartLimits) -> impl crate::Handler {
        handler_fn(move |req| {
            let mut form = match req.multipart(limits) {
                Ok(form) => form,
                Err(e) => return e.into(),
            };
            let mut lines = Vec::new();
            loop {
                match form.next_part() {
                    Ok(Some(mut part)) => {
                        let head = format!(
                            "{} {} {}",
                            part.name().unwrap_or("-"),
                            part.file_name().unwrap_or("-"),
                            part.content_type().unwrap_or("-")
                        );
                        match part.read_all() {
                            Ok(bytes) => lines.push(format!("{head} {bytes:?}")),
                            Err(e) => return e.into(),
                        }
                    }
                    Ok(None) => return Response::text(lines.join("\n")),
                    Err(e) => return e.into(),
                }
            }
        })
    }

    #[test]
    fn a_browser_upload_reads_part_by_part() {
        let (kind, body) = browser_body();
        let r = TestRequest::post("/")
            .header("Content-Type", &kind)
            .body(body)
            .call(&report(MultipartLimits::default()));
        assert_eq!(r.status(), 200);
        let text = r.text().expect("a body");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0], format!("title - - {:?}", b"holiday"));
        assert_eq!(
            lines[1],
            format!("note - - {:?}", "caf\u{e9} \u{2615}".as_bytes())
        );
        assert_eq!(
            lines[2],
            format!(
                "photo a b.png image/png {:?}",
                [
                    0x89u8, b'P', b'N', b'G', 0, 1, 2, 3, b'\r', b'\n', b'-', b'-'
                ]
            )
        );
    }

    #[test]
    fn limits_and_malformed_bodies_are_refused() {
        let (kind, body) = browser_body();
        let call = |limits: MultipartLimits, kind: &str, body: &[u8]| {
            TestRequest::post("/")
                .header("Content-Type", kind)
                .body(body.to_vec())
                .call(&report(limits))
                .status()
        };
        let few = MultipartLimits {
            parts: 2,
            ..MultipartLimits::default()
        };
        assert_eq!(call(few, &kind, &body), 413, "too many parts");
        let small = MultipartLimits {
            part_bytes: 8,
            ..MultipartLimits::default()
        };
        assert_eq!(call(small, &kind, &body), 413, "a part too large");
        let tight = MultipartLimits {
            total_bytes: 100,
            ..MultipartLimits::default()
        };
        assert_eq!(call(tight, &kind, &body), 413, "the whole too large");
        let cut = &body[..body.len() - 20];
        assert_eq!(
            call(MultipartLimits::default(), &kind, cut),
            400,
            "cut short"
        );
        assert_eq!(call(MultipartLimits::default(), "text/plain", &body), 415);
        assert_eq!(
            call(MultipartLimits::default(), "multipart/form-data", &body),
            400
        );
        // RFC 7578 §4.2 and RFC 2046 §5.1.1, which a user's trial found taken: a part without
        // `Content-Disposition: form-data`, and a boundary of 0 or 71 characters.
        let any = MultipartLimits::default;
        for head in [
            "Content-Type: text/plain",
            "Content-Disposition: attachment; name=\"a\"",
        ] {
            let one = format!("--XX\r\n{head}\r\n\r\nv\r\n--XX--\r\n");
            let kind = "multipart/form-data; boundary=XX";
            assert_eq!(call(any(), kind, one.as_bytes()), 400, "{head}");
        }
        // Every form-data part is taken, whatever multer makes of its name (the review found
        // these refused by a first form of the check, which asked multer for the name), and a
        // file name in raw UTF-8, as browsers send it.
        let kind = "multipart/form-data; boundary=XX";
        for disposition in [
            "Form-Data; name=\"a\"",
            "form-data; Name=\"a\"",
            "form-data; filename=\"my name.txt\"; name=\"f\"",
            "form-data; name*=UTF-8''a; name=\"a\"",
            "form-data; name=\"f\"; filename=\"r\u{e9}sum\u{e9}.pdf\"",
        ] {
            let one = format!("--XX\r\nContent-Disposition: {disposition}\r\n\r\nv\r\n--XX--\r\n");
            assert_eq!(call(any(), kind, one.as_bytes()), 200, "{disposition}");
        }
        for boundary in [String::new(), "b".repeat(71)] {
            let kind = format!("multipart/form-data; boundary={boundary}");
            let one = format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--{boundary}--\r\n"
            );
            assert_eq!(
                call(any(), &kind, one.as_bytes()),
                400,
                "{} characters",
                boundary.len()
            );
        }
        let seventy = "b".repeat(70);
        let kind = format!("multipart/form-data; boundary={seventy}");
        let one = format!(
            "--{seventy}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--{seventy}--\r\n"
        );
        assert_eq!(call(any(), &kind, one.as_bytes()), 200, "70 characters");
    }

    /// A body of parts named by `dispositions` (each part's `Content-Disposition` parameters),
    /// each with `content` as its bytes.
    fn parts_body(boundary: &str, parts: &[(&str, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (disposition, content) in parts {
            body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            body.extend_from_slice(
                format!("Content-Disposition: form-data; {disposition}\r\n\r\n").as_bytes(),
            );
            body.extend_from_slice(content);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        body
    }

    #[test]
    fn a_part_head_is_bounded_and_a_skipped_part_does_not_count_to_it() {
        let kind = "multipart/form-data; boundary=b0undary";
        let call = |handler: &dyn crate::Handler, body: Vec<u8>| {
            let r = TestRequest::post("/")
                .header("Content-Type", kind)
                .body(body)
                .call(handler);
            (r.status(), r.text().unwrap_or_default())
        };
        // A head that never ends: refused within the bound, not read to the body's end.
        let mut endless =
            b"--b0undary\r\nContent-Disposition: form-data; name=\"a\"\r\nX: ".to_vec();
        endless.resize(4 << 20, b'x');
        let (status, text) = call(&report(MultipartLimits::default()), endless);
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("head"), "{text}");
        // A long head within the bound (a long file name) is read.
        let name = format!("name=\"f\"; filename=\"{}\"", "n".repeat(12 * 1024));
        let (status, text) = call(
            &report(MultipartLimits::default()),
            parts_body("b0undary", &[(&name, b"data")]),
        );
        assert_eq!(status, 200, "{text}");
        // A large part left unread is skipped before the next head is looked for: its bytes
        // are not a head's.
        let big = vec![b'z'; 1 << 20];
        let body = parts_body(
            "b0undary",
            &[("name=\"skip\"", &big), ("name=\"keep\"", b"kept")],
        );
        let only_keep = handler_fn(|req| {
            let mut form = match req.multipart(MultipartLimits::default()) {
                Ok(form) => form,
                Err(e) => return e.into(),
            };
            let mut kept = String::new();
            loop {
                match form.next_part() {
                    Ok(Some(mut part)) if part.name() == Some("keep") => match part.text() {
                        Ok(text) => kept.push_str(&text),
                        Err(e) => return e.into(),
                    },
                    Ok(Some(mut part)) => {
                        // Read a little of it, then leave it.
                        let mut first = [0u8; 10];
                        if part.read_exact(&mut first).is_err() {
                            return Response::new(500);
                        }
                    }
                    Ok(None) => return Response::text(kept),
                    Err(e) => return e.into(),
                }
            }
        });
        assert_eq!(call(&only_keep, body), (200, "kept".to_owned()));
    }
}
