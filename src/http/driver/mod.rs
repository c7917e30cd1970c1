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

use std::io::{Read, Write};
use std::time::{Duration, Instant};

pub(crate) mod busy;
#[cfg(any(test, feature = "bench-internals"))]
pub(crate) mod script;

use busy::{Busy, Exchange, Fill, Switch};

use crate::MinRate;
use crate::http::access::Logging;
use crate::http::address::Address;
use crate::http::buf::ReadBuf;
use crate::http::conn::{After, Answer, Close, Conn, Encoder, Late, State};
use crate::http::due::HeadDue;
use crate::http::linger::Linger;
use crate::http::pools::Pools;
use crate::http::refusal::Refusal;
use crate::http::request::RequestHead;
use crate::http::session::Takeover;
use crate::http::stream::Streaming;
use crate::limits::Limits;
use crate::rate::Meter;
use crate::transport::Transport;
use crate::upgraded::Upgraded;

/// Requests answered per turn before other connections get theirs.
const REQUEST_BUDGET: u32 = 64;

/// The stream as the driver uses it: non-blocking reads and writes (`WouldBlock` when nothing
/// moves now), and the few things a transport must do on the driver's word.
pub(crate) trait Io: Read + Write {
    /// Shuts the write side (a lingering close begins).
    fn shutdown_write(&mut self);
    /// The exchange was cut short: do not end it cleanly where the transport can tell.
    fn abort(&mut self);
    /// The transport holds output it must send before it can read on (a TLS handshake flight).
    fn wants_write(&self) -> bool;
    /// The transport holds input the socket no longer signals (decrypted TLS records).
    fn buffered_input(&self) -> bool;
    /// Sends up to `len` bytes of `file` (from its position) without copying them through the
    /// driver, where the transport can (`sendfile(2)`); `None` where it cannot.
    fn send_file(&mut self, file: &std::fs::File, len: usize) -> Option<std::io::Result<usize>>;
}

impl<T: Transport + ?Sized> Io for T {
    fn shutdown_write(&mut self) {
        let _ = Transport::shutdown_write(self);
    }
    fn abort(&mut self) {
        Transport::abort(self)
    }
    fn wants_write(&self) -> bool {
        Transport::wants_write(self)
    }
    fn buffered_input(&self) -> bool {
        Transport::buffered_input(self)
    }
    fn send_file(&mut self, file: &std::fs::File, len: usize) -> Option<std::io::Result<usize>> {
        crate::transport::send_file(self, file, len)
    }
}

/// The engine's settings the driver follows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules {
    pub(crate) limits: Limits,
    /// A request head is due in full this long after its first byte (or the accept).
    pub(crate) header_read: Duration,
    /// A connection with nothing of a next request may stay this long.
    pub(crate) idle: Duration,
    pub(crate) body_rate: Option<MinRate>,
    pub(crate) response_rate: Option<MinRate>,
}

/// Where the driver's counts go: the engine's live counters.
pub(crate) trait Tally {
    /// A request head was read in full.
    fn request(&self, head: &RequestHead);
    /// A request or connection was refused, for this reason.
    fn refused(&self, why: Refusal);
}

/// What one step of the driver is given: the rules, the engine's buffers and counters, the
/// time, whether the server is shutting down, and the turn's budget.
pub(crate) struct Cx<'a> {
    pub(crate) rules: &'a Rules,
    pub(crate) pools: &'a mut Pools,
    pub(crate) tally: &'a dyn Tally,
    pub(crate) now: Instant,
    /// Shutdown: the response under way is the last.
    pub(crate) closing: bool,
    /// How the engine waits for the stream.
    readiness: Readiness,
    /// A streamed body's producer (handler code) may run here: false on a thread that must not
    /// run handler code (the thread-pool engine's parker), which gets [`Action::Produce`].
    produce: bool,
    turn: Turn,
}

