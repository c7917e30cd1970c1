//! A worker's socket I/O within an exchange: the request body as the handler reads it (the core's
//! body reader over the socket, at the minimum body rate) and a streamed response pumped out.

use std::time::Instant;

use crate::http::buf::ReadBuf;
use crate::http::conn::Encoder;
use crate::http::reader::Source;
use crate::http::response::BodyKind;
use crate::http::stream::Streaming;
use crate::net::io::{self, flush};
use crate::net::transport::Stream;
use crate::rate::Meter;
use crate::stats::{Counters, Refusal};

/// Writes a streamed body: every piece the core produces goes out at once; a file goes by
/// `sendfile(2)`. `Ok(false)`: the body fell short or failed; `Err`: a write did (`TimedOut`:
/// the client took it slower than the minimum rate). `bytes`: the body bytes sent.
pub(super) fn pump(
    stream: &mut Stream,
    out: &mut Vec<u8>,
    encoder: Encoder,
    kind: BodyKind,
    sent: &mut Meter,
    bytes: &mut u64,
) -> std::io::Result<bool> {
    if let BodyKind::File(file, len) = kind {
        // The head goes first; the bytes bypass the encoder (a file body has a length).
        flush(&mut *stream, out, sent)?;
        return io::send_file(&mut *stream, &file, len, sent, bytes);
    }
    let mut body = Streaming::new(encoder, kind);
    loop {
        let end = body.produce(out);
        *bytes = body.sent();
        flush(&mut *stream, out, sent)?;
        if let Some(complete) = end {
            return Ok(complete);
        }
    }
}

/// Counts a write that failed because the client took it slower than the minimum rate.
pub(super) fn too_slow(e: &std::io::Error, counters: &Counters) {
    if e.kind() == std::io::ErrorKind::TimedOut {
        counters.refused(Refusal::TooSlow);
    }
}

/// The body reader's view of the socket.
pub(super) struct SocketSource<'a> {
    pub(super) stream: &'a mut Stream,
    pub(super) out: &'a mut Vec<u8>,
    /// The minimum rate of the output flushed before waiting on the peer.
    pub(super) sent: &'a mut Meter,
    /// The minimum rate of the body.
    pub(super) body: Meter,
    /// Wait for the client (the handler reads); false: take only what has come (a drain).
    pub(super) wait: bool,
}

impl Source for SocketSource<'_> {
    fn fill(&mut self, buf: &mut ReadBuf) -> std::io::Result<usize> {
        // Responses to earlier pipelined requests go out before we wait on the peer.
        flush(&mut *self.stream, self.out, self.sent)?;
        let n = if self.wait {
            let deadline = self.body.deadline(Instant::now());
            io::read(&mut *self.stream, buf.spare(0), deadline, None)?
        } else {
            io::read_now(&mut *self.stream, buf.spare(0))?.ok_or(std::io::ErrorKind::WouldBlock)?
        };
        self.body.moved(Instant::now(), n);
        buf.filled_by(n);
        Ok(n)
    }

    fn send_interim(&mut self, interim: &[u8]) -> std::io::Result<()> {
        self.out.extend_from_slice(interim);
        flush(&mut *self.stream, self.out, self.sent)
    }
}
