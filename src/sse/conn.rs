//! An event stream being written: what its senders queued goes out as its client takes it.

use std::io::ErrorKind;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use super::sender::{Flow, Queue, Shared, Stream, lock};
use crate::deadline;
use crate::http::budget::{Enlisted, Queued};
use crate::http::framing::Encoder;
use crate::http::session::{Callbacks, Duplex, Io, Next, Session, Start, Takeover, Work};
use crate::rate::{Meter, MinRate};

/// Reads of 512 bytes an event stream makes per turn to drop what its client sends (it
/// should send nothing) before the other connections get their turn.
pub(super) const INPUT_READS_PER_TURN: usize = 64;

/// An event stream being written: the engine-independent driver.
struct SseConn {
    _stream: Stream,
    shared: Arc<Shared>,
    encoder: Encoder,
    out: Vec<u8>,
    written: usize,
    last_write: Instant,
    /// The stream is over: write what is left (and the last chunk), then close.
    ending: bool,
    /// Server shutdown began: closed at this time, whatever is left
    /// ([`SseConfig::shutdown_timeout`](super::SseConfig::shutdown_timeout)).
    closes_by: Option<Instant>,
    /// The minimum rate of output while the client does not take it all.
    rate: Option<MinRate>,
    sent: Meter,
    /// On the budget's list of sessions it may drop.
    _enlisted: Enlisted,
}

