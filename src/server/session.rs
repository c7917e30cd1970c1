//! Long-lived connections on the thread-pool engine with parking on: after its 101 a WebSocket,
//! and after its head an event stream, is a parked connection like an idle keep-alive one.
//! Whichever worker takes it when bytes arrive (or the socket takes more), when its sender
//! pushes or when one of its timers is due runs it (a WebSocket's callbacks as blocking code),
//! then parks it again, so between messages it holds no thread and no buffer. (With parking off,
//! each has a thread of its own: `crate::net::upgrade`.)

use std::net::SocketAddr;
use std::time::Instant;

use super::park::WakeParked;
use super::worker::{Connection, Shared};
use crate::Handler;
use crate::http::buf::ReadBuf;
use crate::http::conn::Encoder;
use crate::sse::{SseConn, Stream};
use crate::ws::{WsConfig, WsConn, WsHandler, WsIo, WsNext, WsSender};

/// A parked connection's state between the workers' turns.
pub(crate) struct Session {
    kind: Kind,
    /// Bytes read but not yet framed, kept only when a WebSocket's turn ended waiting to write
    /// with input still buffered (rare); otherwise each turn reads into the worker's buffer.
    unread: Option<ReadBuf>,
    /// Output is blocked: the parker also waits for the socket to be writable.
    write: bool,
    /// When the connection's next timer (ping, idle, heartbeat, closing handshake, stalled
    /// write) is due.
    deadline: Option<Instant>,
    /// Shutdown has been acted on (a WebSocket's 1001, the end of an event stream).
    stopping: bool,
    /// The turn ended on the message budget with input left: queue it behind the others.
    again: bool,
}

// The session lives in a box of its own (`Connection::session`), so the larger variant costs
// an event stream some bytes of that one allocation, not every connection.
#[allow(clippy::large_enum_variant)]
enum Kind {
    WebSocket(WsConn),
    Events(SseConn),
}

impl Session {
    pub(crate) fn websocket(
        handler: Box<dyn WsHandler>,
        cfg: WsConfig,
        wake: WakeParked,
        peer: Option<SocketAddr>,
    ) -> Self {
        let sender = WsSender::new(Box::new(wake), cfg.max_send_queue, peer);
        Session::new(Kind::WebSocket(WsConn::new(
            handler,
            cfg,
            sender,
            Instant::now(),
        )))
    }

    pub(crate) fn events(stream: Stream, encoder: Encoder, wake: WakeParked) -> Self {
        Session::new(Kind::Events(SseConn::new(
            stream,
            encoder,
            Box::new(wake),
            Instant::now(),
        )))
    }

    fn new(kind: Kind) -> Self {
        Session {
            kind,
            unread: None,
            write: false,
            deadline: None,
            stopping: false,
            again: false,
        }
    }

    pub(crate) fn wants_write(&self) -> bool {
        self.write
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The last turn stopped on the message budget: more is waiting, run it again after the
    /// connections queued before it.
    pub(crate) fn has_more(&self) -> bool {
        self.again
    }

    /// The connection is going away: a WebSocket's `on_close` runs (here), an event stream's
    /// sender learns it.
    fn finish(&mut self) {
        match &mut self.kind {
            Kind::WebSocket(ws) => drop(ws.finish(true)),
            Kind::Events(sse) => sse.finish(),
        }
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
    let mut session = conn.session.take()?;
    let sock = conn.stream();
    let mut own = session.unread.take();
    let buf = own.as_mut().unwrap_or(buf);
    let now = Instant::now();
    let stop = !session.stopping && shared.control.is_shutting_down();
    session.stopping |= stop;
    let due = session.deadline.is_some_and(|d| d <= now);
    let next = match &mut session.kind {
        Kind::WebSocket(ws) => {
            if stop {
                ws.shutdown(&mut WsIo::new(sock, buf), now);
            }
            if due {
                ws.expire(&mut WsIo::new(sock, buf), now);
            }
            // Edge-triggered parking needs the socket drained: a short read shows it is.
            ws.drive(&mut WsIo::until_short_read(sock, buf), now, true)
        }
        Kind::Events(sse) => {
            if stop {
                sse.shutdown();
            }
            // Reads until the socket would block; heartbeats are written when due.
            sse.drive(sock, now)
        }
    };
    session.again = false;
    match next {
        WsNext::Wait { write, deadline } => {
            session.write = write;
            session.deadline = deadline;
        }
        // The message budget ran out: the worker queues it behind the others.
        WsNext::Again => session.again = true,
        _ => {
            session.finish();
            return None;
        }
    }
    if !buf.is_empty() && matches!(session.kind, Kind::WebSocket(_)) {
        // Input still buffered (waiting to write, or the budget ran out): it stays with the
        // connection.
        let mut keep = ReadBuf::new();
        keep.push(buf.filled());
        session.unread = Some(keep);
    }
    // (An event stream reads nothing; bytes a client pipelined after its request are dropped.)
    buf.clear();
    conn.session = Some(session);
    Some(conn)
}

/// A session the parker refused (it has stopped): closes it, with `on_close` run.
pub(crate) fn abandon(mut conn: Connection) {
    if let Some(mut session) = conn.session.take() {
        session.finish();
    }
}
