//! What a connection holds while an exchange is under way: the engine's buffers, lent to it for
//! the exchange, and where the exchange is. A connection holds a [`Busy`] only between the
//! first byte of a request and the moment it waits for the next one with nothing pending; then
//! the buffers go back to the engine's pool (see [`Busy::at_rest`]).

use std::io::ErrorKind;
use std::time::Instant;

use super::body_in::BodyIn;
use super::{Io, Stage, WaitFor};
use crate::MinRate;
use crate::http::body::Decoder;
use crate::http::budget::Held;
use crate::http::buf::{INITIAL_READ_BUF, ReadBuf};
use crate::http::framing::Encoder;
use crate::http::panics::Panics;
use crate::http::pools::Pools;
use crate::http::request_head::RequestHead;
use crate::http::session::Takeover;
use crate::http::spool::Spool;
use crate::http::stream::Streaming;
use crate::rate::Meter;
use crate::upgraded::Upgraded;

/// The capacity a write buffer starts with.
const WRITE_BUF: usize = 16 * 1024;

/// A write buffer that grew past this is not kept for the next exchange.
const MAX_POOLED_WRITE: usize = 256 * 1024;

/// An exchange under way and the buffers lent to it. The loop's pool keeps them boxed, buffers
/// inside, between exchanges.
pub(crate) struct Busy {
    /// Input read and not yet consumed.
    pub(super) read: ReadBuf,
    /// Output queued and not yet written, from `written` on.
    pub(super) out: Vec<u8>,
    written: usize,
    /// The minimum rate of the output being written: one response, or a pipelined batch, until
    /// all of it is out ([`Busy::flush`]).
    pub(super) sent: Meter,
    pub(super) at: Exchange,
    /// The output left waiting for a slow client, charged to the server's memory budget.
    pub(super) tail: Option<Held>,
    /// A request head's storage, kept here between requests (it goes out with each request
    /// and comes back with its answer), so that it travels with the working set.
    pub(super) head: Option<Box<RequestHead>>,
}

/// Where an exchange is. (`repr(u8)`: a plain tag, matched at every turn of the driver's loop;
/// see `Phase`.)
#[repr(u8)]
pub(super) enum Exchange {
    /// Reading a request head.
    Head,
    /// Reading a request body before dispatch (into memory, or a temporary file past the
    /// in-memory limit), at no less than the minimum rate.
    Body {
        head: Box<RequestHead>,
        decoder: Decoder,
        body: Spool,
        meter: Meter,
    },
    /// The request (its head and body) is with its handler; nothing is parsed until its
    /// answer is back ([`Driver::answer`](super::Driver::answer)).
    Running,
    /// The request is with its handler, which reads its body as it arrives
    /// ([`Driver::read_body`](super::Driver::read_body)).
    Handed(BodyIn),
    /// The response's body is produced and written as the socket takes it; nothing more is
    /// parsed until it is done, so responses stay in order.
    Streaming(Streaming),
    /// The streamed body's producer is away on a worker for its next piece, with the output
    /// buffer ([`Driver::produced`](super::Driver::produced) brings both back); `sent` body
    /// bytes were produced before (the access log's count, should the connection close
    /// meanwhile).
    Producing { sent: u64 },
    /// A response that hands the connection over is queued; once it is out, the connection is
    /// switched.
    Switching(Switching),
}

impl Exchange {
    /// Moves on to `next`, giving back what was there unless it held nothing (`Head`,
    /// `Running`): those are left without running the enum's drop glue, an out-of-line call
    /// the hot path made three times a request (85 instructions of a keep-alive request with
    /// what the compiler could simplify around it, counted by callgrind).
    pub(super) fn replace(&mut self, next: Exchange) -> Option<Exchange> {
        match self {
            // Nothing to drop: forgetting a variant without fields leaks nothing.
            Exchange::Head | Exchange::Running | Exchange::Producing { .. } => {
                std::mem::forget(std::mem::replace(self, next));
                None
            }
            _ => Some(std::mem::replace(self, next)),
        }
    }
}

/// What takes a connection over once its response head is out.
pub(super) enum Switch {
    /// A session (a WebSocket after its 101, an event stream after its head), with the encoder
    /// of its output.
    Session(Encoder, Box<dyn Takeover>),
    /// A generic upgrade: the connection leaves the engine for a thread.
    Detach(Box<dyn FnOnce(Upgraded) + Send>),
    /// Handed over: nothing is left.
    Gone,
}

/// A switch waiting for its response to go out. What it holds is handler code (a WebSocket
/// handler, an upgrade's callback): a connection cut before the response was out drops it
/// with a panic in its `Drop` caught and counted, wherever the connection was driven.
pub(super) struct Switching {
    to: Switch,
    panics: Panics,
}

