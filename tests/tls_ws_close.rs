//! A WebSocket over TLS whose client sends its last frames and its `close_notify` in one write
//! (one TCP segment), then keeps the TCP socket open: on every engine configuration the server
//! answers the frames and then ends the connection at once, because rustls took the end of the
//! client's input off the socket together with the frames (the socket will not report it again),
//! not at the WebSocket's idle timeout.
#![cfg(feature = "tls")]

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use support::tls::{Pki, TlsStream as TlsClient};
use support::{Config, Engine, start_with};
use twinhttp::ws::{CloseFrame, RequestExt, WsConfig, WsHandler, WsMessage, WsSender};

const TEXT: u8 = 0x81;
const CLOSE: u8 = 0x88;

/// The WebSocket's own idle timeout: without it a connection the server did not see end would
/// stay open for good. A server that misses the `close_notify` closes only at this deadline
/// (with 1001 "idle timeout").
const WS_IDLE: Duration = Duration::from_secs(5);
const WS_CLOSE_TIMEOUT: Duration = Duration::from_secs(1);
/// What "promptly" means.
const PROMPT: Duration = Duration::from_secs(2);

/// What the server's callbacks saw, and when (printed in the reports).
#[allow(dead_code)]
#[derive(Debug)]
enum Seen {
    Message(String),
    Closed(Option<CloseFrame>),
}

/// Echoes every message; tells the test of each message and of `on_close`.
struct Recorder(Sender<(Seen, Instant)>);

impl WsHandler for Recorder {
    fn on_message(&mut self, ws: &WsSender, msg: WsMessage) {
        let text = msg.as_text().unwrap_or("<binary>").to_owned();
        let _ = self.0.send((Seen::Message(text), Instant::now()));
        let _ = ws.send(msg);
    }

    fn on_close(&mut self, frame: Option<CloseFrame>) {
        let _ = self.0.send((Seen::Closed(frame), Instant::now()));
    }
}

/// An echoing WebSocket handler that reports its callbacks to the returned receiver.
fn recording() -> (impl twinhttp::Handler, Receiver<(Seen, Instant)>) {
    let (tx, rx) = channel();
    let handler = move |req: &mut twinhttp::Request<'_>| match req.upgrade_websocket() {
        Ok(u) => u
            .with_config(
                WsConfig::default()
                    .idle_timeout(Some(WS_IDLE))
                    .close_timeout(WS_CLOSE_TIMEOUT),
            )
            .accept(Recorder(tx.clone())),
        Err(refusal) => refusal,
    };
    (handler, rx)
}

fn serving(engine: Engine, pki: &Pki) -> (support::TestServer, Receiver<(Seen, Instant)>) {
    let (handler, rx) = recording();
    let srv = start_with(
        engine,
        Config {
            tls: Some(pki.server.clone()),
            idle_timeout: Duration::from_secs(60),
            ..Config::default()
        },
        handler,
    );
    (srv, rx)
}

/// A masked client frame of at most 125 bytes of payload.
fn frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() <= 125);
    let key = [0x11, 0x22, 0x33, 0x44];
    let mut f = vec![b0, 0x80 | payload.len() as u8];
    f.extend_from_slice(&key);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    f
}

fn text(s: &str) -> Vec<u8> {
    frame(TEXT, s.as_bytes())
}

