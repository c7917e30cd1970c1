//! Connections that leave the HTTP exchange for a thread of their own: a generic upgrade (both
//! engines), and on the thread-pool engine a WebSocket or an event stream.

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Instant;

use polling::{Event, Events, Poller};

use crate::engine::{Control, OpenGuard, wait_events};
use crate::http::buf::ReadBuf;
use crate::http::conn::Encoder;
use crate::net::sys::Registered;
use crate::sse::{SseConn, Stream};
use crate::ws::{Upgrade, Upgraded, Wake, WsConfig, WsConn, WsHandler, WsIo, WsNext, WsSender};

/// Hands an upgraded connection to a new thread: the generic callback with a blocking socket,
/// or a WebSocket driven as blocking code (callbacks on that thread). The thread counts as the
/// connection (`open`) and as a detached thread until it ends.
pub(crate) fn detach(
    control: &Arc<Control>,
    stream: TcpStream,
    leftover: Vec<u8>,
    peer: Option<SocketAddr>,
    upgrade: Upgrade,
    open: OpenGuard,
) {
    let ctl = control.clone();
    let spawned = match upgrade {
        Upgrade::Raw(then) => control.spawn_detached("twinhttp-upgraded", move || {
            let _open = open;
            match Upgraded::new(stream, leftover) {
                Ok(up) => then(up),
                Err(e) => log::debug!("upgrade: {e}"),
            }
        }),
        Upgrade::WebSocket(handler, cfg) => control.spawn_detached("twinhttp-ws", move || {
            let _open = open;
            if let Err(e) = run_ws(&ctl, stream, leftover, peer, handler, cfg) {
                log::warn!("websocket closed: {e}");
            }
        }),
    };
    if let Err(e) = spawned {
        log::error!("cannot start a connection thread: {e}; closing it");
    }
}

struct PollerWake(Arc<Poller>);

impl Wake for PollerWake {
    fn wake(&self) {
        let _ = self.0.notify();
    }
}

const SOCKET: usize = 0;

/// A connection driven on a thread of its own after its HTTP exchange: a WebSocket or an event
/// stream.
trait Session {
    fn drive(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant) -> WsNext;
    fn expire(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant);
    fn shutdown(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant);
    fn finish(&mut self);
}

impl Session for WsConn {
    fn drive(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant) -> WsNext {
        WsConn::drive(self, &mut WsIo { sock, buf }, now, true)
    }
    fn expire(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant) {
        WsConn::expire(self, &mut WsIo { sock, buf }, now)
    }
    fn shutdown(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant) {
        WsConn::shutdown(self, &mut WsIo { sock, buf }, now)
    }
    fn finish(&mut self) {
        WsConn::finish(self, true);
    }
}

impl Session for SseConn {
    fn drive(&mut self, sock: &TcpStream, _: &mut ReadBuf, now: Instant) -> WsNext {
        SseConn::drive(self, sock, now)
    }
    fn expire(&mut self, _: &TcpStream, _: &mut ReadBuf, _: Instant) {}
    fn shutdown(&mut self, _: &TcpStream, _: &mut ReadBuf, _: Instant) {
        SseConn::shutdown(self)
    }
    fn finish(&mut self) {
        SseConn::finish(self)
    }
}

/// An event stream on the thread-pool engine: a thread of its own, like a WebSocket.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) fn detach_events(
    control: &Arc<Control>,
    stream: TcpStream,
    events: Stream,
    encoder: Encoder,
    open: OpenGuard,
) {
    let ctl = control.clone();
    let spawned = control.spawn_detached("twinhttp-sse", move || {
        let _open = open;
        let run = || -> std::io::Result<()> {
            let poller = Arc::new(Poller::new()?);
            let waker = Box::new(PollerWake(poller.clone()));
            let sse = SseConn::new(events, encoder, waker, Instant::now());
            run_session(&ctl, &poller, stream, sse, ReadBuf::new())
        };
        if let Err(e) = run() {
            log::warn!("event stream closed: {e}");
        }
    });
    if let Err(e) = spawned {
        log::error!("cannot start a connection thread: {e}; closing it");
    }
}

/// A WebSocket as blocking code: wait on the socket and the sender's wake-ups in one poller,
/// drive, repeat.
fn run_ws(
    control: &Arc<Control>,
    stream: TcpStream,
    leftover: Vec<u8>,
    peer: Option<SocketAddr>,
    handler: Box<dyn WsHandler>,
    cfg: WsConfig,
) -> std::io::Result<()> {
    let poller = Arc::new(Poller::new()?);
    let sender = WsSender::new(
        Box::new(PollerWake(poller.clone())),
        cfg.max_send_queue,
        peer,
    );
    let ws = WsConn::new(handler, cfg, sender, Instant::now());
    let mut buf = ReadBuf::new();
    buf.push(&leftover);
    run_session(control, &poller, stream, ws, buf)
}

/// Drives `session` until it closes. Server shutdown wakes it to end (WebSockets close with
/// 1001, event streams end after what is queued).
fn run_session(
    control: &Arc<Control>,
    poller: &Arc<Poller>,
    stream: TcpStream,
    mut session: impl Session,
    mut buf: ReadBuf,
) -> std::io::Result<()> {
    let socket = Registered::new(poller.clone(), stream, Event::none(SOCKET))?;
    let _watch = control.watch(poller.clone());
    let mut events = Events::new();
    let mut stopping = false;
    let result = loop {
        let now = Instant::now();
        if !stopping && control.is_shutting_down() {
            stopping = true;
            session.shutdown(socket.get(), &mut buf, now);
        }
        let (write, deadline) = match session.drive(socket.get(), &mut buf, now) {
            WsNext::Wait { write, deadline } => (write, deadline),
            WsNext::Again => continue,
            WsNext::Close | WsNext::Dispatch | WsNext::Busy => break Ok(()),
        };
        let interest = if write {
            Event::writable(SOCKET)
        } else {
            Event::readable(SOCKET)
        };
        if let Err(e) = socket.rearm(interest) {
            break Err(e);
        }
        let timeout = deadline.map(|d| d.saturating_duration_since(now));
        wait_events(poller, &mut events, timeout, "connection thread");
        let now = Instant::now();
        if deadline.is_some_and(|d| d <= now) {
            session.expire(socket.get(), &mut buf, now);
        }
    };
    session.finish();
    result
}
