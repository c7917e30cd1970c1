//! TLS on every engine configuration, over a real rustls client: the core HTTP behaviours
//! (keep-alive, pipelining, chunked both ways, `100-continue`, error statuses, streamed and
//! sized bodies), WebSocket over TLS, graceful shutdown with `close_notify`, and bad input: bytes
//! that are not TLS, a ClientHello trickled a byte at a time, a handshake that stops half-way,
//! and many silent connections that must not keep a new client from being served (on every
//! configuration that parks connections).
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::tls::{Pki, TlsStream as TlsClient};
use support::{Config, Engine, app, echo_websocket, start_with};

/// A TLS server of `handler` with the default settings.
fn tls_serving(engine: Engine, pki: &Pki, handler: impl twinhttp::Handler) -> support::TestServer {
    start_with(
        engine,
        Config {
            tls: Some(pki.server.clone()),
            ..Config::default()
        },
        handler,
    )
}

fn tls_server(engine: Engine, pki: &Pki, cfg: Config) -> support::TestServer {
    start_with(
        engine,
        Config {
            tls: Some(pki.server.clone()),
            ..cfg
        },
        app,
    )
}

/// A TLS server and a client it has answered once (the handshake is done).
fn served_once(engine: Engine, pki: &Pki) -> (support::TestServer, support::Client<TlsClient>) {
    let srv = tls_server(engine, pki, Config::default());
    let mut c = pki.client(srv.addr);
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    (srv, c)
}

fn keep_alive_and_pipelining(engine: Engine) {
    let pki = Pki::new();
    let srv = tls_server(engine, &pki, Config::default());
    let mut c = pki.client(srv.addr);
    let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "Hello, World!"));
    // Three requests in one write: three responses in order on the same TLS session.
    c.send_all(
        b"GET /status/201 HTTP/1.1\r\nHost: t\r\n\r\nGET /method HTTP/1.1\r\nHost: t\r\n\r\nGET /status/202 HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    assert_eq!(c.response().status, 201);
    assert_eq!(c.response().text(), "GET");
    assert_eq!(c.response().status, 202);
    assert_eq!(srv.open_connections(), 1, "one connection throughout");
}

fn bodies_both_ways(engine: Engine) {
    let pki = Pki::new();
    let srv = tls_server(engine, &pki, Config::default());
    let mut c = pki.client(srv.addr);
    // A chunked request body in, echoed; a chunked response out.
    let r = c.roundtrip(
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    );
    assert_eq!((r.status, r.text().as_str()), (200, "hello world"));
    let r = c.roundtrip(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.text(), "part1;part2;part3;");
    let r = c.roundtrip(b"GET /sized HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.text(), "0123456789");
    // A body larger than one TLS record (16 KiB) both ways.
    let big = vec![b'x'; 100_000];
    let mut req = format!(
        "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        big.len()
    )
    .into_bytes();
    req.extend_from_slice(&big);
    let r = c.roundtrip(&req);
    assert_eq!((r.status, r.body.len()), (200, big.len()));
}

fn expect_continue(engine: Engine) {
    let pki = Pki::new();
    let srv = tls_server(engine, &pki, Config::default());
    let mut c = pki.client(srv.addr);
    c.send_all(
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    );
    let interim = c.read_response(false).expect("100 Continue");
    assert_eq!(interim.status, 100);
    c.send_all(b"hello");
    let r = c.response();
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
}

fn error_status_closes_cleanly(engine: Engine) {
    let pki = Pki::new();
    let srv = tls_server(engine, &pki, Config::default());
    let mut c = pki.client(srv.addr);
    let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n");
    assert_eq!(r.status, 400);
    assert!(r.closes());
    // The lingering close sends close_notify before the end of the stream.
    assert!(c.closed_cleanly(), "close_notify, then EOF");
}

/// The limits answer with their statuses over TLS as over TCP, each closing the connection with
/// `close_notify` after its lingering close.
fn limits_answer_their_statuses(engine: Engine) {
    let pki = Pki::new();
    let mut limits = twinhttp::Limits::default();
    limits.max_target_bytes = 100;
    limits.max_head_bytes = 1024;
    limits.max_body_bytes = 1000;
    let cfg = Config {
        limits,
        ..Config::default()
    };
    let srv = tls_server(engine, &pki, cfg);
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(150));
    let big_head = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX: {}\r\n\r\n",
        "b".repeat(2000)
    );
    let big_body = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n".to_owned();
    for (req, status) in [(long_target, 414), (big_head, 431), (big_body, 413)] {
        let mut c = pki.client(srv.addr);
        let r = c.roundtrip(req.as_bytes());
        assert_eq!((r.status, r.closes()), (status, true), "{engine:?}");
        assert!(c.closed_cleanly(), "{status}: close_notify, then the end");
    }
}

