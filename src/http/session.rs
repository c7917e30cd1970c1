//! The seam after a response head: a protocol that takes the connection over.
//!
//! A response either completes the exchange (its body known, or streamed by the core's
//! [`Streaming`](crate::http::stream::Streaming)), or hands the connection to something that
//! is not HTTP any more:
//!
//! - a **session** ([`Session`]): a protocol driven by the engine that served the request, the
//!   same way on every engine — readiness and time in, interest and deadline out ([`Next`]),
//!   callback work out for a worker pool ([`Work`]). WebSocket (the `ws` module) and event
//!   streams (`sse`) are sessions; a response carries one as a [`Takeover`], which the engine
//!   starts once the response head is out;
//! - a **thread** (the generic upgrade, `Response::upgrade`): the engine hands the socket to a
//!   callback on a thread of its own.
//!
//! The core names neither protocol; they name it.

use crate::http::budget::Budget;
use std::any::Any;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::http::address::Address;
use crate::http::buf::ReadBuf;
use crate::http::framing::Encoder;
use crate::http::panics::Panics;
use crate::rate::MinRate;

/// Wakes the engine that drives a session, from any thread (a sender pushed, or shutdown
/// began).
pub(crate) trait Wake: Send + Sync {
    fn wake(&self);
}

impl<W: Wake + ?Sized> Wake for std::sync::Arc<W> {
    fn wake(&self) {
        (**self).wake()
    }
}

/// Whether the thread that drains a queue needs a wake-up: set while it runs or while a wake-up
/// is pending, so a burst of pushes from other threads costs one wake-up.
#[derive(Debug)]
pub(crate) struct WakeFlag(AtomicBool);

impl WakeFlag {
    /// `running`: the draining thread starts out running (no wake-up needed yet).
    pub(crate) fn new(running: bool) -> Self {
        WakeFlag(AtomicBool::new(running))
    }

    /// After a push: true when the pusher must wake the draining thread.
    pub(crate) fn should_wake(&self) -> bool {
        !self.0.swap(true, Ordering::AcqRel)
    }

    /// The draining thread runs: pushes need not wake it.
    pub(crate) fn running(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// The draining thread is about to wait: later pushes wake it. `pending` looks at the queue
    /// after the flag is cleared, so a push in between is never missed; true (and the flag set
    /// again) when something is pending: run again instead of waiting.
    pub(crate) fn settle(&self, pending: impl FnOnce() -> bool) -> bool {
        self.0.store(false, Ordering::SeqCst);
        let pending = pending();
        if pending {
            self.0.store(true, Ordering::SeqCst);
        }
        pending
    }
}

/// A non-blocking byte stream: a socket, or an in-memory pipe in tests.
pub(crate) trait Duplex: Read + Write {
    /// The transport holds input its socket no longer signals (decrypted TLS records, or the
    /// peer's `close_notify` read with them): a read that came back short has not drained it.
    fn buffered_input(&self) -> bool {
        false
    }
    /// What the socket holds that the peer has not acknowledged, where the transport knows
    /// ([`Transport::unacknowledged`](crate::Transport::unacknowledged)).
    fn unacknowledged(&self) -> Option<usize> {
        None
    }
    /// What the transport wrote to its socket since last asked, where that is not what its
    /// writes returned ([`Transport::take_sent`](crate::Transport::take_sent)).
    fn take_sent(&mut self) -> Option<usize> {
        None
    }
}

impl<T: crate::transport::Transport + ?Sized> Duplex for T {
    fn buffered_input(&self) -> bool {
        crate::transport::Transport::buffered_input(self)
    }
    fn unacknowledged(&self) -> Option<usize> {
        crate::transport::Transport::unacknowledged(self)
    }
    fn take_sent(&mut self) -> Option<usize> {
        crate::transport::Transport::take_sent(self)
    }
}

/// How far a session reads in one turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reads {
    /// Until the stream says `WouldBlock`: the engine's wait is edge-triggered, and the end of
    /// input may come with the last bytes and raise no event of its own.
    UntilWouldBlock,
    /// Until a read returns less than it was offered: the engine then waits level-triggered,
    /// which reports any byte that came since. The buffer grows when reads fill it (up to
    /// 64 KiB), so large messages take one read each.
    UntilShortRead,
}

/// What a session runs on during one turn: the stream, the engine's read buffer (bytes read
/// past the upgrade request are already in it), and how far to read.
pub(crate) struct Io<'a> {
    pub(crate) stream: &'a mut dyn Duplex,
    pub(crate) buf: &'a mut ReadBuf,
    pub(crate) reads: Reads,
}

/// Where a session's callbacks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Callbacks {
    /// Here, during the turn (a worker thread, a session's own thread, or an event loop with
    /// inline dispatch).
    Inline,
    /// On a worker pool: the turn stops with [`Next::Dispatch`] and the engine sends
    /// [`Session::take_work`] there.
    Pool,
}

/// What the engine does next with a session.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Wait for the stream to be readable (and writable when `write`), a wake-up, or the
    /// deadline (then call [`Session::expire`]).
    Wait {
        write: bool,
        deadline: Option<Instant>,
    },
    /// Wait for a wake-up or the deadline, not the stream: the session reads no input for now
    /// (the server's memory budget is spent) and has no output waiting.
    Paused { deadline: Option<Instant> },
    /// Work is left after the turn's budget: run again after the others.
    Again,
    /// Callbacks are due: hand [`Session::take_work`] to the pool.
    Dispatch,
    /// The callbacks are on a worker: wait for nothing; their return drives the session again.
    Busy,
    /// Close the connection (call [`Session::finish`] first).
    Close,
}

