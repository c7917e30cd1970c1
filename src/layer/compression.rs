//! Response compression as a layer (feature `compression`): `gzip`, `br` or `zstd`, as the
//! request's `Accept-Encoding` prefers, for responses whose content type compresses.

use std::io::{self, Read};

use super::encoder::{Coding, Encoder, Levels, quality};
use super::{Layer, Next};
use crate::http::budget::{Budget, Held};
use crate::http::file::entity_tags;
use crate::http::response::BodyKind;
use crate::{Body, Request, Response};

/// The compression layer: a response is compressed when the client accepts a coding
/// (`Accept-Encoding`, with q-values; `br`, then `zstd`, then `gzip` where it likes them
/// equally), its content type compresses (text, JSON, JavaScript, XML, SVG, WebAssembly: not
/// images, audio, video, archives, fonts or event streams), its status has a body, it is not
/// encoded already nor a part (`Content-Range`), and its length, when known, is at least the
/// minimum size. Fixed bodies are compressed whole (their `Content-Length` is the compressed
/// one, `HEAD` included); streamed and file bodies as they are read (a short read flushed),
/// and a stream of chunks chunk by chunk, each flushed so that it reaches the client when
/// produced. Such responses get `Vary: Accept-Encoding`, a strong `ETag` becomes weak, and
/// `Accept-Ranges` is dropped. A `304` carries the `ETag` and `Vary` its `200` would have (RFC
/// 9110 §15.4.5): the weak tag where the 200 would have been compressed. A range request
/// (`206`) is answered with plain bytes: a client resuming a download should send `If-Range`
/// with the weak tag, which then fails (strong comparison), and gets the whole compressed body
/// instead.
///
/// Levels are fast ones, as actix-web's (gzip 1, brotli 3, zstd 3): the cost per response is
/// in `bench/results/2026-11-24-compression.md`. Brotli's and zstd's windows are 512 KiB.
///
/// A body compressed as it streams keeps its encoder's state (1.5 MiB for brotli, 1.4 MiB for
/// zstd, 336 KiB for gzip) for as long as its client takes to read it: that state counts to the
/// server's memory budget, and while it would take what is held past 15/16 of the budget, the
/// response goes out as it is (with `Vary: Accept-Encoding`).
///
/// ```
/// use twinhttp::layer::{Compression, HandlerExt};
/// use twinhttp::{Response, Router};
///
/// let app = Router::new()
///     .get("/data", |_| Response::text("[1, 2, 3]").with_content_type("application/json"))
///     .layer(Compression::new());
/// # let _ = app;
/// ```
#[derive(Clone, Debug)]
pub struct Compression {
    min_size: u64,
    /// The codings offered, in the server's order of preference.
    codings: Vec<Coding>,
    levels: Levels,
}

impl Default for Compression {
    fn default() -> Self {
        Compression::new()
    }
}

impl Compression {
    /// `br`, `zstd` and `gzip`, for responses of 1 KiB or more (or of unknown length).
    pub fn new() -> Compression {
        Compression {
            min_size: 1024,
            codings: Coding::ALL.to_vec(),
            levels: Levels::default(),
        }
    }

    /// Responses shorter than this are sent as they are. Default: 1024 bytes.
    pub fn min_size(mut self, bytes: u64) -> Compression {
        self.min_size = bytes;
        self
    }

    /// Offers only `gzip` (the coding every client has).
    pub fn gzip_only(mut self) -> Compression {
        self.codings = vec![Coding::Gzip];
        self
    }

    /// The coding for `req`, as its `Accept-Encoding` prefers.
    fn choose(&self, req: &Request<'_>) -> Option<Coding> {
        let mut best: Option<(Coding, f32)> = None;
        for &coding in &self.codings {
            let q = quality(req.header_all("accept-encoding"), coding);
            if q > 0.0 && best.is_none_or(|(_, b)| q > b) {
                best = Some((coding, q));
            }
        }
        best.map(|(coding, _)| coding)
    }

