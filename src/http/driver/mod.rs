//! The connection driver: one HTTP/1.1 connection driven from its first byte to its close,
//! sans-I/O in the way rustls's `ServerConnection` is. It owns the connection's buffers (lent
//! from the engine's [`Pools`] while bytes flow), the protocol state ([`Conn`]), every deadline
//! and minimum rate, `100 Continue`, what follows a handler's panic, how the connection ends
//! (keep-alive, close, lingering close, abort) and the hand-over to a session or a thread.
//!
//! An engine gives it the stream (any non-blocking [`Io`]: it reads and writes only what moves
//! without waiting), the time and its buffers, and carries out the [`Action`] it returns: run a
//! request's handler (inline, or on a worker) and give the answer back ([`Driver::answer`]);
//! wait for the stream until a deadline, then [`Driver::expire`]; yield to other connections;
//! close; or hand the connection over. The engine decides nothing about HTTP.
//!
//! A request's body is read into memory (bounded by `Limits::max_body_bytes`) before its
//! handler runs, so that a handler never waits on its client. Output always goes first: while it
//! cannot drain, the connection reads nothing more (backpressure).

use std::time::Instant;

mod action;
mod body_in;
pub(crate) mod busy;
mod cx;
mod input;
mod output;
#[cfg(any(test, feature = "bench-internals"))]
pub(crate) mod script;

pub(crate) use action::{Action, Handover, Request, Stage, WaitFor};
#[cfg_attr(not(feature = "server"), allow(unused_imports))]
pub(crate) use body_in::BodyRead;
#[cfg_attr(not(feature = "server"), allow(unused_imports))]
pub(crate) use cx::Streams;
use cx::{Began, Input, Readiness};
pub(crate) use cx::{Cx, Io, Rules, Tally};
use output::drain;

use body_in::BodyEnd;
use busy::{Busy, Exchange, Fill, Switch, Switching};

use crate::MinRate;
use crate::http::access::Logging;
use crate::http::address::Address;
use crate::http::answer::{After, Answer};
use crate::http::budget::{ALLOWANCE, Held};
use crate::http::buf::ReadBuf;
use crate::http::conn::{Conn, Late};
use crate::http::due::HeadDue;
use crate::http::linger::Linger;
use crate::http::origin::Hop;
use crate::http::pools::Pools;
use crate::http::refusal::Refusal;
use crate::http::request_head::RequestHead;
use crate::http::stream::Streaming;

/// Where a connection is, and what it holds there. (`repr(u8)`: a plain tag, one load to
/// match, where the niche layout took several at every match of the hot path: 100
/// instructions of a keep-alive request with [`Exchange`]'s, counted by callgrind.)
#[repr(u8)]
enum Phase {
    /// Between requests with nothing buffered: it holds no buffer.
    Idle,
    /// Part of a request head came and the rest is awaited: its bytes, in a buffer about their
    /// size (charged past a working buffer's allowance: [`Driver::waiting`]).
    Partial(ReadBuf),
    /// An exchange under way, with the engine's buffers lent to it. (Boxed, from the pool: an
    /// idle connection stays small.)
    Busy(Box<Busy>),
    /// The last response is out and the write side shut; what the client still sends is read
    /// and dropped until it closes.
    Linger(Linger),
    /// Closed or handed over: nothing more.
    Over,
}

impl Phase {
    /// Moves on to `next`, giving back what was there unless it held nothing (`Idle`, `Over`):
    /// those are left without running the enum's drop glue (an out-of-line call; see
    /// [`Exchange::replace`]).
    fn replace(&mut self, next: Phase) -> Option<Phase> {
        match self {
            // Nothing to drop: forgetting a variant without fields leaks nothing.
            Phase::Idle | Phase::Over => {
                std::mem::forget(std::mem::replace(self, next));
                None
            }
            _ => Some(std::mem::replace(self, next)),
        }
    }
}

