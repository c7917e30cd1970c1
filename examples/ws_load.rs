//! A WebSocket echo load generator for the benchmark scripts: `--conns N` clients (a thread
//! each, tungstenite over blocking sockets) send a `--size B` binary message, wait for its echo,
//! and repeat for `--secs S`; prints one line, `ws_load: N msgs in S s = R msgs/s`.
//!
//! usage: ws_load [--addr 127.0.0.1:8080] [--conns 64] [--size 32] [--secs 5]
//! Only the given address (loopback in the scripts) is contacted.

use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tungstenite::Message;

struct Opts {
    addr: String,
    conns: usize,
    size: usize,
    secs: u64,
}

fn opts() -> Opts {
    let mut o = Opts {
        addr: "127.0.0.1:8080".to_owned(),
        conns: 64,
        size: 32,
        secs: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let value = it
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        let number = || {
            value
                .parse()
                .unwrap_or_else(|_| usage(&format!("not a number: {value}")))
        };
        match flag.as_str() {
            "--addr" => o.addr = value.clone(),
            "--conns" => o.conns = number(),
            "--size" => o.size = number(),
            "--secs" => o.secs = number() as u64,
            other => usage(&format!("unknown option {other}")),
        }
    }
    o
}

const USAGE: &str = "usage: ws_load [--addr HOST:PORT] [--conns N] [--size B] [--secs S]";

fn usage(problem: &str) -> ! {
    eprintln!("error: {problem}\n{USAGE}");
    std::process::exit(2)
}

fn main() {
    let o = opts();
    let total = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let until = start + Duration::from_secs(o.secs);
    let threads: Vec<_> = (0..o.conns)
        .map(|_| {
            let (addr, total, size) = (o.addr.clone(), total.clone(), o.size);
            std::thread::spawn(move || {
                let stream = TcpStream::connect(&addr).expect("connect");
                stream.set_nodelay(true).expect("nodelay");
                let url = format!("ws://{addr}/");
                let (mut ws, _) = tungstenite::client(url.as_str(), stream).expect("handshake");
                let payload = vec![7u8; size];
                let mut n = 0u64;
                while Instant::now() < until {
                    if ws.send(Message::binary(payload.clone())).is_err() {
                        break;
                    }
                    match ws.read() {
                        Ok(Message::Binary(b)) if b.len() == size => n += 1,
                        _ => break,
                    }
                }
                let _ = ws.close(None);
                total.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let secs = start.elapsed().as_secs_f64();
    let n = total.load(Ordering::Relaxed);
    println!(
        "ws_load: {n} msgs in {secs:.2} s = {:.0} msgs/s",
        n as f64 / secs
    );
}