    /// True when `response` is one to compress (or to vary by `Accept-Encoding`).
    fn applies(&self, response: &Response) -> bool {
        let status = response.status();
        let has_body = !(status < 200 || status == 204 || status == 304 || status == 206);
        let kind_compresses = matches!(
            response.body().kind,
            BodyKind::Static(_)
                | BodyKind::Bytes(_)
                | BodyKind::Reader(..)
                | BodyKind::Chunks(_)
                | BodyKind::File(..)
        );
        has_body
            && kind_compresses
            && response.header("content-encoding").is_none()
            && response.header("content-range").is_none()
            && response.content_type().is_some_and(compresses)
    }

    fn compress(
        &self,
        response: Response,
        coding: Option<Coding>,
        budget: Option<&Budget>,
    ) -> Response {
        if !self.applies(&response) {
            return response;
        }
        let response = vary(response);
        let Some(coding) = coding else {
            return response;
        };
        if response.body().len().is_some_and(|len| len < self.min_size) {
            return response;
        }
        match encoded(response, coding, self.levels, budget) {
            Ok(response) => response,
            Err(response) => response,
        }
    }
}

impl Layer for Compression {
    fn call(&self, req: &mut Request<'_>, next: Next<'_>) -> Response {
        let coding = self.choose(req);
        let response = next.run(req);
        match response.status() {
            304 => self.not_modified(req, response, coding),
            _ => self.compress(response, coding, req.budget()),
        }
    }
}

/// What this layer does to a response's validators and `Vary`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Validators {
    /// Left as they are: not a representation this layer compresses.
    Kept,
    /// `Vary: Accept-Encoding` added: it would be compressed for another request.
    Varied,
    /// `Vary: Accept-Encoding` added and a strong `ETag` made weak: compressed for this one.
    Weakened,
}

impl Compression {
    /// A `304` with the `ETag` and `Vary` its `200` would have carried (RFC 9110 §15.4.5):
    /// the weak tag where the 200 would have been compressed. Otherwise a client holding the
    /// compressed body would be told its tag is the strong one, and an `If-Range` with it would
    /// then pass and splice identity bytes into the compressed ones. What the 200 would have
    /// been is known from the 304's maker ([`Response::file`], `ServeDir`), else from its
    /// content type, else from the request: a client that names the weak form of the 304's
    /// strong tag in `If-None-Match` holds a body this layer compressed.
    fn not_modified(
        &self,
        req: &Request<'_>,
        response: Response,
        coding: Option<Coding>,
    ) -> Response {
        if response.header("content-encoding").is_some() {
            return response;
        }
        let compressible = |content_type: &str, len: Option<u64>| match compresses(content_type) {
            false => Validators::Kept,
            true if coding.is_some() && len.is_none_or(|len| len >= self.min_size) => {
                Validators::Weakened
            }
            true => Validators::Varied,
        };
        let validators = match (response.representation(), response.content_type()) {
            // Its 200 was already encoded (a precompressed copy), and left as it was.
            (Some(r), _) if r.content_encoding.is_some() => Validators::Kept,
            (Some(r), _) => compressible(&r.content_type, Some(r.len)),
            (None, Some(content_type)) => compressible(content_type, None),
            (None, None) if coding.is_some() && holds_weak_form(req, &response) => {
                Validators::Weakened
            }
            (None, None) => Validators::Kept,
        };
        match validators {
            Validators::Kept => response,
            Validators::Varied => vary(response),
            Validators::Weakened => weak_etag(vary(response)),
        }
    }
}

/// Whether `req`'s `If-None-Match` names `W/` and the strong `ETag` of `response`.
fn holds_weak_form(req: &Request<'_>, response: &Response) -> bool {
    let Some(tag) = response.header("etag").filter(|t| t.starts_with('"')) else {
        return false;
    };
    req.header_all("if-none-match")
        .any(|list| entity_tags(list).any(|t| t.strip_prefix("W/") == Some(tag)))
}