impl Switching {
    pub(super) fn new(to: Switch, panics: Panics) -> Self {
        Switching { to, panics }
    }

    /// The switch, for the engine to carry out: the response is out.
    pub(super) fn hand_over(&mut self) -> Switch {
        std::mem::replace(&mut self.to, Switch::Gone)
    }
}

impl Drop for Switching {
    fn drop(&mut self) {
        match self.hand_over() {
            Switch::Gone => {}
            unmade => self.panics.drop_caught(unmade),
        }
    }
}

/// The outcome of one read.
pub(super) enum Fill {
    /// Bytes arrived; `short` when fewer than the space offered (the socket is drained).
    Got {
        short: bool,
    },
    WouldBlock,
    Closed,
    /// The buffer is full and what it holds cannot be consumed (a chunk line longer than it).
    Full,
}

impl Busy {
    /// A working set with fresh buffers, for the loop's pool when it has none to lend.
    pub(crate) fn new() -> Busy {
        Busy {
            read: ReadBuf::new(),
            out: Vec::with_capacity(WRITE_BUF),
            written: 0,
            sent: Meter::output(None),
            at: Exchange::Head,
            tail: None,
            head: None,
        }
    }

    /// Readies a working set for the pool: buffers emptied (and brought back to their usual
    /// size if a large head or response grew them).
    #[inline]
    pub(crate) fn recycle(&mut self) {
        self.read.reset();
        self.out.clear();
        if self.out.capacity() > MAX_POOLED_WRITE {
            self.out = Vec::with_capacity(WRITE_BUF);
        }
        self.written = 0;
        drop(self.at.replace(Exchange::Head));
        self.tail = None;
    }

    /// Lends the loop's buffers to a connection starting (or resuming) an exchange, with the
    /// bytes of a partial head it kept while it waited.
    pub(super) fn lend(
        pools: &mut Pools,
        partial: Option<ReadBuf>,
        rate: Option<MinRate>,
    ) -> Box<Busy> {
        let mut busy = pools.busy();
        busy.sent = Meter::output(rate);
        match partial {
            // A whole buffer kept for a large partial head: the exchange reads on into it.
            Some(bytes) if bytes.len() >= INITIAL_READ_BUF => {
                let own = std::mem::replace(&mut busy.read, bytes);
                pools.give_read(own);
            }
            // A buffer fitted to a small partial head: its bytes move into the whole one.
            Some(small) => busy.read.push(small.filled()),
            None => {}
        }
        busy
    }

    /// True between requests with no output pending: the buffers can go back.
    pub(super) fn at_rest(&self) -> bool {
        matches!(self.at, Exchange::Head) && self.out.is_empty()
    }

    /// What a connection at rest keeps when its buffers go back: `None` when nothing is
    /// buffered, else its partial head (in a buffer about its size when it is small).
    #[inline]
    pub(super) fn partial(&mut self, pools: &mut Pools) -> Option<ReadBuf> {
        if self.read.is_empty() {
            return None;
        }
        Some(match self.read.fitted() {
            Some(small) => small,
            None => std::mem::replace(&mut self.read, pools.read()),
        })
    }

    /// Keeps a head's storage for the next request (a spare one, or one grown large by a big
    /// head, goes to the pool, which keeps only those of the usual size).
    pub(super) fn keep_head(&mut self, head: Box<RequestHead>, pools: &mut Pools) {
        match self.head {
            None if head.worth_keeping() => self.head = Some(head),
            _ => pools.give_head(head),
        }
    }

    /// Gives everything back (the connection is closing).
    pub(super) fn release(mut self: Box<Self>, pools: &mut Pools) {
        if let Exchange::Body { head, .. } = std::mem::replace(&mut self.at, Exchange::Head) {
            pools.give_head(head);
        }
        pools.give_busy(self);
    }

    /// Where the exchange stands, for the engine's live counters.
    pub(super) fn stage(&self) -> Stage {
        match self.at {
            Exchange::Head if self.all_out() && self.read.is_empty() => Stage::Waiting,
            Exchange::Head if self.all_out() => Stage::Reading,
            _ => Stage::Writing,
        }
    }

    /// Whether a request is under way: part of its head or its body has come, and no response
    /// is being written (nothing unwritten, and nothing a transport holds: [`Busy::all_out`]).
    pub(super) fn receiving(&self) -> bool {
        self.all_out()
            && match self.at {
                Exchange::Head => !self.read.is_empty(),
                Exchange::Body { .. } => true,
                Exchange::Running
                | Exchange::Handed(_)
                | Exchange::Streaming(_)
                | Exchange::Producing { .. }
                | Exchange::Switching(_) => false,
            }
    }

