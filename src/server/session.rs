//! Long-lived connections on the thread-pool engine with parking on: after its 101 a WebSocket,
//! and after its head an event stream, is a parked connection like an idle keep-alive one.
//! Whichever worker takes it when bytes arrive (or the socket takes more), when its sender
//! pushes or when one of its timers is due runs it (a WebSocket's callbacks as blocking code),
//! then parks it again, so between messages it holds no thread and no buffer. (With parking off,
//! each has a thread of its own: `crate::net::upgrade`.)

use std::time::Instant;

use super::connection::{Connection, Phase};
use super::worker::Shared;
use crate::Handler;
use crate::http::buf::ReadBuf;
use crate::http::pools::Pools;
use crate::http::session::{Callbacks, Next, Reads, Start, Takeover};
use crate::http::session_driver::SessionDriver;

/// A parked connection's session between the workers' turns.
pub(crate) struct Session {
    /// Driven by the core's session driver, as on the reactor or on a thread of its own.
    driver: SessionDriver,
    /// How the last turn ended.
    turn: Turn,
}

/// How a session's turn ended.
enum Turn {
    /// Waiting for the socket (readable or writable: the registration reports both), a
    /// sender's push, or its driver's deadline (the next ping, idle, heartbeat,
    /// closing-handshake or stalled-write timer).
    Wait,
    /// The message budget ran out with input left: queue it behind the others. The last
    /// wait's deadline still applies (a closing handshake times out under a flood too).
    More,
}

impl Session {
    /// What the live counters count it as.
    pub(crate) fn activity(&self) -> crate::stats::Activity {
        self.driver.kind().into()
    }

    /// Starts the session a response handed over (woken through the parker), with the bytes
    /// read past its request.
    pub(crate) fn start(
        takeover: Box<dyn Takeover>,
        start: Start,
        input: Option<ReadBuf>,
        pools: &mut Pools,
    ) -> Self {
        let session = takeover.start(start);
        Session {
            driver: SessionDriver::new(session, input, pools),
            turn: Turn::Wait,
        }
    }

    /// A turn has acted on the server's shutdown.
    pub(crate) fn has_shut_down(&self) -> bool {
        self.driver.has_shut_down()
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.driver.deadline()
    }

    /// The last turn stopped on the message budget: more is waiting, run it again after the
    /// connections queued before it.
    pub(crate) fn has_more(&self) -> bool {
        matches!(self.turn, Turn::More)
    }
}

/// Runs one turn of the session on `conn` (its driver: shutdown and due timers first, then
/// output, input and callbacks until the socket has nothing more for now or the message budget
/// runs out, [`Session::has_more`]). Returns the connection to park or requeue, or `None` once
/// it closed.
pub(crate) fn drive<H: Handler>(
    shared: &Shared<H>,
    mut conn: Connection,
    pools: &mut Pools,
) -> Option<Connection> {
    let closing = shared.control.is_shutting_down();
    let (sock, session) = conn.session_io()?;
    // The edge-triggered parker needs the socket read until EAGAIN.
    let next = session.driver.turn(
        sock,
        pools,
        Reads::UntilWouldBlock,
        Instant::now(),
        closing,
        Callbacks::Inline,
    );
    session.turn = match next {
        // Paused: parked as any wait; input arriving meanwhile drives a turn that looks at
        // the budget again and parks it again.
        Next::Wait { .. } | Next::Paused { .. } => Turn::Wait,
        // The message budget ran out: the worker queues it behind the others.
        Next::Again => Turn::More,
        Next::Close | Next::Dispatch | Next::Busy => {
            session.driver.finish(Callbacks::Inline, pools);
            return None;
        }
    };
    Some(conn)
}

/// A session the parker refused (it has stopped): closes it, with `on_close` run.
pub(crate) fn abandon(mut conn: Connection, pools: &mut Pools) {
    if let Phase::Session(session) = &mut conn.phase {
        session.driver.finish(Callbacks::Inline, pools);
    }
}