/// `response` with its body encoded with `coding`; the response as it was when a fixed body
/// cannot be compressed (logged), or when the server's memory budget has no room for a
/// stream's encoder (it holds its state for the stream's life: [`Budget::optional`]). A
/// stream's encoder is made at its first read.
fn encoded(
    mut response: Response,
    coding: Coding,
    levels: Levels,
    budget: Option<&Budget>,
) -> Result<Response, Response> {
    let fixed = match response.body().kind {
        BodyKind::Static(bytes) => Some(whole(bytes, coding, levels)),
        BodyKind::Bytes(ref bytes) => Some(whole(bytes, coding, levels)),
        _ => None,
    };
    let state = match (&fixed, budget) {
        (None, Some(budget)) => match budget.optional(coding.state_bytes()) {
            Some(held) => Some(held),
            None => {
                log::debug!("compression: the memory budget is spent; a stream sent as it is");
                return Err(response);
            }
        },
        _ => None,
    };
    let body = match fixed {
        Some(Ok(bytes)) => Body::from(bytes),
        Some(Err(e)) => {
            log::warn!("compression: {e}; sent as it is");
            return Err(response);
        }
        None => match response.take_body().kind {
            BodyKind::Reader(reader, None) => {
                Body::reader(Compressing::new(reader, coding, levels, state))
            }
            // Exactly its length, as the engine would send it: no byte past it, and one that
            // ends short fails rather than ending a valid, shorter stream.
            BodyKind::Reader(reader, Some(len)) => {
                let exact = Box::new(Exact(reader.take(len)));
                Body::reader(Compressing::new(exact, coding, levels, state))
            }
            BodyKind::File(file, len) => {
                let exact = Box::new(Exact(file.take(len)));
                Body::reader(Compressing::new(exact, coding, levels, state))
            }
            BodyKind::Chunks(chunks) => {
                Body::chunks(CompressingChunks::new(chunks, coding, levels, state))
            }
            kind => Body { kind },
        },
    };
    let response = response
        .with_body(body)
        .with_header("content-encoding", coding.token())
        .without_header("accept-ranges");
    Ok(weak_etag(response))
}

/// A reader of exactly its limit's bytes: one that ends sooner is an error
/// (`UnexpectedEof`).
struct Exact<R>(io::Take<R>);

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.0.read(buf)?;
        if n == 0 && !buf.is_empty() && self.0.limit() > 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(n)
    }
}

/// Fixed bytes compressed whole.
fn whole(bytes: &[u8], coding: Coding, levels: Levels) -> io::Result<Vec<u8>> {
    Encoder::all(coding, levels, bytes)
}

/// Adds `Accept-Encoding` to `Vary` unless it is there.
fn vary(response: Response) -> Response {
    let varies = response
        .headers()
        .filter(|(n, _)| n.eq_ignore_ascii_case("vary"))
        .flat_map(|(_, v)| v.split(','))
        .any(|v| {
            let v = v.trim();
            v == "*" || v.eq_ignore_ascii_case("accept-encoding")
        });
    match varies {
        true => response,
        false => response.with_added_header("vary", "Accept-Encoding"),
    }
}

/// A strong `ETag` made weak: the compressed bytes are not the ones it named.
fn weak_etag(response: Response) -> Response {
    match response.header("etag") {
        Some(tag) if tag.starts_with('"') => {
            let weak = format!("W/{tag}");
            response.with_header("etag", weak)
        }
        _ => response,
    }
}

