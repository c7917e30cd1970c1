//! Waiting on one non-blocking socket with a deadline: `poll(2)` until it is ready, the
//! deadline passes or a cancel flag is set (the thread-pool engine's worker, thread per
//! connection); and a read that never waits.
#![cfg_attr(not(feature = "server"), allow(dead_code))]

use std::io::{self, ErrorKind, Read};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};

/// How long one wait may sleep before looking at a cancel flag again.
const CANCEL_CHECK: Duration = Duration::from_millis(100);

/// Why a wait ended without the socket being ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interrupt {
    /// The deadline passed.
    TimedOut,
    /// The cancel flag was set (server shutdown).
    Cancelled,
}

/// Waits until `stream` is readable (or writable), the deadline passes (`None`: never), or
/// `cancel` is set.
pub(crate) fn wait(
    stream: &(impl AsFd + ?Sized),
    writable: bool,
    deadline: Option<Instant>,
    cancel: Option<&AtomicBool>,
) -> Result<(), Interrupt> {
    let flags = if writable {
        PollFlags::OUT
    } else {
        PollFlags::IN
    };
    wait_for(stream, flags, deadline, cancel)
}

/// Waits until `stream` is ready for any of `flags`, the deadline passes or `cancel` is set.
fn wait_for(
    stream: &(impl AsFd + ?Sized),
    flags: PollFlags,
    deadline: Option<Instant>,
    cancel: Option<&AtomicBool>,
) -> Result<(), Interrupt> {
    loop {
        if cancel.is_some_and(|c| c.load(Ordering::Acquire)) {
            return Err(Interrupt::Cancelled);
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Err(Interrupt::TimedOut);
        }
        let mut slice = deadline.map(|d| d - now);
        if cancel.is_some() {
            slice = Some(slice.map_or(CANCEL_CHECK, |s| s.min(CANCEL_CHECK)));
        }
        let timeout = slice.map(|slice| Timespec {
            tv_sec: i64::try_from(slice.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(slice.subsec_nanos()),
        });
        let mut fds = [PollFd::from_borrowed_fd(stream.as_fd(), flags)];
        match poll(&mut fds, timeout.as_ref()) {
            Ok(n) if n > 0 => return Ok(()),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            // poll on one valid descriptor does not fail otherwise; treat as ready and let the
            // read or write report the real error.
            Err(_) => return Ok(()),
        }
    }
}

/// Reads what is there now without waiting: `Ok(None)` when nothing is.
pub(crate) fn read_now(
    stream: &mut (impl Read + ?Sized),
    buf: &mut [u8],
) -> io::Result<Option<usize>> {
    loop {
        match stream.read(buf) {
            Ok(n) => return Ok(Some(n)),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}
