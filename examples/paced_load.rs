//! Paced load: many users, each on its own keep-alive connection, sending a small `POST /echo`
//! every interval for a fixed time (the long-lived-connection shape wrk cannot produce).
//!
//! Starts the `demo` example (build it first: `cargo build --release --example demo --features
//! server`) in a child process with the flags after `--`, runs the users, stops the server by PID,
//! and prints one markdown row.
//!
//! `cargo run --release --example paced_load -- [--users 100] [--seconds 10] [--interval-ms 100] [-- demo flags]`

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::child::{ChildServer, raise_fd_limit};

#[derive(Default)]
struct Tally {
    sent: u64,
    received: u64,
    failures: u64,
    latencies_us: Vec<u64>,
}

const USAGE: &str =
    "usage: paced_load [--users 100] [--seconds 10] [--interval-ms 100] [-- demo flags]";

fn usage(problem: &str) -> ! {
    eprintln!("error: {problem}\n{USAGE}");
    std::process::exit(2)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let server_flags: Vec<String> = match args.iter().position(|a| a == "--") {
        Some(i) => args.split_off(i).into_iter().skip(1).collect(),
        None => Vec::new(),
    };
    let (mut users, mut seconds, mut interval_ms) = (100u64, 10u64, 100u64);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let slot = match flag.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--users" => &mut users,
            "--seconds" => &mut seconds,
            "--interval-ms" => &mut interval_ms,
            other => usage(&format!("unknown option {other}")),
        };
        let value = it
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        *slot = value
            .parse()
            .unwrap_or_else(|_| usage(&format!("not a number: {value}")));
    }
    let users = usize::try_from(users).unwrap_or_else(|_| usage("--users is too large"));
    let interval = Duration::from_millis(interval_ms);
    raise_fd_limit();

    let server = ChildServer::start("demo", &server_flags);
    let addr = server.addr;

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let start = Instant::now();
    let threads: Vec<_> = (0..users)
        .map(|i| {
            let (stop, tally) = (stop.clone(), tally.clone());
            // Spread the users' first requests over one interval.
            let offset = interval * i as u32 / users.max(1) as u32;
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || user(addr, offset, interval, &stop, &tally))
                .expect("user thread")
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let elapsed = start.elapsed();
    server.stop();

    let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
    t.latencies_us.sort_unstable();
    let avg =
        t.latencies_us.iter().sum::<u64>() as f64 / t.latencies_us.len().max(1) as f64 / 1000.0;
    let p99 = t
        .latencies_us
        .get(t.latencies_us.len() * 99 / 100)
        .copied()
        .unwrap_or(0) as f64
        / 1000.0;
    let label = if server_flags.is_empty() {
        "demo (defaults)".to_owned()
    } else {
        server_flags.join(" ")
    };
    println!("| server | users | seconds | sent | received | failures | avg ms | p99 ms |");
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {label} | {users} | {:.0} | {} | {} | {} | {avg:.2} | {p99:.2} |",
        elapsed.as_secs_f64(),
        t.sent,
        t.received,
        t.failures
    );
}

/// One user: connect, then one small echo every interval until told to stop.
fn user(
    addr: SocketAddr,
    offset: Duration,
    interval: Duration,
    stop: &AtomicBool,
    tally: &Mutex<Tally>,
) {
    std::thread::sleep(offset);
    let mut local = Tally::default();
    let mut conn = TcpStream::connect(addr).ok();
    let request = b"POST /echo HTTP/1.1\r\nHost: paced\r\nContent-Type: text/plain\r\nContent-Length: 16\r\n\r\nping ping ping!\n";
    let mut next = Instant::now();
    let mut buf = [0u8; 1024];
    while !stop.load(Ordering::Relaxed) {
        let Some(s) = conn.as_mut() else {
            local.failures += 1;
            conn = TcpStream::connect(addr).ok();
            std::thread::sleep(interval);
            continue;
        };
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let sent_at = Instant::now();
        local.sent += 1;
        let ok = s.write_all(request).is_ok() && read_echo(s, &mut buf);
        if ok {
            local.received += 1;
            local
                .latencies_us
                .push(sent_at.elapsed().as_micros() as u64);
        } else {
            local.failures += 1;
            conn = TcpStream::connect(addr).ok();
        }
        next += interval;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
    t.sent += local.sent;
    t.received += local.received;
    t.failures += local.failures;
    t.latencies_us.extend(local.latencies_us);
}

/// Reads one response whose body is the 16 bytes sent.
fn read_echo(s: &mut TcpStream, buf: &mut [u8; 1024]) -> bool {
    let mut got = 0;
    loop {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got += n,
        }
        if buf[..got].ends_with(b"ping ping ping!\n") {
            return buf.starts_with(b"HTTP/1.1 200");
        }
        if got == buf.len() {
            return false;
        }
    }
}
