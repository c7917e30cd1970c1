//! How a response's body is framed on the wire: by its length, chunked, until the close, or
//! not at all; [`Encoder`] frames each piece as it goes out and ends the body.

use crate::http::body;

/// How response payload is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoder {
    /// No payload is sent (HEAD, 1xx, 204, 304).
    Skip,
    /// Exactly `remaining` more bytes.
    Length { remaining: u64 },
    /// Chunked transfer coding.
    Chunked,
    /// Payload until the connection closes (HTTP/1.0 peer, unknown length).
    CloseDelimited,
}

impl Encoder {
    /// Appends `data` framed, truncating a Content-Length body at its declared size. Returns
    /// how many of its bytes are sent. (Inlined: a response's body is framed here on the
    /// hot path; callgrind counted 27 instructions a request when it was not.)
    #[inline]
    pub(crate) fn encode(&mut self, data: &[u8], out: &mut Vec<u8>) -> usize {
        match self {
            Encoder::Skip => 0,
            Encoder::Length { remaining } => {
                let n = usize::try_from(*remaining).map_or(data.len(), |r| r.min(data.len()));
                out.extend_from_slice(&data[..n]);
                *remaining -= n as u64;
                n
            }
            Encoder::Chunked => {
                body::encode_chunk(out, data);
                data.len()
            }
            Encoder::CloseDelimited => {
                out.extend_from_slice(data);
                data.len()
            }
        }
    }

    /// Appends the end of the body. False when a Content-Length body came up short, which leaves
    /// the connection unusable.
    pub(crate) fn finish(&self, out: &mut Vec<u8>) -> bool {
        match self {
            Encoder::Chunked => {
                out.extend_from_slice(body::LAST_CHUNK);
                true
            }
            Encoder::Length { remaining } => *remaining == 0,
            Encoder::Skip | Encoder::CloseDelimited => true,
        }
    }
}
