//! The content codings a response can be compressed with, and one encoder over the crates that
//! implement them (flate2 on zlib-rs, brotli, zstd): bytes in, compressed bytes out as they
//! come, each push optionally flushed so that a stream's pieces reach the client as they are
//! produced.

use std::io::{self, Write};

/// A content coding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Coding {
    Gzip,
    Br,
    Zstd,
}

impl Coding {
    /// Every coding, in the server's order of preference where a client likes several alike.
    pub(crate) const ALL: [Coding; 3] = [Coding::Br, Coding::Zstd, Coding::Gzip];

    /// Its `Content-Encoding` token.
    pub(crate) fn token(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// Bytes an encoder of this coding holds while a stream is compressed (its window and
    /// match tables), as measured: the resident growth per encoder of 50 encoders, each fed
    /// 4 MiB of text in flushed 16 KiB pieces, was 328 KiB for gzip, 1,505 KiB for brotli and
    /// 1,365 KiB for zstd (with the windows below; 4,582 and 2,898 KiB with their defaults).
    pub(crate) fn state_bytes(self) -> usize {
        match self {
            Coding::Gzip => 336 * 1024,
            Coding::Br => 1536 * 1024,
            Coding::Zstd => 1408 * 1024,
        }
    }

    /// The file name suffix of a file precompressed with it.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Coding::Gzip => ".gz",
            Coding::Br => ".br",
            Coding::Zstd => ".zst",
        }
    }
}

/// The quality the client gives `coding` in `accepted` (`Accept-Encoding` values): its own
/// entry's, else its alias's (`x-gzip` for gzip, RFC 9110 §8.4.1.3), else `*`'s, else 0; an
/// entry without `q` is 1. (The alias yields to the name whichever comes first.)
pub(crate) fn quality<'a>(accepted: impl Iterator<Item = &'a str>, coding: Coding) -> f32 {
    let mut star = None;
    let mut own = None;
    let mut alias = None;
    for entry in accepted.flat_map(|v| v.split(',')) {
        let mut parts = entry.split(';');
        let name = parts.next().unwrap_or("").trim();
        let q = parts
            .filter_map(|p| {
                let (key, value) = p.split_once('=')?;
                key.trim().eq_ignore_ascii_case("q").then_some(value)
            })
            .next()
            .map_or(1.0, |q| qvalue(q.trim()));
        if name.eq_ignore_ascii_case(coding.token()) {
            own = Some(q);
        } else if coding == Coding::Gzip && name.eq_ignore_ascii_case("x-gzip") {
            alias = Some(q);
        } else if name == "*" {
            star = Some(q);
        }
    }
    own.or(alias).or(star).unwrap_or(0.0)
}

/// A qvalue (`0`, `0.5`, `1.000`: RFC 9110 §12.4.2); anything else counts as 0.
fn qvalue(q: &str) -> f32 {
    let (whole, fraction) = q.split_once('.').unwrap_or((q, ""));
    let digits = fraction.len() <= 3 && fraction.bytes().all(|b| b.is_ascii_digit());
    match whole {
        "0" if digits => q.parse().unwrap_or(0.0),
        "1" if digits && fraction.bytes().all(|b| b == b'0') => 1.0,
        _ => 0.0,
    }
}

/// How hard each coding works: fast levels, as actix-web's (gzip 1, brotli 3, zstd 3), not
/// the smallest output (brotli's 11 takes a hundred times longer).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Levels {
    pub(crate) gzip: u32,
    pub(crate) br: u32,
    pub(crate) zstd: i32,
}

impl Default for Levels {
    fn default() -> Self {
        Levels {
            gzip: 1,
            br: 3,
            zstd: 3,
        }
    }
}

/// Brotli's window: 512 KiB (its default is 4 MiB), as nginx's brotli module has it. A
/// stream's encoder holds its window for the stream's life; text repeats within far less.
const BROTLI_WINDOW: u32 = 19;

/// zstd's window, likewise: 512 KiB (level 3's default for a stream of unknown size is
/// 2 MiB).
const ZSTD_WINDOW_LOG: u32 = 19;

/// A compressor writing into a buffer that [`Encoder::push`] empties.
pub(crate) enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Br(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl Encoder {
    pub(crate) fn new(coding: Coding, levels: Levels) -> io::Result<Encoder> {
        Ok(match coding {
            Coding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(levels.gzip),
            )),
            Coding::Br => Encoder::Br(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                4096,
                levels.br,
                BROTLI_WINDOW,
            ))),
            Coding::Zstd => {
                let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), levels.zstd)?;
                encoder.window_log(ZSTD_WINDOW_LOG)?;
                Encoder::Zstd(encoder)
            }
        })
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Encoder::Gzip(e) => e,
            Encoder::Br(e) => &mut **e,
            Encoder::Zstd(e) => e,
        }
    }

    fn output(&mut self) -> &mut Vec<u8> {
        match self {
            Encoder::Gzip(e) => e.get_mut(),
            Encoder::Br(e) => e.get_mut(),
            Encoder::Zstd(e) => e.get_mut(),
        }
    }

    /// Compresses `input`; with `flush`, everything so far comes out now (a stream's piece).
    /// Returns what came out.
    pub(crate) fn push(&mut self, input: &[u8], flush: bool) -> io::Result<Vec<u8>> {
        let writer = self.writer();
        writer.write_all(input)?;
        if flush {
            writer.flush()?;
        }
        Ok(std::mem::take(self.output()))
    }

    /// Ends the stream: the rest of the output.
    pub(crate) fn finish(self) -> io::Result<Vec<u8>> {
        match self {
            Encoder::Gzip(e) => e.finish(),
            Encoder::Br(e) => Ok(e.into_inner()),
            Encoder::Zstd(e) => e.finish(),
        }
    }

    /// `input` compressed whole.
    pub(crate) fn all(coding: Coding, levels: Levels, input: &[u8]) -> io::Result<Vec<u8>> {
        let mut encoder = Encoder::new(coding, levels)?;
        let mut out = encoder.push(input, false)?;
        out.extend_from_slice(&encoder.finish()?);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn decode(coding: Coding, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match coding {
            Coding::Gzip => flate2::read::GzDecoder::new(bytes).read_to_end(&mut out),
            Coding::Br => brotli::Decompressor::new(bytes, 4096).read_to_end(&mut out),
            Coding::Zstd => {
                zstd::stream::read::Decoder::new(bytes).and_then(|mut d| d.read_to_end(&mut out))
            }
        }
        .expect("decodes");
        out
    }

    #[test]
    fn each_coding_round_trips_whole_and_in_flushed_pieces() {
        let text = b"the quick brown fox jumps over the lazy dog. ".repeat(200);
        for coding in [Coding::Gzip, Coding::Br, Coding::Zstd] {
            let whole = Encoder::all(coding, Levels::default(), &text).expect("compresses");
            assert!(
                whole.len() < text.len() / 4,
                "{coding:?}: {} bytes",
                whole.len()
            );
            assert_eq!(decode(coding, &whole), text, "{coding:?}");
            // In pieces, each flushed: what came out so far decodes to what went in.
            let mut encoder = Encoder::new(coding, Levels::default()).expect("an encoder");
            let mut out = Vec::new();
            for piece in text.chunks(1000) {
                let got = encoder.push(piece, true).expect("compresses");
                assert!(!got.is_empty(), "{coding:?}: a flushed piece comes out");
                out.extend_from_slice(&got);
            }
            out.extend_from_slice(&encoder.finish().expect("finishes"));
            assert_eq!(decode(coding, &out), text, "{coding:?}");
        }
    }
}