/// How the engine learns that the stream is readable again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Readiness {
    /// Level-triggered: whatever is left in the socket is reported at the next wait, so a short
    /// read may end reading.
    Level,
    /// Edge-triggered: only what arrives later is reported, so reading goes on until
    /// `WouldBlock`. (The thread-pool engine's.)
    #[cfg_attr(
        not(any(feature = "server", feature = "bench-internals")),
        allow(dead_code)
    )]
    Edge,
}

/// What is left of a connection's turn (one wake-up of the engine for it).
struct Turn {
    /// Requests it may still answer.
    budget: u32,
    /// A read came back shorter than the space offered: the stream is drained, and the next
    /// read would only say `WouldBlock`. (Waiting instead is safe where the engine's wait is
    /// level-triggered: what is left in the socket, the end of input too, is reported again.)
    drained: bool,
}

impl<'a> Cx<'a> {
    /// One turn of a connection.
    pub(crate) fn new(
        rules: &'a Rules,
        pools: &'a mut Pools,
        tally: &'a dyn Tally,
        now: Instant,
        closing: bool,
    ) -> Self {
        Cx {
            rules,
            pools,
            tally,
            now,
            closing,
            readiness: Readiness::Level,
            produce: true,
            turn: Turn {
                budget: REQUEST_BUDGET,
                drained: false,
            },
        }
    }

    /// The same connection's next turn, after a yield.
    #[cfg(feature = "bench-internals")]
    pub(crate) fn next_turn(mut self) -> Self {
        self.turn = Turn {
            budget: REQUEST_BUDGET,
            drained: false,
        };
        self
    }

    /// The engine waits edge-triggered: reads go on until the stream says `WouldBlock`.
    #[cfg_attr(
        not(any(feature = "server", feature = "bench-internals")),
        allow(dead_code)
    )]
    pub(crate) fn edge_triggered(mut self) -> Self {
        self.readiness = Readiness::Edge;
        self
    }

    /// No handler code runs here: a streamed body's next piece is left for [`Action::Produce`].
    #[cfg_attr(
        not(any(feature = "server", feature = "bench-internals")),
        allow(dead_code)
    )]
    pub(crate) fn without_producers(mut self) -> Self {
        self.produce = false;
        self
    }
}

/// Where a connection stands, for the engine's live counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Nothing of its next request has come.
    Waiting,
    /// Part of a request head has come.
    Reading,
    /// A request is being served: its body read, its handler run, its response written.
    Writing,
    /// A lingering close.
    Closing,
}

/// A request ready for its handler.
pub(crate) struct Request {
    pub(crate) head: Box<RequestHead>,
    pub(crate) body: Vec<u8>,
}

/// What the engine does next.
pub(crate) enum Action {
    /// Run this request's handler, then give its answer to [`Driver::answer`]. An engine that
    /// runs it elsewhere drives the connection again at once: earlier responses go out while
    /// the handler runs.
    Run(Request),
    /// Wait for the stream (readable and/or writable; neither: for a handler's answer) until
    /// the deadline, then drive it again, or call [`Driver::expire`] once the deadline passed.
    Wait {
        read: bool,
        write: bool,
        until: Option<Instant>,
    },
    /// Work is left after the turn's budget: drive it again once other connections had a turn.
    Yield,
    /// A streamed body's next piece is due: drive it again where handler code may run (only
    /// with [`Cx::without_producers`]).
    Produce,
    /// The connection is over: close it (a lingering close or an abort was carried out).
    Close,
    /// The response that hands the connection over is out: the engine gives it on.
    Switch(Handover),
}

/// What takes a connection over, with the bytes read past its request.
pub(crate) enum Handover {
    /// A session (a WebSocket, an event stream): the engine starts it with the encoder of its
    /// output. `input`: bytes already read (`None` when there are none), a pooled buffer.
    Session {
        takeover: Box<dyn Takeover>,
        encoder: Encoder,
        input: Option<ReadBuf>,
    },
    /// A generic upgrade: a thread of its own runs this.
    Detach {
        then: Box<dyn FnOnce(Upgraded) + Send>,
        leftover: Vec<u8>,
    },
}

