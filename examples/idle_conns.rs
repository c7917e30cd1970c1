//! The idle-connection bench: what N idle keep-alive connections, then N idle WebSockets, cost a
//! server.
//!
//! Starts the `hello` example (built with `cargo build --release --example hello --features
//! server`) in a child process, opens N connections that each send one request and read the
//! response, holds them idle, and prints the server's threads and RSS before and after, from
//! `/proc/PID/status`. Then it closes them and does the same with N WebSockets (`GET /ws`, each
//! upgraded and then silent), re-served by one echo on a sample.
//!
//! `cargo run --release --example idle_conns -- [N] [--tls [--pending] [--peer BIN]] [-- extra
//! hello flags]` (`IDLE_CONNS=N` also sets N; default 10,000.) With `--tls` (build both with
//! `--features server,tls`) it makes a certificate for `localhost`, starts `hello` with it, and
//! every connection does a full TLS handshake before its request. `--pending`: each connection
//! sends a ClientHello, reads the first byte of the answer and stops there, so the server holds
//! N handshakes half-done (they end at its header-read deadline, 10 s for `hello`: keep N to
//! what opens well within it). `--peer BIN`: the server is `BIN PORT CERT KEY` (bench/peers),
//! HTTP only. Linux only.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use support::child::{ChildServer, raise_fd_limit};

/// A client connection: plain TCP, or TLS over it.
trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}
type Conn = Box<dyn Stream>;

/// One step on a held connection: opening it (a request, an upgrade, a ClientHello), or checking
/// that it is still served.
type Step = dyn Fn(&mut Conn) -> std::io::Result<()>;

/// How the bench connects: plain, or TLS trusting its own certificate.
#[derive(Clone)]
enum Client {
    Plain,
    #[cfg(feature = "tls")]
    Tls(std::sync::Arc<twinhttp::tls::rustls::ClientConfig>),
}

/// Where the bench's peers listen (they take a port, not port 0).
const PEER_PORT: &str = "18556";

fn main() {
    if !cfg!(target_os = "linux") {
        eprintln!("idle_conns reads the server's threads and memory from /proc: Linux only");
        std::process::exit(2);
    }
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let extra: Vec<String> = match args.iter().position(|a| a == "--") {
        Some(i) => args.split_off(i).into_iter().skip(1).collect(),
        None => Vec::new(),
    };
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        std::process::exit(0);
    }
    let tls = take_flag(&mut args, "--tls");
    let pending = take_flag(&mut args, "--pending");
    let peer = args.iter().position(|a| a == "--peer").map(|i| {
        let bin = args
            .get(i + 1)
            .cloned()
            .unwrap_or_else(|| usage("--peer needs a path"));
        args.drain(i..=i + 1);
        bin
    });
    let n: usize = match args.as_slice() {
        [] => std::env::var("IDLE_CONNS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10_000),
        [n] => n
            .parse()
            .unwrap_or_else(|_| usage(&format!("not a number of connections: {n}"))),
        [_, unexpected, ..] => usage(&format!("unexpected argument {unexpected}")),
    };
    let (client, pem) = tls_setup(tls);
    if (pending || peer.is_some()) && pem.is_none() {
        usage("--pending and --peer need --tls");
    }
    let limit = raise_fd_limit();
    let want = n.min(limit.saturating_sub(64) as usize);
    if want < n {
        eprintln!("open-files limit {limit}: holding {want} connections instead of {n}");
    }
    let (server, label) = start(peer.as_deref(), pem.as_ref(), extra);

    let mut warm = connect(&client, server.addr).expect("connect");
    request(&mut warm).expect("warm-up request");
    drop(warm);
    std::thread::sleep(Duration::from_millis(500));
    println!(
        "| server | connections held | failed | threads before → after | RSS before → after (KiB) | KiB per idle connection | sample re-served |"
    );
    println!("|---|---|---|---|---|---|---|");
    if pending {
        // Plain TCP: the bench speaks the handshake's first message itself and stops there.
        let hello = client_hello_sender(&client);
        let label = format!("{label}, handshake pending");
        hold(&server, &Client::Plain, &label, want, &*hello, &still_open);
        server.stop();
        return;
    }
    hold(
        &server,
        &client,
        &format!("{label}, HTTP"),
        want,
        &request,
        &request,
    );
    if peer.is_none() {
        // The held connections are closed; let the server settle before the next baseline.
        std::thread::sleep(Duration::from_secs(2));
        hold(
            &server,
            &client,
            &format!("{label}, WebSocket"),
            want,
            &upgrade,
            &echo,
        );
    }
    server.stop();
}