fn websocket_over_tls(engine: Engine) {
    let pki = Pki::new();
    let srv = tls_serving(engine, &pki, echo_websocket);
    let stream = pki.connect(srv.addr);
    let (mut ws, resp) = tungstenite::client("wss://localhost/", stream).expect("wss handshake");
    assert_eq!(resp.status(), 101);
    for text in ["one", "two", &"x".repeat(40_000)] {
        ws.send(tungstenite::Message::text(text)).expect("send");
        let back = ws.read().expect("echo");
        assert_eq!(back.into_text().expect("text").as_str(), text);
    }
    ws.close(None).expect("close");
    while ws.read().is_ok() {}
}

/// A file over TLS: the server engine cannot `sendfile(2)` into an encrypted stream, so it copies
/// through the transport; the bytes and a range must come out the same.
fn files_are_copied_through_tls(engine: Engine) {
    let pki = Pki::new();
    let path = std::env::temp_dir().join(format!(
        "twinhttp-tls-file-{}-{engine:?}.bin",
        std::process::id()
    ));
    let bytes: Vec<u8> = (0..300_000).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &bytes).expect("write the file");
    let served = path.clone();
    let srv = tls_serving(engine, &pki, move |req: &mut twinhttp::Request<'_>| {
        twinhttp::Response::file(req, &served)
    });
    let mut c = pki.client(srv.addr);
    let r = c.roundtrip(b"GET /f HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(
        r.body == bytes,
        "the whole file, {} of {} bytes",
        r.body.len(),
        bytes.len()
    );
    let r = c.roundtrip(b"GET /f HTTP/1.1\r\nHost: t\r\nRange: bytes=100000-100009\r\n\r\n");
    assert_eq!((r.status, &r.body[..]), (206, &bytes[100_000..100_010]));
    let _ = std::fs::remove_file(&path);
}

/// A request and the client's `close_notify` in one write, the socket left open: the server
/// answers, then ends the session at once (rustls took the end off the socket, which will not
/// report it again), not at the idle timeout.
fn close_notify_behind_a_request_ends_the_connection(engine: Engine) {
    let pki = Pki::new();
    let idle = Duration::from_secs(60);
    let srv = tls_server(
        engine,
        &pki,
        Config {
            idle_timeout: idle,
            ..Config::default()
        },
    );
    let mut c = pki.client(srv.addr);
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let tls = c.reader.get_mut();
    let sent = support::tls::write_in_one(tls, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n", true);
    assert_eq!(c.response().status, 200);
    assert!(c.closed_cleanly(), "close_notify, then EOF");
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
}

fn shutdown_sends_close_notify(engine: Engine) {
    let pki = Pki::new();
    let (srv, mut c) = served_once(engine, &pki);
    srv.shutdown(Duration::from_secs(5)).expect("graceful");
    assert!(
        c.closed_cleanly(),
        "an idle TLS connection ends with close_notify"
    );
}

fn not_tls_is_refused_and_the_server_goes_on(engine: Engine) {
    let pki = Pki::new();
    let srv = tls_server(engine, &pki, Config::default());
    let mut raw = TcpStream::connect(srv.addr).expect("connect");
    raw.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let start = Instant::now();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("send");
    // rustls answers a record that is not TLS with an alert (a TLS record: content type 21),
    // then the connection closes at once: an end of stream, not the read timeout.
    let mut back = Vec::new();
    let ended = raw.read_to_end(&mut back);
    assert!(
        ended.is_ok() || back.first() == Some(&21),
        "the connection ends: {ended:?}"
    );
    assert_eq!(back.first(), Some(&21), "an alert, not HTTP: {back:?}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "refused at once, not at a deadline: {:?}",
        start.elapsed()
    );
    let mut c = pki.client(srv.addr);
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
}

/// 64 pipelined requests of 256 bytes in one TLS record: the engines' 8 KiB read buffers end
/// exactly after the 32nd, and the rest waits decrypted inside rustls, which no socket event
/// announces (a thread-per-connection worker used to wait on the socket before reading it).
fn pipelined_requests_across_a_buffer_boundary(engine: Engine) {
    let pki = Pki::new();
    let (_srv, mut c) = served_once(engine, &pki);
    let base = b"GET / HTTP/1.1\r\nHost: t\r\nX-Pad: \r\n\r\n".len();
    let one = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Pad: {}\r\n\r\n",
        "p".repeat(256 - base)
    );
    assert_eq!(one.len(), 256);
    c.send_all(one.repeat(64).as_bytes());
    for i in 1..=64 {
        let r = c
            .read_response(false)
            .unwrap_or_else(|| panic!("response {i} of 64 never came"));
        assert_eq!(r.status, 200);
    }
}

