//! Sends an exact number of requests to a server on 127.0.0.1 and checks every response (status
//! 200, its body read to its `Content-Length`), for `bench/instructions.sh`, which counts what a
//! server does for N and for 3N requests. Unlike wrk, which runs for a time, it sends a count.
//!
//! `fixed_load PORT LOAD N [CONNS]`, LOAD one of:
//! - `keepalive`: CONNS connections (64), one `GET /` at a time on each;
//! - `pipelined`: CONNS connections, 16 `GET /` in one write, then their 16 responses;
//! - `close`: CONNS clients, each `GET /` with `Connection: close` on a new connection, which
//!   the client closes once the response is read (may_minihttp ignores `Connection: close`, so
//!   the client cannot wait for the server to close);
//! - `post1k`: as keepalive, each a `POST /` with a 1 KiB body;
//! - `browser`: as keepalive, each `GET /` with the 16 fields (`Host` and 15 more) a browser
//!   sends when it opens a page (`User-Agent`, `Accept`, the `Sec-Fetch-*` and client hints,
//!   `Accept-Encoding`, `Accept-Language`, `Cookie`, ...): what parsing a real head and looking
//!   fields up in it cost.
//!
//! The target is `/`, or `FIXED_LOAD_PATH` when that is set (a route of a larger example).
//!
//! Prints `fixed_load: N responses LOAD SECONDS s` and exits 0, or names the first failure and
//! exits 1.
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const DEPTH: usize = 16;
const POST_BODY: usize = 1024;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Load {
    KeepAlive,
    Pipelined,
    Close,
    Post1k,
    Browser,
}

