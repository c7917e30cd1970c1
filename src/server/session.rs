//! Long-lived connections on the thread-pool engine with parking on: after its 101 a WebSocket,
//! and after its head an event stream, is a parked connection like an idle keep-alive one.
//! Whichever worker takes it when bytes arrive (or the socket takes more), when its sender
//! pushes or when one of its timers is due runs it (a WebSocket's callbacks as blocking code),
//! then parks it again, so between messages it holds no thread and no buffer. (With parking off,
//! each has a thread of its own: `crate::net::upgrade`.)

use std::net::SocketAddr;
use std::time::Instant;

use super::connection::{Connection, Wait};
use super::park::WakeParked;
use super::worker::Shared;
use crate::http::buf::ReadBuf;
use crate::http::conn::Encoder;
use crate::net::upgrade::LongLived;
use crate::sse::{SseConn, Stream};
use crate::ws::{WsConfig, WsConn, WsHandler, WsNext, WsSender};
use crate::{Handler, MinRate};

/// A parked connection's state between the workers' turns.
pub(crate) struct Session {
    /// Driven the same way as on a thread of its own (`crate::net::upgrade`).
    conn: Box<dyn LongLived>,
    /// Bytes read but not yet framed, kept only when a WebSocket's turn ended (waiting to write,
    /// or out of budget) with input still buffered; otherwise each turn reads into the worker's
    /// buffer.
    unread: Option<ReadBuf>,
    /// How the last turn ended.
    turn: Turn,
    /// Shutdown has been acted on (a WebSocket's 1001, the end of an event stream).
    stopping: bool,
}

/// How a session's turn ended.
enum Turn {
    /// Waiting for the socket (also writable when `write`: output is blocked), a sender's
    /// push, or `deadline` (the next ping, idle, heartbeat, closing-handshake or stalled-write
    /// timer).
    Wait {
        write: bool,
        deadline: Option<Instant>,
    },
    /// The message budget ran out with input left: queue it behind the others. The last
    /// wait's `deadline` still applies (a closing handshake times out under a flood too).
    More { deadline: Option<Instant> },
}

impl Session {
    pub(crate) fn websocket(
        handler: Box<dyn WsHandler>,
        cfg: WsConfig,
        wake: WakeParked,
        peer: Option<SocketAddr>,
        rate: Option<MinRate>,
    ) -> Self {
        let sender = WsSender::new(Box::new(wake), cfg.max_send_queue, peer);
        Session::new(Box::new(WsConn::new(
            handler,
            cfg,
            sender,
            Instant::now(),
            rate,
        )))
    }

    pub(crate) fn events(
        stream: Stream,
        encoder: Encoder,
        wake: WakeParked,
        rate: Option<MinRate>,
    ) -> Self {
        let sse = SseConn::new(stream, encoder, Box::new(wake), Instant::now(), rate);
        Session::new(Box::new(sse))
    }

    fn new(conn: Box<dyn LongLived>) -> Self {
        Session {
            conn,
            unread: None,
            turn: Turn::Wait {
                write: false,
                deadline: None,
            },
            stopping: false,
        }
    }

    pub(crate) fn wants_write(&self) -> bool {
        matches!(self.turn, Turn::Wait { write: true, .. })
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
    let Wait::Session(mut session) = std::mem::replace(&mut conn.wait, Wait::Idle { until: None })
    else {
        return None;
    };
    let sock = conn.stream();
    let mut own = session.unread.take();
    let buf = own.as_mut().unwrap_or(buf);
    let now = Instant::now();
    if !session.stopping && shared.control.is_shutting_down() {
        session.stopping = true;
        session.conn.shutdown(sock, buf, now);
    }
    if session.deadline().is_some_and(|d| d <= now) {
        session.conn.expire(sock, buf, now);
    }
    // An edge-triggered parker needs the socket read until EAGAIN; re-arming a oneshot
    // registration checks readiness, so there a short read may end the turn.
    let level = shared.parker.as_ref().is_none_or(|p| !p.edge());
    session.turn = match session.conn.drive(sock, buf, now, level) {
        WsNext::Wait { write, deadline } => Turn::Wait { write, deadline },
        // The message budget ran out: the worker queues it behind the others.
        WsNext::Again => Turn::More {
            deadline: session.deadline(),
        },
        WsNext::Close | WsNext::Dispatch | WsNext::Busy => {
            session.conn.finish();
            return None;
        }
    };
    if !buf.is_empty() && session.conn.keeps_input() {
        // Input still buffered: it stays with the connection.
        let mut keep = ReadBuf::new();
        keep.push(buf.filled());
        session.unread = Some(keep);
    }
    // (An event stream reads nothing; bytes a client pipelined after its request are dropped.)
    buf.clear();
    conn.wait = Wait::Session(session);
    Some(conn)
}

/// A session the parker refused (it has stopped): closes it, with `on_close` run.
pub(crate) fn abandon(mut conn: Connection) {
    if let Wait::Session(session) = &mut conn.wait {
        session.conn.finish();
    }
}