/// A cut close-delimited body (HTTP/1.0, a body reader that fails) must not end with
/// `close_notify`: the client would take the truncated body for a complete one.
fn truncated_close_delimited_body_is_not_a_clean_close(engine: Engine) {
    struct Failing(usize);
    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::Error::other("the backend went away"));
            }
            let n = buf.len().min(self.0).min(1000);
            buf[..n].fill(b'a');
            self.0 -= n;
            Ok(n)
        }
    }
    let pki = Pki::new();
    let srv = tls_serving(engine, &pki, |_: &mut twinhttp::Request<'_>| {
        twinhttp::Response::new(200).with_body(twinhttp::Body::reader(Failing(5000)))
    });
    let mut s = pki.connect(srv.addr);
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").expect("send");
    s.flush().expect("flush");
    let mut back = Vec::new();
    let ended = s.read_to_end(&mut back);
    let text = String::from_utf8_lossy(&back).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 200"), "{text:?}");
    assert!(
        !text.contains("content-length") && !text.contains("chunked"),
        "close-delimited: {text:?}"
    );
    assert!(
        ended.is_err(),
        "a cut body ended with close_notify (a clean end), {} bytes",
        back.len()
    );
}

/// A certificate larger than the socket takes: the server's first flight goes out over several
/// writable wake-ups, while the engine waits for the client's next bytes, which only come once
/// the flight is complete.
fn large_handshake_flight_completes(engine: Engine) {
    use twinhttp::tls::rustls;
    let big = support::tls::Pki::with_names(
        std::iter::once("localhost".to_owned())
            .chain((0..1800).map(|i| format!("host-{i:04}.example.test")))
            .collect(),
    );
    let (listener, addr) = support::tls::small_send_buffer_listener();
    let srv = support::start_on(
        engine,
        Config {
            tls: Some(big.server.clone()),
            header_read_timeout: Duration::from_secs(4),
            ..Config::default()
        },
        support::On::Listener(listener),
        app,
    );
    let tcp = support::tls::small_receive_buffer_client(addr);
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    let conn = rustls::ClientConnection::new(big.client.clone(), name).expect("a client");
    let mut s = rustls::StreamOwned::new(conn, tcp);
    let start = Instant::now();
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap_or_else(|e| panic!("handshake failed after {:?}: {e}", start.elapsed()));
    s.flush().expect("flush");
    let mut back = Vec::new();
    let ended = s.read_to_end(&mut back);
    let text = String::from_utf8_lossy(&back);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "after {:?}: {ended:?} {text:?}",
        start.elapsed()
    );
    drop(srv);
}

/// An event stream with heartbeats only, over TLS, whose client stops reading: once the socket
/// is full, the stream's flush waits (a heartbeat due then is written at the wait's deadline);
/// the stream is cut one grace period later (the minimum rate), not when rustls's own buffer
/// fills (hours of heartbeats). It once measured each wait afresh and was never cut.
fn quiet_event_stream_over_tls_is_cut_when_its_client_stops_reading(engine: Engine) {
    use std::sync::{Mutex, mpsc};
    use twinhttp::sse::SseConfig;
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let quiet = move |_: &mut twinhttp::Request<'_>| {
        let config = SseConfig::default().heartbeat(Some(Duration::from_millis(10)));
        let (resp, sender) = twinhttp::Response::event_stream_with(config);
        // The sender is kept: the stream stays open, quiet but for its heartbeats.
        let _ = tx.lock().expect("lock").send(sender);
        resp
    };
    let (srv, _client) = strict_and_small(engine, quiet, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let _sender = rx.recv_timeout(Duration::from_secs(5)).expect("a stream");
    srv.stats_until("an event stream", |st| st.event_streams == 1);
    let began = Instant::now();
    // The client reads nothing from here on.
    support::stats_within(
        Duration::from_secs(10),
        || srv.stats(),
        "the stream cut by the minimum rate",
        |st| st.event_streams == 0,
    );
    let took = began.elapsed();
    assert!(
        took >= STRICT.grace,
        "cut after {took:?}, before the grace period"
    );
}

