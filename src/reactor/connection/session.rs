//! A connection after its response head handed it over: a session (a WebSocket, an event
//! stream) driven on the loop with its callbacks inline or on the pool, or a generic upgrade
//! leaving the loop for a thread.

use std::sync::Arc;

use super::{Connection, Cx, Next, Phase};
use crate::Handler;
use crate::engine::OpenGuard;
use crate::http::driver::WaitFor;
use crate::http::pools::Pools;
use crate::http::session::{self, Callbacks, Reads, Wake, Work};
use crate::net::transport::Stream;
use crate::reactor::blocking::{Blocking, later};
use crate::reactor::inbox::Inbox;
use crate::reactor::pool::{Job, PoolSender};
use crate::stats::Counters;
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
    /// One turn of the session (the core's session driver): shutdown first when the loop is
    /// closing, a due timer, then as far as it goes; callbacks due under pool dispatch go to
    /// the pool.
    pub(super) fn drive_session<H>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let Phase::Session(driver) = &mut self.phase else {
            return Next::Close;
        };
        let callbacks = match cx.pool {
            Some(_) => Callbacks::Pool,
            None => Callbacks::Inline,
        };
        let stream = self.socket.get_mut();
        // Callbacks inline are handler code on the loop: the turn is timed as a handler call,
        // and the loop's clock moves on by it.
        let started = (callbacks == Callbacks::Inline).then(|| cx.blocking.start());
        let next = driver.turn(
            stream,
            cx.pools,
            Reads::UntilWouldBlock,
            cx.now,
            cx.closing,
            callbacks,
        );
        if matches!(next, session::Next::Close) && callbacks == Callbacks::Inline {
            // Its last callbacks (`on_close`) run in the turn that ended it, timed with it.
            let _ = driver.finish(Callbacks::Inline, cx.pools);
        }
        if let Some(started) = started {
            cx.now = later(cx.now, cx.blocking.session_ran(started, cx.counters));
        }
        match next {
            session::Next::Wait { write, deadline } => Next::Wait {
                on: match write {
                    true => WaitFor::Output,
                    false => WaitFor::Input,
                },
                deadline,
            },
            // Neither readable nor writable matters: a wake-up or the deadline drives it.
            session::Next::Paused { deadline } => Next::Wait {
                on: WaitFor::Wake,
                deadline,
            },
            session::Next::Again => Next::Again,
            session::Next::Dispatch => match (cx.pool, driver.take_work()) {
                (Some(pool), Some(work)) => {
                    let job = Job::Session {
                        key: cx.key,
                        id: self.id,
                        work,
                    };
                    match pool.send_back(job, cx.away) {
                        Ok(()) => Self::busy(),
                        Err(_) => Next::Close,
                    }
                }
                // Nothing would bring it back: closed rather than left waiting for ever.
                _ => {
                    log::error!("a session asked for its pool with nothing to hand it; closed");
                    Next::Close
                }
            },
            // The callbacks are on a worker: their return drives it again.
            session::Next::Busy => Self::busy(),
            session::Next::Close => Next::Close,
        }
    }

    /// Waiting for nothing: a pool worker runs the session's callbacks.
    fn busy() -> Next {
        Next::Wait {
            on: WaitFor::Wake,
            deadline: None,
        }
    }

    /// A pool worker ran this session's callbacks.
    pub(crate) fn work_done<H: Handler>(
        &mut self,
        work: Box<dyn Work>,
        cx: &mut Cx<'_, H>,
    ) -> Next {
        let Phase::Session(driver) = &mut self.phase else {
            return Next::Close;
        };
        driver.put_back(
            work,
            self.socket.get_mut(),
            cx.pools,
            Reads::UntilWouldBlock,
        );
        self.drive(cx)
    }

    /// The connection is closing: a session's last callbacks (a WebSocket's `on_close`) are
    /// due, unless the turn that ended it ran them: sent to the pool, or run here, timed as a
    /// handler call for the blocking warning. (The loop's clock does not move on by these: a
    /// connection the loop closes, not its own turn, for an error of its socket or its
    /// registration, or at its deadline.)
    pub(crate) fn finish(
        &mut self,
        pool: Option<&PoolSender>,
        pools: &mut Pools,
        blocking: &mut Blocking,
        counters: &Counters,
    ) {
        let Phase::Session(driver) = &mut self.phase else {
            return;
        };
        match pool {
            Some(pool) => {
                if let Some(work) = driver.finish(Callbacks::Pool, pools) {
                    pool.send(Job::Last(work));
                }
            }
            None => {
                let started = blocking.start();
                // Inline, the callbacks ran: nothing comes back.
                let _ = driver.finish(Callbacks::Inline, pools);
                blocking.session_ran(started, counters);
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
