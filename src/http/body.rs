//! Request-body decoding (Content-Length and chunked) both engines use, and chunked encoding for
//! responses. (The streaming reader a server-engine handler reads through: `http::reader`.)

use std::io::Write;
use std::ops::Range;

use crate::http::parse::{ParseError, is_tchar};
use crate::http::request_head::BodyFraming;

/// Longest chunk line (size plus extensions) accepted.
const MAX_CHUNK_LINE: u32 = 4096;

/// Bytes of trailer fields a chunked body may end with, all lines together.
const MAX_TRAILER_BYTES: u32 = MAX_CHUNK_LINE * 4;

/// Most bytes of chunk extensions accepted in one body, all chunks together (hyper's bound):
/// extensions carry nothing this server uses, and without a total a body of one-byte chunks
/// could send thousands of framing bytes per byte of payload.
const MAX_CHUNK_EXTENSIONS: u32 = 16 * 1024;

/// Decodes a request body from raw bytes. Sans-I/O: it is fed slices and says how many bytes it
/// used and where the payload is among them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decoder {
    /// `remaining` payload bytes of a Content-Length body.
    Length { remaining: u64 },
    /// A chunked body in `state`, with `total` payload bytes and `extensions` bytes of chunk
    /// extensions so far.
    Chunked {
        state: Chunk,
        total: u64,
        limit: u64,
        extensions: u32,
    },
    /// The body is complete.
    Done,
}

/// Where a chunked decoder is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// Reading hex digits; `len` of them so far (leading zeros too: any number of digits is
    /// a size, RFC 9112 §7.1, within the line's bound).
    Size { size: u64, len: u32 },
    /// After the size: whitespace or extensions until CR; `len` bytes of line so far.
    Extension { size: u64, len: u32 },
    /// Saw the CR ending a size line.
    SizeLf { size: u64 },
    /// Payload bytes left in the current chunk.
    Data { remaining: u64 },
    /// Expect the CR after chunk data.
    DataCr,
    /// Expect the LF after chunk data.
    DataLf,
    /// At the start of a trailer line (or the final empty line); `len` trailer bytes so far.
    TrailerStart { len: u32 },
    /// In a trailer field's name (a token).
    TrailerName { len: u32 },
    /// In a trailer field's value, after the colon.
    TrailerValue { len: u32 },
    /// Saw the CR ending a trailer line.
    TrailerLf { len: u32 },
    /// Saw the CR of the final empty line.
    EndLf,
}

/// What one [`Decoder::decode`] call found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Decoded {
    /// Bytes of input used, framing and payload.
    pub(crate) consumed: usize,
    /// Where the payload is in the input (empty when this call saw framing only).
    pub(crate) data: Range<usize>,
}

impl Decoder {
    pub(crate) fn new(framing: BodyFraming, limit: u64) -> Decoder {
        match framing {
            BodyFraming::Empty => Decoder::Done,
            BodyFraming::Length(n) => Decoder::Length { remaining: n },
            BodyFraming::Chunked => Decoder::Chunked {
                state: Chunk::Size { size: 0, len: 0 },
                total: 0,
                limit,
                extensions: 0,
            },
        }
    }

