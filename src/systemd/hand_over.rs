//! A restart that refuses no connection: a successor process started on this one's listening
//! sockets, passed as systemd passes them, which says when it serves.

use std::io::{self, ErrorKind};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};

use crate::Error;

/// The variable naming the socket a successor reports its readiness on (the service
/// manager's `NOTIFY_SOCKET` is left to the manager).
const READY_SOCKET: &str = "TWINHTTP_HANDOVER_SOCKET";

/// How long a successor that is not ready in time has to stop after `SIGTERM`.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Set once this process handed its sockets over: its stopping is not the service's.
static HANDED_OVER: AtomicBool = AtomicBool::new(false);

/// True once this process handed its sockets to a successor.
pub(super) fn handed_over() -> bool {
    HANDED_OVER.load(Ordering::Acquire)
}

/// Tells a predecessor waiting in [`hand_over`] that this process serves.
pub(super) fn tell_predecessor() {
    let Some(path) = std::env::var_os(READY_SOCKET) else {
        return;
    };
    let sent = UnixDatagram::unbound().and_then(|s| s.send_to(b"READY=1\n", &path));
    if let Err(e) = sent {
        log::warn!("could not tell the process handing over that this one serves: {e}");
    }
}

/// Starts `successor` on `listeners` (a running engine's `listener_fds()`) and returns once it
/// serves: the sockets stay open across the restart, so no connection is refused, and until
/// this process stops accepting both take connections from the same queue. Then shut this
/// process down gracefully: it answers what it has (a connection it accepted whose first
/// request has not come gets a moment for it), and the successor serves on.
///
/// The successor gets the sockets as systemd passes them (descriptors 3 and up, `LISTEN_FDS`;
/// no `LISTEN_PID`, which [`listeners`](super::listeners) accepts, as `listenfd` does), and
/// its engine reports readiness on a socket this process listens on (in a directory of its
/// own), named by `TWINHTTP_HANDOVER_SOCKET`. Under a service manager (`NOTIFY_SOCKET`),
/// this process then tells it the successor is the service's main process (`MAINPID=`) and
/// does not report `STOPPING=1` (the unit needs `NotifyAccess=all`, or `main`: the manager
/// takes `MAINPID=` from the main process). The examples do this on `SIGUSR2`.
///
/// # Errors
///
/// When this process is PID 1 (a container's first process: its exit ends the container and
/// the successor with it; restart the container instead), when the successor cannot be
/// started, exits, or is not ready within `within` (it is then sent `SIGTERM`, `SIGKILL` after
/// 2 s, and this process serves on).
pub fn hand_over(
    listeners: Vec<OwnedFd>,
    mut successor: Command,
    within: Duration,
) -> Result<Child, Error> {
    if std::process::id() == 1 {
        return Err(io::Error::new(
            ErrorKind::Unsupported,
            "a hand-over from PID 1 would end with it: restart the container instead",
        )
        .into());
    }
    let ready = Ready::bind()?;
    let count = listeners.len();
    let mappings = listeners
        .into_iter()
        .zip(3..)
        .map(|(parent_fd, child_fd)| FdMapping {
            parent_fd,
            child_fd,
        })
        .collect();
    successor
        .fd_mappings(mappings)
        .map_err(io::Error::other)?
        .env("LISTEN_FDS", count.to_string())
        .env(READY_SOCKET, ready.path())
        .env_remove("LISTEN_PID")
        .env_remove("LISTEN_FDS_FIRST_FD")
        .env_remove("LISTEN_FDNAMES");
    let mut child = successor.spawn()?;
    // The command's copies of the sockets close; the successor has its own.
    drop(successor);
    if let Err(e) = ready.wait(&mut child, within) {
        stop(&mut child);
        return Err(e);
    }
    HANDED_OVER.store(true, Ordering::Release);
    let main = sd_notify::NotifyState::MainPid(child.id());
    if let Err(e) = sd_notify::notify(false, &[main]) {
        log::warn!("could not tell the service manager the successor's PID: {e}");
    }
    Ok(child)
}

/// `SIGTERM`, then `SIGKILL` if it is still there after [`STOP_GRACE`].
fn stop(child: &mut Child) {
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let until = Instant::now() + STOP_GRACE;
        while Instant::now() < until {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The datagram socket a successor reports its readiness on, in a directory of its own
/// (mode 0700, removed when dropped).
struct Ready {
    socket: UnixDatagram,
    dir: tempfile::TempDir,
}

impl Ready {
    fn bind() -> Result<Ready, Error> {
        let dir = tempfile::Builder::new().prefix("twinhttp-").tempdir()?;
        let path = dir.path().join("ready");
        let socket = UnixDatagram::bind(&path).map_err(|e| Error::bind(path.display(), e))?;
        Ok(Ready { socket, dir })
    }

    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("ready")
    }

    /// Waits for `READY=1` while `child` runs, for `within` at most.
    fn wait(&self, child: &mut Child, within: Duration) -> Result<(), Error> {
        let deadline = crate::deadline::after(Instant::now(), within);
        self.socket
            .set_read_timeout(Some(Duration::from_millis(50)))?;
        let mut buf = [0u8; 512];
        loop {
            match self.socket.recv(&mut buf) {
                Ok(n) => {
                    let said = buf.get(..n).unwrap_or_default();
                    if said.split(|&b| b == b'\n').any(|line| line == b"READY=1") {
                        return Ok(());
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e.into()),
            }
            if let Some(status) = child.try_wait()? {
                let e = format!("the successor exited ({status}) before it served");
                return Err(io::Error::other(e).into());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                let e = io::Error::new(ErrorKind::TimedOut, "the successor did not serve in time");
                return Err(e.into());
            }
        }
    }
}
