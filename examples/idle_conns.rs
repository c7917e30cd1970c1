//! The idle-connection bench: what N idle keep-alive connections cost a server.
//!
//! Starts the `hello` example (built with `cargo build --release --example hello --features
//! server`) in a child process, opens N connections that each send one request and read the
//! response, holds them idle, and prints the server's threads and RSS before and after, from
//! `/proc/PID/status`.
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

    let mut warm = connect(server.addr);
    request(&mut warm).expect("warm-up request");
    drop(warm);
    std::thread::sleep(Duration::from_millis(500));
    let (threads0, rss0) = status(&server);

    let started = Instant::now();
    let mut held = Vec::with_capacity(want);
    let mut failed = 0usize;
    for _ in 0..want {
        let mut s = connect(server.addr);
        match request(&mut s) {
            Ok(()) => held.push(s),
            Err(_) => failed += 1,
        }
    }
    let opened = started.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let (threads1, rss1) = status(&server);
    // Still open and served? One more request on a sample of the held connections.
    let sample = held.len().min(100);
    let alive = held
        .iter_mut()
        .take(sample)
        .map(request)
        .filter(Result::is_ok)
        .count();

    let per_conn = (rss1 as f64 - rss0 as f64) / held.len().max(1) as f64;
    println!(
        "| server | connections held | failed | threads before → after | RSS before → after (KiB) | KiB per idle connection | sample re-served |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {label} | {} | {failed} | {threads0} → {threads1} | {rss0} → {rss1} | {per_conn:.2} | {alive}/{sample} |",
        held.len()
    );
    eprintln!("(opened in {opened:.1?})");
    drop(held);
    server.stop();
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

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s
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
