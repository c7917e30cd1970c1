//! systemd: listeners passed by socket activation, and readiness reported to the service
//! manager.
//!
//! With the feature `systemd`, [`listeners`] takes the sockets systemd (or
//! `systemd-socket-activate`) passed to this process (`LISTEN_FDS`, for this process's
//! `LISTEN_PID`), to give to `serve_listener` on either engine; and when `NOTIFY_SOCKET` is set
//! (a `Type=notify` service), each engine reports `READY=1` once it serves and `STOPPING=1` when
//! its shutdown begins; and [`hand_over`] starts a successor process on this one's listening
//! sockets, the same protocol (`LISTEN_FDS`, `READY=1`) spoken between the two processes, for a
//! restart that refuses no connection. Without the feature the reports are not made and this
//! module has no public item.

#[cfg(feature = "systemd")]
mod hand_over;

#[cfg(feature = "systemd")]
pub use hand_over::hand_over;

#[cfg(feature = "systemd")]
use crate::{Error, Listener};

/// The listening sockets passed to this process by socket activation, in the order of the
/// unit's `ListenStream=` lines: TCP or Unix stream sockets. Empty when none was passed (run
/// outside systemd).
///
/// ```no_run
/// use twinhttp::{Engine, Response, handler_fn};
///
/// let mut passed = twinhttp::systemd::listeners()?;
/// let Some(listener) = passed.pop() else {
///     panic!("run me with systemd-socket-activate -l 8080");
/// };
/// let running = Engine::Reactor
///     .builder()
///     .serve_listener(listener, handler_fn(|_| Response::text("hi")))?;
/// # running.shutdown(std::time::Duration::from_secs(1))?;
/// # Ok::<(), twinhttp::Error>(())
/// ```
///
/// # Errors
///
/// A passed descriptor that is not a TCP or Unix stream socket (a datagram socket, a FIFO).
#[cfg(feature = "systemd")]
#[cfg_attr(docsrs, doc(cfg(feature = "systemd")))]
pub fn listeners() -> Result<Vec<Listener>, Error> {
    let mut passed = listenfd::ListenFd::from_env();
    (0..passed.len())
        .filter_map(|i| take(&mut passed, i).transpose())
        .collect()
}

/// The listener at `i`: TCP if it is one, else Unix. `None`: taken already.
#[cfg(feature = "systemd")]
fn take(passed: &mut listenfd::ListenFd, i: usize) -> Result<Option<Listener>, Error> {
    if let Ok(Some(tcp)) = passed.take_tcp_listener(i) {
        return Ok(Some(tcp.into()));
    }
    // Not a TCP socket: left in its place, to be taken as a Unix one.
    match passed.take_unix_listener(i) {
        Ok(unix) => Ok(unix.map(Listener::from)),
        Err(e) => Err(Error::bind(format_args!("the passed socket {i}"), e)),
    }
}

/// Tells the service manager the server is ready (with `NOTIFY_SOCKET` set), and a
/// predecessor waiting to hand over ([`hand_over`]).
pub(crate) fn ready() {
    #[cfg(feature = "systemd")]
    {
        notify(sd_notify::NotifyState::Ready);
        hand_over::tell_predecessor();
    }
}

/// Tells the service manager the server is stopping (with `NOTIFY_SOCKET` set), unless this
/// process handed its sockets to a successor: the service goes on in that one.
pub(crate) fn stopping() {
    #[cfg(feature = "systemd")]
    if !hand_over::handed_over() {
        notify(sd_notify::NotifyState::Stopping);
    }
}

#[cfg(feature = "systemd")]
fn notify(state: sd_notify::NotifyState<'_>) {
    // Without `NOTIFY_SOCKET` this does nothing; a manager that cannot be told is logged, and
    // the server serves on.
    if let Err(e) = sd_notify::notify(false, &[state]) {
        log::warn!("could not notify the service manager: {e}");
    }
}
