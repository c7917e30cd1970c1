//! Long-lived connections on the thread-pool engine with parking on: after its 101 a WebSocket,
//! and after its head an event stream, is a parked connection like an idle keep-alive one.
//! Whichever worker takes it when bytes arrive (or the socket takes more), when its sender
//! pushes or when one of its timers is due runs it (a WebSocket's callbacks as blocking code),
//! then parks it again, so between messages it holds no thread and no buffer. (With parking off,
//! each has a thread of its own: `crate::net::upgrade`.)

use std::time::Instant;

use super::connection::{Connection, Phase};
use super::park::WakeParked;
use super::worker::Shared;
use crate::Handler;
use crate::http::buf::ReadBuf;
use crate::http::conn::Encoder;
use crate::http::session::{self, Callbacks, Io, Next, Reads, Start, Takeover};

/// A parked connection's state between the workers' turns.
pub(crate) struct Session {
    /// Driven the same way as on a thread of its own (`crate::net::upgrade`) or on the reactor.
    conn: Box<dyn session::Session>,
    /// Bytes read but not yet framed, kept only when a WebSocket's turn ended (waiting to write,
    /// or out of budget) with input still buffered; otherwise each turn reads into the worker's
    /// buffer.
    unread: Option<ReadBuf>,
    /// How the last turn ended.
    turn: Turn,
    /// A turn has acted on the server's shutdown (a WebSocket's 1001, the end of an event
    /// stream); until then the parker does not take it back while shutting down.
    shut_down: bool,
}

/// How a session's turn ended.
enum Turn {
    /// Waiting for the socket (readable or writable: the registration reports both), a
    /// sender's push, or `deadline` (the next ping, idle, heartbeat, closing-handshake or
    /// stalled-write timer).
    Wait { deadline: Option<Instant> },
    /// The message budget ran out with input left: queue it behind the others. The last
    /// wait's `deadline` still applies (a closing handshake times out under a flood too).
    More { deadline: Option<Instant> },
}

impl Session {
    /// What the live counters count it as.
    pub(crate) fn activity(&self) -> crate::stats::Activity {
        self.conn.kind().into()
    }

    /// Starts the session a response handed over, woken through the parker.
    pub(crate) fn start(
        takeover: Box<dyn Takeover>,
        encoder: Encoder,
        wake: WakeParked,
        conn: &Connection,
        rate: Option<crate::MinRate>,
        input: Option<ReadBuf>,
    ) -> Self {
        let conn = takeover.start(Start {
            waker: Box::new(wake),
            peer: conn.peer.clone(),
            now: Instant::now(),
            rate,
            encoder,
        });
        Session {
            // Bytes read past the request, for a session that reads them.
            unread: input.filter(|_| conn.keeps_input()),
            conn,
            turn: Turn::Wait { deadline: None },
            shut_down: false,
        }
    }

    /// A turn has acted on the server's shutdown.
    pub(crate) fn has_shut_down(&self) -> bool {
        self.shut_down
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.turn {
            Turn::Wait { deadline, .. } | Turn::More { deadline } => deadline,
        }
    }

    /// The last turn stopped on the message budget: more is waiting, run it again after the
    /// connections queued before it.
    pub(crate) fn has_more(&self) -> bool {
        matches!(self.turn, Turn::More { .. })
    }
}

/// Runs one turn of the session on `conn`: shutdown and due timers first, then output, input
/// and callbacks until the socket has nothing more for now or the message budget runs out
/// ([`Session::has_more`]). Reads go to `buf` (the worker's), which is left empty. Returns the
/// connection to park or requeue, or `None` once it closed.
pub(crate) fn drive<H: Handler>(
    shared: &Shared<H>,
    mut conn: Connection,
    buf: &mut ReadBuf,
) -> Option<Connection> {
    let (sock, session) = conn.session_io()?;
    let mut own = session.unread.take();
    // The edge-triggered parker needs the socket read until EAGAIN.
    let mut io = Io {
        stream: sock,
        buf: own.as_mut().unwrap_or(buf),
        reads: Reads::UntilWouldBlock,
    };
    let now = Instant::now();
    if shared.control.is_shutting_down() {
        session.conn.shutdown(&mut io, now);
        session.shut_down = true;
    }
    if session.deadline().is_some_and(|d| d <= now) {
        session.conn.expire(&mut io, now);
    }
    session.turn = match session.conn.drive(&mut io, now, Callbacks::Inline) {
        Next::Wait { deadline, .. } => Turn::Wait { deadline },
        // The message budget ran out: the worker queues it behind the others.
        Next::Again => Turn::More {
            deadline: session.deadline(),
        },
        Next::Close | Next::Dispatch | Next::Busy => {
            session.conn.finish(Callbacks::Inline);
            return None;
        }
    };
    let buf = io.buf;
    if !buf.is_empty() && session.conn.keeps_input() {
        // Input still buffered: it stays with the connection.
        let mut keep = ReadBuf::new();
        keep.push(buf.filled());
        session.unread = Some(keep);
    }
    // (An event stream reads nothing; bytes a client pipelined after its request are dropped.)
    buf.clear();
    Some(conn)
}

/// A session the parker refused (it has stopped): closes it, with `on_close` run.
pub(crate) fn abandon(mut conn: Connection) {
    if let Phase::Session(session) = &mut conn.phase {
        session.conn.finish(Callbacks::Inline);
    }
}
