//! A connection after its response head handed it over: a WebSocket or an event stream driven on
//! the loop (callbacks inline or on the pool), or a generic upgrade leaving the loop for a thread.

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use super::{Connection, Cx, Next, Phase};
use crate::Handler;
use crate::engine::OpenGuard;
use crate::http::buf::ReadBuf;
use crate::reactor::inbox::Inbox;
use crate::reactor::pool::{Job, PoolSender};
use crate::reactor::pools::Pools;
use crate::ws::{Calls, Upgrade, Wake, WsIo, WsNext};

/// A connection leaving the loop after a generic upgrade.
pub(crate) struct Detached {
    pub(crate) stream: TcpStream,
    pub(crate) leftover: Vec<u8>,
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) upgrade: Upgrade,
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
    pub(super) fn drive_sse<H>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let Phase::Sse(sse) = &mut self.phase else {
            return Next::Close;
        };
        if cx.closing {
            sse.shutdown();
        }
        match sse.drive(self.socket.get(), cx.now) {
            WsNext::Wait { write, deadline } => Next::Wait {
                read: !write,
                write,
                deadline,
            },
            _ => Next::Close,
        }
    }

    pub(super) fn drive_ws<H>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let Phase::Ws(ws) = &mut self.phase else {
            return Next::Close;
        };
        let buf = self.read.get_or_insert_with(|| cx.pools.ws_read());
        let mut io = WsIo::new(self.socket.get(), buf);
        if cx.closing && ws.is_open() {
            ws.shutdown(&mut io, cx.now);
        }
        let next = ws.drive(&mut io, cx.now, cx.pool.is_none());
        // An idle WebSocket holds no read buffer.
        if self.read.as_ref().is_some_and(ReadBuf::is_empty) {
            if let Some(b) = self.read.take() {
                cx.pools.give_read(b);
            }
        }
        match next {
            WsNext::Wait { write, deadline } => Next::Wait {
                read: !write,
                write,
                deadline,
            },
            WsNext::Again => Next::Again,
            WsNext::Close => Next::Close,
            WsNext::Dispatch => {
                if let (Some(pool), Some(calls)) = (cx.pool, ws.take_calls()) {
                    pool.send(Job::Ws {
                        key: cx.key,
                        id: self.id,
                        calls,
                    });
                }
                Next::Wait {
                    read: false,
                    write: false,
                    deadline: None,
                }
            }
            WsNext::Busy => Next::Wait {
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

    /// A pool worker ran this WebSocket's callbacks.
    pub(crate) fn ws_complete<H: Handler>(&mut self, calls: Calls, cx: &mut Cx<'_, H>) -> Next {
        let Phase::Ws(ws) = &mut self.phase else {
            return Next::Close;
        };
        let buf = self.read.get_or_insert_with(|| cx.pools.ws_read());
        ws.put_back(calls, &mut WsIo::new(self.socket.get(), buf));
        self.drive(cx)
    }

    /// The connection is closing: a WebSocket's `on_close` is due (run here, or sent to the
    /// pool).
    pub(crate) fn finish(&mut self, pool: Option<&PoolSender>) {
        match &mut self.phase {
            Phase::Ws(ws) => {
                if let (Some(calls), Some(pool)) = (ws.finish(pool.is_none()), pool) {
                    pool.send(Job::WsLast(calls));
                }
            }
            Phase::Sse(sse) => sse.finish(),
            _ => {}
        }
    }

    /// A detached connection's parts: the socket (out of the poller), the bytes read past the
    /// upgrade request, the upgrade and the connection count.
    pub(crate) fn into_detached(mut self, pools: &mut Pools) -> Option<Detached> {
        let Phase::Detach(upgrade) = &mut self.phase else {
            return None;
        };
        let upgrade = *upgrade.take()?;
        let leftover = self
            .read
            .as_ref()
            .map(|b| b.filled().to_vec())
            .unwrap_or_default();
        self.release_all(pools);
        // The clone is the same socket; the registration leaves with `self.socket`.
        let stream = self.socket.get().try_clone().ok()?;
        Some(Detached {
            stream,
            leftover,
            peer: self.peer,
            upgrade,
            open: self._open,
        })
    }
}