/// What working through buffered input came to. (`repr(u8)`: see [`Phase`].)
#[repr(u8)]
enum Step {
    /// Something changed (bytes consumed, an error queued).
    Progress,
    /// A request is whole.
    Run(Request),
    /// Nothing more can be done without more input.
    NeedInput,
}

/// One HTTP/1.1 connection, driven.
pub(crate) struct Driver {
    conn: Conn,
    phase: Phase,
    /// When the next request head is due.
    due: HeadDue,
    /// The connection's peer, as far as trusting its forwarded headers goes.
    peer: Hop,
    /// Whether the last wait for input found the stream drained.
    input: Input,
    /// The charge to the memory budget of a long head's buffer while it waits
    /// ([`Phase::Partial`]); none for a head within a working buffer's allowance, as nearly
    /// every one is.
    waiting: Option<Held>,
}

impl Driver {
    /// A connection accepted at `now`.
    pub(crate) fn new(
        logging: Logging,
        peer: Option<&Address>,
        now: Instant,
        rules: &Rules,
    ) -> Self {
        Driver {
            conn: Conn::new(logging, peer),
            phase: Phase::Idle,
            due: HeadDue::first(now, rules.header_read),
            peer: Hop::of(peer),
            input: Input::Unknown,
            waiting: None,
        }
    }

    /// The deadline of a connection that has not been driven yet: its first head's.
    pub(crate) fn first_deadline(&self) -> Option<Instant> {
        self.due.until()
    }

    /// Where the connection stands, for the live counters.
    pub(crate) fn stage(&self) -> Stage {
        match &self.phase {
            Phase::Idle | Phase::Over => Stage::Waiting,
            Phase::Partial(_) => Stage::Reading,
            Phase::Busy(busy) => busy.stage(),
            Phase::Linger(_) => Stage::Closing,
        }
    }

    /// True once the response being written is the last (the fuzz harness's oracle asks).
    #[cfg(feature = "bench-internals")]
    pub(crate) fn is_closing(&self) -> bool {
        self.conn.is_closing()
    }

