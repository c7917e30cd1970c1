//! Blocking-style I/O with deadlines over non-blocking sockets: try the syscall, and on
//! `WouldBlock` wait in `poll(2)` until the socket is ready or the deadline passes. Exact
//! deadlines, no `setsockopt` per read. The blocking engine's I/O; the reactor only uses
//! [`read_now`].
#![cfg_attr(not(feature = "server"), allow(dead_code))]

use std::io::{self, ErrorKind, Read};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::http::linger::Linger;
use crate::net::transport::Transport;
use crate::rate::Meter;

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

fn timed_out() -> io::Error {
    io::Error::from(ErrorKind::TimedOut)
}

/// Reads into `buf`, waiting until `deadline` (`None`: no limit). `Ok(0)` is end of stream.
pub(crate) fn read(
    stream: &mut (impl Transport + ?Sized),
    buf: &mut [u8],
    deadline: Option<Instant>,
    cancel: Option<&AtomicBool>,
) -> io::Result<usize> {
    loop {
        match stream.read(buf) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => return other,
        }
        // A transport with output held back (a TLS handshake flight) waits for the socket to
        // take more, too: the next read sends it.
        let flags = match stream.wants_write() {
            true => PollFlags::IN | PollFlags::OUT,
            false => PollFlags::IN,
        };
        match wait_for(&stream.as_fd(), flags, deadline, cancel) {
            Ok(()) => {}
            Err(Interrupt::TimedOut) => return Err(timed_out()),
            Err(Interrupt::Cancelled) => return Err(io::Error::from(ErrorKind::ConnectionAborted)),
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

/// Writes all of `data`, waiting while the socket buffer is full for as long as `meter` (the
/// response's minimum rate) allows.
pub(crate) fn write_all(
    stream: &mut (impl Transport + ?Sized),
    mut data: &[u8],
    meter: &mut Meter,
) -> io::Result<()> {
    while !data.is_empty() {
        match stream.write(data) {
            Ok(0) => return Err(io::Error::from(ErrorKind::WriteZero)),
            Ok(n) => {
                meter.moved(Instant::now(), n);
                data = &data[n..];
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if wait(&stream.as_fd(), true, meter.deadline(Instant::now()), None).is_err() {
                    return Err(timed_out());
                }
            }
            Err(e) => return Err(e),
        }
    }
    // A transport that holds output (TLS) gets it out too.
    loop {
        match stream.flush() {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if wait(&stream.as_fd(), true, meter.deadline(Instant::now()), None).is_err() {
                    return Err(timed_out());
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes and clears `out`, measured by `meter`.
pub(crate) fn flush(
    stream: &mut (impl Transport + ?Sized),
    out: &mut Vec<u8>,
    meter: &mut Meter,
) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let r = write_all(stream, out, meter);
    out.clear();
    r
}

/// Closes after a final response without destroying it, blocking (thread per connection): shut
/// the write side, then read and drop what the peer is still sending, as long as
/// [`Linger`] allows, so the kernel does not answer unread input with a reset that would
/// discard the response in flight.
pub(crate) fn linger_close(stream: &mut (impl Transport + ?Sized)) {
    let _ = stream.shutdown_write();
    let mut linger = Linger::new(Instant::now());
    let mut scratch = [0u8; 4096];
    loop {
        match read(stream, &mut scratch, linger.deadline(), None) {
            Ok(n) if linger.dropped(n) => {}
            _ => break,
        }
    }
}

/// Sends `len` bytes of `file` from its current position, each wait for the socket bounded by
/// the response's minimum rate; `bytes` counts what went out. `Ok(false)` when the file ends
/// early or the peer went away; `Err` when a write failed (`TimedOut`: the client took the bytes
/// slower than the minimum rate). On Linux a
/// transport that writes bytes unchanged gets them by `sendfile(2)` (from the page cache to the
/// socket without passing through user space); otherwise they are read and written in pieces.
pub(crate) fn send_file(
    stream: &mut (impl Transport + ?Sized),
    file: &std::fs::File,
    len: u64,
    meter: &mut Meter,
    bytes: &mut u64,
) -> io::Result<bool> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Some(fd) = stream.sendfile_fd() {
        return sendfile(fd, file, len, meter, bytes);
    }
    copy_file(stream, file, len, meter, bytes)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn sendfile(
    out: std::os::fd::BorrowedFd<'_>,
    file: &std::fs::File,
    len: u64,
    meter: &mut Meter,
    bytes: &mut u64,
) -> io::Result<bool> {
    while *bytes < len {
        let chunk = usize::try_from((len - *bytes).min(1 << 30)).unwrap_or(1 << 30);
        match rustix::fs::sendfile(out, file, None, chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                meter.moved(Instant::now(), n);
                *bytes = bytes.saturating_add(n as u64);
            }
            Err(rustix::io::Errno::AGAIN) => {
                if wait(&out, true, meter.deadline(Instant::now()), None).is_err() {
                    return Err(timed_out());
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Ok(false),
        }
    }
    Ok(true)
}

/// Sends `len` bytes of `file` from its current position by reading and writing pieces.
fn copy_file(
    stream: &mut (impl Transport + ?Sized),
    mut file: &std::fs::File,
    len: u64,
    meter: &mut Meter,
    bytes: &mut u64,
) -> io::Result<bool> {
    let mut piece = vec![0u8; 64 * 1024];
    while *bytes < len {
        let want = usize::try_from((len - *bytes).min(piece.len() as u64)).unwrap_or(piece.len());
        match file.read(&mut piece[..want]) {
            Ok(0) | Err(_) => return Ok(false),
            Ok(n) => {
                write_all(stream, &piece[..n], meter)?;
                *bytes = bytes.saturating_add(n as u64);
            }
        }
    }
    Ok(true)
}
