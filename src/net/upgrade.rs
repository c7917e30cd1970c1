//! After `101 Switching Protocols`: a connection leaves the HTTP engine for a thread of its own
//! (a generic upgrade, or a WebSocket on the thread-pool engine). Both engines use this.

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Instant;

use polling::{Event, Events, Poller};

use crate::engine::{Control, OpenGuard, wait_events};
use crate::http::buf::ReadBuf;
use crate::net::sys::Registered;
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

/// A WebSocket as blocking code: wait on the socket and the sender's wake-ups in one poller,
/// drive, repeat. Server shutdown wakes it to close with 1001.
fn run_ws(
    control: &Arc<Control>,
    stream: TcpStream,
    leftover: Vec<u8>,
    peer: Option<SocketAddr>,
    handler: Box<dyn WsHandler>,
    cfg: WsConfig,
) -> std::io::Result<()> {
    let poller = Arc::new(Poller::new()?);
    let socket = Registered::new(poller.clone(), stream, Event::none(SOCKET))?;
    let _watch = control.watch(poller.clone());
    let sender = WsSender::new(
        Box::new(PollerWake(poller.clone())),
        cfg.max_send_queue,
        peer,
    );
    let mut ws = WsConn::new(handler, cfg, sender, Instant::now());
    let mut buf = ReadBuf::new();
    buf.push(&leftover);
    let mut events = Events::new();
    let mut stopping = false;
    loop {
        let now = Instant::now();
        let mut io = io_of(&socket, &mut buf);
        if !stopping && control.is_shutting_down() {
            stopping = true;
            ws.shutdown(&mut io, now);
        }
        let (write, deadline) = match ws.drive(&mut io, now, true) {
            WsNext::Wait { write, deadline } => (write, deadline),
            WsNext::Again => continue,
            WsNext::Close | WsNext::Dispatch | WsNext::Busy => break,
        };
        let interest = if write {
            Event::writable(SOCKET)
        } else {
            Event::readable(SOCKET)
        };
        socket.rearm(interest)?;
        let timeout = deadline.map(|d| d.saturating_duration_since(now));
        wait_events(&poller, &mut events, timeout, "websocket");
        let now = Instant::now();
        if deadline.is_some_and(|d| d <= now) {
            ws.expire(&mut io_of(&socket, &mut buf), now);
        }
    }
    ws.finish(true);
    Ok(())
}

fn io_of<'a>(socket: &'a Registered<TcpStream>, buf: &'a mut ReadBuf) -> WsIo<'a> {
    WsIo {
        sock: socket.get(),
        buf,
    }
}
