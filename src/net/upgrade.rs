//! Connections that leave the HTTP exchange for a thread of their own: a generic upgrade (both
//! engines), and on the thread-pool engine a WebSocket or an event stream.

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Instant;

use std::os::fd::{AsFd, BorrowedFd};
#[cfg(not(any(target_os = "linux", target_os = "android")))]
use std::os::unix::net::UnixStream;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::engine::{Control, OpenGuard};
use crate::http::buf::ReadBuf;
use crate::http::conn::Encoder;
use crate::sse::{SseConn, Stream};
use crate::ws::{Upgrade, Upgraded, Wake, WsConfig, WsConn, WsHandler, WsIo, WsNext, WsSender};

/// Hands an upgraded connection to a new thread: the generic callback with a blocking socket,
/// or a WebSocket driven as blocking code (callbacks on that thread). The thread counts as the
/// connection (`open`) and as a detached thread until it ends.
///
/// A WebSocket needs a [`Waiter`]; the thread-pool engine makes it before it sends the 101, so a
/// process out of descriptors answers 503 instead of switching and then dropping the connection.
pub(crate) fn detach(
    control: &Arc<Control>,
    stream: TcpStream,
    leftover: Vec<u8>,
    peer: Option<SocketAddr>,
    upgrade: Upgrade,
    open: OpenGuard,
    waiter: Option<Arc<Waiter>>,
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
            if let Err(e) = run_ws(&ctl, stream, leftover, peer, handler, *cfg, waiter) {
                log::warn!("websocket closed: {e}");
            }
        }),
    };
    if let Err(e) = spawned {
        log::error!("cannot start a connection thread: {e}; closing it");
    }
}

/// How a connection thread waits: for its socket and for wake-ups (a sender pushed, shutdown
/// began) in one `poll(2)`. The wake-up is an eventfd on Linux (one descriptor), a socket pair
/// elsewhere; with the socket that is two (three) descriptors per connection thread.
pub(crate) struct Waiter {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    wake_fd: std::os::fd::OwnedFd,
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pair: (UnixStream, UnixStream),
}

impl Waiter {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(crate) fn new() -> std::io::Result<Waiter> {
        use rustix::event::{EventfdFlags, eventfd};
        let wake_fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Waiter { wake_fd })
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub(crate) fn new() -> std::io::Result<Waiter> {
        let pair = UnixStream::pair()?;
        pair.0.set_nonblocking(true)?;
        pair.1.set_nonblocking(true)?;
        Ok(Waiter { pair })
    }

    /// The descriptor that becomes readable on a wake-up.
    fn wake_side(&self) -> BorrowedFd<'_> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        return self.wake_fd.as_fd();
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        return self.pair.0.as_fd();
    }

    /// Consumes pending wake-ups.
    fn drain(&self) {
        let mut buf = [0u8; 64];
        while matches!(rustix::io::read(self.wake_side(), &mut buf), Ok(n) if n > 0) {}
    }

    /// Waits until `sock` is readable (writable with `write`), a wake-up, or `timeout`.
    fn wait(&self, sock: &TcpStream, write: bool, timeout: Option<Duration>) {
        let flags = if write { PollFlags::OUT } else { PollFlags::IN };
        let timeout = timeout.map(|t| Timespec {
            tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(t.subsec_nanos()),
        });
        let mut fds = [
            PollFd::new(sock, flags),
            PollFd::from_borrowed_fd(self.wake_side(), PollFlags::IN),
        ];
        // EINTR and the like: the caller drives the connection and waits again.
        let _ = poll(&mut fds, timeout.as_ref());
        if !fds[1].revents().is_empty() {
            self.drain();
        }
    }
}

impl Wake for Waiter {
    fn wake(&self) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let _ = rustix::io::write(&self.wake_fd, &1u64.to_ne_bytes());
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let _ = rustix::io::write(&self.pair.1, &[1]);
    }
}

