//! TLS as a transport (feature `tls`): rustls's `ServerConnection`, which is itself sans-I/O,
//! driven over any other [`Transport`]. The engines read and write it like a socket and never
//! know it encrypts: the handshake happens inside the first reads (on the engines' non-blocking
//! I/O, under the header-read deadline, never on an accept thread or a server-engine worker),
//! plaintext comes out of `read`, and `write` encrypts. Two things differ from a socket, and the
//! transport seam carries both: ciphertext may wait inside the transport after `write` returned
//! (the engines call [`Write::flush`] after their output, which answers `WouldBlock` until it is
//! out; a handshake flight the socket did not take shows in [`Transport::wants_write`], and the
//! engines then wait for writability too), and decrypted input may wait inside it with nothing
//! left in the socket ([`Transport::buffered_input`]).

use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};

use super::transport::{Stream, Transport};

/// A TLS server connection over an inner transport (TCP or a Unix domain socket).
pub(crate) struct TlsStream<T: Transport> {
    inner: T,
    tls: ServerConnection,
    /// Decrypted bytes inside rustls, not yet read out.
    plaintext: usize,
    /// The client's `close_notify` came: once the plaintext is read out, reads return the end
    /// of input, which the socket will not signal again (rustls took it off the socket).
    peer_closed: bool,
    /// How the connection is to end.
    end: End,
    /// Ciphertext the socket took since [`Transport::take_sent`] last asked.
    sent: usize,
}

/// How a TLS connection ends when it is dropped or its write side is shut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Cleanly: `close_notify` goes out first, so the client can tell the end of the data from
    /// a cut (the default: the server closes after a complete exchange, an idle timeout, a
    /// shutdown or a lingering close).
    Clean,
    /// `close_notify` is queued behind ciphertext the socket has not taken: the socket's write
    /// side is shut once it is all out (as the lingering close's reads push it).
    ShutWhenSent,
    /// The write side is shut, or the exchange was cut short ([`Transport::abort`]): nothing
    /// more is sent, and a cut close-delimited body reads as truncated, as it is.
    Done,
}

impl<T: Transport> TlsStream<T> {
    pub(crate) fn new(inner: T, config: Arc<ServerConfig>) -> io::Result<Self> {
        let tls = ServerConnection::new(config).map_err(io::Error::other)?;
        Ok(TlsStream {
            inner,
            tls,
            plaintext: 0,
            peer_closed: false,
            end: End::Clean,
            sent: 0,
        })
    }

    /// Writes queued ciphertext (handshake messages, alerts, encrypted output) until none is
    /// left, or the inner stream is full (`WouldBlock`).
    fn write_queued(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.inner) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.sent = self.sent.saturating_add(n),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.end == End::ShutWhenSent {
            self.end = End::Done;
            self.inner.shutdown_write()?;
        }
        Ok(())
    }

    /// Reads ciphertext once and decrypts what it completes. A peer that breaks the protocol
    /// gets rustls's alert (as far as the socket takes it) and an `InvalidData` error.
    fn read_records(&mut self) -> io::Result<()> {
        loop {
            match self.tls.read_tls(&mut self.inner) {
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        match self.tls.process_new_packets() {
            Ok(state) => {
                self.plaintext = state.plaintext_bytes_to_read();
                self.peer_closed = state.peer_has_closed();
                Ok(())
            }
            Err(e) => {
                let _ = self.write_queued();
                Err(io::Error::new(ErrorKind::InvalidData, e))
            }
        }
    }
}

impl<T: Transport> Read for TlsStream<T> {
    /// Decrypted input; `WouldBlock` only when none is buffered and the inner stream has
    /// nothing, so a caller that reads until `WouldBlock` leaves nothing behind.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => {
                    self.plaintext = self.plaintext.saturating_sub(n);
                    return Ok(n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // The peer closed its socket without `close_notify`: the end of its input (the
                // HTTP framing tells a truncated message from a finished one).
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            // Handshake messages go out before more is awaited; a full socket takes them later.
            match self.write_queued() {
                Err(e) if e.kind() != ErrorKind::WouldBlock => return Err(e),
                _ => {}
            }
            self.read_records()?;
        }
    }
}

