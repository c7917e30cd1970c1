//! TLS for the tests: a certificate for `localhost` made at run time (rcgen; no key is
//! committed), the server configuration from its PEM files through the crate's own loader, and
//! rustls clients that trust it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use twinhttp::tls::rustls;
use twinhttp::tls::rustls::pki_types::{CertificateDer, ServerName};

use super::Client;

/// A TLS client stream over TCP.
pub type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A certificate for `localhost`, its files, and the configurations of both sides.
pub struct Pki {
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
    pub cert_pem: PathBuf,
    pub key_pem: PathBuf,
    _dir: TempDir,
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Pki {
    pub fn new() -> Pki {
        Pki::with_names(vec!["localhost".to_owned()])
    }

    /// A certificate for these names (a long list makes a large certificate).
    pub fn with_names(names: Vec<String>) -> Pki {
        let key = rcgen::KeyPair::generate().expect("a key");
        let params = rcgen::CertificateParams::new(names).expect("cert params");
        let cert = params.self_signed(&key).expect("a self-signed certificate");
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("twinhttp-tls-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let (cert_pem, key_pem) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert_pem, cert.pem()).expect("write cert.pem");
        std::fs::write(&key_pem, key.serialize_pem()).expect("write key.pem");
        let server = twinhttp::tls::config_from_pem(&cert_pem, &key_pem).expect("server config");
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(cert.der().to_vec()))
            .expect("trust the certificate");
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Pki {
            server,
            client: Arc::new(client),
            cert_pem,
            key_pem,
            _dir: TempDir(dir),
        }
    }

    /// A TLS connection to `addr` (handshake done on first use), with a read timeout.
    pub fn connect(&self, addr: SocketAddr) -> TlsStream {
        let tcp = TcpStream::connect(addr).expect("connect");
        tcp.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        tcp.set_nodelay(true).expect("nodelay");
        let name = ServerName::try_from("localhost").expect("a server name");
        let conn =
            rustls::ClientConnection::new(self.client.clone(), name).expect("a client connection");
        rustls::StreamOwned::new(conn, tcp)
    }

    /// An HTTP client over TLS.
    pub fn client(&self, addr: SocketAddr) -> Client<TlsStream> {
        Client {
            reader: std::io::BufReader::new(self.connect(addr)),
        }
    }

    /// The ClientHello a fresh client connection sends first.
    pub fn client_hello(&self) -> Vec<u8> {
        let name = ServerName::try_from("localhost").expect("a server name");
        let mut conn =
            rustls::ClientConnection::new(self.client.clone(), name).expect("a client connection");
        let mut hello = Vec::new();
        conn.write_tls(&mut hello).expect("the ClientHello");
        hello
    }
}

/// A listener whose accepted sockets have a small send buffer (about 4.5 KiB): a large
/// handshake flight takes several writable wake-ups.
pub fn small_send_buffer_listener() -> (twinhttp::Listener, SocketAddr) {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    s.set_reuse_address(true).expect("reuse");
    s.set_send_buffer_size(2048).expect("a small send buffer");
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    s.bind(&addr.into()).expect("bind");
    s.listen(128).expect("listen");
    let l: std::net::TcpListener = s.into();
    let addr = l.local_addr().expect("its address");
    (l.into(), addr)
}

/// A client socket with a small receive buffer and a read timeout.
pub fn small_receive_buffer_client(addr: SocketAddr) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    s.set_recv_buffer_size(2048)
        .expect("a small receive buffer");
    s.connect(&addr.into()).expect("connect");
    let t: TcpStream = s.into();
    t.set_read_timeout(Some(Duration::from_secs(8)))
        .expect("timeout");
    t.set_nodelay(true).expect("nodelay");
    t
}

impl Client<TlsStream> {
    /// True when the server ended the TLS session cleanly (`close_notify`, then EOF) within the
    /// read timeout.
    pub fn closed_cleanly(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.reader.read(&mut b), Ok(0))
    }

    /// Writes and flushes.
    pub fn send_all(&mut self, bytes: &[u8]) {
        let s = self.reader.get_mut();
        s.write_all(bytes).expect("send over TLS");
        s.flush().expect("flush");
    }
}

/// Queues `plain` in the client's TLS session, then its `close_notify` (unless `and_close` is
/// false), and writes every record in one `write_all`: returns when it went out.
pub fn write_in_one(s: &mut TlsStream, plain: &[u8], and_close: bool) -> std::time::Instant {
    if !plain.is_empty() {
        s.conn
            .writer()
            .write_all(plain)
            .expect("queue the plaintext");
    }
    if and_close {
        s.conn.send_close_notify();
    }
    let mut records = Vec::new();
    while s.conn.wants_write() {
        s.conn.write_tls(&mut records).expect("records");
    }
    let at = std::time::Instant::now();
    s.sock.write_all(&records).expect("one write");
    at
}
