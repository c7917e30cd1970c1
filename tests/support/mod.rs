//! Shared integration-test support: start a server on an ephemeral port in any engine
//! configuration, and talk to it with raw bytes.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use twinhttp::ws::RequestExt;
use twinhttp::{Body, Handler, Limits, MinRate, Request, Response};

pub mod counting;
pub mod logs;
#[cfg(feature = "tls")]
pub mod tls;
pub mod ws_raw;

/// The process's mapped address space, in bytes (`VmSize`): for the tests that lower its
/// limit (`RLIMIT_AS`) to make a thread's stack fail.
#[cfg(target_os = "linux")]
fn mapped() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmSize:"))
        .expect("VmSize");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a number");
    kib * 1024
}

/// Runs `f` with the process's address space limited to what is mapped and `room` bytes more
/// (`RLIMIT_AS`), then restores the limit: room for a few buffers, not for a thread's 2 MiB
/// stack. (A thread's stack fails only while no thread of the process has exited: glibc gives a
/// new thread a cached stack without a mapping.)
#[cfg(target_os = "linux")]
pub fn with_address_space<T>(room: u64, f: impl FnOnce() -> T) -> T {
    until_threads_started();
    let lowered = lower_limit(rustix::process::Resource::As, mapped() + room);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    drop(lowered);
    match outcome {
        Ok(value) => value,
        // Said again once the limit is back: the first report was written without room and
        // may be cut short.
        Err(payload) => {
            let what = match (
                payload.downcast_ref::<String>(),
                payload.downcast_ref::<&str>(),
            ) {
                (Some(s), _) => s.as_str(),
                (None, Some(s)) => s,
                (None, None) => "a panic",
            };
            panic!("failed under a lowered address-space limit: {what}")
        }
    }
}