/// A strict minimum rate: 240 B/s after 2 s.
const STRICT: twinhttp::MinRate = twinhttp::MinRate::new(240, Duration::from_secs(2));

/// Serves `handler` over TLS with a small send buffer and the [`STRICT`] rate; a client with a
/// small receive buffer sends `request` (the handshake done): the server, and the client.
fn strict_and_small(
    engine: Engine,
    handler: impl twinhttp::Handler,
    request: &[u8],
) -> (support::TestServer, TlsClient) {
    use twinhttp::tls::rustls;
    let pki = Pki::new();
    let (listener, addr) = support::tls::small_send_buffer_listener();
    let srv = support::start_on(
        engine,
        Config {
            tls: Some(pki.server.clone()),
            response_rate: Some(STRICT),
            ..Config::default()
        },
        support::On::Listener(listener),
        handler,
    );
    let tcp = support::tls::small_receive_buffer_client(addr);
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    let conn = rustls::ClientConnection::new(pki.client.clone(), name).expect("a client");
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(request).expect("send");
    s.flush().expect("flush");
    (srv, s)
}

/// [`strict_and_small`], whose client then takes the answer's ciphertext off its socket at
/// 12 KB/s (1,200 bytes every 100 ms) until the server ends the connection or what it
/// decrypted is `whole`: that, and how long it took.
fn read_at_12_kb_a_second(
    engine: Engine,
    handler: impl twinhttp::Handler,
    request: &[u8],
    whole: impl Fn(&[u8]) -> bool,
) -> (Vec<u8>, Duration) {
    let (_srv, s) = strict_and_small(engine, handler, request);
    let began = Instant::now();
    let (mut conn, mut sock) = (s.conn, s.sock);
    let mut plain = Vec::new();
    let mut chunk = [0u8; 1200];
    let mut next = Instant::now();
    loop {
        assert!(began.elapsed() < Duration::from_secs(30), "never ended");
        let n = match sock.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        conn.read_tls(&mut &chunk[..n]).expect("records");
        conn.process_new_packets().expect("valid records");
        let _ = conn.reader().read_to_end(&mut plain);
        if whole(&plain) {
            break;
        }
        next += Duration::from_millis(100);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    (plain, began.elapsed())
}

/// Sizes of an answer read above the rate: one rustls takes at once, and one larger than its
/// 64 KiB buffer.
const SIZES: [usize; 2] = [40_000, 100_000];

/// A response to a client that takes it at 12 KB/s, 50 times the minimum rate, arrives whole,
/// though rustls takes up to 64 KiB of it at once, before the output first waits (which earns
/// nothing): the meter counts the records as the socket takes them. It once counted what the
/// writes returned: records that went out by flushes alone earned nothing (40 KB: cut at the
/// grace period), and when that was fixed, records pushed by writes that then took nothing
/// more (100 KB).
fn a_response_over_tls_read_above_the_rate_arrives_whole(engine: Engine) {
    for size in SIZES {
        let body = move |_: &mut twinhttp::Request<'_>| twinhttp::Response::text("x".repeat(size));
        let request = b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        let (plain, took) = read_at_12_kb_a_second(engine, body, request, |_| false);
        let text = String::from_utf8_lossy(&plain);
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        assert_eq!(
            body.len(),
            size,
            "cut after {took:?}: {}",
            &text[..text.len().min(200)]
        );
    }
}

/// The same for an event stream: an event queued at its start, then its end.
fn an_event_stream_over_tls_read_above_the_rate_arrives_whole(engine: Engine) {
    for size in SIZES {
        let stream = move |_: &mut twinhttp::Request<'_>| {
            let (resp, sender) = twinhttp::Response::event_stream();
            sender
                .send(twinhttp::sse::Event::data("x".repeat(size)))
                .expect("queued");
            sender.close();
            resp
        };
        let request = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
        let (plain, took) = read_at_12_kb_a_second(engine, stream, request, |_| false);
        assert!(
            plain.ends_with(b"0\r\n\r\n"),
            "{size}: cut after {took:?}, {} bytes",
            plain.len(),
        );
    }
}

