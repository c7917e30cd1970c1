//! The transport seam: what an engine serves bytes over. Both engines are written against
//! [`Transport`] (a connected non-blocking stream) and [`Listener`] (where they come from), so
//! TCP, Unix domain sockets and transports that wrap them (TLS) are served the same way; the
//! HTTP core never sees any of them.

use std::any::Any;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// A connected byte stream an engine serves: a TCP or Unix domain socket, or a transport that
/// wraps one (TLS). The engines make it non-blocking and wait for it through its descriptor
/// ([`AsFd`]); they read and write it through `Read` and `Write`, which answer `WouldBlock`
/// when nothing can move now.
///
/// A transport that wraps a socket may hold bytes inside it. Output: once an engine has
/// written its output it calls [`Write::flush`], which answers `WouldBlock` until what the
/// transport holds is out (the engine then waits for the descriptor to be writable). Input:
/// [`Transport::buffered_input`] says that a read would return bytes the socket no longer
/// signals.
pub trait Transport: Read + Write + AsFd + Any + Send {
    /// Shuts the write side: the peer reads the end of the stream (the engines' lingering close
    /// after an error, and a refused connection's 503).
    fn shutdown_write(&mut self) -> io::Result<()>;

    /// Switches between non-blocking (how the engines drive it) and blocking mode (how a
    /// generic upgrade hands it over).
    fn set_nonblocking(&mut self, nonblocking: bool) -> io::Result<()>;

    /// The descriptor `sendfile(2)` may write a file body to directly: the transport's own,
    /// when what is written to it goes out unchanged. `None` (a transport that encrypts):
    /// files are copied through `write`.
    fn sendfile_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// True when input is buffered inside the transport (decrypted, say) with nothing left in
    /// the socket for it: a read returns it at once, and the socket's readiness will not tell.
    /// The engines read it before they wait. A plain socket buffers nothing (`false`).
    fn buffered_input(&self) -> bool {
        false
    }

    /// True when the transport holds output it must send before it can read on (a TLS
    /// handshake's flight the socket did not take): an engine whose read said `WouldBlock` then
    /// waits for the descriptor to be writable as well as readable, and reads again when it is
    /// (the read sends what is held). A plain socket holds nothing (`false`).
    fn wants_write(&self) -> bool {
        false
    }

    /// The exchange was cut short (a response body that failed): a transport that can tell the
    /// peer a clean end from a cut one (TLS: `close_notify`) must not end it cleanly. A plain
    /// socket cannot tell; nothing to do.
    fn abort(&mut self) {}
}

impl Transport for TcpStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
    fn set_nonblocking(&mut self, nonblocking: bool) -> io::Result<()> {
        TcpStream::set_nonblocking(self, nonblocking)
    }
    fn sendfile_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }
}

impl Transport for UnixStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
    fn set_nonblocking(&mut self, nonblocking: bool) -> io::Result<()> {
        UnixStream::set_nonblocking(self, nonblocking)
    }
    fn sendfile_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }
}

/// What `local_addr` reports for an engine that does not listen on TCP.
pub(crate) const UNSPECIFIED: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

/// A connection's stream as the engines hold it.
pub(crate) type Stream = Box<dyn Transport>;

/// What an engine does to a connection it accepted before serving it: nothing, or TLS.
#[derive(Clone, Debug, Default)]
pub(crate) enum Wrap {
    #[default]
    Plain,
    #[cfg(feature = "tls")]
    Tls(super::tls::Tls),
}

impl Wrap {
    /// An admitted connection, ready to serve; `None` (logged) when it cannot be wrapped.
    pub(crate) fn serve(&self, stream: Stream) -> Option<Stream> {
        match self {
            Wrap::Plain => Some(stream),
            #[cfg(feature = "tls")]
            Wrap::Tls(tls) => match tls.wrap(stream) {
                Ok(stream) => Some(stream),
                Err(e) => {
                    log::warn!("tls: {e}");
                    None
                }
            },
        }
    }

    /// A connection over the open-connection limit: a plain one is answered `503`; a TLS one
    /// is closed (answering would cost a handshake, the very work the limit sheds).
    pub(crate) fn refuse(&self, mut stream: Stream) {
        match self {
            Wrap::Plain => super::refuse(&mut *stream),
            #[cfg(feature = "tls")]
            Wrap::Tls(_) => drop(stream),
        }
    }
}

/// A boxed transport is one too (the engines hold connections as `Box<dyn Transport>`).
impl<T: Transport + ?Sized> Transport for Box<T> {
    fn shutdown_write(&mut self) -> io::Result<()> {
        (**self).shutdown_write()
    }
    fn set_nonblocking(&mut self, nonblocking: bool) -> io::Result<()> {
        (**self).set_nonblocking(nonblocking)
    }
    fn sendfile_fd(&self) -> Option<BorrowedFd<'_>> {
        (**self).sendfile_fd()
    }
    fn buffered_input(&self) -> bool {
        (**self).buffered_input()
    }
    fn wants_write(&self) -> bool {
        (**self).wants_write()
    }
    fn abort(&mut self) {
        (**self).abort()
    }
}

/// A peer's or a listener's address: TCP or a Unix domain socket.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Address {
    /// An IP address and port.
    Tcp(std::net::SocketAddr),
    /// A Unix domain socket: its path, or `None` for an unnamed socket (a client's, as a rule).
    Unix(Option<PathBuf>),
}

impl Address {
    /// The TCP address, if it is one.
    pub fn tcp(&self) -> Option<std::net::SocketAddr> {
        match self {
            Address::Tcp(a) => Some(*a),
            Address::Unix(_) => None,
        }
    }

    /// The Unix socket's path, if it is one with a name.
    pub fn unix_path(&self) -> Option<&Path> {
        match self {
            Address::Unix(p) => p.as_deref(),
            Address::Tcp(_) => None,
        }
    }

    fn of_unix(addr: &std::os::unix::net::SocketAddr) -> Address {
        Address::Unix(addr.as_pathname().map(Path::to_path_buf))
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Tcp(a) => a.fmt(f),
            Address::Unix(Some(p)) => write!(f, "unix:{}", p.display()),
            Address::Unix(None) => f.write_str("unix:(unnamed)"),
        }
    }
}

impl From<std::net::SocketAddr> for Address {
    fn from(a: std::net::SocketAddr) -> Self {
        Address::Tcp(a)
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
