//! A connection after its response head handed it over: a session (a WebSocket, an event
//! stream) driven on the loop with its callbacks inline or on the pool, or a generic upgrade
//! leaving the loop for a thread.

use std::sync::Arc;

use super::{Connection, Cx, Next, Phase};
use crate::Handler;
use crate::engine::OpenGuard;
use crate::http::buf::ReadBuf;
use crate::http::pools::Pools;
use crate::http::session::{self, Callbacks, Io, Reads, Session, Wake, Work};
use crate::net::transport::Stream;
use crate::reactor::inbox::Inbox;
use crate::reactor::pool::{Job, PoolSender};
use crate::upgraded::Upgraded;

/// A connection leaving the loop after a generic upgrade.
pub(crate) struct Detached {
    pub(crate) stream: Stream,
    pub(crate) leftover: Vec<u8>,
    pub(crate) then: Box<dyn FnOnce(Upgraded) + Send>,
    pub(crate) open: OpenGuard,
}

/// Where a sender's wake-up goes: the loop's inbox, naming the connection.
pub(crate) type Wakes = Inbox<(usize, u64)>;

struct LoopWake {
    inbox: Arc<Wakes>,
    key: usize,
    id: u64,
}

impl Wake for LoopWake {
    fn wake(&self) {
        self.inbox.push((self.key, self.id));
    }
}

/// Wakes a connection on its loop from any thread (WebSocket and event-stream senders).
pub(super) fn loop_waker<H>(cx: &Cx<'_, H>, id: u64) -> Box<dyn Wake> {
    Box::new(LoopWake {
        inbox: cx.wakes.clone(),
        key: cx.key,
        id,
    })
}

impl Connection {
    /// Runs `f` on this connection's session with its I/O: the socket, and the loop's read
    /// buffer for a session that reads (an event stream is lent none), given back once empty so
    /// that an idle session holds none. `None` when the connection is not a session.
    pub(super) fn on_session<T>(
        &mut self,
        pools: &mut Pools,
        f: impl FnOnce(&mut dyn Session, &mut Io<'_>) -> T,
    ) -> Option<T> {
        let Phase::Session { session, input } = &mut self.phase else {
            return None;
        };
        let mut none = ReadBuf::with_len(0);
        let buf = match session.keeps_input() {
            true => input.get_or_insert_with(|| pools.ws_read()),
            false => &mut none,
        };
        let mut io = Io {
            stream: self.socket.get_mut(),
            buf,
            reads: Reads::UntilWouldBlock,
        };
        let out = f(&mut **session, &mut io);
        if input.as_ref().is_some_and(ReadBuf::is_empty) {
            if let Some(b) = input.take() {
                pools.give_read(b);
            }
        }
        Some(out)
    }

    /// One turn of the session: shutdown first when the loop is closing; callbacks due under
    /// pool dispatch go to the pool.
    pub(super) fn drive_session<H>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let callbacks = match cx.pool {
            Some(_) => Callbacks::Pool,
            None => Callbacks::Inline,
        };
        let (closing, now, pool, key, id) = (cx.closing, cx.now, cx.pool, cx.key, self.id);
        let next = self.on_session(cx.pools, |session, io| {
            if closing {
                session.shutdown(io, now);
            }
            match session.drive(io, now, callbacks) {
                session::Next::Dispatch => {
                    if let (Some(pool), Some(work)) = (pool, session.take_work()) {
                        pool.send(Job::Session { key, id, work });
                    }
                    session::Next::Busy
                }
                next => next,
            }
        });
        match next {
            Some(session::Next::Wait { write, deadline }) => Next::Wait {
                read: !write,
                write,
                deadline,
            },
            Some(session::Next::Again) => Next::Again,
            // The callbacks are on a worker: their return drives it again.
            Some(session::Next::Dispatch | session::Next::Busy) => Next::Wait {
                read: false,
                write: false,
                deadline: None,
            },
            Some(session::Next::Close) | None => Next::Close,
        }
    }

    /// A pool worker ran this session's callbacks.
    pub(crate) fn work_done<H: Handler>(
        &mut self,
        work: Box<dyn Work>,
        cx: &mut Cx<'_, H>,
    ) -> Next {
        match self.on_session(cx.pools, |session, io| session.put_back(work, io)) {
            Some(()) => self.drive(cx),
            None => Next::Close,
        }
    }

    /// The connection is closing: a session's last callbacks (a WebSocket's `on_close`) are
    /// due (run here, or sent to the pool).
    pub(crate) fn finish(&mut self, pool: Option<&PoolSender>) {
        if let Phase::Session { session, .. } = &mut self.phase {
            let callbacks = match pool {
                Some(_) => Callbacks::Pool,
                None => Callbacks::Inline,
            };
            if let (Some(work), Some(pool)) = (session.finish(callbacks), pool) {
                pool.send(Job::Last(work));
            }
        }
    }

    /// A detached connection's parts: the socket (out of the poller), the bytes read past the
    /// upgrade request, the upgrade and the connection count.
    pub(crate) fn into_detached(self) -> Option<Detached> {
        let Phase::Detaching { then, leftover } = self.phase else {
            return None;
        };
        Some(Detached {
            stream: self.socket.into_inner(),
            leftover,
            then,
            open: self._open,
        })
    }
}