/// True for a content type worth compressing.
fn compresses(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    let Some((kind, sub)) = essence.split_once('/') else {
        return false;
    };
    let is = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    let ends = |s: &str, suffix: &str| {
        s.len() >= suffix.len()
            && s.get(s.len() - suffix.len()..)
                .is_some_and(|t| is(t, suffix))
    };
    if is(kind, "text") {
        return !is(sub, "event-stream");
    }
    if is(kind, "application") {
        return [
            "json",
            "javascript",
            "ecmascript",
            "xml",
            "wasm",
            "x-www-form-urlencoded",
        ]
        .iter()
        .any(|t| is(sub, t))
            || ends(sub, "+json")
            || ends(sub, "+xml");
    }
    is(kind, "image") && is(sub, "svg+xml")
}

/// A reader's bytes, compressed as they are read.
struct Compressing {
    source: Box<dyn Read + Send>,
    stage: Stage,
    /// Compressed bytes not yet read out, from `at`.
    out: Vec<u8>,
    at: usize,
    /// The encoder's state, charged to the server's budget while the stream lasts.
    _state: Option<Held>,
}

/// Where a [`Compressing`] reader stands.
enum Stage {
    /// Nothing read yet: the encoder is made at the first read.
    Start(Coding, Levels),
    /// Compressing what the source gives.
    Reading(Box<Encoder>),
    /// The source ended and the encoder's last bytes are out (or being read out).
    Done,
}

impl Compressing {
    fn new(
        source: Box<dyn Read + Send>,
        coding: Coding,
        levels: Levels,
        state: Option<Held>,
    ) -> Compressing {
        Compressing {
            source,
            stage: Stage::Start(coding, levels),
            out: Vec::new(),
            at: 0,
            _state: state,
        }
    }
}

impl Read for Compressing {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some(left) = self.out.get(self.at..).filter(|l| !l.is_empty()) {
                let n = left.len().min(buf.len());
                buf[..n].copy_from_slice(&left[..n]);
                self.at += n;
                return Ok(n);
            }
            // Drained: nothing of it is sent again, whatever the next step comes to.
            self.out.clear();
            self.at = 0;
            match &mut self.stage {
                Stage::Start(coding, levels) => {
                    self.stage = Stage::Reading(Box::new(Encoder::new(*coding, *levels)?));
                }
                Stage::Reading(encoder) => {
                    let mut input = [0u8; 16 * 1024];
                    let n = self.source.read(&mut input)?;
                    if n > 0 {
                        // A short read (a pipe, a live source) goes out now, not when the
                        // encoder's buffer fills.
                        self.out = encoder.push(&input[..n], n < input.len())?;
                    } else if let Stage::Reading(encoder) =
                        std::mem::replace(&mut self.stage, Stage::Done)
                    {
                        self.out = encoder.finish()?;
                    }
                }
                Stage::Done => return Ok(0),
            }
        }
    }
}

/// A stream of chunks, each compressed and flushed as it comes.
struct CompressingChunks {
    chunks: Box<dyn Iterator<Item = Vec<u8>> + Send>,
    encoder: Option<Encoder>,
    /// The encoder's state, charged to the server's budget while the stream lasts.
    _state: Option<Held>,
}

impl CompressingChunks {
    fn new(
        chunks: Box<dyn Iterator<Item = Vec<u8>> + Send>,
        coding: Coding,
        levels: Levels,
        state: Option<Held>,
    ) -> CompressingChunks {
        let encoder = Encoder::new(coding, levels)
            .map_err(|e| log::warn!("compression: {e}; the stream ends"))
            .ok();
        CompressingChunks {
            chunks,
            encoder,
            _state: state,
        }
    }
}

