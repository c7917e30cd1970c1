//! The RFC rules probed with raw bytes against the `demo` example binary itself, and the accept
//! loop surviving descriptor exhaustion (the binary run under a low `ulimit -n`).
#![cfg(feature = "server")]
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;
mod support;
use child::ChildServer;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use support::{Client, probe};

/// The `demo` example, started on an ephemeral port; killed (by PID) when dropped.
struct Demo {
    server: ChildServer,
    addr: SocketAddr,
}

impl Demo {
    /// Starts `demo` with extra flags (e.g. `--engine reactor`), optionally under `ulimit -n`.
    fn start_with(ulimit_n: Option<u32>, flags: &[&str]) -> Demo {
        let demo = child::example_for_test("demo");
        let cmd = match ulimit_n {
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!(
                        "ulimit -n {n} && exec \"$0\" --addr 127.0.0.1:0 --threads 4 \"$@\""
                    ))
                    .arg(&demo)
                    .args(flags);
                c
            }
            None => {
                let mut c = Command::new(&demo);
                c.args(["--addr", "127.0.0.1:0"]).args(flags);
                c
            }
        };
        let server = ChildServer::spawn(cmd);
        let addr = server.addr;
        Demo { server, addr }
    }

    fn alive(&mut self) -> bool {
        matches!(self.server.child.try_wait(), Ok(None))
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.server.child.kill();
        let _ = self.server.child.wait();
    }
}

fn demo_routes(flags: &[&str]) {
    let demo = Demo::start_with(None, flags);
    let mut c = Client::new(demo.addr);
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: d\r\n\r\n").text(),
        "Hello, World!"
    );
    let r = c.roundtrip(b"POST /echo HTTP/1.1\r\nHost: d\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(r.text(), "hello");
    let r = c.roundtrip(b"POST /echo HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhe\r\n3\r\nllo\r\n0\r\n\r\n");
    assert_eq!(r.text(), "hello");
    let started = Instant::now();
    let r = c.roundtrip(b"GET /stream HTTP/1.1\r\nHost: d\r\n\r\n");
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.text().lines().count(), 5);
    assert!(
        started.elapsed() >= Duration::from_millis(350),
        "chunks written over time"
    );
    for code in [204u16, 304, 418] {
        assert_eq!(
            c.roundtrip(format!("GET /status/{code} HTTP/1.1\r\nHost: d\r\n\r\n").as_bytes())
                .status,
            code
        );
    }
    let page = c.roundtrip(b"GET /routes HTTP/1.1\r\nHost: d\r\n\r\n");
    assert!(
        page.header("content-type")
            .is_some_and(|t| t.starts_with("text/html"))
    );
    for route in ["/echo", "/stream", "/status/{code}", "/routes"] {
        assert!(page.text().contains(route), "routes page lists {route}");
    }
    // Routed by a Router: a known path with another method, an unknown path, a bad parameter.
    let r = c.roundtrip(b"DELETE /echo HTTP/1.1\r\nHost: d\r\n\r\n");
    assert_eq!((r.status, r.header("allow")), (405, Some("POST")));
    let r = c.roundtrip(b"POST /routes HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\n\r\n");
    assert_eq!((r.status, r.header("allow")), (405, Some("GET, HEAD")));
    assert_eq!(
        c.roundtrip(b"GET /nope HTTP/1.1\r\nHost: d\r\n\r\n").status,
        404
    );
    assert_eq!(
        c.roundtrip(b"GET /status/abc HTTP/1.1\r\nHost: d\r\n\r\n")
            .status,
        400
    );
}