    /// The output buffer, written and emptied, lent with a streamed body's producer.
    pub(super) fn lend_out(&mut self) -> Vec<u8> {
        self.out.clear();
        self.written = 0;
        self.tail = None;
        std::mem::take(&mut self.out)
    }

    /// The lent output buffer back, holding the piece produced into it.
    pub(super) fn out_back(&mut self, out: Vec<u8>) {
        self.out = out;
        self.written = 0;
    }

    /// A response is queued: with everything before it out, it is a transfer of its own
    /// (behind output not yet out, it goes on with that output's: a pipelined batch is one).
    #[inline]
    pub(super) fn output_begins(&mut self, rate: Option<MinRate>) {
        if self.all_out() {
            self.sent = Meter::output(rate);
        }
    }

    /// A response's body ended: with everything out (its last piece added nothing: a sized
    /// body), its transfer is over, before a request pipelined behind it is read and answered
    /// (an error page, a `100 Continue`).
    pub(super) fn body_ended(&mut self) {
        if self.all_out() {
            self.sent.restart();
        }
    }

    /// Whether all output is out: nothing queued unwritten, and nothing the transport still
    /// holds (a TLS stream takes plaintext while the socket is full: its flush then waits, and
    /// so does the meter).
    fn all_out(&self) -> bool {
        self.unwritten() == 0 && !self.sent.is_waiting()
    }

    /// A response's body is being made (streamed, or a file sent): output that is all out is
    /// not the end of its transfer.
    fn body_under_way(&self) -> bool {
        matches!(self.at, Exchange::Streaming(_) | Exchange::Producing { .. })
    }

    /// Until when an exchange under way may wait `on` its stream from `now`: while output
    /// waits, the response's rate; while a body is read, the body's. (A read that waits for
    /// the stream to take a TLS flight too keeps the deadline of what it reads.) Out of line:
    /// the usual wait, for the next request, does not come here.
    #[inline(never)]
    pub(super) fn deadline<T: Io + ?Sized>(
        &mut self,
        io: &T,
        on: WaitFor,
        now: Instant,
    ) -> Option<Instant> {
        match &mut self.at {
            _ if on == WaitFor::Output => self.sent.deadline(now, || io.unacknowledged()),
            Exchange::Body { meter, .. } => meter.deadline(now, || None),
            _ => None,
        }
    }

    /// Bytes of output queued and not yet written.
    pub(super) fn unwritten(&self) -> usize {
        self.out.len() - self.written
    }

    /// Writes pending output; `Ok(true)` when all of it is out, `Ok(false)` when the socket is
    /// full.
    pub(super) fn flush<T: Io + ?Sized>(
        &mut self,
        stream: &mut T,
        now: Instant,
    ) -> Result<bool, ()> {
        let mut wrote = 0;
        while self.written < self.out.len() {
            match stream.send(&self.out[self.written..]) {
                Ok(0) => return Err(()),
                Ok(n) => {
                    self.written += n;
                    wrote += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.moved(stream, now, wrote);
                    return Ok(false);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        self.out.clear();
        self.written = 0;
        // A transport that holds output (TLS) gets it out before the connection waits.
        loop {
            return match stream.flush() {
                // (A transfer that never waited earns nothing: the usual response, whose
                // turn does not ask.)
                Ok(()) if !self.sent.has_waited() => Ok(true),
                // All of the output is out: unless a body goes on, its transfer is over, and
                // what is written next (the next response, a `100 Continue`, an error page)
                // is measured afresh, not on its credit (hours of it after a large one).
                Ok(()) => {
                    self.moved(stream, now, wrote);
                    if !self.body_under_way() {
                        self.sent.restart();
                    }
                    Ok(true)
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.moved(stream, now, wrote);
                    Ok(false)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => Err(()),
            };
        }
    }

    /// Credits the response's meter with what went to the socket: `wrote` bytes, or what the
    /// transport says its socket took ([`Io::take_sent`]: a TLS stream's records).
    fn moved<T: Io + ?Sized>(&mut self, stream: &mut T, now: Instant, wrote: usize) {
        self.sent.moved(now, stream.take_sent().unwrap_or(wrote));
    }

    /// Reads once from the socket; a head may grow the buffer up to `max_head`.
    pub(super) fn fill<T: Io + ?Sized>(&mut self, stream: &mut T, max_head: usize) -> Fill {
        let cap = match self.at {
            Exchange::Head => max_head,
            _ => 0,
        };
        let spare = self.read.spare(cap);
        if spare.is_empty() {
            return Fill::Full;
        }
        loop {
            return match stream.recv(spare) {
                Ok(0) => Fill::Closed,
                Ok(n) => {
                    let short = n < spare.len();
                    self.read.filled_by(n);
                    Fill::Got { short }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => Fill::WouldBlock,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => Fill::Closed,
            };
        }
    }
}