impl Iterator for CompressingChunks {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            let encoder = self.encoder.as_mut()?;
            let pushed = match self.chunks.next() {
                Some(chunk) if chunk.is_empty() => continue,
                Some(chunk) => encoder.push(&chunk, true),
                None => self.encoder.take().map_or(Ok(Vec::new()), Encoder::finish),
            };
            match pushed {
                Ok(out) if out.is_empty() && self.encoder.is_some() => continue,
                Ok(out) if out.is_empty() => return None,
                Ok(out) => return Some(out),
                Err(e) => {
                    log::warn!("compression: {e}; the stream ends");
                    self.encoder = None;
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler_fn;
    use crate::layer::HandlerExt;
    use crate::testing::TestRequest;

    fn json() -> String {
        let items: Vec<String> = (0..200)
            .map(|i| format!("{{\"id\":{i},\"name\":\"item {i}\"}}"))
            .collect();
        format!("[{}]", items.join(","))
    }

    fn decode(coding: &str, bytes: &[u8]) -> String {
        let mut out = Vec::new();
        match coding {
            "gzip" => flate2::read::GzDecoder::new(bytes).read_to_end(&mut out),
            "br" => brotli::Decompressor::new(bytes, 4096).read_to_end(&mut out),
            "zstd" => {
                zstd::stream::read::Decoder::new(bytes).and_then(|mut d| d.read_to_end(&mut out))
            }
            other => panic!("{other}"),
        }
        .expect("decodes");
        String::from_utf8(out).expect("text")
    }

    fn app() -> impl crate::Handler {
        handler_fn(|req| {
            let as_json = || Response::text(json()).with_content_type("application/json");
            match req.path() {
                "/json" => as_json()
                    .with_header("etag", "\"v1\"")
                    .with_header("accept-ranges", "bytes"),
                // A handler's own 304, without (or with) its content type.
                "/cond" | "/cond-typed" => match req.header("if-none-match") {
                    Some(_) if req.path() == "/cond" => {
                        Response::new(304).with_header("etag", "\"v1\"")
                    }
                    Some(_) => Response::new(304)
                        .with_header("etag", "\"v1\"")
                        .with_content_type("application/json"),
                    None => as_json().with_header("etag", "\"v1\""),
                },
                "/small" => Response::text("tiny").with_content_type("application/json"),
                "/png" => Response::new(200)
                    .with_body(vec![0u8; 4096])
                    .with_content_type("image/png"),
                "/encoded" => as_json().with_header("content-encoding", "gzip"),
                "/partial" => as_json()
                    .with_status(206)
                    .with_header("content-range", "bytes 0-9/20"),
                "/reader" => Response::new(200)
                    .with_content_type("text/plain")
                    .with_body(Body::reader(io::Cursor::new(json().into_bytes()))),
                "/chunks" => Response::new(200)
                    .with_content_type("text/plain")
                    .with_body(Body::chunks(
                        vec![b"first ".repeat(100), b"second ".repeat(100)].into_iter(),
                    )),
                _ => Response::new(404),
            }
        })
        .layer(Compression::new())
    }

    fn get(path: &str, accept: &str) -> crate::testing::TestResponse {
        TestRequest::get(path)
            .header("Accept-Encoding", accept)
            .call(&app())
    }

    #[test]
    fn the_client_s_preference_then_the_server_s_picks_the_coding() {
        for (accept, want) in [
            ("gzip, br;q=0.9", Some("gzip")),
            ("br, gzip", Some("br")),
            ("gzip, zstd", Some("zstd")),
            ("zstd;q=0.5, gzip;q=0.8", Some("gzip")),
            ("*;q=0.5", Some("br")),
            ("br;q=0, *", Some("zstd")),
            ("x-gzip", Some("gzip")),
            // The name counts over its alias, in whichever order (a user's trial found the
            // last of the two deciding).
            ("gzip, x-gzip;q=0", Some("gzip")),
            ("x-gzip;q=0, gzip", Some("gzip")),
            ("gzip;q=0, x-gzip", None),
            ("identity", None),
            ("", None),
        ] {
            let r = get("/json", accept);
            assert_eq!(r.header("content-encoding"), want, "{accept:?}");
            assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{accept:?}");
        }
    }

    /// A handler's own 304 gets the tag its 200 would have (RFC 9110 §15.4.5): weak when its
    /// content type compresses, or, without one, when the client names the weak tag (it holds
    /// a body this layer compressed); strong to a client that holds the identity body.
    #[test]
    fn a_handler_s_304_carries_the_tag_its_200_would() {
        let cond = |path: &str, accept: &str, inm: &str| {
            TestRequest::get(path)
                .header("Accept-Encoding", accept)
                .header("If-None-Match", inm)
                .call(&app())
        };
        assert_eq!(get("/cond", "gzip").header("etag"), Some("W/\"v1\""));
        for (path, accept, inm, etag, vary) in [
            (
                "/cond",
                "gzip",
                "W/\"v1\"",
                "W/\"v1\"",
                Some("Accept-Encoding"),
            ),
            (
                "/cond",
                "gzip",
                "\"x\", W/\"v1\"",
                "W/\"v1\"",
                Some("Accept-Encoding"),
            ),
            ("/cond", "gzip", "\"v1\"", "\"v1\"", None),
            ("/cond", "identity", "W/\"v1\"", "\"v1\"", None),
            (
                "/cond-typed",
                "gzip",
                "\"v1\"",
                "W/\"v1\"",
                Some("Accept-Encoding"),
            ),
            (
                "/cond-typed",
                "identity",
                "\"v1\"",
                "\"v1\"",
                Some("Accept-Encoding"),
            ),
        ] {
            let r = cond(path, accept, inm);
            assert_eq!(r.status(), 304);
            assert_eq!(r.header("etag"), Some(etag), "{path} {accept} {inm}");
            assert_eq!(r.header("vary"), vary, "{path} {accept} {inm}");
        }
    }

    #[test]
    fn a_fixed_body_is_compressed_whole_and_its_validators_follow() {
        for coding in ["gzip", "br", "zstd"] {
            let r = get("/json", coding);
            assert_eq!(r.header("etag"), Some("W/\"v1\""));
            assert_eq!(r.header("accept-ranges"), None);
            let length = r.response().body().len();
            let bytes = r.bytes().expect("a body");
            assert_eq!(length, Some(bytes.len() as u64), "sent with its length");
            assert!(
                bytes.len() < json().len() / 3,
                "{coding}: {} bytes",
                bytes.len()
            );
            assert_eq!(decode(coding, &bytes), json());
        }
        // HEAD: the same fields as GET.
        let head = TestRequest::new("HEAD", "/json")
            .header("Accept-Encoding", "br")
            .call(&app());
        assert_eq!(head.header("content-encoding"), Some("br"));
        assert_eq!(
            head.response().body().len(),
            get("/json", "br").response().body().len()
        );
    }

    #[test]
    fn streams_are_compressed_as_they_are_read_and_chunks_one_by_one() {
        let r = get("/reader", "gzip");
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        assert_eq!(r.response().body().len(), None, "streamed");
        assert_eq!(decode("gzip", &r.bytes().expect("a body")), json());
        let r = get("/chunks", "br");
        assert_eq!(r.header("content-encoding"), Some("br"));
        let BodyKind::Chunks(chunks) = r.into_response().take_body().kind else {
            panic!("still chunks");
        };
        let pieces: Vec<Vec<u8>> = chunks.collect();
        assert!(pieces.len() >= 2, "a piece per chunk: {}", pieces.len());
        let first = decode_prefix("br", &pieces[0]);
        assert!(
            first.starts_with("first first"),
            "the first chunk decodes alone: {first:?}"
        );
        let all: Vec<u8> = pieces.concat();
        let want = format!("{}{}", "first ".repeat(100), "second ".repeat(100));
        assert_eq!(decode("br", &all), want);
    }

    /// What a flushed prefix of a stream decodes to.
    fn decode_prefix(coding: &str, bytes: &[u8]) -> String {
        assert_eq!(coding, "br");
        let mut out = Vec::new();
        let mut d = brotli::Decompressor::new(bytes, 4096);
        let mut buf = [0u8; 4096];
        while let Ok(n) = d.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// A source that gives its pieces in turn: bytes, or an error.
    struct Pieces(std::collections::VecDeque<io::Result<Vec<u8>>>);

    impl Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.0.pop_front() {
                None => Ok(0),
                Some(Err(e)) => Err(e),
                Some(Ok(bytes)) => {
                    buf[..bytes.len()].copy_from_slice(&bytes);
                    Ok(bytes.len())
                }
            }
        }
    }

    #[test]
    fn a_reader_retried_or_read_past_its_end_sends_nothing_twice() {
        let (first, second) = (b"first half ".repeat(50), b"second half ".repeat(50));
        let pieces = Pieces(
            [
                Ok(first.clone()),
                Err(io::ErrorKind::Interrupted.into()),
                Ok(second.clone()),
            ]
            .into(),
        );
        let mut reader = Compressing::new(Box::new(pieces), Coding::Gzip, Levels::default(), None);
        let (mut out, mut buf, mut interrupted) = (Vec::new(), [0u8; 64], 0);
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                // Retried, as the engine does.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => interrupted += 1,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(interrupted, 1);
        assert_eq!(decode("gzip", &out).into_bytes(), [first, second].concat());
        assert_eq!(
            reader.read(&mut buf).expect("the end"),
            0,
            "the end stays the end"
        );
    }

    #[test]
    fn a_sized_reader_sends_its_length_and_no_more_and_a_short_one_fails() {
        let body = json();
        let exact = Response::new(200)
            .with_content_type("text/plain")
            .with_body(Body::sized_reader(
                io::Cursor::new(format!("{body}EXTRA")),
                body.len() as u64,
            ));
        let mut r = Compression::new().compress(exact, Some(Coding::Gzip), None);
        let BodyKind::Reader(mut reader, None) = r.take_body().kind else {
            panic!("a stream");
        };
        let mut sent = Vec::new();
        reader.read_to_end(&mut sent).expect("read");
        assert_eq!(decode("gzip", &sent), body, "no byte past the length");
        let short = Response::new(200)
            .with_content_type("text/plain")
            .with_body(Body::sized_reader(
                io::Cursor::new(body.clone()),
                body.len() as u64 + 10,
            ));
        let mut r = Compression::new().compress(short, Some(Coding::Gzip), None);
        let BodyKind::Reader(mut reader, None) = r.take_body().kind else {
            panic!("a stream");
        };
        let read = reader.read_to_end(&mut Vec::new());
        assert!(read.is_err_and(|e| e.kind() == io::ErrorKind::UnexpectedEof));
    }

    #[test]
    fn q_is_read_in_any_case_and_only_as_a_qvalue() {
        for (accept, want) in [
            ("gzip;Q=0", None),
            ("gzip; q=0.000", None),
            ("gzip;q=1.0", Some("gzip")),
            ("gzip;q=inf", None),
            ("gzip;q=1e3", None),
            ("gzip;q=0.5, br;q=0.4", Some("gzip")),
        ] {
            assert_eq!(
                get("/json", accept).header("content-encoding"),
                want,
                "{accept:?}"
            );
        }
    }

    #[test]
    fn what_does_not_compress_is_left_alone() {
        let small = get("/small", "gzip");
        assert_eq!(
            (small.header("content-encoding"), small.header("vary")),
            (None, Some("Accept-Encoding"))
        );
        assert_eq!(small.text().expect("a body"), "tiny");
        for path in ["/png", "/encoded", "/partial"] {
            let r = get(path, "gzip, br");
            assert_eq!(r.header("vary"), None, "{path}");
            assert_ne!(r.header("content-encoding"), Some("br"), "{path}");
        }
        assert!(!compresses("text/event-stream"));
        assert!(compresses("application/problem+json; charset=utf-8"));
        assert!(compresses("image/svg+xml"));
        assert!(!compresses("font/woff2"));
    }
}
