//! The one driver of sessions (a WebSocket after its `101`, an event stream after its head),
//! used wherever one runs: on an event loop, on the thread-pool engine's workers between parks,
//! on a thread of its own. A turn is always the same: the server's shutdown first (a WebSocket
//! closes with 1001, an event stream ends after what is queued), then a timer that came due,
//! then the session as far as it goes without blocking. The driver keeps the session's next
//! deadline and the bytes it read and has not consumed (a buffer is held only while there are
//! some); the engine carries out the [`Next`] it returns.

use std::time::Instant;

use crate::http::buf::ReadBuf;
use crate::http::pools::Pools;
use crate::http::session::{Callbacks, Duplex, Io, Kind, Next, Reads, Session, Work};

/// A session and what its driver keeps between turns.
pub(crate) struct SessionDriver {
    session: Box<dyn Session>,
    /// Bytes read and not yet consumed (a reading session's), in a pooled buffer.
    input: Option<ReadBuf>,
    /// When the session's next timer is due, as its last wait said.
    deadline: Option<Instant>,
    /// A turn has acted on the server's shutdown.
    shut_down: bool,
}

impl SessionDriver {
    /// A session that took a connection over, with the bytes read past its request.
    pub(crate) fn new(
        session: Box<dyn Session>,
        input: Option<ReadBuf>,
        pools: &mut Pools,
    ) -> Self {
        let input = match (session.keeps_input(), input) {
            (true, Some(bytes)) if !bytes.is_empty() => Some(bytes),
            (_, Some(bytes)) => {
                pools.give_read(bytes);
                None
            }
            (_, None) => None,
        };
        SessionDriver {
            session,
            input,
            deadline: None,
            shut_down: false,
        }
    }

    /// One turn. `closing`: the server is shutting down. Reads go to the session's own bytes,
    /// or to a buffer lent from `pools` for the turn (given back unless bytes are left in it).
    pub(crate) fn turn(
        &mut self,
        stream: &mut dyn Duplex,
        pools: &mut Pools,
        reads: Reads,
        now: Instant,
        closing: bool,
        callbacks: Callbacks,
    ) -> Next {
        self.with_io(stream, pools, reads, |driver, io| {
            if closing {
                driver.session.shutdown(io, now);
                driver.shut_down = true;
            }
            if driver.deadline.is_some_and(|d| d <= now) {
                driver.session.expire(io, now);
            }
            let next = driver.session.drive(io, now, callbacks);
            if let Next::Wait { deadline, .. } | Next::Paused { deadline } = next {
                driver.deadline = deadline;
            }
            next
        })
    }

    /// The callbacks came back from a pool worker.
    pub(crate) fn put_back(
        &mut self,
        work: Box<dyn Work>,
        stream: &mut dyn Duplex,
        pools: &mut Pools,
        reads: Reads,
    ) {
        self.with_io(stream, pools, reads, |driver, io| {
            driver.session.put_back(work, io)
        });
    }

    /// Runs `f` with the session's I/O for a turn: its own unread bytes, or a buffer lent from
    /// the pool for a session that reads (an event stream gets an empty one).
    fn with_io<T>(
        &mut self,
        stream: &mut dyn Duplex,
        pools: &mut Pools,
        reads: Reads,
        f: impl FnOnce(&mut SessionDriver, &mut Io<'_>) -> T,
    ) -> T {
        let mut buf = match (self.input.take(), self.session.keeps_input(), reads) {
            (Some(bytes), _, _) => bytes,
            // Reading to a short read, the buffer grows as messages need it.
            (None, true, Reads::UntilShortRead) => pools.growing_read(),
            (None, true, Reads::UntilWouldBlock) => pools.ws_read(),
            (None, false, _) => ReadBuf::with_len(0),
        };
        let mut io = Io {
            stream,
            buf: &mut buf,
            reads,
        };
        let out = f(self, &mut io);
        match (self.session.keeps_input(), buf.is_empty()) {
            // (The empty buffer of a session that reads nothing.)
            (false, _) => {}
            (true, true) => pools.give_read(buf),
            (true, false) => self.input = Some(buf),
        }
        out
    }

    /// The callbacks due, for a pool worker.
    pub(crate) fn take_work(&mut self) -> Option<Box<dyn Work>> {
        self.session.take_work()
    }

    /// The connection is going away: its last callbacks (run here with
    /// [`Callbacks::Inline`], else returned for the pool).
    pub(crate) fn finish(
        &mut self,
        callbacks: Callbacks,
        pools: &mut Pools,
    ) -> Option<Box<dyn Work>> {
        if let Some(bytes) = self.input.take() {
            pools.give_read(bytes);
        }
        self.session.finish(callbacks)
    }

    /// When the engine must drive it even if nothing happens.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// A turn has acted on the server's shutdown.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn has_shut_down(&self) -> bool {
        self.shut_down
    }

    /// What protocol it is.
    pub(crate) fn kind(&self) -> Kind {
        self.session.kind()
    }
}