impl<T: Transport> Write for TlsStream<T> {
    /// Pushes the records queued before (as far as the socket takes them), hands rustls what
    /// its send buffer takes (up to its 64 KiB limit) and pushes the new records: what it
    /// returns is plaintext taken, perhaps held in rustls while the socket is full.
    /// `WouldBlock` when rustls takes none of it (its buffer is at the limit). What the socket
    /// took is counted for [`Transport::take_sent`].
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match self.write_queued() {
            Err(e) if e.kind() != ErrorKind::WouldBlock => return Err(e),
            _ => {}
        }
        let n = self.tls.writer().write(buf)?;
        if n == 0 {
            return Err(ErrorKind::WouldBlock.into());
        }
        match self.write_queued() {
            Err(e) if e.kind() != ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }

    /// Writes the ciphertext still queued: `WouldBlock` until all of it is out.
    fn flush(&mut self) -> io::Result<()> {
        self.write_queued()?;
        self.inner.flush()
    }
}

/// A connection the server closes ends its TLS session cleanly, unless it was cut short:
/// `close_notify` goes out as far as the socket takes it now (never waiting: a blocking socket,
/// after a generic upgrade, is made non-blocking first).
impl<T: Transport> Drop for TlsStream<T> {
    fn drop(&mut self) {
        if self.end != End::Clean {
            return;
        }
        self.tls.send_close_notify();
        if self.inner.set_nonblocking(true).is_ok() {
            let _ = self.write_queued();
        }
    }
}

impl<T: Transport> AsFd for TlsStream<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl<T: Transport> Transport for TlsStream<T> {
    /// Sends `close_notify`, then shuts the socket's write side; what the socket does not take
    /// now goes out with later reads or flushes (the lingering close's), and the socket's write
    /// side is shut after it.
    fn shutdown_write(&mut self) -> io::Result<()> {
        if self.end == End::Done {
            return self.inner.shutdown_write();
        }
        self.tls.send_close_notify();
        self.end = End::ShutWhenSent;
        match self.write_queued() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(()),
            other => other,
        }
    }

    fn abort(&mut self) {
        self.end = End::Done;
    }

    fn wants_write(&self) -> bool {
        self.tls.wants_write()
    }

    fn set_nonblocking(&mut self, nonblocking: bool) -> io::Result<()> {
        self.inner.set_nonblocking(nonblocking)
    }

    /// Decrypted bytes, or the client's `close_notify` (a read returns the end at once).
    fn buffered_input(&self) -> bool {
        self.plaintext > 0 || self.peer_closed || self.inner.buffered_input()
    }

    fn proxied_source(&self) -> Option<std::net::SocketAddr> {
        self.inner.proxied_source()
    }

    /// The socket's (records, a little more than the bytes written to the stream).
    fn unacknowledged(&self) -> Option<usize> {
        self.inner.unacknowledged()
    }
    /// The records the socket took: plaintext rustls takes may wait in it (up to its 64 KiB
    /// limit) while the socket is full, which is no progress of the client's.
    fn take_sent(&mut self) -> Option<usize> {
        Some(std::mem::take(&mut self.sent))
    }
}

/// How accepted connections are wrapped before an engine serves them.
#[derive(Clone, Debug)]
pub(crate) struct Tls(pub(crate) Arc<ServerConfig>);

impl Tls {
    /// The accepted stream inside a TLS server connection. Its handshake has not begun: it runs
    /// in the engine's first reads.
    pub(crate) fn wrap(&self, stream: Stream) -> io::Result<Stream> {
        Ok(Box::new(TlsStream::new(stream, self.0.clone())?))
    }
}

/// A server configuration from a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1 or
/// SEC1), with ALPN `http/1.1` and rustls's safe defaults on the `ring` provider.
///
/// # Errors
///
/// When a file cannot be read, holds no certificate or key, or the key does not match.
pub fn config_from_pem(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, crate::Error> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| pem_error("read the TLS certificate", cert, e))?;
    if certs.is_empty() {
        return Err(crate::Error::path(
            "read the TLS certificate",
            cert,
            io::Error::new(ErrorKind::InvalidData, "no certificate in the file"),
        ));
    }
    let key_der =
        PrivateKeyDer::from_pem_file(key).map_err(|e| pem_error("read the TLS key", key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| crate::Error::from(io::Error::other(e)))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| {
            crate::Error::path(
                "use the TLS key",
                key,
                io::Error::new(ErrorKind::InvalidInput, e),
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A PEM file that could not be read (the operating system's error, kept) or parsed.
fn pem_error(action: &'static str, path: &Path, e: pem::Error) -> crate::Error {
    let e = match e {
        pem::Error::Io(e) => e,
        pem::Error::NoItemsFound => {
            io::Error::new(ErrorKind::InvalidData, "no PEM item in the file")
        }
        e => io::Error::new(ErrorKind::InvalidData, e),
    };
    crate::Error::path(action, path, e)
}
