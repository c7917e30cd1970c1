//! Socket helpers both engines use: listener set-up, accept-error triage, deadline-bounded I/O on
//! non-blocking sockets, and (in [`sys`]) the poller registration that needs `unsafe`.

pub(crate) mod acceptor;
pub(crate) mod io;
pub(crate) mod proxied;
pub(crate) mod sys;
#[cfg(feature = "tls")]
pub(crate) mod tls;
pub(crate) mod transport;
pub(crate) mod upgrade;

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};

use transport::Transport;

use crate::Error;
use crate::http::date::DateLine;

use socket2::{Domain, Protocol, Socket, Type};

/// Listen backlog: large enough that a burst of connects is queued by the kernel, not refused.
const BACKLOG: i32 = 1024;

/// Whether a port is shared with other processes (a builder's `share_port`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Port {
    /// A port another socket listens on fails to bind ("address in use").
    #[default]
    Own,
    /// `SO_REUSEPORT` (`SO_REUSEPORT_LB` on FreeBSD): listeners of other processes (of the
    /// same user) on the port share its connections with these.
    Shared,
}

/// Binds a non-blocking listener with `SO_REUSEADDR` (and `SO_REUSEPORT` when the port is
/// [`Port::Shared`]) on the first address that works. The error names the last address tried.
pub(crate) fn bind(addr: impl ToSocketAddrs, port: Port) -> Result<TcpListener, Error> {
    let mut last = None;
    for addr in resolve(addr)? {
        match bind_with(addr, port == Port::Shared) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(Error::bind(addr, e)),
        }
    }
    Err(last.unwrap_or_else(no_address))
}

/// The addresses to bind. A name that does not resolve has no address to show (`addr` is only
/// `ToSocketAddrs`): its error says "cannot bind the address" and the resolver's words.
fn resolve(addr: impl ToSocketAddrs) -> Result<impl Iterator<Item = SocketAddr>, Error> {
    addr.to_socket_addrs()
        .map_err(|e| Error::bind("the address", e))
}

/// A name that resolved to no address at all.
fn no_address() -> Error {
    Error::bind(
        "the address",
        std::io::Error::from(ErrorKind::AddrNotAvailable),
    )
}

/// Binds `n` listeners on one address with `SO_REUSEPORT`, so the kernel spreads new
/// connections across them (one per event loop). Port 0 picks a port for all of them.
///
/// On FreeBSD it is `SO_REUSEPORT_LB` (FreeBSD 12 on): there `SO_REUSEPORT` only lets the
/// sockets share the port, and the first one gets every connection. macOS and the other BSDs
/// have no balancing option, so the reactor accepts with a thread there by default.
///
/// `SO_REUSEPORT` would also let these listeners join one that another program (of the same
/// user) already has on the port, and silently take part of its connections. So a named port is
/// first bound without it: a port in use anywhere fails with "address in use", as a plain bind
/// does — unless the port is [`Port::Shared`] on purpose.
pub(crate) fn bind_reuse_port(
    addr: impl ToSocketAddrs,
    n: usize,
    port: Port,
) -> Result<Vec<TcpListener>, Error> {
    let mut last = None;
    for addr in resolve(addr)? {
        if addr.port() != 0 && port == Port::Own {
            if let Err(e) = probe_free(addr) {
                last = Some(Error::bind(addr, e));
                continue;
            }
        }
        match bind_with(addr, true) {
            Ok(first) => {
                let actual = first.local_addr().map_err(|e| Error::bind(addr, e))?;
                let mut all = vec![first];
                for _ in 1..n.max(1) {
                    all.push(bind_with(actual, true).map_err(|e| Error::bind(actual, e))?);
                }
                return Ok(all);
            }
            Err(e) => last = Some(Error::bind(addr, e)),
        }
    }
    Err(last.unwrap_or_else(no_address))
}

/// Binds (without listening, so no connection can arrive) and closes a socket without
/// `SO_REUSEPORT`: fails with "address in use" when anything listens on `addr`.
fn probe_free(addr: SocketAddr) -> std::io::Result<()> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())
}

fn bind_with(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        #[cfg(target_os = "freebsd")]
        socket.set_reuse_port_lb(true)?;
        #[cfg(not(target_os = "freebsd"))]
        socket.set_reuse_port(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// What an accept error means for the accept loop.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AcceptError {
    /// Nothing more to accept now.
    Drained,
    /// Out of descriptors or memory: back off, then keep serving.
    Exhausted,
    /// That one connection failed (aborted, reset, interrupted): go on at once.
    Transient,
}

pub(crate) fn classify_accept_error(e: &std::io::Error) -> AcceptError {
    if e.kind() == ErrorKind::WouldBlock {
        return AcceptError::Drained;
    }
    let errno = e.raw_os_error().map(rustix::io::Errno::from_raw_os_error);
    match errno {
        Some(
            rustix::io::Errno::MFILE
            | rustix::io::Errno::NFILE
            | rustix::io::Errno::NOBUFS
            | rustix::io::Errno::NOMEM,
        ) => AcceptError::Exhausted,
        _ => AcceptError::Transient,
    }
}

/// Answers 503 without waiting (the socket is fresh, so the small write fits its buffer) and
/// shuts the write side: the core's error page, as the engines answer their own refusals. What
/// the client already sent is read first so that closing does not turn into a reset that would
/// discard the answer.
pub(crate) fn refuse(stream: &mut dyn Transport, date: &mut DateLine) {
    let mut scratch = [0u8; 4096];
    let _ = io::read_now(stream, &mut scratch);
    let mut busy = Vec::with_capacity(192);
    crate::http::conn::error_page(&mut busy, 503, None, date);
    let _ = stream.write(&busy);
    let _ = stream.shutdown_write();
}
