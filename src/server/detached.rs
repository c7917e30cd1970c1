//! Sessions on threads of their own: with parking off, a WebSocket or an event stream is driven
//! as blocking code on a thread that waits for its socket and its wake-ups in one `poll(2)`.

use std::os::fd::{AsFd, BorrowedFd};
#[cfg(not(any(target_os = "linux", target_os = "android")))]
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::engine::{Control, OpenGuard, Runs};
use crate::http::buf::ReadBuf;
use crate::http::pools::Pools;
use crate::http::session::{Callbacks, Next, Reads, Session, Wake};
use crate::http::session_driver::SessionDriver;
use crate::net::transport::Stream;

/// Drives a session on a thread of its own, as blocking code (callbacks on that thread), until
/// it closes. Its [`Waiter`] is made by the engine once the response head is out (a process out
/// of descriptors then closes the connection: the 101 or the event stream's head went out
/// already), and the session was started with it as its waker.
pub(crate) fn detach_session(
    control: &Arc<Control>,
    stream: Stream,
    leftover: Vec<u8>,
    session: Box<dyn Session>,
    mut open: OpenGuard,
    waiter: Arc<Waiter>,
) {
    open.set(session.kind().into());
    let ctl = control.clone();
    let unstarted = Unstarted(Some((session, open)));
    let spawned = control.spawn_detached("twinhttp-session", Runs::Session, move || {
        let Some((session, _open)) = unstarted.start() else {
            return;
        };
        let mut buf = ReadBuf::new();
        buf.push(&leftover);
        run_session(&ctl, &waiter, stream, session, buf);
    });
    if let Err(e) = spawned {
        log::error!("cannot start a connection thread: {e}; closing it");
    }
}

/// A session on its way to a thread of its own. Dropped before the thread took it (no thread
/// could be started: the closure that held it is dropped where the spawn failed, on the worker
/// that answered the upgrade), it finishes there: its last callbacks run (a WebSocket's
/// `on_open`, if due, and `on_close`), as they would have on its thread, and the connection
/// is counted as open until they have run.
struct Unstarted(Option<(Box<dyn Session>, OpenGuard)>);

impl Unstarted {
    /// The thread takes the session, and the count of it as open.
    fn start(mut self) -> Option<(Box<dyn Session>, OpenGuard)> {
        self.0.take()
    }
}

impl Drop for Unstarted {
    fn drop(&mut self) {
        if let Some((mut session, open)) = self.0.take() {
            // Inline, the callbacks ran: nothing comes back.
            let _ = session.finish(Callbacks::Inline);
            drop(open);
        }
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

    /// Waits until a wake-up, `timeout`, or (`on`) the socket is readable (writable with
    /// its `true`).
    fn wait(&self, on: Option<(BorrowedFd<'_>, bool)>, timeout: Option<Duration>) {
        let timeout = timeout.map(|t| Timespec {
            tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(t.subsec_nanos()),
        });
        let wake = PollFd::from_borrowed_fd(self.wake_side(), PollFlags::IN);
        let (mut fds, n) = match on {
            Some((sock, write)) => {
                let flags = if write { PollFlags::OUT } else { PollFlags::IN };
                ([wake, PollFd::from_borrowed_fd(sock, flags)], 2)
            }
            None => ([wake.clone(), wake], 1),
        };
        // EINTR and the like: the caller drives the connection and waits again.
        let _ = poll(&mut fds[..n], timeout.as_ref());
        if !fds[0].revents().is_empty() {
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

/// Drives `session` until it closes: a turn of its driver, then a wait on the socket and the
/// wake-ups in one `poll(2)`, until its next deadline. Server shutdown wakes it to end
/// (WebSockets close with 1001, event streams end after what is queued).
fn run_session(
    control: &Arc<Control>,
    waiter: &Arc<Waiter>,
    mut socket: Stream,
    session: Box<dyn Session>,
    input: ReadBuf,
) {
    let _watch = control.watch(waiter.clone());
    // One thread, one connection: the pool holds this thread's buffer between turns.
    let mut pools = Pools::default();
    let mut driver = SessionDriver::new(session, Some(input), &mut pools);
    loop {
        let now = Instant::now();
        let next = driver.turn(
            &mut socket,
            &mut pools,
            Reads::UntilShortRead,
            now,
            control.is_shutting_down(),
            Callbacks::Inline,
        );
        let (on, deadline) = match next {
            Next::Wait { write, deadline } => (Some((socket.as_fd(), write)), deadline),
            // Not the socket: its input would wake this thread at once, again and again.
            Next::Paused { deadline } => (None, deadline),
            Next::Again => continue,
            Next::Close | Next::Dispatch | Next::Busy => break,
        };
        waiter.wait(on, deadline.map(|d| d.saturating_duration_since(now)));
    }
    driver.finish(Callbacks::Inline, &mut pools);
}
