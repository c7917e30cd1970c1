//! A streamed response body produced piece by piece, framed by its encoder: the connection
//! driver writes what [`Streaming::produce`] appends as the socket takes it. A file body goes
//! from the file to a socket that takes bytes unchanged without passing through it
//! ([`Streaming::file`], `sendfile(2)`), else in pieces like any reader.

use std::fs::File;
use std::io::{ErrorKind, Read};

use crate::http::framing::Encoder;
use crate::http::panics::{Panics, catch, panics_when_dropped};
use crate::http::response::BodyKind;

/// Bytes of a streamed response body produced per step.
pub(crate) const STREAM_PIECE: usize = 16 * 1024;

/// A response body being produced piece by piece.
pub(crate) struct Streaming {
    encoder: Encoder,
    body: BodyKind,
    /// Body bytes produced so far (the access log's count).
    sent: u64,
    /// Where a panic in the body's pieces or its `Drop` (handler code) is counted.
    panics: Panics,
}

impl Streaming {
    /// A body to stream through `encoder`; its panics are counted in `panics`.
    pub(crate) fn new(encoder: Encoder, body: BodyKind, panics: Panics) -> Self {
        let body = match (body, encoder) {
            // A file keeps its own path only with its length framing it.
            (BodyKind::File(file, len), Encoder::Length { .. }) => BodyKind::File(file, len),
            (BodyKind::File(file, len), _) => BodyKind::Reader(Box::new(file.take(len)), Some(len)),
            (other, _) => other,
        };
        Streaming {
            encoder,
            body,
            sent: 0,
            panics,
        }
    }

    /// Body bytes produced so far.
    pub(crate) fn sent(&self) -> u64 {
        self.sent
    }

    /// A file body's file and how many of its bytes are left to send, for a transport that
    /// sends them from the file itself.
    pub(crate) fn file(&self) -> Option<(&File, u64)> {
        match (&self.body, self.encoder) {
            (BodyKind::File(file, _), Encoder::Length { remaining }) => Some((file, remaining)),
            _ => None,
        }
    }

    /// Whether producing a piece runs handler code (a reader's, an iterator's): false for a
    /// file, whose pieces the core reads itself, wherever the engine would run a handler's.
    pub(crate) fn runs_handler_code(&self) -> bool {
        !matches!(self.body, BodyKind::File(..))
    }

    /// `n` bytes of the file went out straight from it.
    pub(crate) fn file_sent(&mut self, n: usize) {
        if let Encoder::Length { remaining } = &mut self.encoder {
            *remaining = remaining.saturating_sub(n as u64);
        }
        self.sent = self.sent.saturating_add(n as u64);
    }

    /// Appends the next piece to `out`; `Some(complete)` when the body ended (`complete` false
    /// when it failed or a sized body came up short, which leaves the connection unusable).
    pub(crate) fn produce(&mut self, out: &mut Vec<u8>) -> Option<bool> {
        match &mut self.body {
            BodyKind::Reader(reader, _) => piece(reader, &mut self.encoder, &mut self.sent, out),
            BodyKind::File(file, _) => piece(file, &mut self.encoder, &mut self.sent, out),
            BodyKind::Chunks(chunks) => match chunks.next() {
                Some(chunk) => {
                    self.sent += self.encoder.encode(&chunk, out) as u64;
                    None
                }
                None => Some(self.encoder.finish(out)),
            },
            BodyKind::Static(_)
            | BodyKind::Bytes(_)
            | BodyKind::Switch(_)
            | BodyKind::Session(_) => Some(self.encoder.finish(out)),
        }
    }
}

/// What producing one piece of a streamed body came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A piece was appended (or nothing yet): more to come.
    More,
    /// The body ended: `complete` false when it failed, panicked or a sized body came up
    /// short, which leaves the connection unusable.
    Ended { complete: bool },
}

/// A streamed body's piece produced away from its connection, on a worker: the body, to lend
/// again, or once it ended, what is left of it. An ended body is dropped where it was produced,
/// since its drop is handler code too (a reader's, an iterator's).
pub(crate) enum Produced {
    More(Streaming),
    Ended { sent: u64, complete: bool },
}