fn demo_rfc_probes(flags: &[&str]) {
    let demo = Demo::start_with(None, flags);
    let cases: &[(&[u8], u16)] = &[
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"POST /echo HTTP/1.1\r\nHost: d\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        (b"POST /echo HTTP/1.1\r\nHost: d\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
        (b"POST /echo HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: br\r\n\r\n", 501),
        (b"GET / HTTP/1.1\r\nHost: d\r\nX: a\r\n b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost : d\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\nHost: d\r\n\r\n", 505),
        (b"POST /echo HTTP/1.1\r\nHost: d\r\nContent-Length: 99999999999\r\n\r\n", 413),
    ];
    for (req, status) in cases {
        let (r, mut c) = probe(demo.addr, req);
        assert_eq!(r.status, *status, "{}", String::from_utf8_lossy(req));
        assert!(r.closes() && c.is_closed());
    }
    let long = format!("GET /{} HTTP/1.1\r\nHost: d\r\n\r\n", "x".repeat(10_000));
    assert_eq!(probe(demo.addr, long.as_bytes()).0.status, 414);
    let big = format!(
        "GET / HTTP/1.1\r\nHost: d\r\nX: {}\r\n\r\n",
        "x".repeat(40_000)
    );
    assert_eq!(probe(demo.addr, big.as_bytes()).0.status, 431);
    // Keep-alive, HTTP/1.0, HEAD, pipelining, 100-continue.
    let mut c = Client::new(demo.addr);
    c.send(b"GET / HTTP/1.1\r\nHost: d\r\n\r\nHEAD / HTTP/1.1\r\nHost: d\r\n\r\nGET /status/204 HTTP/1.1\r\nHost: d\r\n\r\n");
    assert_eq!(c.response().text(), "Hello, World!");
    let head = c.read_response(true).expect("HEAD response");
    assert_eq!(head.header("content-length"), Some("13"));
    assert_eq!(c.response().status, 204);
    c.send(b"POST /echo HTTP/1.1\r\nHost: d\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
    assert_eq!(c.response().status, 100);
    c.send(b"ok");
    assert_eq!(c.response().text(), "ok");
    let r = c.roundtrip(b"GET / HTTP/1.0\r\n\r\n");
    assert!(r.closes() && c.is_closed());
}

fn accept_loop_survives_descriptor_exhaustion(flags: &[&str]) {
    let mut demo = Demo::start_with(Some(40), flags);
    // Far more connections than the server has descriptors: accept fails with EMFILE.
    let mut flood: Vec<std::net::TcpStream> = Vec::new();
    for _ in 0..120 {
        match std::net::TcpStream::connect(demo.addr) {
            Ok(s) => flood.push(s),
            Err(_) => break,
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(demo.alive(), "server process still running under EMFILE");
    drop(flood);
    // Descriptors come back as the flood closes; the server must serve again by itself.
    let deadline = Instant::now() + Duration::from_secs(20);
    let served = loop {
        let mut c = Client::new(demo.addr);
        c.read_timeout(Duration::from_secs(2));
        if c.try_send(b"GET / HTTP/1.1\r\nHost: d\r\n\r\n")
            && c.read_response(false).is_some_and(|r| r.status == 200)
        {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(served, "served again after exhaustion");
    assert!(demo.alive());
}

/// A whole number from the demo's `/stats` JSON.
fn field(json: &str, key: &str) -> u64 {
    let at = json
        .find(&format!("\"{key}\": "))
        .map(|i| i + key.len() + 4);
    let digits: String = at
        .map(|i| json[i..].chars().take_while(char::is_ascii_digit).collect())
        .unwrap_or_default();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no {key} in {json}"))
}

/// `/stats` counts what is held: 1,000 idle keep-alive connections (each served once) and 100
/// idle WebSockets, plus the probe asking; a refused request is counted by its status.
fn demo_stats_counts_held_connections(flags: &[&str]) {
    support::raise_fd_limit();
    let demo = Demo::start_with(None, flags);
    let mut idle = Vec::new();
    for _ in 0..1000 {
        let mut c = Client::new(demo.addr);
        assert_eq!(c.request("GET /", "").status, 200);
        idle.push(c);
    }
    let sockets: Vec<_> = (0..100)
        .map(|_| {
            let mut s = support::connect(demo.addr);
            support::send(
                &mut s,
                b"GET /ws HTTP/1.1\r\nHost: d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                  Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            );
            assert!(support::read_head(&mut s).starts_with("HTTP/1.1 101 "));
            s
        })
        .collect();
    let (bad, _) = probe(
        demo.addr,
        b"GET / HTTP/1.1\r\nHost: d\r\nContent-Length: x\r\n\r\n",
    );
    assert_eq!(bad.status, 400);
    let mut probe = Client::new(demo.addr);
    let deadline = Instant::now() + Duration::from_secs(20);
    let json = loop {
        let r = probe.request("GET /stats", "");
        assert_eq!(r.header("content-type"), Some("application/json"));
        let json = r.text();
        // The refused connection has closed, the WebSockets have settled.
        let parked = match flags.contains(&"--no-park") || flags.contains(&"reactor") {
            true => 0,
            // A WebSocket's first turn may still be on a worker a moment after its 101.
            false => 1100,
        };
        if field(&json, "active") == 1101
            && field(&json, "websockets") == 100
            && field(&json, "parked") == parked
        {
            break json;
        }
        assert!(Instant::now() < deadline, "{json}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(field(&json, "waiting"), 1000, "{json}");
    assert_eq!(field(&json, "writing"), 1, "the probe: {json}");
    for key in [
        "reading",
        "queued",
        "closing",
        "event_streams",
        "upgraded",
        "panics",
    ] {
        assert_eq!(field(&json, key), 0, "{key}: {json}");
    }
    assert_eq!(field(&json, "accepted"), 1102, "{json}");
    assert_eq!(field(&json, "handled"), 1102, "{json}");
    assert!(field(&json, "requests") >= 1101, "{json}");
    assert_eq!(field(&json, "400"), 1, "{json}");
    let page = probe.request("GET /stats.html", "");
    assert!(page.text().contains("fetch(\"/stats\""));
    drop((idle, sockets));
}

const SERVER: &[&str] = &["--engine", "server"];
const SERVER_NO_PARK: &[&str] = &["--engine", "server", "--no-park", "--threads", "1010"];
const REACTOR_INLINE: &[&str] = &["--engine", "reactor", "--dispatch", "inline"];
const REACTOR_POOL: &[&str] = &[
    "--engine",
    "reactor",
    "--dispatch",
    "pool",
    "--workers",
    "4",
];

macro_rules! per_engine {
    ($($name:ident),*) => {
        mod server { $( #[test] fn $name() { super::$name(super::SERVER) } )* }
        mod reactor_inline { $( #[test] fn $name() { super::$name(super::REACTOR_INLINE) } )* }
        mod reactor_pool { $( #[test] fn $name() { super::$name(super::REACTOR_POOL) } )* }
    };
}

per_engine!(
    demo_routes,
    demo_rfc_probes,
    accept_loop_survives_descriptor_exhaustion,
    demo_stats_counts_held_connections
);

mod server_no_park {
    #[test]
    fn demo_stats_counts_held_connections() {
        super::demo_stats_counts_held_connections(super::SERVER_NO_PARK)
    }
}
