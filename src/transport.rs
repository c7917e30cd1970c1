//! The transport seam: the byte stream a connection is served over. Both engines are written
//! against [`Transport`] (a connected non-blocking stream), so TCP, Unix domain sockets and
//! transports that wrap them (TLS) are served the same way. A leaf: it names nothing of the
//! crate, so the core can hand a connection's stream on (a generic upgrade) without knowing the
//! engines.

use std::any::Any;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;

/// A connected byte stream an engine serves: a TCP or Unix domain socket, or a transport that
/// wraps one (TLS). The engines make it non-blocking and wait for it through its descriptor
/// ([`AsFd`]); they read and write it through `Read` and `Write`, which answer `WouldBlock`
/// when nothing can move now.
///
/// A transport that wraps a socket may hold bytes inside it. Output: once an engine has
/// written its output it calls [`Write::flush`], which answers `WouldBlock` until what the
/// transport holds is out (the engine then waits for the descriptor to be writable), and
/// [`Transport::take_sent`] says what its socket took, which is then not what the writes
/// returned (the minimum response rate counts it). Input: [`Transport::buffered_input`] says
/// that a read would return bytes the socket no longer signals.
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

    /// The socket itself, when reading and writing it is reading and writing the transport:
    /// a plain TCP or Unix domain socket. On Linux and Android the engines then read and write
    /// the connection's HTTP exchanges with `recv(2)` and `send(2)` (`MSG_NOSIGNAL`) on it
    /// directly, and this transport's `Read` and `Write` are not called for them: no std or
    /// libc wrapper (about 35 fewer instructions a call, counted by callgrind). Elsewhere it is
    /// not used. `None`, the default: a transport that changes, holds or adds bytes (TLS, a
    /// PROXY protocol header), read and written through `Read` and `Write`.
    fn direct_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// True when input is buffered inside the transport (decrypted, say) with nothing left in
    /// the socket for it: a read returns it at once, and the socket's readiness will not tell.
    /// The engines read it before they wait. A plain socket buffers nothing (`false`).
    fn buffered_input(&self) -> bool {
        false
    }

    /// Bytes the transport's socket took that its peer has not acknowledged yet: a TCP socket's
    /// send queue (`SIOCOUTQ`), on Linux and Android (on the architectures that number it as
    /// most do: not alpha, MIPS, PowerPC or SPARC). The minimum response rate counts what the
    /// peer took, not what the kernel took into a send buffer that grew (Linux grows a TCP
    /// send buffer up to `net.ipv4.tcp_wmem`'s maximum, 4 MiB by default, as the connection
    /// speeds up). `None`, the default: not known (a Unix domain socket, other platforms), and
    /// every byte the socket takes counts.
    fn unacknowledged(&self) -> Option<usize> {
        None
    }

    /// Bytes the transport wrote to its socket since the last call, where that is not what its
    /// writes returned: a TLS stream's records, which go out as the socket takes them, while
    /// its writes return the plaintext it took (perhaps to hold). The minimum response rate
    /// counts these instead of what the writes returned. Every byte the socket took counts,
    /// whatever wrote it (a write, a flush, a read that pushed queued records) and whatever it
    /// carried (a handshake's or an alert's records too): the engines take the count when a
    /// transfer first waits on its peer and discard it, and credit only what comes after.
    /// `None`, the default: every byte a write returned went to the socket.
    fn take_sent(&mut self) -> Option<usize> {
        None
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

    /// The client's address as a proxy in front reported it at the start of the stream (the
    /// PROXY protocol, when the engine reads it): `None` for a stream without such a report.
    fn proxied_source(&self) -> Option<std::net::SocketAddr> {
        None
    }
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
    fn direct_fd(&self) -> Option<BorrowedFd<'_>> {
        direct(self)
    }
    fn unacknowledged(&self) -> Option<usize> {
        crate::net::sys::unacknowledged(self.as_fd())
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
    fn direct_fd(&self) -> Option<BorrowedFd<'_>> {
        direct(self)
    }
}

/// A socket's own descriptor for direct `recv(2)` and `send(2)`: on Linux and Android, where
/// `MSG_NOSIGNAL` keeps a write to a closed peer from raising `SIGPIPE` (as std's `TcpStream`
/// writes do). Elsewhere `None`: std's wrappers, which know each platform's way.
fn direct(socket: &impl AsFd) -> Option<BorrowedFd<'_>> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        Some(socket.as_fd())
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = socket;
        None
    }
}

/// Reads what the socket holds, up to `buf`'s length, with one `recv(2)`: what `Read::read`
/// does on a socket, without std's and libc's wrappers.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    rustix::net::recv(fd, buf, rustix::net::RecvFlags::empty())
        .map(|(n, _)| n)
        .map_err(io::Error::from)
}

/// Writes what the socket takes of `buf` with one `send(2)` (`MSG_NOSIGNAL`: a closed peer is
/// an error, not a signal): what `Write::write` does on a socket, without the wrappers.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    rustix::net::send(fd, buf, rustix::net::SendFlags::NOSIGNAL).map_err(io::Error::from)
}

/// Sends up to `len` bytes of `file`, from its position on, straight to `transport` when it
/// takes bytes unchanged (`sendfile(2)`, Linux): `None` when it cannot, and the caller copies
/// them. Non-blocking like the transport: `WouldBlock` when the socket is full.
pub(crate) fn send_file<T: Transport + ?Sized>(
    transport: &mut T,
    file: &std::fs::File,
    len: usize,
) -> Option<io::Result<usize>> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let fd = transport.sendfile_fd()?;
        Some(rustix::fs::sendfile(fd, file, None, len).map_err(io::Error::from))
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (transport, file, len);
        None
    }
}

/// A connection's stream as the engines hold it.
pub(crate) type Stream = Box<dyn Transport>;

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
    fn direct_fd(&self) -> Option<BorrowedFd<'_>> {
        (**self).direct_fd()
    }
    fn buffered_input(&self) -> bool {
        (**self).buffered_input()
    }
    fn unacknowledged(&self) -> Option<usize> {
        (**self).unacknowledged()
    }
    fn take_sent(&mut self) -> Option<usize> {
        (**self).take_sent()
    }
    fn wants_write(&self) -> bool {
        (**self).wants_write()
    }
    fn abort(&mut self) {
        (**self).abort()
    }
    fn proxied_source(&self) -> Option<std::net::SocketAddr> {
        (**self).proxied_source()
    }
}
