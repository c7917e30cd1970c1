//! Server-sent events over real sockets on every engine configuration: events pushed from
//! another thread, Last-Event-ID, heartbeats, the client going away, the sender ending the
//! stream (closed, or every clone dropped), and server shutdown.
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::{Engine, TestServer, connect, start};
use twinhttp::sse::{Event, SendError, SseConfig, SseSender};
use twinhttp::{Request, Response};

/// A stream whose sender goes to the test through `tx`; `/beat` has a 100 ms heartbeat.
fn server(engine: Engine) -> (TestServer, mpsc::Receiver<(SseSender, Option<String>)>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let srv = start(engine, move |req: &mut Request<'_>| {
        let config = match req.path() {
            "/beat" => SseConfig::default().heartbeat(Some(Duration::from_millis(100))),
            _ => SseConfig::default(),
        };
        let (resp, sender) = Response::event_stream_with(config);
        let last = req.last_event_id().map(str::to_owned);
        let _ = tx.lock().expect("lock").send((sender, last));
        resp
    });
    (srv, rx)
}

/// Reads the response head, then de-chunks the body as it arrives.
struct Stream {
    sock: TcpStream,
    raw: Vec<u8>,
    head: String,
}

impl Stream {
    fn open(srv: &TestServer, path: &str, extra: &str) -> Stream {
        let mut sock = connect(srv.addr);
        sock.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").as_bytes())
            .expect("send");
        let mut s = Stream {
            sock,
            raw: Vec::new(),
            head: String::new(),
        };
        while !s.raw.windows(4).any(|w| w == b"\r\n\r\n") {
            assert!(s.fill(), "head");
        }
        let end = s.raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
        s.head = String::from_utf8_lossy(&s.raw[..end]).to_ascii_lowercase();
        s.raw.drain(..end + 4);
        s
    }