/// The same for a WebSocket message: the client's first message is answered with one of each
/// size, which the client takes at 12 KB/s (its meter counts the records the socket takes, as
/// the response's does).
fn a_websocket_message_over_tls_read_above_the_rate_arrives_whole(engine: Engine) {
    use twinhttp::ws::{RequestExt as _, WsMessage, WsSender};
    // The upgrade, and a masked text frame "go" behind it.
    let mut request = b"GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
        Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        .to_vec();
    let mask = [1u8, 2, 3, 4];
    request.extend_from_slice(&[0x81, 0x82]);
    request.extend_from_slice(&mask);
    request.extend(b"go".iter().zip(mask).map(|(b, m)| b ^ m));
    for size in SIZES {
        let large = move |req: &mut twinhttp::Request<'_>| match req.upgrade_websocket() {
            Ok(u) => u.accept(move |ws: &WsSender, _: WsMessage| {
                let _ = ws.send(vec![b'x'; size]);
            }),
            Err(refusal) => refusal,
        };
        // The 101's head, then a binary frame's: 0x82, and 126 and a 16-bit length or 127 and
        // a 64-bit one.
        let frame_head = if size < 1 << 16 { 4 } else { 10 };
        let whole = move |plain: &[u8]| {
            let head = plain.windows(4).position(|w| w == b"\r\n\r\n");
            head.is_some_and(|h| plain.len() >= h + 4 + frame_head + size)
        };
        let (plain, took) = read_at_12_kb_a_second(engine, large, &request, whole);
        assert!(
            whole(&plain),
            "{size}: cut after {took:?}, {} bytes",
            plain.len()
        );
    }
}

/// A ClientHello a byte at a time, then the rest of the handshake and a request as usual: the
/// server reassembles it and serves the connection.
fn trickled_client_hello_is_served(engine: Engine) {
    use twinhttp::tls::rustls;
    let pki = Pki::new();
    let srv = tls_server(engine, &pki, Config::default());
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    let mut conn = rustls::ClientConnection::new(pki.client.clone(), name).expect("a client");
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).expect("the ClientHello");
    let mut raw = TcpStream::connect(srv.addr).expect("connect");
    raw.set_nodelay(true).expect("nodelay");
    raw.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    for b in &hello {
        raw.write_all(std::slice::from_ref(b)).expect("one byte");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut c = support::Client {
        reader: std::io::BufReader::new(rustls::StreamOwned::new(conn, raw)),
    };
    let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "Hello, World!"));
}

fn half_handshake_closes_at_the_header_deadline(engine: Engine) {
    let pki = Pki::new();
    let timeout = Duration::from_millis(800);
    let srv = tls_server(
        engine,
        &pki,
        Config {
            header_read_timeout: timeout,
            ..Config::default()
        },
    );
    let hello = pki.client_hello();
    let mut raw = TcpStream::connect(srv.addr).expect("connect");
    raw.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let start = Instant::now();
    // Half a ClientHello, then nothing.
    raw.write_all(&hello[..hello.len() / 2]).expect("send");
    let mut sink = Vec::new();
    let _ = raw.read_to_end(&mut sink);
    let closed = start.elapsed();
    assert!(
        closed >= timeout.mul_f32(0.9) && closed < timeout * 4,
        "closed after {closed:?}, the header-read deadline is {timeout:?}"
    );
}