    /// True when nothing is under way: no buffered input, no output, no request in flight.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Idle)
    }

    /// True when a shutdown closes it now: idle after an exchange. One whose first request has
    /// not come waits a moment for it (see [`HeadDue::at_shutdown`]).
    pub(crate) fn closes_at_shutdown(&self) -> bool {
        self.is_idle() && !self.due.awaits_first()
    }

    /// True while nothing of its first request has come.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn awaits_first_request(&self) -> bool {
        self.is_idle() && self.due.awaits_first()
    }

    /// Shutdown began (noticed at `now`): when its wait for the next head ends.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn deadline_at_shutdown(&mut self, now: Instant) -> Option<Instant> {
        self.due = self.due.at_shutdown(now);
        self.due.until()
    }

    /// Runs the connection as far as it goes without waiting. Pipelined responses are batched:
    /// output is written before waiting for input, when it passes `max_pipeline_output`, and
    /// when the turn's budget runs out.
    pub(crate) fn drive<T: Io + ?Sized>(&mut self, io: &mut T, cx: &mut Cx<'_>) -> Action {
        // However it came to a close (a write that failed, the client gone), the buffers go
        // back and a body cut off is logged with what was sent.
        match self.step(io, cx) {
            Action::Close => self.close(cx.pools),
            action => action,
        }
    }

    /// [`Driver::drive`]'s work.
    fn step<T: Io + ?Sized>(&mut self, io: &mut T, cx: &mut Cx<'_>) -> Action {
        if cx.closing {
            self.due = self.due.at_shutdown(cx.now);
        }
        match &mut self.phase {
            Phase::Linger(linger) => return drain(io, linger),
            Phase::Over => return Action::Close,
            Phase::Idle | Phase::Partial(_) | Phase::Busy(_) => {}
        }
        self.lend(cx.pools, cx.rules.response_rate);
        // A turn no readable event began, on a stream the last read found drained, waits
        // instead of reading; not at shutdown, whose pass reads what is already in the socket.
        if cx.began == Began::Otherwise
            && self.input == Input::Drained
            && !cx.closing
            && cx.readiness == Readiness::Level
            && !io.buffered_input()
        {
            cx.turn.drained = true;
        }
        loop {
            let Phase::Busy(busy) = &self.phase else {
                return Action::Close;
            };
            // A streamed body, a close or a request with its handler: nothing more is parsed
            // until it is done, so responses stay in order.
            let parsing = match busy.at {
                Exchange::Switching(_) => return self.switch(io, cx),
                Exchange::Streaming(_)
                | Exchange::Producing { .. }
                | Exchange::Running
                | Exchange::Handed(_) => false,
                Exchange::Head | Exchange::Body { .. } => !self.conn.is_closing(),
            };
            if !parsing {
                match self.output_step(io, cx) {
                    Some(action) => return action,
                    None => continue,
                }
            }
            if cx.turn.budget == 0 {
                return self.flush(io, cx).unwrap_or(Action::Yield);
            }
            // Buffered input to work through (writing leaves it as it is).
            let input = !busy.read.is_empty();
            // Pipelined responses are batched up to `max_pipeline_output`, then written before
            // more is parsed: a client that does not read stops being answered there.
            if busy.out.len() >= cx.rules.limits.max_pipeline_output {
                if let Some(blocked) = self.flush(io, cx) {
                    return blocked;
                }
            }
            if input {
                // The client a PROXY protocol header named: known once the stream gave a byte.
                let proxied = match cx.rules.relay.proxy_protocol {
                    true => {
                        let proxied = io.proxied_source().map(|a| a.ip());
                        self.conn.proxied(proxied);
                        proxied
                    }
                    false => None,
                };
                match self.process(proxied, cx) {
                    Step::Run(request) => {
                        cx.turn.budget -= 1;
                        if let Phase::Busy(busy) = &mut self.phase {
                            if let Exchange::Head = busy.at {
                                busy.at.replace(Exchange::Running);
                            }
                        }
                        return Action::Run(request);
                    }
                    Step::Progress => continue,
                    Step::NeedInput => {}
                }
            }
            // Everything answered so far goes out before waiting for more input.
            if let Some(blocked) = self.flush(io, cx) {
                return blocked;
            }
            let filled = match cx.turn.drained {
                true => Fill::WouldBlock,
                false => self.fill(io, cx),
            };
            match filled {
                Fill::Got { short } => {
                    cx.turn.drained =
                        short && cx.readiness == Readiness::Level && !io.buffered_input();
                    // (A short read leaves `input` as it was: a later wait for input settles it.)
                    if !cx.turn.drained {
                        self.input = Input::Unknown;
                    }
                }
                Fill::WouldBlock => {
                    if cx.readiness == Readiness::Level {
                        self.input = Input::Drained;
                    }
                    self.rest(cx.pools, cx.tally);
                    // At shutdown a connection idle after an exchange closes here: the engines
                    // only carry it out.
                    if cx.closing && self.closes_at_shutdown() {
                        return self.close(cx.pools);
                    }
                    // A transport with output held back (a TLS handshake flight) is woken when
                    // the stream takes more, too: its next read sends it.
                    return self.wait(io, WaitFor::input_and_held_output(io.wants_write()), cx.now);
                }
                Fill::Closed => return self.close(cx.pools),
                // A head is refused (431) before it fills the buffer at its cap: this is body
                // framing longer than the buffer (a chunk line), which cannot be read on.
                Fill::Full => {
                    if let Phase::Busy(busy) = &mut self.phase {
                        cx.tally
                            .refused(self.conn.write_error(400, &mut busy.out, cx.date));
                    }
                }
            }
        }
    }

    /// The handler of the request `head` gave `answer` at `at` (the engine's clock, read after
    /// the handler returned; not before the turn's time): its response is queued (then [`Driver::drive`] writes it). A
    /// panic is answered `500` and closes the connection. The turn goes on from `at`: the
    /// response's rate and the next idle wait start when the answer came, not when the turn
    /// that ran a slow handler began.
    pub(crate) fn answer(
        &mut self,
        head: Box<RequestHead>,
        answer: Answer,
        at: Instant,
        cx: &mut Cx<'_>,
    ) {
        cx.now = at;
        let Phase::Busy(busy) = &mut self.phase else {
            cx.pools.give_head(head);
            answer.drop_caught(cx.tally.panics());
            return;
        };
        busy.output_begins(cx.rules.response_rate);
        let body = match busy.at.replace(Exchange::Head) {
            Some(Exchange::Handed(body)) => body.end,
            _ => BodyEnd::Complete,
        };
        self.due = HeadDue::after_response(
            cx.now,
            !busy.read.is_empty(),
            cx.rules.header_read,
            cx.rules.idle,
        );
        let after = match body {
            BodyEnd::Complete => {
                self.conn
                    .write_response(&head, answer, true, cx.closing, &mut busy.out, cx.date)
            }
            // Left unread: the response closes the connection.
            BodyEnd::Open => {
                self.conn
                    .write_response(&head, answer, false, cx.closing, &mut busy.out, cx.date)
            }
            // The body failed: its failure is the answer, the handler's is dropped.
            failed => {
                answer.drop_caught(cx.tally.panics());
                match failed {
                    BodyEnd::Failed(status) => {
                        After::Refused(self.conn.write_error(status, &mut busy.out, cx.date))
                    }
                    BodyEnd::TooSlow => {
                        let why = self
                            .conn
                            .request_timed_out(Late::Body, &mut busy.out, cx.date);
                        After::Refused(why.unwrap_or(Refusal::TooSlow))
                    }
                    // Broken (the others were matched above).
                    _ => {
                        self.conn.abort();
                        After::Done
                    }
                }
            }
        };
        busy.keep_head(head, cx.pools);
        // `at` is `Head` since the answer came: it changes only for what follows the head.
        match after {
            After::Done => {}
            After::Refused(why) => cx.tally.refused(why),
            After::Unsent(body) => cx.tally.panics().drop_caught(body),
            After::Declined(why, switch) => {
                cx.tally.refused(why);
                cx.tally.panics().drop_caught(switch);
            }
            // A file is read in pieces, like any sized reader.
            After::Stream(encoder, body) => {
                let panics = cx.tally.panics().clone();
                busy.at = Exchange::Streaming(Streaming::new(encoder, body, panics));
            }
            After::Session(encoder, takeover) => {
                let to = Switch::Session(encoder, takeover);
                busy.at = Exchange::Switching(Switching::new(to, cx.tally.panics().clone()));
            }
            After::Detach(then) => {
                let to = Switch::Detach(then);
                busy.at = Exchange::Switching(Switching::new(to, cx.tally.panics().clone()));
            }
        }
    }

    /// The deadline the engine waited for passed. A request under way is answered `408` and
    /// its close lingers (true: drive it to write that); output that waited is written again
    /// and goes on (true: drive it) unless its client is still below the minimum rate; a
    /// connection with nothing of a next request, or a lingering close that ran its time,
    /// closes (false).
    pub(crate) fn expire<T: Io + ?Sized>(&mut self, io: &mut T, cx: &mut Cx<'_>) -> bool {
        let late = match &self.phase {
            Phase::Idle => Late::Idle,
            Phase::Partial(_) => Late::Head,
            Phase::Busy(busy) if busy.receiving() => match busy.at {
                Exchange::Body { .. } => Late::Body,
                _ => Late::Head,
            },
            // Output waited past the minimum rate's deadline, going by what the engine saw:
            // the socket may have taken more since without saying so (Linux reports a grown
            // send buffer writable only once a third of it is free: seconds at a rate far above
            // the minimum). What it takes now is written and the meter asked again, before
            // another request of the client's runs.
            Phase::Busy(_) => {
                return match self.flush(io, cx) {
                    // Cut as too slow, or the stream failed: closed here, as a drive's close
                    // would be (its buffers back, a streamed body logged with what was sent).
                    Some(Action::Close) => {
                        self.close(cx.pools);
                        false
                    }
                    _ => true,
                };
            }
            Phase::Linger(_) | Phase::Over => {
                self.close(cx.pools);
                return false;
            }
        };
        if !self.conn.is_closing() {
            if late != Late::Idle {
                self.lend(cx.pools, cx.rules.response_rate);
            }
            let mut none = Vec::new();
            let out = match &mut self.phase {
                Phase::Busy(busy) => &mut busy.out,
                _ => &mut none,
            };
            if let Some(why) = self.conn.request_timed_out(late, out, cx.date) {
                cx.tally.refused(why);
                return true;
            }
        }
        self.close(cx.pools);
        false
    }

    /// The connection is closed (by the engine, or as the driver said): every pooled item goes
    /// back, and an exchange cut off ends in the access log with what was sent.
    pub(crate) fn close(&mut self, pools: &mut Pools) -> Action {
        match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::Partial(bytes) => {
                self.waiting = None;
                pools.give_read(bytes);
            }
            Phase::Busy(busy) => {
                match &busy.at {
                    Exchange::Streaming(st) => self.conn.streamed(st.sent()),
                    Exchange::Producing { sent } => self.conn.streamed(*sent),
                    _ => {}
                }
                busy.release(pools);
            }
            Phase::Idle | Phase::Linger(_) | Phase::Over => {}
        }
        Action::Close
    }

    /// Lends the engine's buffers to an idle or waiting connection for an exchange (one already
    /// busy keeps its own). (Inlined: a connection drives again while busy, once a request
    /// at least, and the out-of-line call to learn it cost about 20 instructions.)
    #[inline]
    fn lend(&mut self, pools: &mut Pools, rate: Option<MinRate>) {
        if let Phase::Idle | Phase::Partial(_) = self.phase {
            self.lend_to_rest(pools, rate);
        }
    }

    /// [`Driver::lend`] to a connection at rest.
    fn lend_to_rest(&mut self, pools: &mut Pools, rate: Option<MinRate>) {
        let partial = match &self.phase {
            Phase::Idle => None,
            Phase::Partial(_) => match self.phase.replace(Phase::Idle) {
                Some(Phase::Partial(bytes)) => {
                    // Lent for the turn, the bytes are a working set's: their charge goes.
                    self.waiting = None;
                    Some(bytes)
                }
                _ => None,
            },
            Phase::Busy(_) | Phase::Linger(_) | Phase::Over => return,
        };
        self.phase
            .replace(Phase::Busy(Busy::lend(pools, partial, rate)));
    }

    /// Between requests with no output pending, the buffers go back to the pool: an idle
    /// connection holds none, and a partial head that waits keeps its bytes in a buffer their
    /// size, charged past a working buffer's allowance (its room was looked at when it was
    /// found incomplete: [`input::head_step`]).
    fn rest(&mut self, pools: &mut Pools, tally: &dyn Tally) {
        let Phase::Busy(busy) = &mut self.phase else {
            return;
        };
        if !busy.at_rest() {
            return;
        }
        let next = match busy.partial(pools) {
            None => Phase::Idle,
            Some(bytes) => {
                if bytes.len() > ALLOWANCE {
                    self.waiting = Some(waiting_charge(&bytes, tally));
                }
                Phase::Partial(bytes)
            }
        };
        if let Some(Phase::Busy(busy)) = self.phase.replace(next) {
            pools.give_busy(busy);
        }
    }
}

/// The charge of a long head's buffer while it waits (its room was looked at when the head was
/// found incomplete).
#[cold]
fn waiting_charge(bytes: &ReadBuf, tally: &dyn Tally) -> Held {
    let mut charge = tally.budget().charge();
    charge.hold(bytes.len());
    charge
}

#[cfg(test)]
mod tests;
