//! One connection on an event loop: its socket, its registration and deadline, and what drives
//! it: the core's connection [`Driver`] for HTTP exchanges, then a session if one takes the
//! connection over. The loop carries out what they decide.

use std::sync::Arc;
use std::time::Instant;

mod http;
mod interest;
mod session;

pub(crate) use interest::{Interest, Rearm};

pub(crate) use session::Wakes;

use super::Config;
use super::blocking::Blocking;
use super::pool::PoolSender;
use crate::Handler;
use crate::engine::OpenGuard;
use crate::http::date::DateLine;
use crate::http::driver::{self, Driver, Rules, WaitFor};
use crate::http::pools::Pools;
use crate::http::session_driver::SessionDriver;
use crate::net::sys::Registered;
use crate::net::transport::{Address, Stream};
use crate::stats::{Activity, Counters};
use crate::timers::Due;
use crate::upgraded::Upgraded;

/// What the loop needs to run a connection's step.
pub(crate) struct Cx<'a, H> {
    pub(crate) handler: &'a H,
    pub(crate) cfg: &'a Config,
    pub(crate) rules: &'a Rules,
    pub(crate) pools: &'a mut Pools,
    pub(crate) pool: Option<&'a PoolSender>,
    pub(crate) now: Instant,
    pub(crate) closing: bool,
    pub(crate) key: usize,
    pub(crate) wakes: &'a Arc<Wakes>,
    pub(crate) counters: &'a Counters,
    /// Times inline handler calls, for the blocking warning.
    pub(crate) blocking: &'a mut Blocking,
    /// The loop's `Date` line.
    pub(crate) date: &'a mut DateLine,
    /// The wake-up that brought the connection here reported it readable.
    pub(crate) readable: bool,
    /// The loop's count of jobs on the pool that answer back (a request's handler, a streamed
    /// body's piece, a session's callbacks).
    pub(crate) away: &'a mut usize,
}

/// What the loop should do with a connection after a step.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Wait for the socket (as `on` says) until the deadline.
    Wait {
        on: WaitFor,
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

/// What drives the connection.
enum Phase {
    /// HTTP exchanges, driven by the core.
    Http(Driver),
    /// A session took the connection over (a WebSocket after its 101, an event stream after
    /// its head), driven by the core's session driver.
    Session(SessionDriver),
    /// A generic upgrade's 101 is out: the loop takes the connection out for a thread.
    Detaching {
        then: Box<dyn FnOnce(Upgraded) + Send>,
        leftover: Vec<u8>,
    },
}

pub(crate) struct Connection {
    socket: Registered<Stream>,
    /// Tells this connection from a later one in the same slab slot (pool replies).
    pub(crate) id: u64,
    peer: Address,
    phase: Phase,
    /// Its deadline, and its entry in the loop's timers.
    pub(crate) due: Due,
    /// What its level-triggered registration is armed for.
    pub(crate) interest: Interest,
    /// In its loop's queue of connections run again after their turn's budget: queued once,
    /// though an event (a level-triggered registration still armed for writing) may give it a
    /// turn meanwhile that yields again.
    pub(crate) queued: bool,
    _open: OpenGuard,
}

impl Connection {
    pub(crate) fn new(
        socket: Registered<Stream>,
        id: u64,
        peer: Address,
        driver: Driver,
        open: OpenGuard,
    ) -> Self {
        Connection {
            socket,
            id,
            peer,
            due: Due::default(),
            phase: Phase::Http(driver),
            interest: Interest::new(),
            queued: false,
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
            Phase::Http(driver) => driver.stage().into(),
            Phase::Session(driver) => driver.kind().into(),
            Phase::Detaching { .. } => Activity::Upgraded,
        };
        self._open.set(now);
    }

    /// Runs the connection as far as it can go without blocking.
    pub(crate) fn drive<H: Handler>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        match &self.phase {
            Phase::Http(_) => self.drive_http(cx),
            Phase::Session(_) => self.drive_session(cx),
            Phase::Detaching { .. } => Next::Detach,
        }
    }

    /// A deadline passed. A session's turn acts on its due timer (true: drive it again); for
    /// HTTP the core's driver decides (true: drive it to write its answer).
    pub(crate) fn expire(
        &mut self,
        pools: &mut Pools,
        now: Instant,
        date: &mut DateLine,
        rules: &Rules,
        counters: &Counters,
    ) -> bool {
        match &mut self.phase {
            Phase::Session(_) => true,
            Phase::Http(driver) => driver.expire(
                self.socket.get_mut(),
                &mut driver::Cx::new(rules, pools, counters, now, date, false),
            ),
            Phase::Detaching { .. } => false,
        }
    }

    /// Gives every pooled item back (the connection is closing).
    pub(crate) fn release_all(&mut self, pools: &mut Pools) {
        match &mut self.phase {
            Phase::Http(driver) => {
                driver.close(pools);
            }
            // (Its driver gave its buffer back when it finished.)
            Phase::Session(_) | Phase::Detaching { .. } => {}
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