/// Where a connection is, and what it holds there.
enum Phase {
    /// Between requests with nothing buffered: it holds no buffer.
    Idle,
    /// Part of a request head came and the rest is awaited: its bytes, in a buffer about their
    /// size.
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

/// What working through buffered input came to.
enum Step {
    /// Something changed (bytes consumed, an error queued).
    Progress,
    /// A request is whole.
    Run(Request),
    /// Nothing more can be done without more input.
    NeedInput,
}

/// What sending a file body straight from its file came to.
enum Sent {
    /// Not a file body, or not a stream that can: produce it instead.
    NotAFile,
    /// Bytes went out.
    Some,
    /// The socket is full.
    Blocked,
    /// The stream failed.
    Failed,
}

/// One HTTP/1.1 connection, driven.
pub(crate) struct Driver {
    conn: Conn,
    phase: Phase,
    /// When the next request head is due.
    due: HeadDue,
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

    /// Runs the connection as far as it goes without waiting. Pipelined responses are batched:
    /// output is written before waiting for input, when it passes `max_pipeline_output`, and
    /// when the turn's budget runs out.
    pub(crate) fn drive<T: Io + ?Sized>(&mut self, io: &mut T, cx: &mut Cx<'_>) -> Action {
        match &mut self.phase {
            Phase::Linger(linger) => return drain(io, linger),
            Phase::Over => return Action::Close,
            Phase::Idle | Phase::Partial(_) | Phase::Busy(_) => {}
        }
        self.lend(cx.pools, cx.rules.response_rate);
        loop {
            let Phase::Busy(busy) = &self.phase else {
                return Action::Close;
            };
            // A streamed body, a close or a request with its handler: nothing more is parsed
            // until it is done, so responses stay in order.
            let parsing = match busy.at {
                Exchange::Switching(_) => return self.switch(io, cx),
                Exchange::Streaming(_) | Exchange::Running => false,
                Exchange::Head | Exchange::Body { .. } => !self.conn.is_closing(),
            };
            if !parsing {
                if let Some(blocked) = self.flush(io, cx.now) {
                    return blocked;
                }
                match self.send_file(io, cx.now) {
                    Sent::NotAFile => {}
                    Sent::Some => continue,
                    Sent::Blocked => return self.wait(false, true, cx.now),
                    Sent::Failed => return self.close(cx.pools),
                }
                if matches!(busy_at(&self.phase), Some(Exchange::Streaming(_))) && !cx.produce {
                    return Action::Produce;
                }
                if self.stream_step() {
                    continue;
                }
                return self.hold(io, cx);
            }
            if cx.turn.budget == 0 {
                return self.flush(io, cx.now).unwrap_or(Action::Yield);
            }
            match self.process(cx) {
                Step::Run(request) => {
                    cx.turn.budget -= 1;
                    if let Phase::Busy(busy) = &mut self.phase {
                        busy.at = Exchange::Running;
                    }
                    return Action::Run(request);
                }
                Step::Progress => continue,
                Step::NeedInput => {}
            }
            // Everything answered so far goes out before waiting for more input.
            if let Some(blocked) = self.flush(io, cx.now) {
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
                }
                Fill::WouldBlock => {
                    self.rest(cx.pools);
                    // A transport with output held back (a TLS handshake flight) is woken when
                    // the stream takes more, too: its next read sends it.
                    return self.wait(true, io.wants_write(), cx.now);
                }
                Fill::Closed => return self.close(cx.pools),
                // A head is refused (431) before it fills the buffer at its cap: this is body
                // framing longer than the buffer (a chunk line), which cannot be read on.
                Fill::Full => {
                    if let Phase::Busy(busy) = &mut self.phase {
                        cx.tally.refused(self.conn.write_error(400, &mut busy.out));
                    }
                }
            }
        }
    }