/// A connection that has left the HTTP exchange and is driven as blocking code, on a thread of
/// its own here or a pool worker's turn (the thread-pool engine's parked sessions): a WebSocket
/// or an event stream.
pub(crate) trait LongLived: Send {
    /// Runs as far as it goes without blocking. With `level` the caller then waits
    /// level-triggered, so reading may stop at a short read; otherwise (an edge-triggered
    /// parker) it reads until the socket says EAGAIN, since the end of input may come with the
    /// last bytes and raise no event of its own.
    fn drive(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant, level: bool) -> WsNext;
    /// A deadline `drive` returned has passed.
    fn expire(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant);
    /// Server shutdown: a WebSocket closes with 1001, an event stream ends after what is queued.
    fn shutdown(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant);
    /// The connection is going away: a WebSocket's `on_close` runs here, an event stream's
    /// sender learns it.
    fn finish(&mut self);
    /// Whether unread input in `buf` belongs to it (an event stream reads nothing).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    fn keeps_input(&self) -> bool;
}

impl LongLived for WsConn {
    fn drive(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant, level: bool) -> WsNext {
        let mut io = if level {
            WsIo::until_short_read(sock, buf)
        } else {
            WsIo::new(sock, buf)
        };
        WsConn::drive(self, &mut io, now, true)
    }
    fn expire(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant) {
        WsConn::expire(self, &mut WsIo::new(sock, buf), now)
    }
    fn shutdown(&mut self, sock: &TcpStream, buf: &mut ReadBuf, now: Instant) {
        WsConn::shutdown(self, &mut WsIo::new(sock, buf), now)
    }
    fn finish(&mut self) {
        WsConn::finish(self, true);
    }
    fn keeps_input(&self) -> bool {
        true
    }
}

impl LongLived for SseConn {
    fn drive(&mut self, sock: &TcpStream, _: &mut ReadBuf, now: Instant, _: bool) -> WsNext {
        SseConn::drive(self, sock, now)
    }
    fn expire(&mut self, _: &TcpStream, _: &mut ReadBuf, _: Instant) {}
    fn shutdown(&mut self, _: &TcpStream, _: &mut ReadBuf, _: Instant) {
        SseConn::shutdown(self)
    }
    fn finish(&mut self) {
        SseConn::finish(self)
    }
    fn keeps_input(&self) -> bool {
        false
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
    waiter: Arc<Waiter>,
) {
    let ctl = control.clone();
    let spawned = control.spawn_detached("twinhttp-sse", move || {
        let _open = open;
        let waker = Box::new(waiter.clone());
        let sse = SseConn::new(events, encoder, waker, Instant::now(), ctl.response_rate);
        run_session(&ctl, &waiter, &stream, sse, ReadBuf::new());
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
    waiter: Option<Arc<Waiter>>,
) -> std::io::Result<()> {
    let waiter = match waiter {
        Some(w) => w,
        None => Arc::new(Waiter::new()?),
    };
    let sender = WsSender::new(Box::new(waiter.clone()), cfg.max_send_queue, peer);
    let ws = WsConn::new(handler, cfg, sender, Instant::now(), control.response_rate);
    let mut buf = ReadBuf::new();
    buf.push(&leftover);
    run_session(control, &waiter, &stream, ws, buf);
    Ok(())
}

/// Drives `session` until it closes. Server shutdown wakes it to end (WebSockets close with
/// 1001, event streams end after what is queued).
fn run_session(
    control: &Arc<Control>,
    waiter: &Arc<Waiter>,
    socket: &TcpStream,
    mut session: impl LongLived,
    mut buf: ReadBuf,
) {
    let _watch = control.watch(waiter.clone());
    let mut stopping = false;
    loop {
        let now = Instant::now();
        if !stopping && control.is_shutting_down() {
            stopping = true;
            session.shutdown(socket, &mut buf, now);
        }
        let (write, deadline) = match session.drive(socket, &mut buf, now, true) {
            WsNext::Wait { write, deadline } => (write, deadline),
            WsNext::Again => continue,
            WsNext::Close | WsNext::Dispatch | WsNext::Busy => break,
        };
        waiter.wait(
            socket,
            write,
            deadline.map(|d| d.saturating_duration_since(now)),
        );
        let now = Instant::now();
        if deadline.is_some_and(|d| d <= now) {
            session.expire(socket, &mut buf, now);
        }
    }
    session.finish();
}
