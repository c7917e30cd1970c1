//! The idle-connection bench: what N idle keep-alive connections, then N idle WebSockets, cost a
//! server.
//!
//! Starts the `hello` example (built with `cargo build --release --example hello --features
//! server`) in a child process, opens N connections that each send one request and read the
//! response, holds them idle, and prints the server's threads and RSS before and after, from
//! `/proc/PID/status`. Then it closes them and does the same with N WebSockets (`GET /ws`, each
//! upgraded and then silent), re-served by one echo on a sample.
//!
//! `cargo run --release --example idle_conns -- [N] [-- extra hello flags]`
//! (`IDLE_CONNS=N` also sets N; default 10,000.) Linux only.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use support::child::{ChildServer, raise_fd_limit};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let extra: Vec<String> = match args.iter().position(|a| a == "--") {
        Some(i) => args.split_off(i).into_iter().skip(1).collect(),
        None => Vec::new(),
    };
    let n: usize = args
        .first()
        .cloned()
        .or_else(|| std::env::var("IDLE_CONNS").ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let limit = raise_fd_limit();
    let want = n.min(limit.saturating_sub(64) as usize);
    if want < n {
        eprintln!("open-files limit {limit}: holding {want} connections instead of {n}");
    }
    let server = ChildServer::start("hello", &extra);
    let label = if extra.is_empty() {
        "hello (defaults)".to_owned()
    } else {
        format!("hello {}", extra.join(" "))
    };

    let mut warm = connect(server.addr).expect("connect");
    request(&mut warm).expect("warm-up request");
    drop(warm);
    std::thread::sleep(Duration::from_millis(500));
    println!(
        "| server | connections held | failed | threads before → after | RSS before → after (KiB) | KiB per idle connection | sample re-served |"
    );
    println!("|---|---|---|---|---|---|---|");
    hold(&server, &format!("{label}, HTTP"), want, request, request);
    // The held connections are closed; let the server settle before the next baseline.
    std::thread::sleep(Duration::from_secs(2));
    hold(&server, &format!("{label}, WebSocket"), want, upgrade, echo);
    server.stop();
}

/// Opens `want` connections with `open`, holds them idle, prints one table row, and checks a
/// sample with `check`.
fn hold(
    server: &ChildServer,
    label: &str,
    want: usize,
    open: fn(&mut TcpStream) -> std::io::Result<()>,
    check: fn(&mut TcpStream) -> std::io::Result<()>,
) {
    let (threads0, rss0) = status(server);
    let started = Instant::now();
    let mut held = Vec::with_capacity(want);
    let mut failed = 0usize;
    for _ in 0..want {
        let Some(mut s) = connect(server.addr) else {
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

fn connect(addr: SocketAddr) -> Option<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    Some(s)
}

/// Upgrades to WebSocket on `/ws`: reads the 101's head.
fn upgrade(s: &mut TcpStream) -> std::io::Result<()> {
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
fn echo(s: &mut TcpStream) -> std::io::Result<()> {
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
fn request(s: &mut TcpStream) -> std::io::Result<()> {
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