    /// The handler of the request `head` gave `answer`: its response is queued (then
    /// [`Driver::drive`] writes it). A panic is answered `500` and closes the connection.
    pub(crate) fn answer(&mut self, head: Box<RequestHead>, answer: Answer, cx: &mut Cx<'_>) {
        let Phase::Busy(busy) = &mut self.phase else {
            cx.pools.give_head(head);
            return;
        };
        busy.sent = Meter::new(cx.rules.response_rate);
        busy.at = Exchange::Head;
        self.due = HeadDue::after_response(
            cx.now,
            !busy.read.is_empty(),
            cx.rules.header_read,
            cx.rules.idle,
        );
        let after = self
            .conn
            .write_response(&head, answer, true, cx.closing, &mut busy.out);
        busy.keep_head(head, cx.pools);
        busy.at = match after {
            After::Done => Exchange::Head,
            After::Refused(why) => {
                cx.tally.refused(why);
                Exchange::Head
            }
            // A file is read in pieces, like any sized reader.
            After::Stream(encoder, body) => Exchange::Streaming(Streaming::new(encoder, body)),
            After::Session(encoder, takeover) => {
                Exchange::Switching(Switch::Session(encoder, takeover))
            }
            After::Detach(then) => Exchange::Switching(Switch::Detach(then)),
        };
    }

    /// The deadline the engine waited for passed. A request under way is answered `408` and
    /// its close lingers (true: drive it to write that); a connection with nothing of a next
    /// request, a response its client took slower than the minimum rate, or a lingering close
    /// that ran its time, closes (false).
    pub(crate) fn expire(&mut self, cx: &mut Cx<'_>) -> bool {
        let late = match &self.phase {
            Phase::Idle => Late::Idle,
            Phase::Partial(_) => Late::Head,
            Phase::Busy(busy) if busy.receiving() => match busy.at {
                Exchange::Body { .. } => Late::Body,
                _ => Late::Head,
            },
            Phase::Busy(_) => {
                cx.tally.refused(Refusal::TooSlow);
                self.close(cx.pools);
                return false;
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
            if let Some(why) = self.conn.request_timed_out(late, out) {
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
            Phase::Partial(bytes) => pools.give_read(bytes),
            Phase::Busy(busy) => {
                if let Exchange::Streaming(st) = &busy.at {
                    self.conn.streamed(st.sent());
                }
                busy.release(pools);
            }
            Phase::Idle | Phase::Linger(_) | Phase::Over => {}
        }
        Action::Close
    }

    /// Lends the engine's buffers to an idle or waiting connection for an exchange (one already
    /// busy keeps its own).
    fn lend(&mut self, pools: &mut Pools, rate: Option<MinRate>) {
        self.phase = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => Phase::Busy(Busy::lend(pools, None, rate)),
            Phase::Partial(bytes) => Phase::Busy(Busy::lend(pools, Some(bytes), rate)),
            other => other,
        };
    }

    /// Between requests with no output pending, the buffers go back to the pool: an idle
    /// connection holds none, and a partial head that waits keeps its bytes in a buffer their
    /// size.
    fn rest(&mut self, pools: &mut Pools) {
        self.phase = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Busy(busy) => match busy.rest(pools) {
                Ok(None) => Phase::Idle,
                Ok(Some(bytes)) => Phase::Partial(bytes),
                Err(busy) => Phase::Busy(busy),
            },
            other => other,
        };
    }

