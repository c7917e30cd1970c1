//! One connection on an event loop: a non-blocking driver of the shared `http::Conn`.
//!
//! A request's body is read into memory (bounded by `Limits::max_body_bytes`) before the handler
//! runs, because an inline handler must never wait on the socket. Output always goes first: while
//! it cannot drain, the connection reads nothing more (backpressure).

use std::sync::Arc;
use std::time::Instant;

pub(crate) mod busy;
mod http;
mod session;

pub(crate) use session::Wakes;

use busy::{Busy, Exchange};

use super::Config;
use super::blocking::Blocking;
use super::pool::PoolSender;
use super::pools::Pools;
use crate::Handler;
use crate::MinRate;
use crate::engine::OpenGuard;
use crate::http::access::Logging;
use crate::http::buf::ReadBuf;
use crate::http::conn::{Conn, Late};
use crate::http::due::HeadDue;
use crate::http::linger::Linger;
use crate::http::session::Session;
use crate::net::sys::Registered;
use crate::net::transport::{Address, Stream};
use crate::stats::{Activity, Counters, Refusal};

/// What the loop needs to run a connection's step.
pub(crate) struct Cx<'a, H> {
    pub(crate) handler: &'a H,
    pub(crate) cfg: &'a Config,
    pub(crate) pools: &'a mut Pools,
    pub(crate) pool: Option<&'a PoolSender>,
    pub(crate) now: Instant,
    pub(crate) closing: bool,
    pub(crate) key: usize,
    pub(crate) wakes: &'a Arc<Wakes>,
    pub(crate) counters: &'a Counters,
    /// Times inline handler calls, for the blocking warning.
    pub(crate) blocking: &'a mut Blocking,
}

/// What the loop should do with a connection after a step.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Wait for the socket (readable and/or writable) until the deadline.
    Wait {
        read: bool,
        write: bool,
        deadline: Option<Instant>,
    },
    /// Work is left after the budget: run again once other connections had their turn.
    Again,
    /// Close it.
    Close,
    /// The connection switched protocols: it leaves the loop for a thread of its own
    /// ([`Connection::into_detached`]).
    Detach,
}

/// Where a connection is, and what it holds there.
enum Phase {
    /// Between requests with nothing buffered: it holds no buffer (they are in the loop's pool).
    Idle,
    /// Part of a request head came and the rest is awaited: its bytes, in a buffer about their
    /// size.
    Partial(ReadBuf),
    /// An exchange under way, with the loop's buffers lent to it.
    /// (Boxed, and the box comes from the loop's pool: a connection's slab slot stays small.)
    Busy(Box<Busy>),
    /// A session took the connection over (a WebSocket after its 101, an event stream after
    /// its head); `input` holds bytes it has not consumed yet, and is given back once empty.
    Session {
        session: Box<dyn Session>,
        input: Option<ReadBuf>,
    },
    /// The last response is out and the write side shut; what the client still sends is read
    /// and dropped until it closes (a lingering close, as the core decided).
    Linger(Linger),
}

enum Step {
    /// A request was answered.
    Answered,
    /// Something changed (bytes consumed, a response or error queued, a dispatch).
    Progress,
    /// Nothing more can be done without more input.
    NeedInput,
}

pub(crate) struct Connection {
    socket: Registered<Stream>,
    /// Tells this connection from a later one in the same slab slot (pool replies).
    pub(crate) id: u64,
    peer: Address,
    http: Conn,
    phase: Phase,
    /// When the next request head is due (the core's policy).
    due: HeadDue,
    /// The deadline currently in the loop's timer set.
    pub(crate) deadline: Option<Instant>,
    /// What its level-triggered registration is armed for.
    pub(crate) armed: Armed,
    /// A readable event came while it did not read: at the next, reading is disarmed.
    pub(crate) stray: bool,
    _open: OpenGuard,
}

/// The directions a registration reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Armed {
    pub(crate) read: bool,
    pub(crate) write: bool,
}

impl Connection {
    pub(crate) fn new(
        socket: Registered<Stream>,
        id: u64,
        peer: Address,
        due: HeadDue,
        open: OpenGuard,
        access_log: Logging,
    ) -> Self {
        Connection {
            socket,
            id,
            http: Conn::new(access_log, Some(&peer)),
            peer,
            phase: Phase::Idle,
            due,
            deadline: None,
            armed: Armed {
                read: true,
                write: false,
            },
            stray: false,
            _open: open,
        }
    }

    pub(crate) fn socket(&self) -> &Registered<Stream> {
        &self.socket
    }

    /// Counts the connection as doing what its phase says, after a step. Every step ends here
    /// (the loop's `apply`), so a quiescent loop's gauges are exact.
    #[inline]
    pub(crate) fn settle(&mut self) {
        let now = match &self.phase {
            Phase::Idle => Activity::Waiting,
            Phase::Partial(_) => Activity::Reading,
            Phase::Busy(busy) => busy.activity(),
            Phase::Session { session, .. } => session.kind().into(),
            Phase::Linger(_) => Activity::Closing,
        };
        self._open.set(now);
    }