const USAGE: &str = "usage: idle_conns [N] [--tls [--pending] [--peer BIN]] [-- hello flags]";

fn usage(why: &str) -> ! {
    eprintln!("error: {why}\n{USAGE}");
    std::process::exit(2)
}

/// Removes `flag` from `args`; whether it was there.
fn take_flag(args: &mut Vec<String>, flag: &str) -> bool {
    let had = args.iter().any(|a| a == flag);
    args.retain(|a| a != flag);
    had
}

/// Starts `hello` (with the TLS files, if any, and the extra flags), or a peer (`BIN PORT CERT
/// KEY`, as bench/peers take them); returns it and its label.
fn start(peer: Option<&str>, pem: Option<&Pem>, extra: Vec<String>) -> (ChildServer, String) {
    if let (Some(bin), Some(pem)) = (peer, pem) {
        let mut cmd = std::process::Command::new(bin);
        cmd.arg(PEER_PORT).arg(&pem.cert).arg(&pem.key);
        let name = std::path::Path::new(bin)
            .file_name()
            .map_or_else(|| bin.to_owned(), |n| n.to_string_lossy().into_owned());
        return (ChildServer::spawn(cmd), name);
    }
    let label = if extra.is_empty() {
        "hello (defaults)".to_owned()
    } else {
        format!("hello {}", extra.join(" "))
    };
    let mut flags = Vec::new();
    if let Some(pem) = pem {
        flags.extend(["--tls-cert".to_owned(), pem.cert.display().to_string()]);
        flags.extend(["--tls-key".to_owned(), pem.key.display().to_string()]);
    }
    flags.extend(extra);
    let label = match pem {
        Some(_) => format!("{label}, TLS"),
        None => label,
    };
    (ChildServer::start("hello", &flags), label)
}

/// The certificate and key files of a TLS run, in a directory removed on drop.
struct Pem {
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
    _dir: TempDir,
}

/// Without `--tls`: plain. With it: a certificate for `localhost` in a temporary directory,
/// and a client that trusts it.
fn tls_setup(tls: bool) -> (Client, Option<Pem>) {
    if !tls {
        return (Client::Plain, None);
    }
    #[cfg(feature = "tls")]
    {
        use twinhttp::tls::rustls;
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .and_then(|p| p.self_signed(&key))
            .expect("a certificate");
        let dir = TempDir(std::env::temp_dir().join(format!("idle-conns-{}", std::process::id())));
        std::fs::create_dir_all(&dir.0).expect("a temporary directory");
        let (cert_pem, key_pem) = (dir.0.join("cert.pem"), dir.0.join("key.pem"));
        std::fs::write(&cert_pem, cert.pem()).expect("cert.pem");
        std::fs::write(&key_pem, key.serialize_pem()).expect("key.pem");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.der().clone()).expect("trust it");
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let pem = Pem {
            cert: cert_pem,
            key: key_pem,
            _dir: dir,
        };
        (Client::Tls(std::sync::Arc::new(config)), Some(pem))
    }
    #[cfg(not(feature = "tls"))]
    usage("--tls needs --features server,tls")
}

/// Sends a fresh ClientHello on a plain connection and reads the first byte of the server's
/// answer: the server has read it, answered, and now holds a handshake that goes no further.
fn client_hello_sender(client: &Client) -> Box<Step> {
    match client {
        #[cfg(feature = "tls")]
        Client::Tls(config) => {
            use twinhttp::tls::rustls;
            let config = config.clone();
            Box::new(move |s: &mut Conn| {
                let name = rustls::pki_types::ServerName::try_from("localhost")
                    .map_err(std::io::Error::other)?;
                let mut conn = rustls::ClientConnection::new(config.clone(), name)
                    .map_err(std::io::Error::other)?;
                let mut hello = Vec::new();
                conn.write_tls(&mut hello)?;
                s.write_all(&hello)?;
                let mut first = [0u8; 1];
                s.read_exact(&mut first)
            })
        }
        _ => usage("--pending needs --tls"),
    }
}

