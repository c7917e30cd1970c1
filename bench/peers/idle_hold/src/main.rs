//! `idle_hold PORT N http|ws [HOLD_SECS]`: opens N connections to 127.0.0.1:PORT, one after
//! another; on each sends one `GET /` and reads its response (`http`), or upgrades it to a
//! WebSocket (`ws`, `GET /` with the RFC 6455 headers, expecting 101); then prints
//! `READY held=H failed=F` and holds them idle for HOLD_SECS (10), while the caller reads the
//! server's RSS and threads from /proc. The peers' side of twinhttp's `examples/idle_conns`
//! (which starts twinhttp's own `hello`). Raise the open-files limit first (`ulimit -n`).
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const HTTP: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
const WS: &[u8] =
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// Opens one connection and makes its one exchange; the stream stays open.
fn open(port: u16, ws: bool) -> io::Result<TcpStream> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(if ws { WS } else { HTTP })?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 || head.len() > 16 * 1024 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let status = if ws { " 101 " } else { " 200 " };
    if !head.lines().next().is_some_and(|l| l.contains(status)) {
        return Err(io::ErrorKind::InvalidData.into());
    }
    if !ws {
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or(io::ErrorKind::InvalidData)?;
        stream.read_exact(&mut vec![0; length])?;
    }
    Ok(stream)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match &args[..] {
        [port, n, kind, rest @ ..] if rest.len() <= 1 => (|| {
            let hold = rest.first().map_or(Some(10), |h| h.parse().ok())?;
            let ws = match kind.as_str() {
                "http" => false,
                "ws" => true,
                _ => return None,
            };
            Some((
                port.parse::<u16>().ok()?,
                n.parse::<usize>().ok()?,
                ws,
                hold,
            ))
        })(),
        _ => None,
    };
    let Some((port, n, ws, hold)) = parsed else {
        eprintln!("usage: idle_hold PORT N http|ws [HOLD_SECS]");
        std::process::exit(2);
    };
    let mut held = Vec::with_capacity(n);
    let mut failed = 0;
    for _ in 0..n {
        match open(port, ws) {
            Ok(stream) => held.push(stream),
            Err(_) => failed += 1,
        }
    }
    println!("READY held={} failed={failed}", held.len());
    let _ = io::stdout().flush();
    std::thread::sleep(Duration::from_secs(hold));
}
