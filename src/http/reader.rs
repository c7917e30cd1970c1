//! The request body as a handler reads it, streamed: decoded from what is buffered, more pulled
//! from a [`Source`] (the thread-pool engine's socket) as the handler reads, `100 Continue` sent
//! on the first read, and how the body ended for the exchange to judge. (The reactor reads whole
//! bodies before its handler runs and needs none of this.)

use std::io::{self, Read};

use crate::error::Error;
use crate::http::body::Decoder;
use crate::http::buf::ReadBuf;
#[cfg(feature = "server")]
use crate::http::conn::Answer;
use crate::http::conn::CONTINUE;
use crate::http::parse::ParseError;

/// Where a streaming body reader gets more bytes from: the engine's socket (with its deadlines),
/// or nothing more when the engine read the whole body before calling the handler.
pub(crate) trait Source {
    /// Reads more bytes into `buf`. `Ok(0)` means the peer closed.
    fn fill(&mut self, buf: &mut ReadBuf) -> io::Result<usize>;
    /// Writes an interim response (`100 Continue`, as the reader decides) to the peer.
    fn send_interim(&mut self, interim: &[u8]) -> io::Result<()>;
}

/// How a body read ended, which decides whether the connection can be kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyEnd {
    /// Not read to the end (yet).
    Unread,
    /// Read to the end: the connection is in sync.
    Complete,
    /// A framing error or limit: answer with this status and close.
    Failed(ParseError),
    /// The body came slower than the minimum rate: answer `408` and close.
    TooSlow,
    /// The peer closed or the connection failed: close without answering further.
    Broken,
}

/// The streaming request-body reader shared by both engines.
pub(crate) struct BodyReader<'a, S: Source> {
    pub(crate) decoder: Decoder,
    pub(crate) buf: &'a mut ReadBuf,
    pub(crate) source: S,
    /// `Expect: 100-continue` is pending: send `100 Continue` before the first socket read.
    pub(crate) expect_continue: bool,
    pub(crate) end: BodyEnd,
}

impl<'a, S: Source> BodyReader<'a, S> {
    pub(crate) fn new(decoder: Decoder, buf: &'a mut ReadBuf, source: S, expect: bool) -> Self {
        let end = if decoder.is_done() {
            BodyEnd::Complete
        } else {
            BodyEnd::Unread
        };
        BodyReader {
            decoder,
            buf,
            source,
            expect_continue: expect && end == BodyEnd::Unread,
            end,
        }
    }

    /// Reads and discards what is left of the body, up to `limit` bytes. [`BodyReader::end`]
    /// then says how it ended: complete (the connection is in sync), failed or too slow (as a
    /// read would have), or still unread (more than `limit`, or held back for `100 Continue`).
    #[cfg(feature = "server")]
    fn drain(&mut self, limit: u64) {
        if self.expect_continue {
            // The client may still be waiting for 100 Continue before sending: we cannot know
            // whether a body will follow, so the connection cannot be reused.
            return;
        }
        if matches!(self.decoder, Decoder::Length { remaining } if remaining > limit) {
            // More than we would read anyway: close at once instead of waiting for it.
            return;
        }
        let mut left = limit;
        let mut scratch = [0u8; 4096];
        while self.end == BodyEnd::Unread && left > 0 {
            match self.read(&mut scratch) {
                Ok(0) => break,
                Ok(n) => left = left.saturating_sub(n as u64),
                Err(_) => break,
            }
        }
    }

    /// The handler returned `answer`: a body it left unread is read and dropped (up to `limit`
    /// bytes, as far as the source gives it), so that it is judged as a read would judge it
    /// (malformed is 400 whether the handler read it or not, as on the reactor, which reads
    /// every body before its handler runs). After a panic nothing is read: the connection
    /// closes anyway. Returns how the body ended, for [`Conn::body_ended`].
    ///
    /// [`Conn::body_ended`]: crate::http::conn::Conn::body_ended
    #[cfg(feature = "server")]
    pub(crate) fn settle(&mut self, answer: &Answer, limit: u64) -> BodyEnd {
        if self.end == BodyEnd::Unread && !matches!(answer, Answer::Panicked) {
            self.drain(limit);
        }
        self.end
    }

    fn fail(&mut self, err: ParseError) -> io::Error {
        self.end = BodyEnd::Failed(err);
        Error::parse(err).into_io()
    }
}

impl<S: Source> Read for BodyReader<'_, S> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.end {
                BodyEnd::Unread => {}
                BodyEnd::Complete => return Ok(0),
                BodyEnd::Failed(e) => return Err(Error::parse(e).into_io()),
                BodyEnd::TooSlow => {
                    return Err(Error::new(crate::error::ErrorKind::TimedOut).into_io());
                }
                BodyEnd::Broken => {
                    return Err(Error::new(crate::error::ErrorKind::ConnectionClosed).into_io());
                }
            }
            if out.is_empty() {
                return Ok(0);
            }
            if !self.buf.is_empty() {
                let input = self.buf.filled();
                let d = match self.decoder.decode(input, out.len()) {
                    Ok(d) => d,
                    Err(e) => return Err(self.fail(e)),
                };
                let n = d.data.len();
                out[..n].copy_from_slice(&input[d.data]);
                self.buf.consume(d.consumed);
                if self.decoder.is_done() {
                    self.end = BodyEnd::Complete;
                }
                if n > 0 {
                    return Ok(n);
                }
                continue;
            }
            if self.expect_continue {
                self.expect_continue = false;
                if let Err(e) = self.source.send_interim(CONTINUE) {
                    self.end = BodyEnd::Broken;
                    return Err(e);
                }
            }
            match self.source.fill(self.buf) {
                Ok(0) => {
                    self.end = BodyEnd::Broken;
                    return Err(Error::new(crate::error::ErrorKind::ConnectionClosed).into_io());
                }
                Ok(_) => {}
                // A source that does not wait (a drain) leaves the rest unread.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(e),
                Err(e) => {
                    self.end = if e.kind() == io::ErrorKind::TimedOut {
                        BodyEnd::TooSlow
                    } else {
                        BodyEnd::Broken
                    };
                    return Err(e);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::BodyFraming;

    struct NoMore(usize);
    impl Source for NoMore {
        fn fill(&mut self, _: &mut ReadBuf) -> io::Result<usize> {
            Ok(0)
        }
        fn send_interim(&mut self, _: &[u8]) -> io::Result<()> {
            self.0 += 1;
            Ok(())
        }
    }

    #[test]
    fn reader_reads_buffered_body_and_leaves_the_next_request() {
        let mut buf = ReadBuf::new();
        buf.push(b"3\r\nabc\r\n0\r\n\r\nGET /");
        let dec = Decoder::new(BodyFraming::Chunked, 100);
        let mut r = BodyReader::new(dec, &mut buf, NoMore(0), true);
        let mut s = String::new();
        assert_eq!(r.read_to_string(&mut s).ok(), Some(3));
        assert_eq!(s, "abc");
        assert_eq!(r.end, BodyEnd::Complete);
        assert_eq!(r.source.0, 0, "body bytes already there: no 100 Continue");
        assert_eq!(buf.filled(), b"GET /");
    }

    #[test]
    fn reader_reports_truncated_body() {
        let mut buf = ReadBuf::new();
        buf.push(b"ab");
        let mut r = BodyReader::new(
            Decoder::new(BodyFraming::Length(5), 100),
            &mut buf,
            NoMore(0),
            true,
        );
        let mut v = Vec::new();
        assert!(r.read_to_end(&mut v).is_err());
        assert_eq!(v, b"ab");
        assert_eq!(r.end, BodyEnd::Broken);
    }
}