fn silent_connections_do_not_stop_new_clients(engine: Engine) {
    support::raise_fd_limit();
    let pki = Pki::new();
    let srv = tls_server(
        engine,
        &pki,
        Config {
            max_connections: 5000,
            ..Config::default()
        },
    );
    let silent: Vec<TcpStream> = (0..2000)
        .map(|_| TcpStream::connect(srv.addr).expect("connect"))
        .collect();
    support::wait_open(&srv, silent.len());
    let start = Instant::now();
    let mut c = pki.client(srv.addr);
    assert_eq!(
        c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let served = start.elapsed();
    assert!(
        served < Duration::from_secs(1),
        "a new TLS client waited {served:?} behind 2,000 silent connections"
    );
    drop(silent);
}

/// With pool dispatch, a file's pieces over TLS are read and encrypted on the event loop (the
/// core's work, as `sendfile` is on plain TCP), not sent to the pool piece by piece: the file goes
/// out while every worker of the pool is held by a handler.
#[test]
fn with_pool_dispatch_a_file_goes_out_over_tls_while_every_worker_is_held() {
    use crossbeam_channel::bounded;
    use twinhttp::reactor::{Dispatch, Reactor};
    use twinhttp::{Request, Response};
    const LEN: usize = 32 << 20; // more than the sockets hold between the two sides
    let pki = Pki::new();
    // Removed when dropped, however the test ends.
    let on_disk = tempfile::NamedTempFile::new().expect("a temporary file");
    let path = on_disk.path().to_owned();
    let bytes: Vec<u8> = (0..LEN).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &bytes).expect("write the file");
    let (holding, held) = bounded::<()>(2);
    let (release, released) = bounded::<()>(0);
    let served = path.clone();
    let handler = move |req: &mut Request<'_>| match req.path() {
        "/held" => {
            let _ = holding.send(());
            let _ = released.recv();
            Response::text("released")
        }
        _ => Response::file(req, &served),
    };
    let reactor = Reactor::builder()
        .loops(1)
        .dispatch(Dispatch::Pool(2))
        .tls(pki.server.clone())
        .serve("127.0.0.1:0", handler)
        .expect("reactor starts");
    let addr = reactor.local_addr();
    // The file's head and first pieces come; the rest waits for the client to read.
    let mut file = pki.connect(addr);
    file.write_all(b"GET /f HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("the request");
    let mut got = Vec::with_capacity(LEN + 1024);
    let mut buf = vec![0u8; 64 << 10];
    let head_len = loop {
        let n = file.read(&mut buf).expect("the response begins");
        assert!(n > 0, "the response begins");
        got.extend_from_slice(&buf[..n]);
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"));
    // Every worker of the pool is taken by a handler that waits for the test.
    let mut holders: Vec<_> = (0..2)
        .map(|_| {
            let mut c = pki.client(addr);
            c.send(b"GET /held HTTP/1.1\r\nHost: t\r\n\r\n");
            c
        })
        .collect();
    for _ in 0..2 {
        held.recv_timeout(Duration::from_secs(10))
            .expect("a worker holds");
    }
    // The rest of the file comes all the same (the socket's read timeout is 10 s).
    while got.len() < head_len + LEN {
        let n = file
            .read(&mut buf)
            .expect("the rest of the file, with every worker held");
        assert!(n > 0, "the file is cut at {} bytes", got.len() - head_len);
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got[head_len..] == bytes[..], "the file's bytes");
    for _ in 0..2 {
        release.send(()).expect("a held handler");
    }
    for c in &mut holders {
        assert_eq!(c.response().text(), "released");
    }
    reactor.shutdown(Duration::from_secs(5)).expect("shutdown");
    drop(on_disk);
}

engine_tests!(
    keep_alive_and_pipelining,
    bodies_both_ways,
    expect_continue,
    error_status_closes_cleanly,
    limits_answer_their_statuses,
    websocket_over_tls,
    files_are_copied_through_tls,
    close_notify_behind_a_request_ends_the_connection,
    shutdown_sends_close_notify,
    not_tls_is_refused_and_the_server_goes_on,
    pipelined_requests_across_a_buffer_boundary,
    truncated_close_delimited_body_is_not_a_clean_close,
    large_handshake_flight_completes,
    quiet_event_stream_over_tls_is_cut_when_its_client_stops_reading,
    a_response_over_tls_read_above_the_rate_arrives_whole,
    an_event_stream_over_tls_read_above_the_rate_arrives_whole,
    a_websocket_message_over_tls_read_above_the_rate_arrives_whole,
    trickled_client_hello_is_served,
    half_handshake_closes_at_the_header_deadline,
);

parking_tests!(silent_connections_do_not_stop_new_clients);
