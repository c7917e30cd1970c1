//! One connection on an event loop: a non-blocking driver of the shared `http::Conn`.
//!
//! A request's body is read into memory (bounded by `Limits::max_body_bytes`) before the handler
//! runs, because an inline handler must never wait on the socket. Output always goes first: while
//! it cannot drain, the connection reads nothing more (backpressure).

use std::io::{ErrorKind, Write};
use std::sync::Arc;
use std::time::Instant;

mod http;
mod session;

pub(crate) use session::Wakes;

use super::Config;
use super::pool::PoolSender;
use super::pools::Pools;
use crate::Handler;
use crate::deadline;
use crate::engine::OpenGuard;
use crate::http::body::Decoder;
use crate::http::buf::ReadBuf;
use crate::http::conn::{Close, Conn};
use crate::http::linger::Linger;
use crate::http::request::RequestHead;
use crate::http::session::Session;
use crate::http::stream::Streaming;
use crate::net::sys::Registered;
use crate::net::transport::{Address, Stream};
use crate::net::upgrade::Upgraded;
use crate::rate::Meter;

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

/// Where the connection is in the current exchange.
enum Phase {
    /// Waiting for a request head (idle when nothing is buffered).
    Head,
    /// Reading a request body into memory before dispatch, at no less than the minimum rate.
    Body {
        head: Box<RequestHead>,
        decoder: Decoder,
        body: Vec<u8>,
        meter: Meter,
    },
    /// The request (its head and body) is with a pool worker; nothing is read until its
    /// response is back.
    Dispatched,
    /// The response's body is produced and written as the socket takes it; nothing more is
    /// parsed until it is done, so responses stay in order.
    Streaming(Streaming),
    /// A session took the connection over (a WebSocket after its 101, an event stream after
    /// its head).
    Session(Box<dyn Session>),
    /// A generic upgrade: once the 101 is out, the connection leaves the loop. (Boxed: every
    /// connection's slab slot is as large as the largest phase.)
    Detach(Option<Box<dyn FnOnce(Upgraded) + Send>>),
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
    peer: Option<Address>,
    http: Conn,
    phase: Phase,
    read: Option<ReadBuf>,
    write: Option<Vec<u8>>,
    written: usize,
    /// The minimum rate of the response being written.
    sent: Meter,
    /// Start of the current wait: accept, the last response, or the last body progress.
    since: Instant,
    /// When the first byte of the head being read arrived.
    head_start: Instant,
    served: u64,
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
        now: Instant,
        open: OpenGuard,
        cfg: &Config,
    ) -> Self {
        Connection {
            socket,
            id,
            peer: Some(peer),
            http: Conn::default(),
            phase: Phase::Head,
            read: None,
            write: None,
            written: 0,
            // Also bounds an error answered before any response (reset for each response).
            sent: Meter::new(cfg.min_response_rate),
            since: now,
            head_start: now,
            served: 0,
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

    /// True when nothing is under way: no buffered input, no output, no request in flight.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Head)
            && self.read.as_ref().is_none_or(ReadBuf::is_empty)
            && self.write.as_ref().is_none_or(Vec::is_empty)
    }

    /// Runs the connection as far as it can go without blocking. Pipelined responses are
    /// batched: output is written before waiting for input, when it passes
    /// `max_pipeline_output`, and when the budget runs out.
    pub(crate) fn drive<H: Handler>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        if let Phase::Linger(linger) = &mut self.phase {
            return Self::drain(self.socket.get_mut(), linger);
        }
        if !self.switched() {
            let next = self.drive_http(cx);
            if !self.switched() {
                return next;
            }
        }
        // The 101 (and any responses before it) go out before anything else.
        match self.flush(cx.now) {
            Ok(true) => {}
            Ok(false) => return self.wait(false, true, cx.now, cx.cfg),
            Err(()) => return Next::Close,
        }
        if let Some(b) = self.write.take() {
            cx.pools.give_write(b);
        }
        match &mut self.phase {
            Phase::Session(_) => self.drive_session(cx),
            _ => Next::Detach,
        }
    }

    pub(super) fn switched(&self) -> bool {
        matches!(self.phase, Phase::Session(_) | Phase::Detach(_))
    }

    /// A deadline passed. A session handles its own timers (true: drive it again). For HTTP the
    /// core decides: a request under way gets `408` and a lingering close (true: drive it to
    /// write that and linger); otherwise it closes (false).
    pub(crate) fn expire(&mut self, pools: &mut Pools, now: Instant) -> bool {
        match &mut self.phase {
            Phase::Session(_) => {
                self.on_session(pools, |session, io| session.expire(io, now));
                return true;
            }
            Phase::Head | Phase::Body { .. } => {}
            Phase::Dispatched | Phase::Streaming(_) | Phase::Detach(_) | Phase::Linger(_) => {
                self.release_all(pools);
                return false;
            }
        }
        let receiving = !self.http.is_closing() && self.write.as_ref().is_none_or(Vec::is_empty);
        if receiving {
            let started = matches!(self.phase, Phase::Body { .. })
                || self.read.as_ref().is_some_and(|b| !b.is_empty());
            let mut out = self.write.take().unwrap_or_else(|| pools.write());
            let close = self.http.request_timed_out(started, &mut out);
            self.write = Some(out);
            if close == Close::Linger {
                return true;
            }
        }
        self.release_all(pools);
        false
    }

    /// Gives every pooled item back (the connection is closing).
    pub(crate) fn release_all(&mut self, pools: &mut Pools) {
        if let Some(b) = self.read.take() {
            pools.give_read(b);
        }
        if let Some(b) = self.write.take() {
            pools.give_write(b);
        }
    }

    pub(super) fn wait(&mut self, read: bool, write: bool, now: Instant, cfg: &Config) -> Next {
        let deadline = if write {
            self.sent.deadline(now)
        } else {
            match &mut self.phase {
                Phase::Body { meter, .. } => meter.deadline(now),
                Phase::Linger(linger) => {
                    return Next::Wait {
                        read,
                        write,
                        deadline: linger.deadline(),
                    };
                }
                Phase::Dispatched | Phase::Streaming(_) | Phase::Session(_) | Phase::Detach(_) => {
                    return Next::Wait {
                        read,
                        write,
                        deadline: None,
                    };
                }
                // The first head is due from the accept, a later one from its first byte.
                Phase::Head if self.served == 0 => {
                    deadline::after(self.since, cfg.header_read_timeout)
                }
                Phase::Head if self.read.as_ref().is_some_and(|b| !b.is_empty()) => {
                    deadline::after(self.head_start, cfg.header_read_timeout)
                }
                Phase::Head => deadline::after(self.since, cfg.idle_timeout),
            }
        };
        Next::Wait {
            read,
            write,
            deadline,
        }
    }

    /// Writes pending output; `Ok(true)` when all of it is out, `Ok(false)` when the socket is full.
    pub(super) fn flush(&mut self, now: Instant) -> Result<bool, ()> {
        let Some(out) = self.write.as_mut() else {
            return Ok(true);
        };
        let stream = self.socket.get_mut();
        while self.written < out.len() {
            match stream.write(&out[self.written..]) {
                Ok(0) => return Err(()),
                Ok(n) => {
                    self.written += n;
                    self.sent.moved(now, n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        out.clear();
        self.written = 0;
        Ok(true)
    }

    pub(super) fn out<'a>(write: &'a mut Option<Vec<u8>>, pools: &mut Pools) -> &'a mut Vec<u8> {
        write.get_or_insert_with(|| pools.write())
    }
}