impl Produced {
    /// The body, when it goes on.
    pub(crate) fn into_body(self) -> Option<Streaming> {
        match self {
            Produced::More(st) => Some(st),
            Produced::Ended { .. } => None,
        }
    }
}

impl Streaming {
    /// [`produce_piece`](Self::produce_piece) on a worker: the body comes back if it goes on,
    /// and is dropped here once it ended.
    pub(crate) fn produce_away(mut self, out: &mut Vec<u8>) -> Produced {
        match self.produce_piece(out) {
            Piece::More => Produced::More(self),
            Piece::Ended { complete } => Produced::Ended {
                sent: self.sent,
                complete,
            },
        }
    }

    /// [`produce`](Self::produce) with a body that panics taken as one that failed (and the
    /// panic counted): the body is handler code, run on whichever thread may run it (an event
    /// loop with inline dispatch, a worker otherwise).
    pub(crate) fn produce_piece(&mut self, out: &mut Vec<u8>) -> Piece {
        let produced = catch(|| self.produce(out));
        match produced {
            Ok(None) => Piece::More,
            Ok(Some(complete)) => Piece::Ended { complete },
            Err(_) => {
                self.panics.count();
                log::error!("response body panicked; closing the connection");
                // One panic a body: its `Drop`, which may panic again on the state the first
                // panic left, runs now, caught and not counted.
                let body = std::mem::replace(&mut self.body, BodyKind::Static(b""));
                if panics_when_dropped(body) {
                    log::error!("response body panicked again when dropped");
                }
                Piece::Ended { complete: false }
            }
        }
    }
}

/// A body that ends here (produced to its end, or the connection closed under it) is dropped
/// where its connection was driven: a handler's reader or iterator, whose `Drop` is handler
/// code, is dropped with a panic in it caught, as its pieces are (logged and counted; the
/// thread that drives the connection goes on). A file is the core's: closed as it is.
impl Drop for Streaming {
    fn drop(&mut self) {
        if !self.runs_handler_code() {
            return;
        }
        let body = std::mem::replace(&mut self.body, BodyKind::Static(b""));
        self.panics.drop_caught(body);
    }
}

/// Reads the next piece of `reader` into `out` through `encoder` (no further than a length
/// framing it); `Some(complete)` once it ended.
fn piece(
    mut reader: impl Read,
    encoder: &mut Encoder,
    sent: &mut u64,
    out: &mut Vec<u8>,
) -> Option<bool> {
    let want = match *encoder {
        Encoder::Length { remaining: 0 } => return Some(encoder.finish(out)),
        Encoder::Length { remaining } => {
            usize::try_from(remaining).map_or(STREAM_PIECE, |r| r.min(STREAM_PIECE))
        }
        _ => STREAM_PIECE,
    };
    let mut buf = [0u8; STREAM_PIECE];
    loop {
        return match reader.read(&mut buf[..want]) {
            Ok(0) => Some(encoder.finish(out)),
            Ok(n) => {
                *sent += encoder.encode(&buf[..n], out) as u64;
                None
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => Some(false),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::response::Body;

    fn all(mut st: Streaming) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        loop {
            if let Some(complete) = st.produce(&mut out) {
                return (out, complete);
            }
        }
    }

    #[test]
    fn chunked_sized_and_short_bodies() {
        let chunks = Body::chunks(vec![b"ab".to_vec(), b"c".to_vec()].into_iter()).kind;
        assert_eq!(
            all(Streaming::new(Encoder::Chunked, chunks, Panics::default())),
            (b"2\r\nab\r\n1\r\nc\r\n0\r\n\r\n".to_vec(), true)
        );
        let sized = Body::sized_reader(&b"0123456789"[..], 4).kind;
        let enc = Encoder::Length { remaining: 4 };
        let st = Streaming::new(enc, sized, Panics::default());
        assert_eq!(all(st), (b"0123".to_vec(), true));
        let short = Body::sized_reader(&b"01"[..], 4).kind;
        let enc = Encoder::Length { remaining: 4 };
        let st = Streaming::new(enc, short, Panics::default());
        assert_eq!(all(st), (b"01".to_vec(), false));
    }
}