/// Waits (10 s at most) until every other thread of the process is blocked in a system call:
/// each has then run its start, whose alternative signal stack std maps as the thread begins.
/// A thread spawned just before the address space is limited (an engine's loop that has not
/// run yet on a busy machine) would otherwise fail that mapping and abort the process.
#[cfg(target_os = "linux")]
fn until_threads_started() {
    let me = std::fs::read_link("/proc/thread-self").expect("this thread");
    let me = me.file_name().map(std::ffi::OsStr::to_owned);
    let runnable = || {
        std::fs::read_dir("/proc/self/task")
            .expect("the threads")
            .flatten()
            .filter(|t| Some(t.file_name()) != me)
            .filter(|t| {
                // `running` while it runs or waits to (a number: the call it is blocked in).
                std::fs::read_to_string(t.path().join("syscall"))
                    .is_ok_and(|call| call.starts_with("running"))
            })
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while runnable() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A process limit lowered for a test, restored when dropped: also when the test fails while
/// it holds (as the failure unwinds; the panic's first report is written before, under the
/// lowered limit, which is why `with_address_space` reports it again after).
#[cfg(target_os = "linux")]
pub struct Lowered {
    resource: rustix::process::Resource,
    before: rustix::process::Rlimit,
}

/// Lowers the process's soft limit of `resource` to `current`.
#[cfg(target_os = "linux")]
pub fn lower_limit(resource: rustix::process::Resource, current: u64) -> Lowered {
    use rustix::process::{Rlimit, getrlimit, setrlimit};
    let before = getrlimit(resource);
    let lowered = Rlimit {
        current: Some(current),
        maximum: before.maximum,
    };
    setrlimit(resource, lowered).expect("lower the limit");
    Lowered { resource, before }
}

#[cfg(target_os = "linux")]
impl Drop for Lowered {
    fn drop(&mut self) {
        let before = rustix::process::Rlimit {
            current: self.before.current,
            maximum: self.before.maximum,
        };
        if let Err(e) = rustix::process::setrlimit(self.resource, before) {
            eprintln!("cannot restore a limit: {e}");
        }
    }
}

/// The engine configurations every behaviour test runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Thread-pool server, idle connections parked (the default).
    Server,
    /// Thread-pool server, one worker held per open connection.
    ServerNoPark,
    /// Reactor, handlers on the event loops.
    ReactorInline,
    /// Reactor, handlers on a worker pool.
    ReactorPool,
}

impl Engine {
    /// Every configuration this build has: the server engine's only with the `server` feature.
    pub fn all() -> Vec<Engine> {
        let mut all = vec![Engine::ReactorInline, Engine::ReactorPool];
        if cfg!(feature = "server") {
            all.extend([Engine::Server, Engine::ServerNoPark]);
        }
        all
    }

    pub fn is_reactor(self) -> bool {
        matches!(self, Engine::ReactorInline | Engine::ReactorPool)
    }
}

/// Defines one `#[test]` per engine configuration from one test body `fn(Engine)`.
/// The server engine's configurations exist with the `server` feature only; without it, the
/// reactor's run (a plain `cargo test`).
#[macro_export]
macro_rules! engine_tests {
    ($($name:ident),* $(,)?) => {
        #[cfg(feature = "server")]
        mod server { $( #[test] fn $name() { super::$name($crate::support::Engine::Server) } )* }
        #[cfg(feature = "server")]
        mod server_no_park { $( #[test] fn $name() { super::$name($crate::support::Engine::ServerNoPark) } )* }
        mod reactor_inline { $( #[test] fn $name() { super::$name($crate::support::Engine::ReactorInline) } )* }
        mod reactor_pool { $( #[test] fn $name() { super::$name($crate::support::Engine::ReactorPool) } )* }
    };
}

/// Like [`engine_tests!`], on every configuration that parks what is not a request: all but the
/// server engine with parking off, whose shape is a worker per connection
/// (tests/thread_per_connection.rs).
#[macro_export]
macro_rules! parking_tests {
    ($($name:ident),* $(,)?) => {
        mod parking {
            #[cfg(feature = "server")]
            mod server { $( #[test] fn $name() { super::super::$name($crate::support::Engine::Server) } )* }
            mod reactor_inline { $( #[test] fn $name() { super::super::$name($crate::support::Engine::ReactorInline) } )* }
            mod reactor_pool { $( #[test] fn $name() { super::super::$name($crate::support::Engine::ReactorPool) } )* }
        }
    };
}

/// Engine-independent settings for a test server.
#[derive(Clone, Debug)]
pub struct Config {
    pub limits: Limits,
    pub workers: usize,
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub body_rate: Option<MinRate>,
    pub response_rate: Option<MinRate>,
    /// Log every exchange to `twinhttp::access`.
    pub access_log: bool,
    /// Serve TLS with this configuration (feature `tls`).
    #[cfg(feature = "tls")]
    pub tls: Option<std::sync::Arc<twinhttp::tls::rustls::ServerConfig>>,
    /// Require a PROXY protocol header on every connection.
    pub proxy_protocol: bool,
    /// Believe these proxies' forwarded headers.
    pub trusted_proxies: twinhttp::TrustedProxies,
    /// The server's memory budget, in bytes.
    pub memory_budget: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            limits: Limits::default(),
            workers: 4,
            max_connections: 1000,
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(10),
            body_rate: Some(MinRate::default()),
            response_rate: Some(MinRate::default()),
            access_log: false,
            #[cfg(feature = "tls")]
            tls: None,
            proxy_protocol: false,
            trusted_proxies: twinhttp::TrustedProxies::new(),
            memory_budget: 256 << 20,
        }
    }
}

enum Running {
    #[cfg(feature = "server")]
    Server(twinhttp::server::Server),
    Reactor(twinhttp::reactor::Reactor),
}

/// A running test server; shut down (with a deadline) when dropped.
pub struct TestServer {
    /// The TCP address (`0.0.0.0:0` on a Unix socket).
    pub addr: SocketAddr,
    /// Where it listens, TCP or Unix.
    pub address: Option<twinhttp::Address>,
    running: Option<Running>,
}

impl TestServer {
    /// Graceful shutdown with `grace`; returns whether it finished in time.
    pub fn shutdown(mut self, grace: Duration) -> Result<(), twinhttp::Error> {
        match self.running.take() {
            #[cfg(feature = "server")]
            Some(Running::Server(s)) => s.shutdown(grace),
            Some(Running::Reactor(r)) => r.shutdown(grace),
            None => Ok(()),
        }
    }

    /// Blocks until the shutdown a [`shutdown_handle`](Self::shutdown_handle) began is done,
    /// every thread joined (the engine's `wait`).
    pub fn wait(mut self) {
        match self.running.take() {
            #[cfg(feature = "server")]
            Some(Running::Server(s)) => s.wait(),
            Some(Running::Reactor(r)) => r.wait(),
            None => {}
        }
    }

    /// A handle that begins the shutdown from any thread.
    pub fn shutdown_handle(&self) -> twinhttp::ShutdownHandle {
        match &self.running {
            #[cfg(feature = "server")]
            Some(Running::Server(s)) => s.shutdown_handle(),
            Some(Running::Reactor(r)) => r.shutdown_handle(),
            None => unreachable!("a running server"),
        }
    }

    /// The engine's live counters.
    pub fn stats(&self) -> twinhttp::stats::Stats {
        match &self.running {
            #[cfg(feature = "server")]
            Some(Running::Server(s)) => s.stats(),
            Some(Running::Reactor(r)) => r.stats(),
            None => twinhttp::stats::Stats::default(),
        }
    }

    /// Polls the live counters until `ok` holds ([`stats_until`]).
    pub fn stats_until(
        &self,
        what: &str,
        ok: impl Fn(&twinhttp::stats::Stats) -> bool,
    ) -> twinhttp::stats::Stats {
        stats_until(|| self.stats(), what, ok)
    }

    /// Waits (bounded: 10 s, then fails the test) until the server has no open connection.
    pub fn until_none_open(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.open_connections() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "a connection never closed"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn open_connections(&self) -> usize {
        match &self.running {
            #[cfg(feature = "server")]
            Some(Running::Server(s)) => s.open_connections(),
            Some(Running::Reactor(r)) => r.open_connections(),
            None => 0,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            let _ = match r {
                #[cfg(feature = "server")]
                Running::Server(s) => s.shutdown(Duration::from_secs(5)),
                Running::Reactor(r) => r.shutdown(Duration::from_secs(5)),
            };
        }
    }
}

pub fn start(engine: Engine, handler: impl Handler) -> TestServer {
    start_with(engine, Config::default(), handler)
}

pub fn start_with(engine: Engine, cfg: Config, handler: impl Handler) -> TestServer {
    start_on(engine, cfg, On::Tcp, handler)
}

/// Where a test server listens.
pub enum On {
    /// An ephemeral port on 127.0.0.1, bound by the engine.
    Tcp,
    /// A Unix domain socket at this path, bound by the engine.
    Unix(std::path::PathBuf),
    /// A listener the test bound.
    Listener(twinhttp::Listener),
}

pub fn start_on(engine: Engine, cfg: Config, on: On, handler: impl Handler) -> TestServer {
    let running = match engine {
        #[cfg(not(feature = "server"))]
        Engine::Server | Engine::ServerNoPark => {
            unreachable!("the server engine needs the `server` feature")
        }
        #[cfg(feature = "server")]
        Engine::Server | Engine::ServerNoPark => Running::Server({
            let b = twinhttp::server::Server::builder()
                .workers(cfg.workers)
                .max_connections(cfg.max_connections)
                .header_read_timeout(cfg.header_read_timeout)
                .idle_timeout(cfg.idle_timeout)
                .min_request_body_rate(cfg.body_rate)
                .min_response_rate(cfg.response_rate)
                .limits(cfg.limits)
                .access_log(cfg.access_log)
                .proxy_protocol(cfg.proxy_protocol)
                .trusted_proxies(cfg.trusted_proxies.clone())
                .memory_budget(cfg.memory_budget)
                .parking(match engine {
                    Engine::Server => twinhttp::server::Parking::All,
                    _ => twinhttp::server::Parking::Off,
                });
            #[cfg(feature = "tls")]
            let b = match cfg.tls.clone() {
                Some(config) => b.tls(config),
                None => b,
            };
            match on {
                On::Tcp => b.serve("127.0.0.1:0", handler),
                On::Unix(path) => b.serve_unix(path, handler),
                On::Listener(l) => b.serve_listener(l, handler),
            }
            .expect("server starts")
        }),
        Engine::ReactorInline | Engine::ReactorPool => Running::Reactor({
            let b = twinhttp::reactor::Reactor::builder()
                .loops(2)
                .dispatch(match engine {
                    Engine::ReactorPool => twinhttp::reactor::Dispatch::Pool(cfg.workers),
                    _ => twinhttp::reactor::Dispatch::Inline,
                })
                .max_connections(cfg.max_connections)
                .header_read_timeout(cfg.header_read_timeout)
                .idle_timeout(cfg.idle_timeout)
                .min_request_body_rate(cfg.body_rate)
                .min_response_rate(cfg.response_rate)
                .limits(cfg.limits)
                .access_log(cfg.access_log)
                .proxy_protocol(cfg.proxy_protocol)
                .trusted_proxies(cfg.trusted_proxies.clone())
                .memory_budget(cfg.memory_budget);
            #[cfg(feature = "tls")]
            let b = match cfg.tls.clone() {
                Some(config) => b.tls(config),
                None => b,
            };
            match on {
                On::Tcp => b.serve("127.0.0.1:0", handler),
                On::Unix(path) => b.serve_unix(path, handler),
                On::Listener(l) => b.serve_listener(l, handler),
            }
            .expect("reactor starts")
        }),
    };
    let (addr, address) = match &running {
        #[cfg(feature = "server")]
        Running::Server(s) => (s.local_addr(), s.address().clone()),
        Running::Reactor(r) => (r.local_addr(), r.address().clone()),
    };
    TestServer {
        addr,
        address: Some(address),
        running: Some(running),
    }
}

/// A WebSocket that echoes every message, or the refusal of an upgrade that is not one.
pub fn echo_websocket(req: &mut Request<'_>) -> Response {
    match req.upgrade_websocket() {
        Ok(u) => u.accept(
            |ws: &twinhttp::ws::WsSender, msg: twinhttp::ws::WsMessage| {
                let _ = ws.send(msg);
            },
        ),
        Err(refusal) => refusal,
    }
}

/// The test application: the demo's routes, plus a few for edge cases.
pub fn app(req: &mut Request<'_>) -> Response {
    match req.path() {
        "/" => Response::text("Hello, World!"),
        "/echo" => match req.read_body() {
            Ok(b) => Response::new(200).with_body(b),
            Err(_) => Response::new(400),
        },
        "/len" => {
            // Reads the body in small pieces and answers with its length.
            let mut n = 0usize;
            let mut buf = [0u8; 7];
            loop {
                match req.body().read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(_) => return Response::new(400),
                }
            }
            Response::text(n.to_string())
        }
        "/ignore-body" => Response::text("ignored"),
        "/stream" => Response::text(Body::chunks(
            (1..=3).map(|i| format!("part{i};").into_bytes()),
        )),
        "/reader" => Response::new(200).with_body(Body::reader(std::io::Cursor::new(
            b"from a reader".to_vec(),
        ))),
        "/sized" => Response::new(200).with_body(Body::sized_reader(
            std::io::Cursor::new(b"0123456789".to_vec()),
            10,
        )),
        "/short" => Response::new(200).with_body(Body::sized_reader(
            std::io::Cursor::new(b"0123".to_vec()),
            10,
        )),
        "/close" => Response::text("bye").with_header("Connection", "close"),
        "/panic" => panic!("handler panic on purpose"),
        "/sleep" => {
            let ms = req
                .query_param("ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(100);
            std::thread::sleep(Duration::from_millis(ms));
            Response::text("slept")
        }
        p if p.starts_with("/status/") => Response::new(p[8..].parse().unwrap_or(400)),
        "/method" => Response::text(req.method().to_owned()),
        _ => Response::new(404),
    }
}

/// Reads a response head off `s` byte by byte, so nothing after it is consumed (a 101 has no body
/// to frame); stops early at the end of the stream.
pub fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// A client socket with a read timeout, so a broken server fails a test instead of hanging it.
pub fn connect(addr: SocketAddr) -> TcpStream {
    ready(TcpStream::connect(addr).expect("connect"))
}

/// A connected client socket given the read timeout and `TCP_NODELAY` every test client has.
pub fn ready(s: TcpStream) -> TcpStream {
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

pub fn send(s: &mut TcpStream, bytes: &[u8]) {
    s.write_all(bytes).expect("send");
}

/// A response as read off the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raw {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Raw {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// A reader of responses on one connection (keeps bytes read past a response for the next):
/// TCP unless made with [`Client::unix`].
pub struct Client<S = TcpStream> {
    pub reader: BufReader<S>,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Client {
        Client::of(connect(addr))
    }

    /// A client on a socket already connected (and [`ready`]).
    pub fn of(s: TcpStream) -> Client {
        Client {
            reader: BufReader::new(s),
        }
    }
}

impl Client<UnixStream> {
    /// A client of a server on a Unix domain socket, with a read timeout.
    pub fn unix(path: &Path) -> Client<UnixStream> {
        let s = UnixStream::connect(path).expect("connect to the Unix socket");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Client {
            reader: BufReader::new(s),
        }
    }
}

impl<S: Read + Write> Client<S> {
    pub fn send(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).expect("send");
    }

    /// Sends `bytes`; false when the server has closed the connection (for load loops).
    pub fn try_send(&mut self, bytes: &[u8]) -> bool {
        self.reader.get_mut().write_all(bytes).is_ok()
    }

    /// Sends `bytes` and reads one response (to a request that is not HEAD).
    pub fn roundtrip(&mut self, bytes: &[u8]) -> Raw {
        self.send(bytes);
        self.response()
    }

    /// Sends `line` (a method and a target) as an HTTP/1.1 request with `Host` and `fields` (each
    /// ending in CRLF) and no body, and reads the response.
    pub fn request(&mut self, line: &str, fields: &str) -> Raw {
        self.roundtrip(format!("{line} HTTP/1.1\r\nHost: t\r\n{fields}\r\n").as_bytes())
    }

    pub fn response(&mut self) -> Raw {
        self.read_response(false).expect("a response")
    }

    /// Reads one response; `head_request` means no body follows whatever the framing says.
    pub fn read_response(&mut self, head_request: bool) -> Option<Raw> {
        let mut head = Vec::new();
        loop {
            let mut line = Vec::new();
            let n = self.reader.read_until(b'\n', &mut line).ok()?;
            if n == 0 {
                return None;
            }
            head.extend_from_slice(&line);
            if line == b"\r\n" {
                break;
            }
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Response::new(&mut headers);
        r.parse(&head).ok()?;
        let status = r.code?;
        let headers: Vec<(String, String)> = r
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_owned(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect();
        let mut raw = Raw {
            status,
            headers,
            body: Vec::new(),
        };
        if head_request || status < 200 || status == 204 || status == 304 {
            return Some(raw);
        }
        if let Some(len) = raw.header("content-length") {
            let len: usize = len.parse().ok()?;
            raw.body = vec![0; len];
            self.reader.read_exact(&mut raw.body).ok()?;
        } else if raw.header("transfer-encoding").is_some() {
            loop {
                let mut line = String::new();
                self.reader.read_line(&mut line).ok()?;
                let size = usize::from_str_radix(line.trim_end().split(';').next()?, 16).ok()?;
                if size == 0 {
                    let mut end = String::new();
                    self.reader.read_line(&mut end).ok()?;
                    break;
                }
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk).ok()?;
                raw.body.extend_from_slice(&chunk[..size]);
            }
        } else {
            self.reader.read_to_end(&mut raw.body).ok()?;
        }
        Some(raw)
    }
}

impl Client {
    /// True when the server closed the connection (EOF or reset) within the read timeout;
    /// false when bytes arrive or the timeout passes with the connection open.
    pub fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.reader.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    }

    /// Sets the read timeout (for checks that the server keeps a connection open).
    pub fn read_timeout(&mut self, t: Duration) {
        self.reader
            .get_ref()
            .set_read_timeout(Some(t))
            .expect("timeout");
    }
}

/// Sends raw bytes on a fresh connection and reads one response.
pub fn probe(addr: SocketAddr, bytes: &[u8]) -> (Raw, Client) {
    let mut c = Client::new(addr);
    let r = c.roundtrip(bytes);
    (r, c)
}

/// Polls a server's live counters (`stats`) until `ok` holds, and returns them; after 20 s
/// fails the test with `what` and the last counters.
pub fn stats_until(
    stats: impl Fn() -> twinhttp::stats::Stats,
    what: &str,
    ok: impl Fn(&twinhttp::stats::Stats) -> bool,
) -> twinhttp::stats::Stats {
    stats_within(Duration::from_secs(20), stats, what, ok)
}

/// [`stats_until`] with a `limit` of its own: where how soon is what the test asserts.
pub fn stats_within(
    limit: Duration,
    stats: impl Fn() -> twinhttp::stats::Stats,
    what: &str,
    ok: impl Fn(&twinhttp::stats::Stats) -> bool,
) -> twinhttp::stats::Stats {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let s = stats();
        if ok(&s) {
            return s;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: {s:#?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits (bounded) until the server counts `n` open connections: every client opened before has
/// been accepted, so a client opened after really comes after them.
pub fn wait_open(srv: &TestServer, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while srv.open_connections() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of {n} connections open",
            srv.open_connections()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The ids of the first two events of the demo's `/sse` (ids 1, 2, … a few times a second),
/// over any stream.
pub fn event_ids(mut stream: impl Read + Write) -> Vec<String> {
    stream
        .write_all(b"GET /sse HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send");
    let mut ids = Vec::new();
    for line in BufReader::new(stream).lines() {
        let line = line.expect("an event line");
        if let Some(id) = line.strip_prefix("id: ") {
            ids.push(id.to_owned());
            if ids.len() == 2 {
                break;
            }
        }
    }
    ids
}

/// Threads of this process, from /proc (Linux only: the tests that count threads are gated).
#[cfg(target_os = "linux")]
pub fn thread_count() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Threads:")
                    .map(|v| v.trim().parse().unwrap_or(0))
            })
        })
        .unwrap_or(0)
}

/// Raises this process's open-files soft limit to the hard limit (tests holding 1,000
/// connections need both ends' descriptors).
pub fn raise_fd_limit() {
    let mut lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    lim.current = lim.maximum;
    let _ = rustix::process::setrlimit(rustix::process::Resource::Nofile, lim);
}
