//! The output side of the connection driver: what is queued goes out as the stream takes it, a
//! file body straight from its file, a streamed body piece by piece; then the connection closes
//! as the core said (lingering, cut short), waits for its handler, or is handed over.

use std::time::Instant;

use super::busy::{Exchange, Switch};
use super::{Action, Cx, Driver, Handover, Io, Phase, WaitFor};
use crate::http::conn::{Close, State};
use crate::http::linger::{Drained, Linger};
use crate::http::refusal::Refusal;
use crate::http::stream::{Piece, Produced, Streaming};

/// What sending a file body straight from its file came to.
enum Sent {
    /// Not a file body, or not a stream that can: produce it instead.
    NotAFile,
    /// Bytes went out: this many.
    Some(usize),
    /// The socket is full.
    Blocked,
    /// The stream failed.
    Failed,
}

impl Driver {
    /// One step of a turn that parses nothing (a response under way, a handler or producer
    /// away, a close due): what is queued goes out, then a file's next part, or a streamed
    /// body's next piece, or the connection waits or closes as the core said. `None`: go on.
    pub(super) fn output_step<T: Io + ?Sized>(
        &mut self,
        io: &mut T,
        cx: &mut Cx<'_>,
    ) -> Option<Action> {
        // Its output is with its producer: nothing to write or read until it is back.
        if matches!(busy_at(&self.phase), Some(Exchange::Producing { .. })) {
            return Some(Action::Wait {
                on: WaitFor::Wake,
                until: None,
            });
        }
        let piece = self.piece_unwritten();
        if let Some(blocked) = self.flush(io, cx) {
            return Some(blocked);
        }
        match self.send_file(io, cx.now) {
            Sent::NotAFile => {}
            Sent::Some(n) => return cx.turn.sent_body(n).then_some(Action::Yield),
            Sent::Blocked => return Some(self.wait_for_output(io, cx)),
            Sent::Failed => return Some(self.close(cx.pools)),
        }
        if let Some(Exchange::Streaming(st)) = busy_at(&self.phase) {
            if cx.turn.sent_body(piece) {
                return Some(Action::Yield);
            }
            if !cx.produce.here(st) {
                return Some(Action::Produce);
            }
        }
        if self.stream_step() {
            return None;
        }
        Some(self.hold(io, cx))
    }