/// The server still holds the connection: nothing more comes, or what comes is not its end.
fn still_open(s: &mut Conn) -> std::io::Result<()> {
    let mut buf = [0u8; 4096];
    match s.read(&mut buf) {
        Ok(0) => Err(std::io::ErrorKind::UnexpectedEof.into()),
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// A directory removed when dropped.
struct TempDir(#[allow(dead_code)] std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens `want` connections with `open`, holds them idle, prints one table row, and checks a
/// sample with `check`.
fn hold(
    server: &ChildServer,
    client: &Client,
    label: &str,
    want: usize,
    open: &Step,
    check: &Step,
) {
    let (threads0, rss0) = status(server);
    let started = Instant::now();
    let mut held = Vec::with_capacity(want);
    let mut failed = 0usize;
    for _ in 0..want {
        let Some(mut s) = connect(client, server.addr) else {
            failed += 1;
            break;
        };
        match open(&mut s) {
            Ok(()) => held.push(s),
            Err(_) => {
                // The server is out of something (descriptors, threads): report what it held.
                failed += 1;
                break;
            }
        }
    }
    let opened = started.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let (threads1, rss1) = status(server);
    // Still open and served? One more exchange on the last connections opened (the first to
    // be lost if the server ran short of something while they were opened).
    let sample = held.len().min(100);
    let alive = held
        .iter_mut()
        .rev()
        .take(sample)
        .map(check)
        .filter(Result::is_ok)
        .count();
    let per_conn = (rss1 as f64 - rss0 as f64) / held.len().max(1) as f64;
    println!(
        "| {label} | {} | {failed} | {threads0} → {threads1} | {rss0} → {rss1} | {per_conn:.2} | {alive}/{sample} |",
        held.len()
    );
    eprintln!("({label}: opened in {opened:.1?})");
}

/// (threads, VmRSS KiB) of the server process, from `/proc/PID/status`.
fn status(server: &ChildServer) -> (u64, u64) {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("Threads:"), field("VmRSS:"))
}

fn connect(client: &Client, addr: SocketAddr) -> Option<Conn> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    match client {
        Client::Plain => Some(Box::new(s)),
        #[cfg(feature = "tls")]
        Client::Tls(config) => {
            use twinhttp::tls::rustls;
            let name = rustls::pki_types::ServerName::try_from("localhost").ok()?;
            let conn = rustls::ClientConnection::new(config.clone(), name).ok()?;
            Some(Box::new(rustls::StreamOwned::new(conn, s)))
        }
    }
}

/// Upgrades to WebSocket on `/ws`: reads the 101's head.
fn upgrade(s: &mut Conn) -> std::io::Result<()> {
    s.write_all(
        b"GET /ws HTTP/1.1\r\nHost: idle\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
    }
    if head.starts_with(b"HTTP/1.1 101 ") {
        Ok(())
    } else {
        Err(std::io::ErrorKind::InvalidData.into())
    }
}

/// One masked text frame ("ping", zero mask) and its echo.
fn echo(s: &mut Conn) -> std::io::Result<()> {
    s.write_all(&[0x81, 0x84, 0, 0, 0, 0, b'p', b'i', b'n', b'g'])?;
    let mut frame = [0u8; 6];
    s.read_exact(&mut frame)?;
    if &frame == b"\x81\x04ping" {
        Ok(())
    } else {
        Err(std::io::ErrorKind::InvalidData.into())
    }
}

/// One keep-alive request; reads the whole response (by its Content-Length).
fn request(s: &mut Conn) -> std::io::Result<()> {
    s.write_all(b"GET / HTTP/1.1\r\nHost: idle\r\n\r\n")?;
    let mut buf = [0u8; 1024];
    let mut got = Vec::new();
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got.extend_from_slice(&buf[..n]);
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                return Ok(());
            }
        }
    }
}