    /// Works through buffered input: a head, body bytes, or a whole request.
    fn process(&mut self, cx: &mut Cx<'_>) -> Step {
        let Phase::Busy(busy) = &mut self.phase else {
            return Step::NeedInput;
        };
        if busy.read.is_empty() {
            return Step::NeedInput;
        }
        match &mut busy.at {
            Exchange::Head => {
                let mut head = busy.head.take().unwrap_or_else(|| cx.pools.head());
                match self
                    .conn
                    .recv_head(&mut busy.read, &mut head, &cx.rules.limits)
                {
                    Ok(None) => {
                        busy.keep_head(head, cx.pools);
                        Step::NeedInput
                    }
                    Err(e) => {
                        busy.keep_head(head, cx.pools);
                        cx.tally
                            .refused(self.conn.write_error(e.status(), &mut busy.out));
                        Step::Progress
                    }
                    Ok(Some(decoder)) => {
                        cx.tally.request(&head);
                        if decoder.is_done() {
                            return Step::Run(Request {
                                head,
                                body: Vec::new(),
                            });
                        }
                        // The whole body is read before the handler runs, so a client holding
                        // it back for `100 Continue` is told to send it now.
                        self.conn.body_wanted(&head, &busy.read, &mut busy.out);
                        busy.at = Exchange::Body {
                            head,
                            decoder,
                            body: Vec::new(),
                            meter: Meter::new(cx.rules.body_rate),
                        };
                        Step::Progress
                    }
                }
            }
            Exchange::Body {
                decoder,
                body,
                meter,
                ..
            } => {
                let input = busy.read.filled();
                match decoder.decode(input, usize::MAX) {
                    Err(e) => {
                        cx.tally
                            .refused(self.conn.write_error(e.status(), &mut busy.out));
                        Step::Progress
                    }
                    Ok(d) => {
                        body.extend_from_slice(&input[d.data]);
                        busy.read.consume(d.consumed);
                        meter.moved(cx.now, d.consumed);
                        if decoder.is_done() {
                            match std::mem::replace(&mut busy.at, Exchange::Head) {
                                Exchange::Body { head, body, .. } => {
                                    Step::Run(Request { head, body })
                                }
                                _ => Step::NeedInput,
                            }
                        } else if d.consumed == 0 {
                            Step::NeedInput
                        } else {
                            Step::Progress
                        }
                    }
                }
            }
            Exchange::Running | Exchange::Streaming(_) | Exchange::Switching(_) => Step::NeedInput,
        }
    }

    /// Sends the next part of a file body straight from the file, where the stream can.
    fn send_file<T: Io + ?Sized>(&mut self, io: &mut T, now: Instant) -> Sent {
        let Phase::Busy(busy) = &mut self.phase else {
            return Sent::NotAFile;
        };
        let Exchange::Streaming(st) = &mut busy.at else {
            return Sent::NotAFile;
        };
        let Some((file, left)) = st.file() else {
            return Sent::NotAFile;
        };
        if left == 0 {
            // Its end (or a file that came up short) is the producer's to tell.
            return Sent::NotAFile;
        }
        let len = usize::try_from(left.min(1 << 30)).unwrap_or(1 << 30);
        match io.send_file(file, len) {
            None => Sent::NotAFile,
            // The file ended before its length: the producer reads the end and cuts it.
            Some(Ok(0)) => {
                st.file_sent(0);
                Sent::NotAFile
            }
            Some(Ok(n)) => {
                st.file_sent(n);
                busy.sent.moved(now, n);
                Sent::Some
            }
            Some(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => Sent::Blocked,
            Some(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => Sent::Some,
            Some(Err(_)) => Sent::Failed,
        }
    }

    /// Produces the next piece of a streamed body into the (empty) output; true when it did
    /// something, so the caller flushes and comes back. A body that panics cuts the response.
    fn stream_step(&mut self) -> bool {
        let Phase::Busy(busy) = &mut self.phase else {
            return false;
        };
        let Exchange::Streaming(st) = &mut busy.at else {
            return false;
        };
        let produced =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| st.produce(&mut busy.out)));
        let complete = match produced {
            Ok(None) => return true,
            Ok(Some(complete)) => complete,
            Err(_) => {
                log::error!("response body panicked; closing the connection");
                false
            }
        };
        self.conn.streamed(st.sent());
        busy.at = Exchange::Head;
        if !complete {
            self.conn.abort();
        }
        true
    }