    /// Payload bytes still to come, when the framing says (`Content-Length`).
    pub(crate) fn remaining(&self) -> Option<u64> {
        match self {
            Decoder::Length { remaining } => Some(*remaining),
            Decoder::Chunked { .. } => None,
            Decoder::Done => Some(0),
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        *self == Decoder::Done
    }

    /// Consumes framing bytes from `input` up to the next payload, and at most `max` payload bytes.
    pub(crate) fn decode(&mut self, input: &[u8], max: usize) -> Result<Decoded, ParseError> {
        match self {
            Decoder::Done => Ok(Decoded {
                consumed: 0,
                data: 0..0,
            }),
            Decoder::Length { remaining } => {
                let n = clamp(*remaining, input.len().min(max));
                *remaining -= n as u64;
                if *remaining == 0 {
                    *self = Decoder::Done;
                }
                Ok(Decoded {
                    consumed: n,
                    data: 0..n,
                })
            }
            Decoder::Chunked {
                state,
                total,
                limit,
                extensions,
            } => {
                let mut pos = 0;
                while pos < input.len() {
                    if let Chunk::Data { remaining } = state {
                        let n = clamp(*remaining, (input.len() - pos).min(max));
                        *remaining -= n as u64;
                        if *remaining == 0 {
                            *state = Chunk::DataCr;
                        }
                        return Ok(Decoded {
                            consumed: pos + n,
                            data: pos..pos + n,
                        });
                    }
                    let next = step(*state, input[pos], total, *limit)?;
                    pos += 1;
                    if let Some(Chunk::Extension { .. }) = next {
                        *extensions += 1;
                        if *extensions > MAX_CHUNK_EXTENSIONS {
                            return Err(ParseError::BadChunk);
                        }
                    }
                    match next {
                        Some(s) => *state = s,
                        None => {
                            *self = Decoder::Done;
                            break;
                        }
                    }
                }
                Ok(Decoded {
                    consumed: pos,
                    data: pos..pos,
                })
            }
        }
    }
}

fn clamp(remaining: u64, available: usize) -> usize {
    usize::try_from(remaining).map_or(available, |r| r.min(available))
}

/// One framing byte of a chunked body. `Ok(None)` means the body is complete.
fn step(state: Chunk, b: u8, total: &mut u64, limit: u64) -> Result<Option<Chunk>, ParseError> {
    use Chunk::*;
    let bad = Err(ParseError::BadChunk);
    let next = match state {
        Size { size, len } => match hex(b) {
            Some(d) => {
                // A size past u64::MAX (its next digit would shift bits out) is no body's.
                if size >> 60 != 0 || len >= MAX_CHUNK_LINE {
                    return bad;
                }
                Size {
                    size: size << 4 | u64::from(d),
                    len: len + 1,
                }
            }
            None if len == 0 => return bad,
            None => {
                let new_total = total.checked_add(size).ok_or(ParseError::BodyTooLarge)?;
                if new_total > limit {
                    return Err(ParseError::BodyTooLarge);
                }
                match b {
                    b'\r' => SizeLf { size },
                    b';' | b' ' | b'\t' if len < MAX_CHUNK_LINE => Extension { size, len: len + 1 },
                    _ => return bad,
                }
            }
        },
        Extension { size, len } => match b {
            b'\r' => SizeLf { size },
            _ if len >= MAX_CHUNK_LINE => return bad,
            b'\t' | b' '..=b'~' | 0x80..=0xff => Extension { size, len: len + 1 },
            _ => return bad,
        },
        SizeLf { size } => match b {
            b'\n' if size == 0 => TrailerStart { len: 0 },
            b'\n' => {
                *total += size;
                Data { remaining: size }
            }
            _ => return bad,
        },
        Data { .. } => return bad,
        DataCr if b == b'\r' => DataLf,
        DataLf if b == b'\n' => Size { size: 0, len: 0 },
        DataCr | DataLf => return bad,
        // A trailer section is field lines as in a head (RFC 9112 §7.1.2, §5): a token, a
        // colon, a value of visible bytes, spaces and tabs. Anything else (a line without a
        // colon, a control byte, obs-fold) loses the framing: 400.
        TrailerStart { len } => match b {
            b'\r' => EndLf,
            _ if is_tchar(b) => TrailerName { len: len + 1 },
            _ => return bad,
        },
        TrailerName { len } => match b {
            _ if len >= MAX_TRAILER_BYTES => return bad,
            b':' => TrailerValue { len: len + 1 },
            _ if is_tchar(b) => TrailerName { len: len + 1 },
            _ => return bad,
        },
        TrailerValue { len } => match b {
            b'\r' => TrailerLf { len },
            _ if len >= MAX_TRAILER_BYTES => return bad,
            b'\t' | b' '..=b'~' | 0x80..=0xff => TrailerValue { len: len + 1 },
            _ => return bad,
        },
        TrailerLf { len } if b == b'\n' => TrailerStart { len },
        TrailerLf { .. } => return bad,
        EndLf if b == b'\n' => return Ok(None),
        EndLf => return bad,
    };
    Ok(Some(next))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Writes one chunk of a chunked body (nothing for empty data, which would end the body).
pub(crate) fn encode_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let _ = write!(out, "{:X}\r\n", data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The last chunk, with no trailers.
pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_extensions_are_bounded_in_total() {
        // Each line is within the per-line bound; together they pass the body's.
        let line = format!("1;{}\r\nx\r\n", "e".repeat(1000));
        let mut input = line.repeat(17);
        input.push_str("0\r\n\r\n");
        let mut dec = Decoder::new(BodyFraming::Chunked, u64::MAX);
        let mut pos = 0;
        let end = loop {
            match dec.decode(&input.as_bytes()[pos..], usize::MAX) {
                Ok(d) if d.consumed > 0 => pos += d.consumed,
                other => break other,
            }
        };
        assert_eq!(end, Err(ParseError::BadChunk));
        assert!(
            pos > 15 * line.len(),
            "refused only past 16 KiB of extensions, at {pos}"
        );
        // Sixteen such chunks are fine.
        let mut input = line.repeat(16);
        input.push_str("0\r\n\r\n");
        let mut dec = Decoder::new(BodyFraming::Chunked, u64::MAX);
        let mut pos = 0;
        while !dec.is_done() {
            let d = dec
                .decode(&input.as_bytes()[pos..], usize::MAX)
                .expect("within the bound");
            pos += d.consumed;
        }
        assert_eq!(pos, input.len());
    }

    /// Decodes `input` fed in pieces of `step` bytes; returns payload or the first error.
    fn decode_all(input: &[u8], step: usize, limit: u64) -> Result<(Vec<u8>, usize), ParseError> {
        let mut dec = Decoder::new(BodyFraming::Chunked, limit);
        let mut out = Vec::new();
        let mut fed = 0;
        let mut pending: Vec<u8> = Vec::new();
        while !dec.is_done() && fed < input.len() {
            let end = (fed + step).min(input.len());
            pending.extend_from_slice(&input[fed..end]);
            fed = end;
            loop {
                let d = dec.decode(&pending, 3)?;
                out.extend_from_slice(&pending[d.data.clone()]);
                pending.drain(..d.consumed);
                if d.consumed == 0 || dec.is_done() {
                    break;
                }
            }
        }
        if !dec.is_done() {
            return Err(ParseError::Malformed);
        }
        Ok((out, fed - pending.len()))
    }

    #[test]
    fn valid_chunked_bodies_at_every_split() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"0\r\n\r\n", b""),
            (b"5\r\nhello\r\n0\r\n\r\n", b"hello"),
            (
                b"5;ext=1;x\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
                b"hello world",
            ),
            (
                b"A\r\n0123456789\r\n0\r\nTrailer: x\r\nOther: y\r\n\r\n",
                b"0123456789",
            ),
            (b"00000001 ; a=\"q\"\r\nZ\r\n0\r\n\r\n", b"Z"),
            // Leading zeros are digits of a size like any other (1*HEXDIG, RFC 9112 §7.1):
            // 27 of them were refused before a user's trial found it.
            (
                b"000000000000000000000000003\r\nabc\r\n00000000000000000000\r\n\r\n",
                b"abc",
            ),
            (b"1\r\nZ\r\n0\r\nX-T:\r\nY: a\tb \x80~\r\n\r\n", b"Z"),
            (b"a\r\n0123456789\r\n0\r\n\r\nNEXT", b"0123456789"),
        ];
        for (input, payload) in cases {
            let body_len = input.len() - if input.ends_with(b"NEXT") { 4 } else { 0 };
            for step in 1..=input.len() {
                let got = decode_all(input, step, 1 << 20);
                assert_eq!(
                    got,
                    Ok((payload.to_vec(), body_len)),
                    "step {step} {input:?}"
                );
            }
        }
    }

    #[test]
    fn invalid_chunked_bodies() {
        let cases: &[(&[u8], ParseError)] = &[
            (b"x\r\n", ParseError::BadChunk),
            (b"\r\n", ParseError::BadChunk),
            (b"5\nhello\r\n0\r\n\r\n", ParseError::BadChunk),
            (b"5\r\nhelloXX0\r\n\r\n", ParseError::BadChunk),
            (b"5\r\nhello\n0\r\n\r\n", ParseError::BadChunk),
            (b"11111111111111111\r\n", ParseError::BadChunk),
            (b"000000011111111111111111\r\n", ParseError::BadChunk),
            (b"FFFFFFFFFFFFFFFF\r\n", ParseError::BodyTooLarge),
            (b"101\r\n", ParseError::BodyTooLarge),
            (b"0\r\nbad trailer\n\r\n", ParseError::BadChunk),
            (b"0\r\n: x\r\n\r\n", ParseError::BadChunk),
            (
                b"0\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
                ParseError::BadChunk,
            ),
            (b"0\r\nbad trailer\r\n\r\n", ParseError::BadChunk),
            (b"0\r\nX T: a\r\n\r\n", ParseError::BadChunk),
            (b"0\r\nX(: a\r\n\r\n", ParseError::BadChunk),
            (b"0\r\nX-T: a\0b\r\n\r\n", ParseError::BadChunk),
            (b"0\r\nX-T: a\x7fb\r\n\r\n", ParseError::BadChunk),
            (b"0\r\nX-T: a\r\n b\r\n\r\n", ParseError::BadChunk),
            (b"5;\x01\r\nhello\r\n0\r\n\r\n", ParseError::BadChunk),
        ];
        for (input, err) in cases {
            for step in 1..=input.len() {
                assert_eq!(
                    decode_all(input, step, 256),
                    Err(*err),
                    "step {step} {input:?}"
                );
            }
        }
    }

    /// A size line of zeros is bounded as every chunk line is: refused past 4 KiB.
    #[test]
    fn a_size_of_zeros_is_bounded_by_the_line() {
        let mut line = vec![b'0'; MAX_CHUNK_LINE as usize];
        line.extend_from_slice(b"\r\n\r\n");
        assert_eq!(decode_all(&line, 4096, 256), Ok((Vec::new(), line.len())));
        let mut longer = vec![b'0'; MAX_CHUNK_LINE as usize + 1];
        longer.extend_from_slice(b"\r\n\r\n");
        assert_eq!(decode_all(&longer, 4096, 256), Err(ParseError::BadChunk));
        // With an extension's `;` the line is bounded alike (the review found 4,096 digits and
        // a `;` taken: 4,097 bytes).
        for (digits, fits) in [(MAX_CHUNK_LINE - 1, true), (MAX_CHUNK_LINE, false)] {
            let mut line = vec![b'0'; digits as usize];
            line.extend_from_slice(b";\r\n\r\n");
            let got = decode_all(&line, 4096, 256);
            assert_eq!(got.is_ok(), fits, "{digits} digits and a ';': {got:?}");
        }
    }

    #[test]
    fn length_decoder_stops_at_length() {
        let mut dec = Decoder::new(BodyFraming::Length(4), 100);
        let d = dec
            .decode(b"abcdef", 10)
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            d,
            Decoded {
                consumed: 4,
                data: 0..4
            }
        );
        assert!(dec.is_done());
    }

    #[test]
    fn chunk_encoding() {
        let mut out = Vec::new();
        encode_chunk(&mut out, b"hello world, hello world");
        encode_chunk(&mut out, b"");
        out.extend_from_slice(LAST_CHUNK);
        assert_eq!(out, b"18\r\nhello world, hello world\r\n0\r\n\r\n");
    }
}
