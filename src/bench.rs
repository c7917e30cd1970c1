//! Entry points into the sans-I/O core for the criterion benches. Not a stable API.

use std::io::{self, Read};

use crate::handler::answer;
use crate::http::body::Decoder;
use crate::http::buf::ReadBuf;
use crate::http::conn::Conn;
use crate::http::parse::parse_head;
use crate::http::reader::{BodyReader, Source};
use crate::http::request::{BodyFraming, RequestHead};
use crate::stats::Counters;
use crate::{Handler, Limits, Request, Response};

/// Parses request heads with reused storage, as an engine does.
#[derive(Default)]
pub struct HeadParser {
    head: RequestHead,
    limits: Limits,
}

impl HeadParser {
    /// Parses one head; its length when complete.
    pub fn parse(&mut self, bytes: &[u8]) -> Option<usize> {
        parse_head(bytes, &self.limits, &mut self.head)
            .ok()
            .flatten()
    }
}

/// One parsed request with no body, handed to a handler as an engine hands it, without a
/// connection: what a handler call costs alone (the router bench).
pub struct OneRequest {
    head: RequestHead,
}

impl OneRequest {
    /// The request of `bytes`, one whole head; `None` when it does not parse.
    pub fn new(bytes: &[u8]) -> Option<OneRequest> {
        let mut head = RequestHead::default();
        parse_head(bytes, &Limits::default(), &mut head)
            .ok()
            .flatten()?;
        Some(OneRequest { head })
    }

    /// Runs `handler` on the request.
    pub fn call(&self, handler: &impl Handler) -> Response {
        let mut body: &[u8] = b"";
        handler.handle(&mut Request::new(&self.head, &mut body, None))
    }
}

/// Decodes a whole chunked body; payload bytes seen.
pub fn decode_chunked(bytes: &[u8]) -> usize {
    let mut dec = Decoder::new(BodyFraming::Chunked, u64::MAX);
    let (mut pos, mut payload) = (0, 0);
    while pos < bytes.len() && !dec.is_done() {
        match dec.decode(&bytes[pos..], usize::MAX) {
            Ok(d) if d.consumed > 0 => {
                pos += d.consumed;
                payload += d.data.len();
            }
            _ => break,
        }
    }
    payload
}

/// The rest of a benchmark's input, handed to the body reader as its socket.
struct Feed<'a>(&'a [u8]);

impl Source for Feed<'_> {
    fn fill(&mut self, buf: &mut ReadBuf) -> io::Result<usize> {
        let spare = buf.spare(0);
        let n = spare.len().min(self.0.len());
        spare[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        buf.filled_by(n);
        Ok(n)
    }
    fn send_interim(&mut self, _: &[u8]) -> io::Result<()> {
        Ok(())
    }
}

/// One connection's core state machine with its buffers, fed whole byte batches.
pub struct Pipeline {
    conn: Conn,
    buf: ReadBuf,
    head: RequestHead,
    limits: Limits,
    counters: Counters,
    /// Response bytes produced by the last [`Pipeline::serve`].
    pub out: Vec<u8>,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline {
            conn: Conn::default(),
            buf: ReadBuf::new(),
            head: RequestHead::default(),
            limits: Limits::default(),
            counters: Counters::default(),
            out: Vec::with_capacity(64 * 1024),
        }
    }
}

impl Pipeline {
    /// Parses every complete request in `input`, runs `handler` on each (bodies must be
    /// complete in `input`) and writes all responses to `out`; the number answered.
    /// `input` must end on a request boundary.
    pub fn serve(&mut self, input: &[u8], handler: &impl Handler) -> usize {
        self.out.clear();
        let mut rest = input;
        let mut answered = 0;
        loop {
            let spare = self.buf.spare(usize::MAX);
            let n = spare.len().min(rest.len());
            spare[..n].copy_from_slice(&rest[..n]);
            self.buf.filled_by(n);
            rest = &rest[n..];
            let decoder = match self
                .conn
                .recv_head(&mut self.buf, &mut self.head, &self.limits)
            {
                Ok(Some(d)) => {
                    self.counters.request();
                    d
                }
                Ok(None) if !rest.is_empty() => continue,
                _ => return answered,
            };
            let mut reader = BodyReader::new(decoder, &mut self.buf, Feed(rest), false);
            let answered_now = answer(handler, &self.head, &mut reader, None, &self.counters);
            let mut sink = [0u8; 4096];
            while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
            rest = reader.source.0;
            self.conn
                .write_response(&self.head, answered_now, true, false, &mut self.out);
            answered += 1;
            if self.conn.is_closing() || (self.buf.is_empty() && rest.is_empty()) {
                return answered;
            }
        }
    }
}
