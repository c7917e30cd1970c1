//! A connection after its response head handed it over: a session (a WebSocket, an event
//! stream) driven on the loop with its callbacks inline or on the pool, or a generic upgrade
//! leaving the loop for a thread.

use std::sync::Arc;

use super::{Connection, Cx, Next, Phase};
use crate::Handler;
use crate::engine::OpenGuard;
use crate::http::buf::ReadBuf;
use crate::http::session::{self, Callbacks, Io, Reads, Wake, Work};
use crate::net::transport::Stream;
use crate::net::upgrade::Upgraded;
use crate::reactor::inbox::Inbox;
use crate::reactor::pool::{Job, PoolSender};
use crate::reactor::pools::Pools;

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

impl Connection {
    pub(super) fn drive_session<H>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let Phase::Session(session) = &mut self.phase else {
            return Next::Close;
        };
        let callbacks = match cx.pool {
            Some(_) => Callbacks::Pool,
            None => Callbacks::Inline,
        };
        // A session that reads nothing (an event stream) is lent no buffer.
        let mut none = ReadBuf::with_len(0);
        let buf = match session.keeps_input() {
            true => self.read.get_or_insert_with(|| cx.pools.ws_read()),
            false => &mut none,
        };
        let mut io = Io {
            stream: self.socket.get_mut(),
            buf,
            reads: Reads::UntilWouldBlock,
        };
        if cx.closing {
            session.shutdown(&mut io, cx.now);
        }
        let next = session.drive(&mut io, cx.now, callbacks);
        // An idle session holds no read buffer.
        if self.read.as_ref().is_some_and(ReadBuf::is_empty) {
            if let Some(b) = self.read.take() {
                cx.pools.give_read(b);
            }
        }
        match next {
            session::Next::Wait { write, deadline } => Next::Wait {
                read: !write,
                write,
                deadline,
            },
            session::Next::Again => Next::Again,
            session::Next::Close => Next::Close,
            session::Next::Dispatch => {
                if let (Some(pool), Some(work)) = (cx.pool, session.take_work()) {
                    pool.send(Job::Session {
                        key: cx.key,
                        id: self.id,
                        work,
                    });
                }
                Next::Wait {
                    read: false,
                    write: false,
                    deadline: None,
                }
            }
            session::Next::Busy => Next::Wait {
                read: false,
                write: false,
                deadline: None,
            },
        }
    }

    /// Wakes this connection on its loop from any thread (WebSocket and event-stream senders).
    pub(super) fn waker<H>(&self, cx: &Cx<'_, H>) -> Box<dyn Wake> {
        Box::new(LoopWake {
            inbox: cx.wakes.clone(),
            key: cx.key,
            id: self.id,
        })
    }

    /// A pool worker ran this session's callbacks.
    pub(crate) fn work_done<H: Handler>(
        &mut self,
        work: Box<dyn Work>,
        cx: &mut Cx<'_, H>,
    ) -> Next {
        let Phase::Session(session) = &mut self.phase else {
            return Next::Close;
        };
        // A session that reads nothing (an event stream) is lent no buffer.
        let mut none = ReadBuf::with_len(0);
        let buf = match session.keeps_input() {
            true => self.read.get_or_insert_with(|| cx.pools.ws_read()),
            false => &mut none,
        };
        let mut io = Io {
            stream: self.socket.get_mut(),
            buf,
            reads: Reads::UntilWouldBlock,
        };
        session.put_back(work, &mut io);
        self.drive(cx)
    }

    /// The connection is closing: a session's last callbacks (a WebSocket's `on_close`) are
    /// due (run here, or sent to the pool).
    pub(crate) fn finish(&mut self, pool: Option<&PoolSender>) {
        if let Phase::Session(session) = &mut self.phase {
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
    pub(crate) fn into_detached(mut self, pools: &mut Pools) -> Option<Detached> {
        let Phase::Detach(then) = &mut self.phase else {
            return None;
        };
        let then = then.take()?;
        let leftover = self
            .read
            .as_ref()
            .map(|b| b.filled().to_vec())
            .unwrap_or_default();
        self.release_all(pools);
        let stream = self.socket.into_inner();
        Some(Detached {
            stream,
            leftover,
            then,
            open: self._open,
        })
    }
}
