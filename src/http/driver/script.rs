//! A scripted stream: the driver run with no socket, by its unit tests and the fuzz harness.
//! What the client sent waits in `incoming`; a read takes what is there (`WouldBlock` when
//! nothing is, the end of input once the client closed); a write takes what `room` allows.
//! Writing after the driver shut the write side, or after an abort, is a bug: it panics.

use std::cell::RefCell;
use std::io::{self, ErrorKind, Read, Write};

use super::{Io, Tally};
use crate::http::budget::Budget;
use crate::http::panics::Panics;
use crate::http::refusal::Refusal;
use crate::http::request_head::{RequestHead, Version};

/// A turn's [`Cx`](super::Cx) made from a harness's `rules`, `pools`, `tally`, `now` and `date`
/// fields, each borrowed on its own, so that the harness's driver and stream stay free to use.
macro_rules! harness_cx {
    ($h:expr, $closing:expr) => {
        $crate::http::driver::Cx::new(
            &$h.rules,
            &mut $h.pools,
            &$h.tally,
            $h.now,
            &mut $h.date,
            $closing,
        )
    };
}
pub(crate) use harness_cx;

/// A non-blocking stream whose input and room are set by the test.
#[derive(Debug, Default)]
pub(crate) struct Scripted {
    /// Bytes the client sent that no read has taken yet.
    pub(crate) incoming: Vec<u8>,
    /// The client closed after `incoming`.
    pub(crate) eof: bool,
    /// Everything written.
    pub(crate) out: Vec<u8>,
    /// Bytes the stream takes before it is full; `None`: no bound.
    pub(crate) room: Option<usize>,
    /// The driver shut the write side (a lingering close).
    pub(crate) shut: bool,
    /// The driver cut the exchange short.
    pub(crate) aborted: bool,
    /// Reads made, `WouldBlock` ones included.
    pub(crate) reads: usize,
    /// What the stream says its peer has not acknowledged ([`Io::unacknowledged`]).
    pub(crate) unacknowledged: Option<usize>,
    /// For a stream that reports what its socket took ([`Io::take_sent`], as a TLS stream
    /// does): bytes taken since the driver last asked. Writes add what they take; a test adds
    /// what else went out (a TLS stream's handshake or earlier records). `None`: what writes
    /// returned is what went out.
    pub(crate) sent: Option<usize>,
    /// For a stream that holds output as a TLS stream does: writes take up to this many
    /// bytes into `held`, which goes to the socket as `room` allows; a flush says
    /// `WouldBlock` until all of it went. `None`: writes go straight to the socket.
    pub(crate) holds: Option<usize>,
    /// Output taken and held, not yet in the socket.
    pub(crate) held: Vec<u8>,
    /// The peer reset the connection: writes and flushes fail.
    pub(crate) reset: bool,
}

impl Scripted {
    /// The client sends `bytes`.
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.incoming.extend_from_slice(bytes);
    }

    /// Bytes of what was written that the socket takes (all of them, or `room`'s worth).
    fn taken(&mut self, len: usize) -> usize {
        let n = self.room.map_or(len, |room| room.min(len));
        if let Some(room) = &mut self.room {
            *room -= n;
        }
        if let Some(sent) = &mut self.sent {
            *sent += n;
        }
        n
    }

    /// Pushes held output to the socket as far as it takes it.
    fn push_held(&mut self) {
        let n = self.taken(self.held.len());
        self.out.extend(self.held.drain(..n));
    }

    /// What was written since the last call, as text.
    #[cfg(test)]
    pub(crate) fn take_out(&mut self) -> String {
        String::from_utf8_lossy(&std::mem::take(&mut self.out)).into_owned()
    }
}

impl Read for Scripted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reads += 1;
        if self.incoming.is_empty() {
            return match self.eof {
                true => Ok(0),
                false => Err(ErrorKind::WouldBlock.into()),
            };
        }
        let n = buf.len().min(self.incoming.len());
        buf[..n].copy_from_slice(&self.incoming[..n]);
        self.incoming.drain(..n);
        Ok(n)
    }
}

impl Write for Scripted {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.reset {
            return Err(ErrorKind::ConnectionReset.into());
        }
        assert!(!self.shut, "written after the write side was shut");
        assert!(!self.aborted, "written after the exchange was aborted");
        if let Some(holds) = self.holds {
            self.push_held();
            let n = data.len().min(holds.saturating_sub(self.held.len()));
            if n == 0 && !data.is_empty() {
                return Err(ErrorKind::WouldBlock.into());
            }
            self.held.extend_from_slice(&data[..n]);
            self.push_held();
            return Ok(n);
        }
        let n = self.room.map_or(data.len(), |room| room.min(data.len()));
        if n == 0 && !data.is_empty() {
            return Err(ErrorKind::WouldBlock.into());
        }
        let n = self.taken(n);
        self.out.extend_from_slice(&data[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.reset {
            return Err(ErrorKind::ConnectionReset.into());
        }
        self.push_held();
        match self.held.is_empty() {
            true => Ok(()),
            false => Err(ErrorKind::WouldBlock.into()),
        }
    }
}

impl Io for Scripted {
    fn shutdown_write(&mut self) {
        self.shut = true;
    }
    fn abort(&mut self) {
        self.aborted = true;
    }
    fn wants_write(&self) -> bool {
        !self.held.is_empty()
    }
    fn buffered_input(&self) -> bool {
        false
    }
    fn unacknowledged(&self) -> Option<usize> {
        self.unacknowledged
    }
    fn take_sent(&mut self) -> Option<usize> {
        self.sent.as_mut().map(std::mem::take)
    }
    fn send_file(&mut self, _: &std::fs::File, _: usize) -> Option<io::Result<usize>> {
        None
    }
    fn proxied_source(&self) -> Option<std::net::SocketAddr> {
        None
    }
}

/// What a request head said that the checks need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) version: Version,
    pub(crate) expect_continue: bool,
    pub(crate) is_head: bool,
}

/// The driver's counts, recorded, and a memory budget.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    pub(crate) requests: RefCell<Vec<Seen>>,
    pub(crate) refusals: RefCell<Vec<Refusal>>,
    pub(crate) budget: Budget,
    /// Handler code the driver ran or dropped that panicked.
    pub(crate) panics: Panics,
}

impl Tally for Recorded {
    fn budget(&self) -> &Budget {
        &self.budget
    }
    fn request(&self, head: &RequestHead) {
        self.requests.borrow_mut().push(Seen {
            version: head.version,
            expect_continue: head.expect_continue,
            is_head: head.is_head(),
        });
    }
    fn refused(&self, why: Refusal) {
        self.refusals.borrow_mut().push(why);
    }
    fn panics(&self) -> &Panics {
        &self.panics
    }
}
