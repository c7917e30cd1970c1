//! WebSockets on the thread-pool engine with parking on: after its 101 a WebSocket is a parked
//! connection like an idle keep-alive one. Whichever worker takes it when bytes arrive, when its
//! sender pushes or when one of its timers is due runs its callbacks as blocking code, then parks
//! it again, so between messages it holds no thread and no buffer. (With parking off, each
//! WebSocket has a thread of its own: `crate::net::upgrade`.)

use std::net::SocketAddr;
use std::time::Instant;

use super::park::WakeParked;
use super::worker::{Connection, Shared};
use crate::Handler;
use crate::http::buf::ReadBuf;
use crate::ws::{WsConfig, WsConn, WsHandler, WsIo, WsNext, WsSender};

/// A WebSocket's state between the workers' turns.
pub(crate) struct Session {
    conn: WsConn,
    /// Bytes read but not yet framed, kept only when a step ended waiting to write with input
    /// still buffered (rare); otherwise each step reads into the serving worker's buffer.
    unread: Option<ReadBuf>,
    /// Output is blocked: the parker also waits for the socket to be writable.
    write: bool,
    /// When the connection's next timer (ping, idle, closing handshake, stalled write) is due.
    deadline: Option<Instant>,
    /// Shutdown's close frame has been sent.
    stopping: bool,
}

impl Session {
    pub(crate) fn new(
        handler: Box<dyn WsHandler>,
        cfg: WsConfig,
        wake: WakeParked,
        peer: Option<SocketAddr>,
    ) -> Self {
        let sender = WsSender::new(Box::new(wake), cfg.max_send_queue, peer);
        Session {
            conn: WsConn::new(handler, cfg, sender, Instant::now()),
            unread: None,
            write: false,
            deadline: None,
            stopping: false,
        }
    }

    pub(crate) fn wants_write(&self) -> bool {
        self.write
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

/// Runs one turn of the WebSocket on `conn`: shutdown's close frame and due timers first, then
/// output, input and callbacks until the socket has nothing more for now. Reads go to `buf` (the
/// worker's), which is left empty. Returns the connection to park, or `None` once it closed
/// (`on_close` has run).
pub(crate) fn drive<H: Handler>(
    shared: &Shared<H>,
    mut conn: Connection,
    buf: &mut ReadBuf,
) -> Option<Connection> {
    let mut session = conn.ws.take()?;
    let sock = conn.stream();
    let mut own = session.unread.take();
    let buf = own.as_mut().unwrap_or(buf);
    let mut now = Instant::now();
    if !session.stopping && shared.control.is_shutting_down() {
        session.stopping = true;
        session.conn.shutdown(&mut WsIo::new(sock, buf), now);
    }
    if session.deadline.is_some_and(|d| d <= now) {
        session.conn.expire(&mut WsIo::new(sock, buf), now);
    }
    loop {
        // Edge-triggered parking needs the socket drained: a short read shows it is.
        match session
            .conn
            .drive(&mut WsIo::until_short_read(sock, buf), now, true)
        {
            WsNext::Wait { write, deadline } => {
                session.write = write;
                session.deadline = deadline;
                break;
            }
            // The message budget ran out: this worker goes on (the peer keeps it busy, as a
            // thread of its own would be).
            WsNext::Again => now = Instant::now(),
            WsNext::Close | WsNext::Dispatch | WsNext::Busy => {
                session.conn.finish(true);
                return None;
            }
        }
    }
    if !buf.is_empty() {
        // Waiting to write with input still buffered: it stays with the connection.
        let mut keep = ReadBuf::with_len(buf.filled().len());
        keep.push(buf.filled());
        buf.clear();
        session.unread = Some(keep);
    }
    conn.ws = Some(session);
    Some(conn)
}

/// A WebSocket the parker refused (it has stopped): closes it, with `on_close` run.
pub(crate) fn abandon(mut conn: Connection) {
    if let Some(mut session) = conn.ws.take() {
        session.conn.finish(true);
    }
}
