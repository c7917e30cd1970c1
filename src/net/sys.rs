//! The one module allowed `unsafe`: registering sockets with a `polling::Poller`, whose `add` is
//! unsafe because the source must be deleted from the poller before it is dropped. [`Registered`]
//! owns the socket and upholds that in its `Drop`. And one `ioctl(2)` ([`unacknowledged`]).
#![allow(unsafe_code)]

use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use polling::{Event, PollMode, Poller};

/// A socket registered with a poller, edge-triggered ([`Registered::edge`]: the thread-pool
/// engine's parker) or level-triggered ([`Registered::level`]: the reactor's loops and every
/// listener), deleted from it on drop. (No oneshot registrations: every supported poller, epoll
/// and kqueue, has both modes, and the engines refuse to start on one that lacks theirs.)
#[derive(Debug)]
pub(crate) struct Registered<S: AsFd> {
    // Field order: `source` must outlive the registration, so it is dropped after `drop` runs.
    source: S,
    poller: Arc<Poller>,
}

impl<S: AsFd> Registered<S> {
    /// Registers `source` edge-triggered for `interest`; for pollers that
    /// [support it](Poller::supports_edge) (epoll, kqueue). It stays armed, so it is never
    /// re-armed, and its owner must read until the socket says EAGAIN before it waits again.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    /// On failure the source comes back with the error, for its owner to drop where it may.
    pub(crate) fn edge(
        poller: Arc<Poller>,
        source: S,
        interest: Event,
    ) -> Result<Self, (io::Error, S)> {
        // SAFETY: `source` moves into the returned `Registered`, whose `Drop` deletes it from
        // `poller` before the source is dropped; if `add_with_mode` fails nothing was
        // registered.
        let added =
            unsafe { poller.add_with_mode(source.as_fd().as_raw_fd(), interest, PollMode::Edge) };
        match added {
            Ok(()) => Ok(Registered { source, poller }),
            Err(e) => Err((e, source)),
        }
    }

    /// Registers `source` level-triggered for `interest`, for pollers that
    /// [support it](Poller::supports_level): reported at every wait while it is ready, so a
    /// short read may end reading (what is left, the end of input too, is reported again), and
    /// its owner must change the interest to what it waits for ([`Registered::set_level`]).
    pub(crate) fn level(poller: Arc<Poller>, source: S, interest: Event) -> io::Result<Self> {
        // SAFETY: `source` moves into the returned `Registered`, whose `Drop` deletes it from
        // `poller` before the source is dropped; if `add_with_mode` fails nothing was
        // registered.
        unsafe { poller.add_with_mode(source.as_fd().as_raw_fd(), interest, PollMode::Level)? };
        Ok(Registered { source, poller })
    }

    /// Changes a level-triggered registration's interest (it stays level-triggered).
    pub(crate) fn set_level(&self, interest: Event) -> io::Result<()> {
        self.poller
            .modify_with_mode(self.source.as_fd(), interest, PollMode::Level)
    }

    /// Changes an edge-triggered registration's interest (it stays edge-triggered).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn set_edge(&self, interest: Event) -> io::Result<()> {
        self.poller
            .modify_with_mode(self.source.as_fd(), interest, PollMode::Edge)
    }

    pub(crate) fn get(&self) -> &S {
        &self.source
    }

    pub(crate) fn get_mut(&mut self) -> &mut S {
        &mut self.source
    }

    /// Deletes the registration and gives the source back (a connection leaving its poller).
    pub(crate) fn into_inner(self) -> S {
        let _ = self.poller.delete(self.source.as_fd());
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped or used again, so each field is moved out exactly
        // once; the registration was deleted above, which is all `Drop` would have done.
        let (source, poller) =
            unsafe { (std::ptr::read(&this.source), std::ptr::read(&this.poller)) };
        drop(poller);
        source
    }
}

impl<S: AsFd> Drop for Registered<S> {
    fn drop(&mut self) {
        let _ = self.poller.delete(self.source.as_fd());
    }
}

/// Whether `SIOCOUTQ` is `TIOCOUTQ`, 0x5411 in Linux's generic ioctl table: on Linux and Android
/// on the architectures named here. Alpha, MIPS, PowerPC and SPARC number it otherwise, so there
/// (and on any architecture not named, and other systems) it is not asked, and every byte the
/// socket takes counts.
const GENERIC_OUTQ: bool = cfg!(all(
    any(target_os = "linux", target_os = "android"),
    any(
        target_arch = "x86",
        target_arch = "x86_64",
        target_arch = "arm",
        target_arch = "aarch64",
        target_arch = "riscv32",
        target_arch = "riscv64",
        target_arch = "s390x",
        target_arch = "loongarch64"
    )
));

/// The bytes a TCP socket holds that its peer has not acknowledged (`SIOCOUTQ`); `None` where it
/// is not asked ([`GENERIC_OUTQ`]), or when the call fails.
pub(crate) fn unacknowledged(socket: std::os::fd::BorrowedFd<'_>) -> Option<usize> {
    const SIOCOUTQ: rustix::ioctl::Opcode = 0x5411;
    if !GENERIC_OUTQ {
        return None;
    }
    // SAFETY: where `GENERIC_OUTQ` holds, `SIOCOUTQ` on a socket writes one `int` through the
    // pointer the `Getter` gives, which points at a `c_int`.
    let queued = unsafe {
        let getter = rustix::ioctl::Getter::<SIOCOUTQ, std::ffi::c_int>::new();
        rustix::ioctl::ioctl(socket, getter)
    };
    queued.ok().and_then(|n| usize::try_from(n).ok())
}