fn close(code: u16, reason: &str) -> Vec<u8> {
    let mut p = code.to_be_bytes().to_vec();
    p.extend_from_slice(reason.as_bytes());
    frame(CLOSE, &p)
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` at a clean end before the first byte.
fn fill(s: &mut TlsClient, buf: &mut [u8]) -> std::io::Result<bool> {
    let mut at = 0;
    while at < buf.len() {
        match s.read(&mut buf[at..]) {
            Ok(0) if at == 0 => return Ok(false),
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// One unmasked server frame of at most 125 bytes: its first byte and payload; `None` at the
/// clean end of the TLS session (`close_notify`, then EOF).
fn read_frame(s: &mut TlsClient) -> std::io::Result<Option<(u8, Vec<u8>)>> {
    let mut head = [0u8; 2];
    if !fill(s, &mut head)? {
        return Ok(None);
    }
    let len = usize::from(head[1] & 0x7f);
    assert!(
        head[1] & 0x80 == 0 && len <= 125,
        "a short server frame: {head:?}"
    );
    let mut payload = vec![0u8; len];
    if len > 0 && !fill(s, &mut payload)? {
        return Err(ErrorKind::UnexpectedEof.into());
    }
    Ok(Some((head[0], payload)))
}

/// A TLS client whose WebSocket handshake is done and whose first message was echoed.
fn open(addr: SocketAddr, pki: &Pki) -> TlsClient {
    let mut s = pki.connect(addr);
    s.sock
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .expect("upgrade request");
    s.flush().expect("flush");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert!(fill(&mut s, &mut byte).expect("the 101"), "the 101");
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s.write_all(&text("first")).expect("first message");
    s.flush().expect("flush");
    let (b0, p) = read_frame(&mut s).expect("echo").expect("echo");
    assert_eq!((b0, &p[..]), (TEXT, &b"first"[..]));
    s
}

/// What the client read after its last write, with times since that write (printed in the
/// reports).
#[allow(dead_code)]
#[derive(Debug)]
enum Got {
    Frame(u8, String, Duration),
    /// `close_notify`, then EOF.
    CleanEnd(Duration),
    /// An end without `close_notify`, a reset, or the read timeout.
    Error(ErrorKind, String, Duration),
}

fn read_to_end(s: &mut TlsClient, sent: Instant) -> Vec<Got> {
    let mut got = Vec::new();
    loop {
        match read_frame(s) {
            Ok(Some((b0, p))) => {
                got.push(Got::Frame(b0, p.escape_ascii().to_string(), sent.elapsed()))
            }
            Ok(None) => {
                got.push(Got::CleanEnd(sent.elapsed()));
                return got;
            }
            Err(e) => {
                got.push(Got::Error(e.kind(), e.to_string(), sent.elapsed()));
                return got;
            }
        }
    }
}

/// The server's callbacks up to `on_close` (at most 20 s), with times since `sent`.
fn server_saw(rx: &Receiver<(Seen, Instant)>, sent: Instant) -> Vec<(Seen, Duration)> {
    let mut seen = Vec::new();
    while let Ok((what, at)) = rx.recv_timeout(Duration::from_secs(20)) {
        let last = matches!(what, Seen::Closed(_));
        seen.push((what, at.saturating_duration_since(sent)));
        if last {
            break;
        }
    }
    seen
}

/// `frames` and `close_notify` in one write; the client then only reads. Checks the server
/// answered with `answers` (first byte, payload) and ended the TLS session within [`PROMPT`].
fn last_frames_with_close_notify(engine: Engine, frames: &[Vec<u8>], answers: &[(u8, &str)]) {
    let pki = Pki::new();
    let (srv, rx) = serving(engine, &pki);
    check_last_frames(&format!("{engine:?}"), srv.addr, &pki, &rx, frames, answers);
    drop(srv);
}

fn check_last_frames(
    engine: &str,
    addr: SocketAddr,
    pki: &Pki,
    rx: &Receiver<(Seen, Instant)>,
    frames: &[Vec<u8>],
    answers: &[(u8, &str)],
) {
    let mut s = open(addr, pki);
    // The first message's callback.
    assert!(matches!(rx.recv().expect("first").0, Seen::Message(ref m) if m == "first"));
    let plain: Vec<u8> = frames.concat();
    let sent = support::tls::write_in_one(&mut s, &plain, true);
    let got = read_to_end(&mut s, sent);
    let seen = server_saw(rx, sent);
    let report = format!("{engine}: client read {got:?}; server callbacks {seen:?}");
    eprintln!("{report}");
    let frames_back: Vec<(u8, &str)> = got
        .iter()
        .filter_map(|g| match g {
            Got::Frame(b0, p, _) => Some((*b0, p.as_str())),
            _ => None,
        })
        .collect();
    let ended = match got.last() {
        Some(Got::CleanEnd(t)) => *t,
        _ => panic!("the server did not end the TLS session cleanly: {report}"),
    };
    assert!(
        ended < PROMPT,
        "the connection ended after {ended:?}: {report}"
    );
    assert_eq!(frames_back, answers, "the frames answered: {report}");
    let closed = match seen.last() {
        Some((Seen::Closed(_), t)) => *t,
        _ => panic!("on_close never ran: {report}"),
    };
    assert!(closed < PROMPT, "on_close ran after {closed:?}: {report}");
}

/// A text frame and `close_notify` in one write: the echo, then the end at once.
fn text_then_close_notify_in_one_write(engine: Engine) {
    last_frames_with_close_notify(engine, &[text("last")], &[(TEXT, "last")]);
}

/// A Close frame and `close_notify` in one write: the close answered, then the end at once.
fn close_frame_then_close_notify_in_one_write(engine: Engine) {
    last_frames_with_close_notify(engine, &[close(1000, "bye")], &[(CLOSE, r"\x03\xe8bye")]);
}

/// A text frame, a Close frame and `close_notify` in one write.
fn text_close_frame_and_close_notify_in_one_write(engine: Engine) {
    last_frames_with_close_notify(
        engine,
        &[text("last"), close(1000, "bye")],
        &[(TEXT, "last"), (CLOSE, r"\x03\xe8bye")],
    );
}

/// The control: the echo of a text frame read first, then `close_notify` alone in a write of its
/// own (new bytes on the socket, which wake every engine).
fn close_notify_in_a_write_of_its_own(engine: Engine) {
    let pki = Pki::new();
    let (srv, rx) = serving(engine, &pki);
    let mut s = open(srv.addr, &pki);
    assert!(matches!(rx.recv().expect("first").0, Seen::Message(ref m) if m == "first"));
    support::tls::write_in_one(&mut s, &text("last"), false);
    let (b0, p) = read_frame(&mut s).expect("echo").expect("echo");
    assert_eq!((b0, &p[..]), (TEXT, &b"last"[..]));
    let sent = support::tls::write_in_one(&mut s, &[], true);
    let got = read_to_end(&mut s, sent);
    let seen = server_saw(&rx, sent);
    let report = format!("{engine:?}: client read {got:?}; server callbacks {seen:?}");
    eprintln!("{report}");
    assert!(
        matches!(got.last(), Some(Got::CleanEnd(t)) if *t < PROMPT),
        "{report}"
    );
    assert!(
        matches!(seen.last(), Some((Seen::Closed(_), t)) if *t < PROMPT),
        "{report}"
    );
    drop(srv);
}

engine_tests!(
    text_then_close_notify_in_one_write,
    close_frame_then_close_notify_in_one_write,
    text_close_frame_and_close_notify_in_one_write,
    close_notify_in_a_write_of_its_own,
);

/// Frames the client sends with its `close_notify`, and the frames the server answers.
#[cfg(feature = "server")]
type Case<'a> = (&'a [Vec<u8>], &'a [(u8, &'a str)]);

/// The server engine with `Parking::Http` (HTTP parked, each WebSocket on a thread of its own,
/// as with parking off): the same three cases.
#[cfg(feature = "server")]
#[test]
fn parking_http_last_frames_with_close_notify() {
    let cases: [Case<'_>; 3] = [
        (&[text("last")], &[(TEXT, "last")]),
        (&[close(1000, "bye")], &[(CLOSE, r"\x03\xe8bye")]),
        (
            &[text("last"), close(1000, "bye")],
            &[(TEXT, "last"), (CLOSE, r"\x03\xe8bye")],
        ),
    ];
    for (frames, answers) in cases {
        let pki = Pki::new();
        let (handler, rx) = recording();
        let srv = twinhttp::server::Server::builder()
            .workers(4)
            .parking(twinhttp::server::Parking::Http)
            .tls(pki.server.clone())
            .serve("127.0.0.1:0", handler)
            .expect("server starts");
        check_last_frames("ParkingHttp", srv.local_addr(), &pki, &rx, frames, answers);
        srv.shutdown(Duration::from_secs(5)).expect("shutdown");
    }
}