    fn fill(&mut self) -> bool {
        let mut buf = [0u8; 4096];
        match self.sock.read(&mut buf) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.raw.extend_from_slice(&buf[..n]);
                true
            }
        }
    }

    /// The next chunk's payload; `None` at the last chunk or end of input.
    fn chunk(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(line_end) = self.raw.windows(2).position(|w| w == b"\r\n") {
                let size = usize::from_str_radix(
                    std::str::from_utf8(&self.raw[..line_end]).expect("size"),
                    16,
                )
                .expect("hex size");
                if self.raw.len() >= line_end + 2 + size + 2 {
                    let data = self.raw[line_end + 2..line_end + 2 + size].to_vec();
                    self.raw.drain(..line_end + 2 + size + 2);
                    return (size > 0).then_some(data);
                }
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// Reads until `n` complete events (blank-line terminated blocks) arrived.
    fn events(&mut self, n: usize) -> String {
        let mut text = String::new();
        while text.matches("\n\n").count() < n {
            let chunk = self.chunk().expect("more events");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        text
    }

    /// True when the stream ends with the last chunk and the connection closes.
    fn ends(&mut self) -> bool {
        while self.chunk().is_some() {}
        !self.fill()
    }
}

fn events_pushed_from_another_thread(engine: Engine) {
    let (srv, rx) = server(engine);
    let mut s = Stream::open(&srv, "/", "");
    assert!(s.head.starts_with("http/1.1 200"), "{}", s.head);
    assert!(s.head.contains("content-type: text/event-stream"));
    assert!(s.head.contains("transfer-encoding: chunked"));
    assert!(s.head.contains("cache-control: no-cache"));
    let (sender, last) = rx.recv_timeout(Duration::from_secs(5)).expect("sender");
    assert_eq!(last, None);
    std::thread::spawn(move || {
        for i in 1..=3 {
            let ev = Event::data(format!("line {i}\nsecond"))
                .id(i.to_string())
                .event("tick");
            sender.send(ev).expect("send");
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let text = s.events(3);
    assert_eq!(
        text,
        "id: 1\nevent: tick\ndata: line 1\ndata: second\n\n\
         id: 2\nevent: tick\ndata: line 2\ndata: second\n\n\
         id: 3\nevent: tick\ndata: line 3\ndata: second\n\n"
    );
}

fn last_event_id_reaches_the_handler(engine: Engine) {
    let (srv, rx) = server(engine);
    let _s = Stream::open(&srv, "/", "Last-Event-ID: 41\r\n");
    let (_, last) = rx.recv_timeout(Duration::from_secs(5)).expect("sender");
    assert_eq!(last.as_deref(), Some("41"));
}

fn heartbeats_keep_a_quiet_stream_alive(engine: Engine) {
    let (srv, rx) = server(engine);
    let mut s = Stream::open(&srv, "/beat", "");
    let (_sender, _) = rx.recv_timeout(Duration::from_secs(5)).expect("sender");
    let started = Instant::now();
    assert_eq!(s.events(2), ":\n\n:\n\n");
    assert!(started.elapsed() >= Duration::from_millis(150));
}

fn the_sender_reports_a_client_that_went_away(engine: Engine) {
    let (srv, rx) = server(engine);
    let mut s = Stream::open(&srv, "/", "");
    let (sender, _) = rx.recv_timeout(Duration::from_secs(5)).expect("sender");
    sender.send(Event::data("one")).expect("send");
    assert_eq!(s.events(1), "data: one\n\n");
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match sender.send(Event::data("more")) {
            Err(SendError::Closed) => break,
            _ if Instant::now() > deadline => panic!("the sender never saw the client go"),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    assert!(sender.is_closed());
    // The server still serves.
    let mut s = Stream::open(&srv, "/", "");
    let (sender, _) = rx.recv_timeout(Duration::from_secs(5)).expect("sender");
    sender.send(Event::data("two")).expect("send");
    assert_eq!(s.events(1), "data: two\n\n");
}

fn the_sender_ends_the_stream(engine: Engine) {
    let (srv, rx) = server(engine);
    let mut s = Stream::open(&srv, "/", "");
    let (sender, _) = rx.recv_timeout(Duration::from_secs(5)).expect("sender");
    sender.send(Event::data("last")).expect("send");
    sender.close();
    assert_eq!(s.events(1), "data: last\n\n");
    assert!(s.ends(), "last chunk, then the connection closes");
    assert_eq!(sender.send(Event::data("x")), Err(SendError::Closed));
}

fn dropping_every_sender_ends_the_stream(engine: Engine) {
    let (srv, rx) = server(engine);
    let mut s = Stream::open(&srv, "/", "");
    let (sender, _) = rx.recv_timeout(Duration::from_secs(5)).expect("sender");
    let other = sender.clone();
    sender.send(Event::data("one")).expect("send");
    assert_eq!(s.events(1), "data: one\n\n");
    drop(sender);
    other.send(Event::data("two")).expect("a clone still sends");
    assert_eq!(s.events(1), "data: two\n\n");
    // Dropped from another thread while the stream waits: it wakes and ends.
    std::thread::spawn(move || drop(other))
        .join()
        .expect("dropped");
    assert!(s.ends(), "last chunk, then the connection closes");
}

fn shutdown_ends_open_streams(engine: Engine) {
    let (srv, rx) = server(engine);
    let mut s = Stream::open(&srv, "/", "");
    let (sender, _) = rx.recv_timeout(Duration::from_secs(5)).expect("sender");
    sender.send(Event::data("before")).expect("send");
    assert_eq!(s.events(1), "data: before\n\n");
    srv.shutdown(Duration::from_secs(5))
        .expect("shutdown in time");
    assert!(s.ends());
    assert_eq!(sender.send(Event::data("x")), Err(SendError::Closed));
}

/// A client that does not take what is queued (no minimum rate here, so only the shutdown can
/// end it) holds the shutdown no longer than the stream's shutdown timeout: the stream is closed
/// with what is left, and the shutdown ends well within its grace.
fn shutdown_closes_a_stream_its_client_does_not_drain(engine: Engine) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let srv = support::start_with(
        engine,
        support::Config {
            response_rate: None,
            ..support::Config::default()
        },
        move |_: &mut Request<'_>| {
            let config = SseConfig::default()
                .max_queue(64 << 20)
                .shutdown_timeout(Duration::from_millis(500));
            let (resp, sender) = Response::event_stream_with(config);
            let _ = tx.lock().expect("lock").send(sender);
            resp
        },
    );
    let mut s = Stream::open(&srv, "/", "");
    let sender = rx.recv_timeout(Duration::from_secs(5)).expect("sender");
    // More than the sockets' buffers hold: the client reads none of it.
    let event = Event::data("x".repeat(64 * 1024));
    for _ in 0..256 {
        sender.send(event.clone()).expect("queued");
    }
    srv.stats_until("an event stream", |st| st.event_streams == 1);
    let began = Instant::now();
    srv.shutdown(Duration::from_secs(20))
        .expect("shutdown in time");
    let took = began.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "the shutdown took {took:?}: the stream's 500 ms timeout did not end it"
    );
    assert!(
        took >= Duration::from_millis(400),
        "closed at once: {took:?}"
    );
    // Closed with what was left: the client never sees the last chunk.
    s.sock
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut buf = vec![0u8; 1 << 20];
    let mut tail = Vec::new();
    loop {
        match s.sock.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                tail.drain(..tail.len().saturating_sub(16));
            }
            Err(e) => panic!("the connection was not closed: {e}"),
        }
    }
    assert!(!tail.ends_with(b"0\r\n\r\n"), "cut, not ended: {tail:?}");
}

fn a_head_request_closes_the_sender(engine: Engine) {
    let (srv, rx) = server(engine);
    let mut sock = connect(srv.addr);
    sock.write_all(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("send");
    let (sender, _) = rx.recv_timeout(Duration::from_secs(5)).expect("sender");
    let deadline = Instant::now() + Duration::from_secs(5);
    while sender.send(Event::data("x")) != Err(SendError::Closed) {
        assert!(Instant::now() < deadline, "sender never closed");
        std::thread::sleep(Duration::from_millis(10));
    }
}

engine_tests!(
    events_pushed_from_another_thread,
    last_event_id_reaches_the_handler,
    heartbeats_keep_a_quiet_stream_alive,
    the_sender_reports_a_client_that_went_away,
    the_sender_ends_the_stream,
    dropping_every_sender_ends_the_stream,
    shutdown_ends_open_streams,
    shutdown_closes_a_stream_its_client_does_not_drain,
    a_head_request_closes_the_sender,
);