/// Callbacks on their way to a pool worker and back ([`Session::put_back`]).
pub(crate) trait Work: Any + Send {
    /// Runs the callbacks. A panic in one is caught and recorded for `put_back`.
    fn run(&mut self);
    /// The connection went while this was away: queues the last callback, if one is due (false
    /// when nothing is left to run).
    fn close_due(&mut self) -> bool;
}

/// A protocol that has taken a connection over, driven by the engine as sans-I/O code.
pub(crate) trait Session: Send {
    /// Runs as far as it goes without blocking.
    fn drive(&mut self, io: &mut Io<'_>, now: Instant, callbacks: Callbacks) -> Next;
    /// A deadline the last [`Next::Wait`] named has passed.
    fn expire(&mut self, io: &mut Io<'_>, now: Instant);
    /// Server shutdown: end as the protocol ends (a WebSocket closes with 1001, an event stream
    /// after what is queued). Called before each turn while the server shuts down.
    fn shutdown(&mut self, io: &mut Io<'_>, now: Instant);
    /// The connection is going away. Returns the last callbacks (a WebSocket's `on_close`) for
    /// the pool; with [`Callbacks::Inline`] they ran here. Once they are out, nothing more is
    /// due: a second call (an engine that finished the session in the turn that ended it, then
    /// closes the connection) returns nothing.
    fn finish(&mut self, callbacks: Callbacks) -> Option<Box<dyn Work>>;
    /// The callbacks due, for a pool worker (`None` while they are away, or for a session
    /// without callbacks).
    fn take_work(&mut self) -> Option<Box<dyn Work>>;
    /// The callbacks came back from a worker.
    fn put_back(&mut self, work: Box<dyn Work>, io: &mut Io<'_>);
    /// Whether it reads its client's input through the read buffer (a WebSocket), so that unread
    /// bytes left there belong to it; an event stream only watches for the end of its client's
    /// input and is driven with an empty buffer.
    fn keeps_input(&self) -> bool;
    /// What protocol it is (the live counters count each apart).
    fn kind(&self) -> Kind;
}

/// The protocols that take a connection over as a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A WebSocket, after its `101`.
    WebSocket,
    /// An event stream, after its response head.
    EventStream,
}

/// What an engine gives a session when it starts it.
pub(crate) struct Start {
    /// Wakes the engine for this connection.
    pub(crate) waker: Box<dyn Wake>,
    pub(crate) peer: Option<Address>,
    pub(crate) now: Instant,
    /// The minimum rate at which the peer must take the session's output.
    pub(crate) rate: Option<MinRate>,
    /// How the session's output is framed: the response body's encoder (chunked for an event
    /// stream to an HTTP/1.1 client), or raw after a `101`.
    pub(crate) encoder: Encoder,
    /// The server's memory budget, which the session's send queue counts against.
    pub(crate) budget: Budget,
    /// Where the session's handler code counts its panics.
    pub(crate) panics: Panics,
}

/// A session waiting in a response for its head to go out.
pub(crate) trait Takeover: Send {
    fn start(self: Box<Self>, start: Start) -> Box<dyn Session>;
}

/// Unpacks work that came back from a pool worker into the type a session sent.
pub(crate) fn work_as<T: Work>(work: Box<dyn Work>) -> Option<Box<T>> {
    let any: Box<dyn Any> = work;
    any.downcast().ok()
}

/// An in-memory stream for driving sessions in unit tests, with no socket and no engine.
#[cfg(test)]
pub(crate) mod memory {
    use std::collections::VecDeque;
    use std::io::{self, ErrorKind, Read, Write};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{Io, Reads, Wake};
    use crate::http::buf::ReadBuf;

    /// The peer's side: bytes it sent (read by the session), whether it closed its write side,
    /// what the session wrote, and how much more the "socket" takes before `WouldBlock`.
    pub(crate) struct Pipe {
        pub(crate) input: VecDeque<u8>,
        pub(crate) input_closed: bool,
        pub(crate) output: Vec<u8>,
        pub(crate) room: usize,
    }

    impl super::Duplex for Pipe {}

    impl Pipe {
        pub(crate) fn new() -> Self {
            Pipe {
                input: VecDeque::new(),
                input_closed: false,
                output: Vec::new(),
                room: usize::MAX,
            }
        }

        /// Runs `f` with an [`Io`] over this pipe and `buf`.
        pub(crate) fn io<T>(&mut self, buf: &mut ReadBuf, f: impl FnOnce(&mut Io<'_>) -> T) -> T {
            f(&mut Io {
                stream: self,
                buf,
                reads: Reads::UntilWouldBlock,
            })
        }
    }

    impl Read for Pipe {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.input.is_empty() {
                return match self.input_closed {
                    true => Ok(0),
                    false => Err(ErrorKind::WouldBlock.into()),
                };
            }
            let n = out.len().min(self.input.len());
            for (o, b) in out.iter_mut().zip(self.input.drain(..n)) {
                *o = b;
            }
            Ok(n)
        }
    }

    impl Write for Pipe {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(ErrorKind::WouldBlock.into());
            }
            let n = data.len().min(self.room);
            self.room -= n;
            self.output.extend_from_slice(&data[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Counts wake-ups.
    #[derive(Default)]
    pub(crate) struct Wakes(pub(crate) AtomicUsize);

    impl Wakes {
        pub(crate) fn count(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    impl Wake for Wakes {
        fn wake(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A waker counting into `wakes`.
    pub(crate) fn waker(wakes: &Arc<Wakes>) -> Box<dyn Wake> {
        Box::new(wakes.clone())
    }
}
