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

/// Tells the service manager the server is ready (with `NOTIFY_SOCKET` set).
pub(crate) fn ready() {
    #[cfg(feature = "systemd")]
    notify(sd_notify::NotifyState::Ready);
}

/// Tells the service manager the server is stopping (with `NOTIFY_SOCKET` set).
pub(crate) fn stopping() {
    #[cfg(feature = "systemd")]
    notify(sd_notify::NotifyState::Stopping);
}

#[cfg(feature = "systemd")]
fn notify(state: sd_notify::NotifyState<'_>) {
    // Without `NOTIFY_SOCKET` this does nothing; a manager that cannot be told is logged, and
    // the server serves on.
    match sd_notify::notify(false, &[state]) {
        Ok(()) => {}
        // The manager is gone (a predecessor that handed over and exited): nobody to tell.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) => {}
        Err(e) => log::warn!("could not notify the service manager: {e}"),
    }
}

/// Starts `successor` on this process's listening sockets (a running engine's
/// `listener_fds()`) and returns once it is serving, for a restart that refuses and resets no
/// connection: the sockets stay open across it, and until this process stops accepting, both
/// take connections from their queue. Then shut this process down gracefully: it answers what it
/// has, and the successor serves on.
///
/// The successor gets the sockets as systemd passes them: at descriptors 3 and up, with
/// `LISTEN_FDS` set (and no `LISTEN_PID`: [`listeners`] accepts that, as `listenfd` does), and
/// reports its readiness on a `NOTIFY_SOCKET` this process listens on, which every engine does.
/// The examples do this on `SIGHUP`. Under systemd, a socket unit already keeps the port open
/// across `systemctl restart`; this is for processes started otherwise.
///
/// # Errors
///
/// When the successor cannot be started, exits, or is not ready within `within` (it is killed
/// then, and this process serves on).
#[cfg(feature = "systemd")]
#[cfg_attr(docsrs, doc(cfg(feature = "systemd")))]
pub fn hand_over(
    listeners: &[std::os::fd::BorrowedFd<'_>],
    mut successor: std::process::Command,
    within: std::time::Duration,
) -> Result<std::process::Child, Error> {
    use command_fds::{CommandFdExt, FdMapping};

    let notify = Notified::bind()?;
    let mappings = listeners
        .iter()
        .zip(3..)
        .map(|(fd, child_fd)| {
            Ok(FdMapping {
                parent_fd: fd.try_clone_to_owned()?,
                child_fd,
            })
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    successor
        .fd_mappings(mappings)
        .map_err(std::io::Error::other)?
        .env("LISTEN_FDS", listeners.len().to_string())
        .env("NOTIFY_SOCKET", &notify.path)
        .env_remove("LISTEN_PID")
        .env_remove("LISTEN_FDS_FIRST_FD")
        .env_remove("LISTEN_FDNAMES");
    let mut child = successor.spawn()?;
    // The copies of the sockets the command held are closed; the successor has its own.
    drop(successor);
    match notify.ready(&mut child, within) {
        Ok(()) => Ok(child),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// The datagram socket a successor reports its readiness on; its file is removed when dropped.
#[cfg(feature = "systemd")]
struct Notified {
    socket: std::os::unix::net::UnixDatagram,
    path: std::path::PathBuf,
}

#[cfg(feature = "systemd")]
impl Notified {
    fn bind() -> Result<Notified, Error> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "twinhttp-hand-over-{}-{}.sock",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&path);
        let socket = std::os::unix::net::UnixDatagram::bind(&path)
            .map_err(|e| Error::bind(path.display(), e))?;
        Ok(Notified { socket, path })
    }

    /// Waits for `READY=1` from `child`, while it runs, for `within` at most.
    fn ready(
        &self,
        child: &mut std::process::Child,
        within: std::time::Duration,
    ) -> Result<(), Error> {
        use std::io::{Error as IoError, ErrorKind as Io};
        use std::time::{Duration, Instant};
        let deadline = crate::deadline::after(Instant::now(), within);
        self.socket
            .set_read_timeout(Some(Duration::from_millis(50)))?;
        let mut buf = [0u8; 4096];
        loop {
            match self.socket.recv(&mut buf) {
                Ok(n) => {
                    let said = buf.get(..n).unwrap_or_default();
                    if said.split(|&b| b == b'\n').any(|line| line == b"READY=1") {
                        return Ok(());
                    }
                }
                Err(e) if matches!(e.kind(), Io::WouldBlock | Io::TimedOut | Io::Interrupted) => {}
                Err(e) => return Err(e.into()),
            }
            if let Some(status) = child.try_wait()? {
                return Err(IoError::other(format!(
                    "the successor exited ({status}) before it was ready"
                ))
                .into());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(
                    IoError::new(Io::TimedOut, "the successor was not ready in time").into(),
                );
            }
        }
    }
}

#[cfg(feature = "systemd")]
impl Drop for Notified {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
