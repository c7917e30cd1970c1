//! A streamed response body produced piece by piece, framed by its encoder: both engines write
//! what [`Streaming::produce`] appends, as their socket takes it (the thread-pool engine blocking
//! on each piece, the reactor when the socket is writable).

use std::io::{ErrorKind, Read};

use crate::http::conn::Encoder;
use crate::http::response::BodyKind;

/// Bytes of a streamed response body produced per step.
pub(crate) const STREAM_PIECE: usize = 16 * 1024;

/// A response body being produced piece by piece.
pub(crate) struct Streaming {
    encoder: Encoder,
    body: BodyKind,
    /// Body bytes produced so far (the access log's count).
    sent: u64,
}

impl Streaming {
    /// A body to stream through `encoder`. A file is read in pieces like any sized reader (the
    /// thread-pool engine sends files with `sendfile(2)` instead, without this).
    pub(crate) fn new(encoder: Encoder, body: BodyKind) -> Self {
        let body = match body {
            BodyKind::File(file, len) => BodyKind::Reader(Box::new(file.take(len)), Some(len)),
            other => other,
        };
        Streaming {
            encoder,
            body,
            sent: 0,
        }
    }

    /// Body bytes produced so far.
    pub(crate) fn sent(&self) -> u64 {
        self.sent
    }

    /// Appends the next piece to `out`; `Some(complete)` when the body ended (`complete` false
    /// when it failed or a sized body came up short, which leaves the connection unusable).
    pub(crate) fn produce(&mut self, out: &mut Vec<u8>) -> Option<bool> {
        match &mut self.body {
            BodyKind::Reader(reader, _) => {
                if matches!(self.encoder, Encoder::Length { remaining: 0 }) {
                    return Some(self.encoder.finish(out));
                }
                let mut piece = [0u8; STREAM_PIECE];
                loop {
                    return match reader.read(&mut piece) {
                        Ok(0) => Some(self.encoder.finish(out)),
                        Ok(n) => {
                            self.sent += self.encoder.encode(&piece[..n], out) as u64;
                            None
                        }
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(_) => Some(false),
                    };
                }
            }
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
            | BodyKind::Session(_)
            | BodyKind::File(..) => Some(self.encoder.finish(out)),
        }
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
            all(Streaming::new(Encoder::Chunked, chunks)),
            (b"2\r\nab\r\n1\r\nc\r\n0\r\n\r\n".to_vec(), true)
        );
        let sized = Body::sized_reader(&b"0123456789"[..], 4).kind;
        let enc = Encoder::Length { remaining: 4 };
        assert_eq!(all(Streaming::new(enc, sized)), (b"0123".to_vec(), true));
        let short = Body::sized_reader(&b"01"[..], 4).kind;
        let enc = Encoder::Length { remaining: 4 };
        assert_eq!(all(Streaming::new(enc, short)), (b"01".to_vec(), false));
    }
}