/// A browser's fields after `Host` when it opens a page (Chromium's, 2025), ending the head.
/// With `Host` they are 16: exactly may_minihttp's limit (one more and it closes the
/// connection), so do not add one.
const BROWSER_FIELDS: &str = "Connection: keep-alive\r\n\
    sec-ch-ua: \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"\r\n\
    sec-ch-ua-mobile: ?0\r\n\
    sec-ch-ua-platform: \"Linux\"\r\n\
    Upgrade-Insecure-Requests: 1\r\n\
    User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
    Chrome/131.0.0.0 Safari/537.36\r\n\
    Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,\
    image/apng,*/*;q=0.8\r\n\
    Sec-Fetch-Site: none\r\n\
    Sec-Fetch-Mode: navigate\r\n\
    Sec-Fetch-User: ?1\r\n\
    Sec-Fetch-Dest: document\r\n\
    Accept-Encoding: gzip, deflate, br, zstd\r\n\
    Accept-Language: en-US,en;q=0.9\r\n\
    Cookie: session=3f9a1c0e7b2d4a6f8e1b5c9d0a7e3f21; theme=dark\r\n\
    Priority: u=0, i\r\n\r\n";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: fixed_load PORT keepalive|pipelined|close|post1k|browser N [CONNS]");
        std::process::exit(2)
    };
    let (Some(port), Some(load), Some(n)) = (
        args.first().and_then(|p| p.parse::<u16>().ok()),
        args.get(1),
        args.get(2).and_then(|n| n.parse::<usize>().ok()),
    ) else {
        usage()
    };
    let conns = args.get(3).map_or(Some(64), |c| c.parse::<usize>().ok());
    let Some(conns) = conns.filter(|&c| c > 0) else {
        usage()
    };
    let load = match load.as_str() {
        "keepalive" => Load::KeepAlive,
        "pipelined" => Load::Pipelined,
        "close" => Load::Close,
        "post1k" => Load::Post1k,
        "browser" => Load::Browser,
        _ => usage(),
    };
    let started = Instant::now();
    let clients: Vec<_> = (0..conns)
        .map(|i| {
            // n split as evenly as it goes: the first n % conns clients send one more.
            let share = n / conns + usize::from(i < n % conns);
            std::thread::spawn(move || client(port, load, share))
        })
        .collect();
    let mut failure = None;
    for client in clients {
        match client.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failure = failure.or(Some(e.to_string())),
            Err(_) => failure = failure.or(Some("a client thread panicked".to_owned())),
        }
    }
    if let Some(e) = failure {
        eprintln!("fixed_load: {e}");
        std::process::exit(1);
    }
    println!(
        "fixed_load: {n} responses {} {:.2} s",
        args[1],
        started.elapsed().as_secs_f64()
    );
}

/// One client's `share` of the requests.
fn client(port: u16, load: Load, share: usize) -> io::Result<()> {
    let host = format!("Host: 127.0.0.1:{port}\r\n");
    let path = std::env::var("FIXED_LOAD_PATH")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/".to_owned());
    match load {
        Load::Close => {
            let request = format!("GET {path} HTTP/1.1\r\n{host}Connection: close\r\n\r\n");
            for _ in 0..share {
                let mut conn = Conn::open(port)?;
                conn.stream.write_all(request.as_bytes())?;
                conn.response()?;
            }
            Ok(())
        }
        Load::KeepAlive | Load::Post1k | Load::Pipelined | Load::Browser => {
            let one = match load {
                Load::Post1k => format!(
                    "POST {path} HTTP/1.1\r\n{host}Content-Type: application/octet-stream\r\n\
                     Content-Length: {POST_BODY}\r\n\r\n{}",
                    "x".repeat(POST_BODY)
                ),
                Load::Browser => format!("GET {path} HTTP/1.1\r\n{host}{BROWSER_FIELDS}"),
                _ => format!("GET {path} HTTP/1.1\r\n{host}\r\n"),
            };
            let depth = if load == Load::Pipelined { DEPTH } else { 1 };
            let batch = one.repeat(depth);
            let mut conn = Conn::open(port)?;
            let mut left = share;
            while left > 0 {
                let now = left.min(depth);
                let bytes = if now == depth {
                    &batch[..]
                } else {
                    &batch[..one.len() * now]
                };
                conn.stream.write_all(bytes.as_bytes())?;
                for _ in 0..now {
                    conn.response()?;
                }
                left -= now;
            }
            Ok(())
        }
    }
}

/// A connection and the bytes read from it that no response has taken yet.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(port: u16) -> io::Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        // A server under callgrind is some 50 times slower than its native self.
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(4096),
        })
    }

    /// Reads one whole response, which must be a 200 with a `Content-Length`, and takes it off
    /// the buffer.
    fn response(&mut self) -> io::Result<()> {
        loop {
            if let Some(size) = whole_response(&self.buf)? {
                self.buf.drain(..size);
                return Ok(());
            }
            self.fill()?;
        }
    }

    fn fill(&mut self) -> io::Result<()> {
        let at = self.buf.len();
        self.buf.resize(at + 8192, 0);
        let got = self.stream.read(&mut self.buf[at..]);
        self.buf.truncate(at + *got.as_ref().unwrap_or(&0));
        match got? {
            0 => Err(io::Error::other(
                "the server closed before a whole response",
            )),
            _ => Ok(()),
        }
    }
}

/// The size of the response at the start of `buf` when it is all there; an error when it is not
/// a 200 with a `Content-Length`.
fn whole_response(buf: &[u8]) -> io::Result<Option<usize>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(buf) {
        Ok(httparse::Status::Complete(head)) => head,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(io::Error::other(format!("a malformed response: {e}"))),
    };
    if response.code != Some(200) {
        return Err(io::Error::other(format!("status {:?}", response.code)));
    }
    let length = response
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| {
            std::str::from_utf8(h.value)
                .ok()?
                .trim()
                .parse::<usize>()
                .ok()
        })
        .ok_or_else(|| io::Error::other("a response without a Content-Length"))?;
    let size = head + length;
    Ok((buf.len() >= size).then_some(size))
}
