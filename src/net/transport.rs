//! The transport seam: what an engine serves bytes over. Both engines are written against
//! [`Transport`] (a connected non-blocking stream) and [`Listener`] (where they come from), so
//! TCP, Unix domain sockets and transports that wrap them (TLS) are served the same way; the
//! HTTP core never sees any of them.

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixListener;
use std::path::Path;

pub use crate::http::address::Address;
use crate::http::date::DateLine;
use crate::http::origin::{Relay, Scheme, TrustedProxies};
pub(crate) use crate::transport::Stream;
pub use crate::transport::Transport;

/// What `local_addr` reports for an engine that does not listen on TCP.
pub(crate) const UNSPECIFIED: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

/// What an engine does to a connection it accepted before serving it: read a PROXY protocol
/// header first, or not; then serve it plain, or over TLS.
#[derive(Clone, Debug, Default)]
pub(crate) struct Wrap {
    pub(crate) preface: Preface,
    pub(crate) security: Security,
}

/// What a connection begins with, before its own bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Preface {
    /// Nothing: HTTP (or TLS) from the first byte.
    #[default]
    None,
    /// A PROXY protocol header (version 1 or 2), required.
    ProxyProtocol,
}

/// Plain, or TLS.
#[derive(Clone, Debug, Default)]
pub(crate) enum Security {
    #[default]
    Plain,
    #[cfg(feature = "tls")]
    Tls(super::tls::Tls),
}

impl Wrap {
    /// An admitted connection, ready to serve; `None` (logged) when it cannot be wrapped.
    pub(crate) fn serve(&self, stream: Stream) -> Option<Stream> {
        let stream = match self.preface {
            Preface::None => stream,
            Preface::ProxyProtocol => Box::new(super::proxied::Proxied::new(stream)),
        };
        match &self.security {
            Security::Plain => Some(stream),
            #[cfg(feature = "tls")]
            Security::Tls(tls) => match tls.wrap(stream) {
                Ok(stream) => Some(stream),
                Err(e) => {
                    log::warn!("tls: {e}");
                    None
                }
            },
        }
    }

    /// How the driver finds a request's client and scheme on these connections, believing the
    /// forwarded headers of `trusted` proxies.
    pub(crate) fn relay(&self, trusted: &TrustedProxies) -> Relay {
        Relay {
            proxy_protocol: self.preface == Preface::ProxyProtocol,
            trusted: trusted.clone(),
            scheme: match self.security {
                Security::Plain => Scheme::Http,
                #[cfg(feature = "tls")]
                Security::Tls(_) => Scheme::Https,
            },
        }
    }

    /// A connection over the open-connection limit: a plain one is answered `503`; a TLS one
    /// is closed (answering would cost a handshake, the very work the limit sheds).
    pub(crate) fn refuse(&self, mut stream: Stream, date: &mut DateLine) {
        match self.security {
            Security::Plain => super::refuse(&mut *stream, date),
            #[cfg(feature = "tls")]
            Security::Tls(_) => drop(stream),
        }
    }
}

/// Where an engine's connections come from: a bound, listening TCP or Unix domain socket.
/// Made from a [`TcpListener`] or a [`UnixListener`] (`.into()`), including one the caller
/// bound itself (socket activation, a test's ephemeral port).
#[derive(Debug)]
#[non_exhaustive]
pub enum Listener {
    /// A TCP listener.
    Tcp(TcpListener),
    /// A Unix domain socket listener.
    Unix(UnixListener),
}

impl From<TcpListener> for Listener {
    fn from(l: TcpListener) -> Self {
        Listener::Tcp(l)
    }
}

impl From<UnixListener> for Listener {
    fn from(l: UnixListener) -> Self {
        Listener::Unix(l)
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Listener::Tcp(l) => l.as_fd(),
            Listener::Unix(l) => l.as_fd(),
        }
    }
}

/// True when connecting to the socket at `path` is refused: nobody listens there. The connect is
/// non-blocking, so a live server with a full backlog (`WouldBlock`) counts as listening rather
/// than hanging the caller.
fn nobody_listens(path: &Path) -> bool {
    use socket2::{Domain, SockAddr, Socket, Type};
    let Ok(sock) = Socket::new(Domain::UNIX, Type::STREAM, None) else {
        return false;
    };
    let Ok(addr) = SockAddr::unix(path) else {
        return false;
    };
    sock.set_nonblocking(true).is_ok()
        && sock
            .connect(&addr)
            .is_err_and(|e| e.kind() == io::ErrorKind::ConnectionRefused)
}

impl Listener {
    /// Binds a Unix domain socket at `path`. A socket file left there by a server that is gone
    /// (connecting to it is refused) is replaced; one a live server listens on, and any file
    /// that is not a socket, is not (`AddrInUse`).
    pub(crate) fn bind_unix(path: &Path) -> io::Result<Listener> {
        match UnixListener::bind(path) {
            Ok(l) => Ok(Listener::Unix(l)),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                // Only a socket file nobody listens on is replaced: never a regular file, a
                // directory or a symbolic link (the path is not followed).
                let is_socket = std::fs::symlink_metadata(path)
                    .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()));
                let stale = is_socket && nobody_listens(path);
                if !stale {
                    return Err(e);
                }
                std::fs::remove_file(path)?;
                UnixListener::bind(path).map(Listener::Unix)
            }
            Err(e) => Err(e),
        }
    }

    /// Makes it non-blocking, as the engines accept.
    pub(crate) fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Listener::Tcp(l) => l.set_nonblocking(true),
            Listener::Unix(l) => l.set_nonblocking(true),
        }
    }

    /// The address it listens on.
    pub(crate) fn address(&self) -> io::Result<Address> {
        match self {
            Listener::Tcp(l) => l.local_addr().map(Address::Tcp),
            Listener::Unix(l) => l.local_addr().map(|a| Address::of_unix(&a)),
        }
    }

    /// Accepts one connection, prepared as the engines expect: non-blocking, and for TCP
    /// `TCP_NODELAY` (so pipelined and small responses do not stall on Nagle and delayed ACK).
    pub(crate) fn accept(&self) -> io::Result<(Stream, Address)> {
        match self {
            Listener::Tcp(l) => {
                let (s, peer) = l.accept()?;
                s.set_nonblocking(true)?;
                s.set_nodelay(true)?;
                Ok((Box::new(s), Address::Tcp(peer)))
            }
            Listener::Unix(l) => {
                let (s, peer) = l.accept()?;
                s.set_nonblocking(true)?;
                Ok((Box::new(s), Address::of_unix(&peer)))
            }
        }
    }
}