    /// True when nothing is under way: no buffered input, no output, no request in flight.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Idle)
    }

    /// Runs the connection as far as it can go without blocking. Pipelined responses are
    /// batched: output is written before waiting for input, when it passes
    /// `max_pipeline_output`, and when the budget runs out.
    pub(crate) fn drive<H: Handler>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        match &mut self.phase {
            Phase::Linger(linger) => return Self::drain(self.socket.get_mut(), linger),
            Phase::Session { .. } => return self.drive_session(cx),
            Phase::Idle | Phase::Partial(_) | Phase::Busy(_) => {}
        }
        let next = self.drive_http(cx);
        match &self.phase {
            Phase::Busy(busy) if matches!(busy.at, Exchange::Switching(_)) => self.switch(cx),
            _ => next,
        }
    }

    /// Lends the loop's buffers to an idle or waiting connection for an exchange (a connection
    /// already busy keeps its own).
    fn lend(&mut self, pools: &mut Pools, rate: Option<MinRate>) {
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => self.phase = Phase::Busy(Busy::lend(pools, None, rate)),
            Phase::Partial(bytes) => self.phase = Phase::Busy(Busy::lend(pools, Some(bytes), rate)),
            other => self.phase = other,
        }
    }

    /// A deadline passed. A session handles its own timers (true: drive it again). For HTTP the
    /// core decides: a request under way gets `408` and a lingering close (true: drive it to
    /// write that and linger); otherwise it closes (false).
    pub(crate) fn expire(
        &mut self,
        pools: &mut Pools,
        now: Instant,
        cfg: &Config,
        counters: &Counters,
    ) -> bool {
        let late = match &self.phase {
            Phase::Session { .. } => {
                self.on_session(pools, |session, io| session.expire(io, now));
                return true;
            }
            Phase::Idle => Late::Idle,
            Phase::Partial(_) => Late::Head,
            Phase::Busy(busy) if busy.receiving() => match busy.at {
                Exchange::Body { .. } => Late::Body,
                _ => Late::Head,
            },
            Phase::Busy(_) | Phase::Linger(_) => {
                // A response its client took slower than the minimum rate (a lingering close
                // that ran its time is no refusal).
                if matches!(self.phase, Phase::Busy(_)) {
                    counters.refused(Refusal::TooSlow);
                }
                self.release_all(pools);
                return false;
            }
        };
        if !self.http.is_closing() {
            if late != Late::Idle {
                self.lend(pools, cfg.min_response_rate);
            }
            let mut none = Vec::new();
            let out = match &mut self.phase {
                Phase::Busy(busy) => &mut busy.out,
                _ => &mut none,
            };
            if let Some(why) = self.http.request_timed_out(late, out) {
                counters.refused(why);
                return true;
            }
        }
        self.release_all(pools);
        false
    }

    /// Gives every pooled item back (the connection is closing or lingering).
    pub(crate) fn release_all(&mut self, pools: &mut Pools) {
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Partial(bytes) => pools.give_read(bytes),
            Phase::Busy(busy) => {
                // A streamed body cut off (its client left, or took it too slowly): the
                // exchange ends here, with what was sent.
                if let Exchange::Streaming(st) = &busy.at {
                    self.http.streamed(st.sent());
                }
                busy.release(pools);
            }
            Phase::Session {
                input: Some(bytes), ..
            } => pools.give_read(bytes),
            Phase::Idle | Phase::Session { input: None, .. } | Phase::Linger(_) => {}
        }
    }

    pub(super) fn wait(&mut self, read: bool, write: bool, now: Instant) -> Next {
        let deadline = match &mut self.phase {
            Phase::Busy(busy) if write => busy.sent.deadline(now),
            Phase::Busy(busy) => match &mut busy.at {
                Exchange::Body { meter, .. } => meter.deadline(now),
                _ => None,
            },
            Phase::Linger(linger) => linger.deadline(),
            Phase::Idle | Phase::Partial(_) => self.due.until(),
            Phase::Session { .. } => None,
        };
        Next::Wait {
            read,
            write,
            deadline,
        }
    }

    /// Writes pending output; `Ok(true)` when all of it is out (or there is none), `Ok(false)`
    /// when the socket is full.
    pub(super) fn flush(&mut self, now: Instant) -> Result<bool, ()> {
        match &mut self.phase {
            Phase::Busy(busy) => busy.flush(self.socket.get_mut(), now),
            _ => Ok(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Connection;

    /// What an exchange needs is boxed and lent by the loop, so the slot every connection holds
    /// in the loop's slab, idle ones included, stays small (416 bytes before it was).
    #[test]
    fn a_connection_slot_holds_no_exchange_state() {
        let size = size_of::<Connection>();
        assert!(size <= 256, "a connection's slab slot is {size} bytes");
    }
}