impl SseConn {
    fn new(stream: Stream, start: Start) -> Self {
        let Start {
            waker,
            now,
            rate,
            encoder,
            budget,
            ..
        } = start;
        let _ = stream.0.waker.set(waker);
        {
            // What was queued before the stream started counts from now.
            let mut q = lock(&stream.0.queue);
            let mut held = budget.charge();
            held.hold(q.bytes.len());
            q.held = Some(held);
            q.mark();
        }
        let me: std::sync::Weak<dyn Queued> = Arc::downgrade(&stream.0) as _;
        SseConn {
            _enlisted: budget.enlist(me),
            shared: stream.0.clone(),
            _stream: stream,
            encoder,
            out: Vec::new(),
            written: 0,
            last_write: now,
            ending: false,
            closes_by: None,
            rate,
            sent: Meter::output(rate),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        lock(&self.shared.queue)
    }

    /// Server shutdown, begun at `now`: end the stream after what is queued, or at the
    /// shutdown timeout with what is left.
    fn end_after_queue(&mut self, now: Instant) {
        let mut q = self.queue();
        if q.flow == Flow::Open {
            q.flow = Flow::Ending;
        }
        drop(q);
        if self.closes_by.is_none() {
            self.closes_by = deadline::after(now, self.shared.config.shutdown_timeout);
        }
    }

    /// Waits for the socket (`write`: to take output) until `deadline` or the shutdown's.
    fn wait(&self, write: bool, deadline: Option<Instant>) -> Next {
        let deadline = match (deadline, self.closes_by) {
            (Some(d), Some(by)) => Some(d.min(by)),
            (d, by) => d.or(by),
        };
        Next::Wait { write, deadline }
    }

    /// Marks the sender closed (the connection is going away): what is queued is dropped and
    /// no longer counts.
    fn sender_closed(&mut self) {
        self.queue().close();
    }

    /// Writes what is queued (and a heartbeat when due), watches for the client going away.
    fn run(&mut self, sock: &mut dyn Duplex, now: Instant) -> Next {
        self.shared.notified.running();
        if lock(&self.shared.queue).flow == Flow::Shed {
            return self.closed();
        }
        if self.closes_by.is_some_and(|by| now >= by) {
            return self.closed();
        }
        // The client sends nothing on an event stream; end of input means it went away. What
        // it sends anyway is dropped, up to a share per turn.
        let mut scratch = [0u8; 512];
        let mut input_left = false;
        for reads in 0.. {
            if reads == INPUT_READS_PER_TURN {
                input_left = true;
                break;
            }
            match sock.read(&mut scratch) {
                Ok(0) => return self.closed(),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.closed(),
            }
        }
        loop {
            if self.written == self.out.len() {
                self.out.clear();
                self.written = 0;
                let mut q = lock(&self.shared.queue);
                if q.in_out > 0 {
                    q.in_out = 0;
                    let unsent = q.unsent();
                    if let Some(held) = q.held.as_mut() {
                        held.hold(unsent);
                    }
                    // What is left came after what the client just took.
                    q.over_since = None;
                    q.mark();
                }
                if q.flow == Flow::Shed {
                    drop(q);
                    return self.closed();
                }
                if !q.bytes.is_empty() {
                    self.encoder.encode(&q.bytes, &mut self.out);
                    q.in_out = q.bytes.len();
                    q.bytes.clear();
                }
                if q.flow != Flow::Open && !self.ending {
                    self.ending = true;
                    self.encoder.finish(&mut self.out);
                }
                drop(q);
                let beat = self.shared.config.heartbeat;
                if self.out.is_empty()
                    && beat
                        .and_then(|b| deadline::after(self.last_write, b))
                        .is_some_and(|d| now >= d)
                {
                    self.encoder.encode(b":\n\n", &mut self.out);
                }
            }
            if self.written == self.out.len() {
                // A transport that holds output (TLS) gets it out before the stream waits.
                match sock.flush() {
                    // Everything is out (the socket took what a TLS session held too): the
                    // next backlog is measured afresh.
                    Ok(()) => self.sent = Meter::output(self.rate),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return self.stalled(sock, now),
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => return self.closed(),
                }
                if self.ending {
                    return self.closed();
                }
                let queue = &self.shared.queue;
                let pending = || {
                    let q = lock(queue);
                    !q.bytes.is_empty() || q.flow != Flow::Open
                };
                if self.shared.notified.settle(pending) {
                    continue;
                }
                if input_left {
                    return Next::Again;
                }
                let beat = (self.shared.config.heartbeat)
                    .and_then(|b| deadline::after(self.last_write, b));
                return self.wait(false, beat);
            }
            match sock.write(&self.out[self.written..]) {
                Ok(0) => return self.closed(),
                Ok(n) => {
                    self.written += n;
                    self.last_write = now;
                    // What the socket took (a TLS stream may hold what it was given).
                    self.sent.moved(now, sock.take_sent().unwrap_or(n));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return self.stalled(sock, now),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.closed(),
            }
        }
    }

    /// The socket takes no more output: wait for it, or close the stream when its client
    /// took it slower than the minimum rate. Records a TLS stream pushed out before it said
    /// `WouldBlock` (by the flush, or by the write that took nothing more) are credited first.
    fn stalled(&mut self, sock: &mut dyn Duplex, now: Instant) -> Next {
        if let Some(n) = sock.take_sent() {
            self.sent.moved(now, n);
        }
        let stalled = self.sent.deadline(now, || sock.unacknowledged());
        if stalled.is_some_and(|d| now >= d) {
            return self.closed();
        }
        self.wait(true, stalled)
    }

    fn closed(&mut self) -> Next {
        self.sender_closed();
        Next::Close
    }
}

impl Takeover for Stream {
    fn start(self: Box<Self>, start: Start) -> Box<dyn Session> {
        Box::new(SseConn::new(*self, start))
    }
}

/// An event stream has no callbacks and reads nothing but the end of its client's input.
impl Session for SseConn {
    fn drive(&mut self, io: &mut Io<'_>, now: Instant, _: Callbacks) -> Next {
        self.run(io.stream, now)
    }
    /// The heartbeat is due: the next turn writes it.
    fn expire(&mut self, _: &mut Io<'_>, _: Instant) {}
    fn shutdown(&mut self, _: &mut Io<'_>, now: Instant) {
        self.end_after_queue(now)
    }
    fn finish(&mut self, _: Callbacks) -> Option<Box<dyn Work>> {
        self.sender_closed();
        None
    }
    fn take_work(&mut self) -> Option<Box<dyn Work>> {
        None
    }
    fn put_back(&mut self, _: Box<dyn Work>, _: &mut Io<'_>) {}
    fn keeps_input(&self) -> bool {
        false
    }

    fn kind(&self) -> crate::http::session::Kind {
        crate::http::session::Kind::EventStream
    }
}