    /// With its output out and nothing to parse: the connection closes as the core said
    /// (lingering, or cut short), or waits for its handler's answer.
    fn hold<T: Io + ?Sized>(&mut self, io: &mut T, cx: &mut Cx<'_>) -> Action {
        match self.conn.state() {
            State::Closing(Close::Now) => self.close(cx.pools),
            State::Closing(Close::Linger) => {
                io.shutdown_write();
                self.close(cx.pools);
                let mut linger = Linger::new(cx.now);
                let next = drain(io, &mut linger);
                self.phase = Phase::Linger(linger);
                next
            }
            State::Closing(Close::Abort) => {
                io.abort();
                self.close(cx.pools)
            }
            State::Head | State::Responding | State::Switched => Action::Wait {
                read: false,
                write: false,
                until: None,
            },
        }
    }

    /// The response that hands the connection over is queued: once it is out, the connection
    /// goes to what takes it over, with the bytes read past its request.
    fn switch<T: Io + ?Sized>(&mut self, io: &mut T, cx: &mut Cx<'_>) -> Action {
        if let Some(blocked) = self.flush(io, cx.now) {
            return blocked;
        }
        let Phase::Busy(mut busy) = std::mem::replace(&mut self.phase, Phase::Over) else {
            return Action::Close;
        };
        let handover = match std::mem::replace(&mut busy.at, Exchange::Head) {
            Exchange::Switching(Switch::Session(encoder, takeover)) => Handover::Session {
                takeover,
                encoder,
                input: match busy.read.is_empty() {
                    true => None,
                    false => Some(std::mem::replace(&mut busy.read, cx.pools.read())),
                },
            },
            Exchange::Switching(Switch::Detach(then)) => Handover::Detach {
                then,
                leftover: busy.read.filled().to_vec(),
            },
            _ => {
                busy.release(cx.pools);
                return Action::Close;
            }
        };
        busy.release(cx.pools);
        Action::Switch(handover)
    }

    /// What to wait for, until the deadline that applies: the response's minimum rate while
    /// output waits, the body's while a body is read, the head's between requests, the
    /// lingering close's.
    fn wait(&mut self, read: bool, write: bool, now: Instant) -> Action {
        let until = match &mut self.phase {
            Phase::Busy(busy) if write => busy.sent.deadline(now),
            Phase::Busy(busy) => match &mut busy.at {
                Exchange::Body { meter, .. } => meter.deadline(now),
                _ => None,
            },
            Phase::Linger(linger) => linger.deadline(),
            Phase::Idle | Phase::Partial(_) => self.due.until(),
            Phase::Over => None,
        };
        Action::Wait { read, write, until }
    }

    /// Writes pending output; `None` when all of it is out (or there is none), else what to
    /// do: wait for the stream to take more, or close (it failed).
    fn flush<T: Io + ?Sized>(&mut self, io: &mut T, now: Instant) -> Option<Action> {
        let Phase::Busy(busy) = &mut self.phase else {
            return None;
        };
        match busy.flush(io, now) {
            Ok(true) => None,
            Ok(false) => Some(self.wait(false, true, now)),
            Err(()) => Some(Action::Close),
        }
    }

    /// Reads once from the stream; the first byte of a head starts its deadline.
    fn fill<T: Io + ?Sized>(&mut self, io: &mut T, cx: &mut Cx<'_>) -> Fill {
        let Phase::Busy(busy) = &mut self.phase else {
            return Fill::Closed;
        };
        let head_begins = busy.read.is_empty() && matches!(busy.at, Exchange::Head);
        let filled = busy.fill(io, cx.rules.limits.max_head_bytes);
        if head_begins && matches!(filled, Fill::Got { .. }) {
            self.due = self.due.bytes_came(cx.now, cx.rules.header_read);
        }
        filled
    }
}

/// Where the exchange under way is, if one is.
fn busy_at(phase: &Phase) -> Option<&Exchange> {
    match phase {
        Phase::Busy(busy) => Some(&busy.at),
        _ => None,
    }
}

/// One step of a lingering close: drop what came, wait for more until its deadline.
fn drain<T: Io + ?Sized>(io: &mut T, linger: &mut Linger) -> Action {
    match linger.drain(io) {
        true => Action::Wait {
            read: true,
            write: false,
            until: linger.deadline(),
        },
        false => Action::Close,
    }
}

#[cfg(test)]
mod tests;
