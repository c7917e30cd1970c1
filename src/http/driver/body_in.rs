//! A request body streamed to its handler as it arrives, for a handler that opted in
//! ([`crate::streaming`]): the handler's reads come here through its engine, which waits on the
//! socket when this says so. Every other body is read whole before its handler runs. (Only the
//! thread-pool server streams bodies: without it, this is not used.)
#![cfg_attr(not(feature = "server"), allow(dead_code))]

use std::io::ErrorKind;
use std::time::Instant;

use super::busy::{Busy, Exchange, Fill};
use super::{Driver, Io, Phase};
use crate::MinRate;
use crate::http::body::Decoder;
use crate::http::conn::CONTINUE;
use crate::rate::Meter;

/// A body on its way to its handler.
pub(crate) struct BodyIn {
    decoder: Decoder,
    meter: Meter,
    /// `100 Continue` is owed before the first read from the socket.
    continue_due: bool,
    pub(super) end: BodyEnd,
}

/// How a streamed body stands, which decides how its exchange ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyEnd {
    /// Not all read (yet): once answered, the connection closes.
    Open,
    /// Read to its end: the connection stays in sync.
    Complete,
    /// Malformed or over a limit: answered with this status (the handler's response is not
    /// sent).
    Failed(u16),
    /// Slower than the minimum rate: answered `408`.
    TooSlow,
    /// The client went away or the connection failed.
    Broken,
}

/// What one read of a streamed body came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BodyRead {
    /// This many bytes of payload.
    Data(usize),
    /// The body is complete.
    End,
    /// Nothing now: the engine waits on the stream (to write `100 Continue` first when
    /// `write`) until the deadline, then reads again, or calls [`Driver::body_timed_out`].
    Wait { write: bool, until: Option<Instant> },
    /// The body cannot be read; its exchange ends as [`BodyEnd`] says.
    Failed(ErrorKind),
}

impl BodyIn {
    pub(super) fn new(decoder: Decoder, rate: Option<MinRate>, continue_due: bool) -> Self {
        BodyIn {
            decoder,
            meter: Meter::input(rate),
            continue_due,
            end: BodyEnd::Open,
        }
    }
}

impl BodyEnd {
    /// What a read that finds the body ended this way returns.
    fn read(self) -> BodyRead {
        match self {
            BodyEnd::Open => BodyRead::Failed(ErrorKind::Other),
            BodyEnd::Complete => BodyRead::End,
            BodyEnd::Failed(413) => BodyRead::Failed(ErrorKind::FileTooLarge),
            BodyEnd::Failed(_) => BodyRead::Failed(ErrorKind::InvalidData),
            BodyEnd::TooSlow => BodyRead::Failed(ErrorKind::TimedOut),
            BodyEnd::Broken => BodyRead::Failed(ErrorKind::UnexpectedEof),
        }
    }
}

impl Driver {
    /// Reads the next payload of the body its handler is streaming into `out`: what is
    /// buffered first, then from the stream. `100 Continue` goes out before the first read.
    pub(crate) fn read_body<T: Io + ?Sized>(
        &mut self,
        io: &mut T,
        out: &mut [u8],
        now: Instant,
    ) -> BodyRead {
        let Phase::Busy(busy) = &mut self.phase else {
            return BodyRead::Failed(ErrorKind::NotConnected);
        };
        // The body is taken out while the buffers around it are used, and put back.
        let Exchange::Handed(mut body) = std::mem::replace(&mut busy.at, Exchange::Running) else {
            return BodyRead::End;
        };
        let read = next(busy, &mut body, io, out, now);
        busy.at = Exchange::Handed(body);
        read
    }

    /// The deadline of a streamed body's read passed: the body came slower than its minimum
    /// rate, and its exchange is answered `408`.
    pub(crate) fn body_timed_out(&mut self) {
        if let Phase::Busy(busy) = &mut self.phase {
            if let Exchange::Handed(body) = &mut busy.at {
                body.end = BodyEnd::TooSlow;
            }
        }
    }
}

/// [`Driver::read_body`]'s work, on the exchange's buffers and its body.
fn next<T: Io + ?Sized>(
    busy: &mut Busy,
    body: &mut BodyIn,
    io: &mut T,
    out: &mut [u8],
    now: Instant,
) -> BodyRead {
    if body.end != BodyEnd::Open {
        return body.end.read();
    }
    if std::mem::take(&mut body.continue_due) {
        busy.out.extend_from_slice(CONTINUE);
    }
    match busy.flush(io, now) {
        Ok(true) => {}
        Ok(false) => {
            return BodyRead::Wait {
                write: true,
                until: busy.sent.deadline(now, || io.unacknowledged()),
            };
        }
        Err(()) => {
            body.end = BodyEnd::Broken;
            return body.end.read();
        }
    }
    loop {
        if body.decoder.is_done() {
            body.end = BodyEnd::Complete;
            return BodyRead::End;
        }
        let input = busy.read.filled();
        if !input.is_empty() {
            let d = match body.decoder.decode(input, out.len()) {
                Ok(d) => d,
                Err(e) => {
                    body.end = BodyEnd::Failed(e.status());
                    return body.end.read();
                }
            };
            let n = d.data.len();
            out[..n].copy_from_slice(&input[d.data]);
            busy.read.consume(d.consumed);
            body.meter.moved(now, d.consumed);
            if n > 0 {
                return BodyRead::Data(n);
            }
            if d.consumed > 0 {
                continue;
            }
        }
        match busy.fill(io, 0) {
            Fill::Got { .. } => {}
            Fill::WouldBlock => {
                return BodyRead::Wait {
                    write: false,
                    until: body.meter.deadline(now, || None),
                };
            }
            Fill::Closed => {
                body.end = BodyEnd::Broken;
                return body.end.read();
            }
            // Framing longer than the buffer (a chunk line).
            Fill::Full => {
                body.end = BodyEnd::Failed(400);
                return body.end.read();
            }
        }
    }
}