    /// The unwritten bytes of a streamed body's piece: what the turn's next flush sends of it.
    fn piece_unwritten(&self) -> usize {
        match &self.phase {
            Phase::Busy(busy) if matches!(busy.at, Exchange::Streaming(_)) => busy.unwritten(),
            _ => 0,
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
                // (What the socket took: a transport that reports it otherwise says so.)
                busy.sent.moved(now, io.take_sent().unwrap_or(n));
                Sent::Some(n)
            }
            Some(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => Sent::Blocked,
            Some(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => Sent::Some(0),
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
        if let Piece::Ended { complete } = st.produce_piece(&mut busy.out) {
            let sent = st.sent();
            self.stream_ended(sent, complete);
        }
        true
    }

    /// After [`Action::Produce`], on a thread that may run handler code: produces the streamed
    /// body's next piece here, for the engine to drive on and write it. `clock` is the
    /// engine's, read once the piece is made (not before the turn's time): the turn goes on
    /// from it (a slow piece does not eat the write's time).
    pub(crate) fn produce(&mut self, cx: &mut Cx<'_>, clock: impl FnOnce() -> Instant) {
        self.stream_step();
        cx.now = clock();
    }

    /// The streamed body ended after `sent` bytes: the response is done (cut short unless
    /// `complete`).
    fn stream_ended(&mut self, sent: u64, complete: bool) {
        let Phase::Busy(busy) = &mut self.phase else {
            return;
        };
        drop(busy.at.replace(Exchange::Head));
        busy.body_ended();
        self.conn.streamed(sent);
        if !complete {
            self.conn.abort();
        }
    }

    /// After [`Action::Produce`]: the streamed body's producer and the (empty, written) output
    /// buffer, for a thread that may run handler code to produce the next piece into
    /// ([`Streaming::produce_piece`]). `None` when no body is being streamed.
    pub(crate) fn lend_producer(&mut self) -> Option<(Streaming, Vec<u8>)> {
        let Phase::Busy(busy) = &mut self.phase else {
            return None;
        };
        let sent = match &busy.at {
            Exchange::Streaming(st) if busy.unwritten() == 0 => st.sent(),
            _ => return None,
        };
        let Some(Exchange::Streaming(st)) = busy.at.replace(Exchange::Producing { sent }) else {
            return None;
        };
        Some((st, busy.lend_out()))
    }

    /// The producer lent by [`lend_producer`](Self::lend_producer) is back, with the output
    /// buffer holding what it produced ([`Streaming::produce_away`]); the engine drives on to
    /// write it. Given back anywhere else, the producer is returned.
    pub(crate) fn produced(&mut self, out: Vec<u8>, produced: Produced) -> Option<Streaming> {
        let busy = match &mut self.phase {
            Phase::Busy(busy) if matches!(busy.at, Exchange::Producing { .. }) => busy,
            _ => return produced.into_body(),
        };
        busy.out_back(out);
        match produced {
            Produced::More(st) => drop(busy.at.replace(Exchange::Streaming(st))),
            Produced::Ended { sent, complete } => self.stream_ended(sent, complete),
        }
        None
    }

    /// With its output out and nothing to parse: the connection closes as the core said
    /// (lingering, or cut short), or waits for its handler's answer.
    pub(super) fn hold<T: Io + ?Sized>(&mut self, io: &mut T, cx: &mut Cx<'_>) -> Action {
        // Input read and not taken (requests pipelined behind the last one) would be answered
        // by a reset if the connection closed now, which can destroy the response in flight:
        // it lingers instead (RFC 9112 §9.6).
        match self.conn.state() {
            State::Closing(Close::Now) if !self.has_unread_input() => self.close(cx.pools),
            State::Closing(Close::Ended) if !self.has_unread_input() && !input_waits(io) => {
                self.close(cx.pools)
            }
            State::Closing(Close::Now | Close::Ended | Close::Linger) => {
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
                on: WaitFor::Wake,
                until: None,
            },
        }
    }

    /// Input read and not taken: requests pipelined behind the last one.
    fn has_unread_input(&self) -> bool {
        matches!(&self.phase, Phase::Busy(busy) if !busy.read.is_empty())
    }

    /// The response that hands the connection over is queued: once it is out, the connection
    /// goes to what takes it over, with the bytes read past its request.
    pub(super) fn switch<T: Io + ?Sized>(&mut self, io: &mut T, cx: &mut Cx<'_>) -> Action {
        if let Some(blocked) = self.flush(io, cx) {
            return blocked;
        }
        let Phase::Busy(mut busy) = std::mem::replace(&mut self.phase, Phase::Over) else {
            return Action::Close;
        };
        let to = match &mut busy.at {
            Exchange::Switching(switching) => switching.hand_over(),
            _ => Switch::Gone,
        };
        let handover = match to {
            Switch::Session(encoder, takeover) => Handover::Session {
                takeover,
                encoder,
                input: match busy.read.is_empty() {
                    true => None,
                    false => Some(std::mem::replace(&mut busy.read, cx.pools.read())),
                },
            },
            Switch::Detach(then) => Handover::Detach {
                then,
                leftover: busy.read.filled().to_vec(),
            },
            Switch::Gone => {
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
    pub(super) fn wait<T: Io + ?Sized>(&mut self, io: &T, on: WaitFor, now: Instant) -> Action {
        let until = match &mut self.phase {
            Phase::Idle | Phase::Partial(_) => self.due.until(),
            Phase::Busy(busy) => busy.deadline(io, on, now),
            Phase::Linger(linger) => linger.deadline(),
            Phase::Over => None,
        };
        Action::Wait { on, until }
    }

    /// Output waits for the stream to take more, until the response's deadline; past it (all
    /// the socket took written), the connection closes: its client takes it slower than the
    /// minimum rate.
    fn wait_for_output<T: Io + ?Sized>(&mut self, io: &T, cx: &mut Cx<'_>) -> Action {
        match self.wait(io, WaitFor::Output, cx.now) {
            Action::Wait {
                until: Some(until), ..
            } if until <= cx.now => {
                cx.tally.refused(Refusal::TooSlow);
                self.close(cx.pools)
            }
            action => action,
        }
    }

    /// Writes pending output; `None` when all of it is out (or there is none), else what to
    /// do: wait for the stream to take more, or close (it failed).
    pub(super) fn flush<T: Io + ?Sized>(&mut self, io: &mut T, cx: &mut Cx<'_>) -> Option<Action> {
        let Phase::Busy(busy) = &mut self.phase else {
            return None;
        };
        match busy.flush(io, cx.now) {
            Ok(true) => {
                busy.tail = None;
                None
            }
            Ok(false) => {
                // What waits for a slow client counts against the server's memory budget.
                let left = busy.unwritten();
                (busy.tail.get_or_insert_with(|| cx.tally.budget().charge())).hold(left);
                Some(self.wait_for_output(io, cx))
            }
            Err(()) => Some(Action::Close),
        }
    }
}

/// Where the exchange under way is, if one is.
fn busy_at(phase: &Phase) -> Option<&Exchange> {
    match phase {
        Phase::Busy(busy) => Some(&busy.at),
        _ => None,
    }
}

/// Whether the client has sent input the server has not read: one read, whose bytes (if any)
/// are dropped, as the lingering close that follows drops the rest.
fn input_waits<T: Io + ?Sized>(io: &mut T) -> bool {
    let mut scratch = [0u8; 512];
    loop {
        match io.read(&mut scratch) {
            Ok(n) => return n > 0,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // `WouldBlock`: nothing; another error: the close will tell.
            Err(_) => return false,
        }
    }
}

/// One step of a lingering close: drop what came, wait for more until its deadline.
pub(super) fn drain<T: Io + ?Sized>(io: &mut T, linger: &mut Linger) -> Action {
    match linger.drain(io) {
        Drained::Wait => Action::Wait {
            on: WaitFor::Input,
            until: linger.deadline(),
        },
        Drained::More => Action::Yield,
        Drained::Over => Action::Close,
    }
}
