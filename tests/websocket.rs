//! WebSocket over real sockets on every engine configuration: the opening handshake's edge
//! cases, echo, the closing handshake, limits, pushes from other threads, shutdown, panics, and
//! generic upgrades.
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{Client, Config, Engine, TestServer, connect, probe, read_head, start, start_with};
use tungstenite::protocol::CloseFrame;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Message, WebSocket};
use twinhttp::ws::{RequestExt, WsConfig, WsHandler, WsMessage, WsSender};
use twinhttp::{Request, Response};

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

fn upgrade_request(extra: &str) -> String {
    format!(
        "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

/// Echo on `/ws` (a 64 KiB message limit), subprotocols on `/proto`, `/panic` panics on a
/// message, `/raw` is a generic upgrade echoing bytes, `/blocking` hands a tungstenite socket.
fn ws_app(req: &mut Request<'_>) -> Response {
    let path = req.path().to_owned();
    let upgrade = match req.upgrade_websocket() {
        Ok(u) => u,
        Err(refusal) if path != "/raw" && path != "/raw-tcp" => return refusal,
        Err(_) if path == "/raw-tcp" => {
            // The socket type back from the transport: a TCP stream, with the early bytes.
            return Response::upgrade("x-echo", |up| match up.into_stream::<TcpStream>() {
                Ok((mut tcp, early)) => {
                    let clone = tcp.try_clone().map(|_| "tcp:").unwrap_or("no clone:");
                    let _ = tcp.write_all(clone.as_bytes());
                    let _ = tcp.write_all(&early);
                }
                Err(mut up) => {
                    let _ = up.write_all(b"not tcp");
                }
            });
        }
        Err(_) => {
            return Response::upgrade("x-echo", |mut up| {
                let mut buf = [0u8; 1024];
                while let Ok(n) = up.read(&mut buf) {
                    if n == 0 || up.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    };
    let limits = WsConfig::default().max_message_size(64 * 1024);
    match path.as_str() {
        "/ws" => upgrade
            .with_config(limits)
            .accept(|ws: &WsSender, msg: WsMessage| {
                let _ = ws.send(msg);
            }),
        // Settings at their extremes: a read buffer as large as a usize allows is taken as
        // the largest one that makes sense, not allocated.
        "/huge" => upgrade
            .with_config(
                WsConfig::default()
                    .read_buffer_size(usize::MAX)
                    .max_message_size(usize::MAX)
                    .max_frame_size(usize::MAX)
                    .max_send_queue(usize::MAX)
                    .ping_interval(Some(Duration::MAX))
                    .idle_timeout(Some(Duration::MAX))
                    .close_timeout(Duration::MAX),
            )
            .accept(|ws: &WsSender, msg: WsMessage| {
                let _ = ws.send(msg);
            }),
        // No message limit, and closed after 300 ms without input.
        "/idle-huge" => upgrade
            .with_config(
                WsConfig::default()
                    .max_message_size(usize::MAX)
                    .max_frame_size(usize::MAX)
                    .idle_timeout(Some(Duration::from_millis(300))),
            )
            .accept(|_: &WsSender, _: WsMessage| {}),
        "/proto" => upgrade
            .select_protocol(&["v2.chat", "v1.chat"])
            .accept(|_: &WsSender, _: WsMessage| {}),
        "/panic" => upgrade.accept(|_: &WsSender, _: WsMessage| panic!("on purpose")),
        "/panics-when-dropped" => upgrade.accept(EchoPanicsWhenDropped),
        "/panics-twice" => upgrade.accept(PanicsTwice),
        "/origin" => match upgrade.check_origin(|o| o == Some("https://good.example")) {
            Ok(u) => u.accept(|_: &WsSender, _: WsMessage| {}),
            Err(refusal) => refusal,
        },
        "/blocking" => upgrade.accept_blocking(|mut ws| {
            while let Ok(msg) = ws.read() {
                if (msg.is_text() || msg.is_binary()) && ws.send(msg).is_err() {
                    break;
                }
            }
        }),
        _ => Response::new(404),
    }
}

fn client(addr: SocketAddr, path: &str) -> WebSocket<TcpStream> {
    let (ws, resp) =
        tungstenite::client(format!("ws://{addr}{path}"), connect(addr)).expect("handshake");
    assert_eq!(resp.status(), 101);
    ws
}

fn close_code(ws: &mut WebSocket<TcpStream>) -> Option<CloseCode> {
    loop {
        match ws.read() {
            Ok(Message::Close(f)) => return f.map(|f| f.code),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

fn upgrade_edge_cases(engine: Engine) {
    let srv = start(engine, ws_app);
    let cases: Vec<(String, u16)> = vec![
        (
            upgrade_request("").replace("Version: 13", "Version: 8"),
            426,
        ),
        (upgrade_request("").replace(KEY, "short"), 400),
        (
            upgrade_request("").replace(&format!("Sec-WebSocket-Key: {KEY}\r\n"), ""),
            400,
        ),
        (
            upgrade_request("").replace("Upgrade: websocket\r\n", ""),
            426,
        ),
        (
            upgrade_request("").replace("Connection: Upgrade", "Connection: keep-alive"),
            400,
        ),
        (upgrade_request("").replacen("GET", "POST", 1), 405),
        // RFC 6455 §11.3.1: the key appears once.
        (
            upgrade_request(&format!("Sec-WebSocket-Key: {KEY}\r\n")),
            400,
        ),
        (
            upgrade_request("Origin: https://evil.example\r\n").replace("/ws", "/origin"),
            403,
        ),
    ];
    for (req, status) in cases {
        let (raw, _) = probe(srv.addr, req.as_bytes());
        assert_eq!(raw.status, status, "{req}");
        if status == 426 {
            assert_eq!(raw.header("sec-websocket-version"), Some("13"), "{req}");
            // RFC 9110 §7.8: an `Upgrade` field goes with the `upgrade` connection option.
            assert_eq!(raw.header("upgrade"), Some("websocket"), "{req}");
            let connection = raw.header("connection").unwrap_or_default();
            assert!(
                connection.to_ascii_lowercase().contains("upgrade"),
                "{connection}: {req}"
            );
        }
    }
    // The 405 allows what a router's GET route allows; a HEAD gets the head of the 426 a GET
    // without the upgrade gets (before a user's trial: 405 with `Allow: GET` to both).
    let (raw, _) = probe(
        srv.addr,
        upgrade_request("").replacen("GET", "PUT", 1).as_bytes(),
    );
    assert_eq!((raw.status, raw.header("allow")), (405, Some("GET, HEAD")));
    let mut c = Client::new(srv.addr);
    c.send(upgrade_request("").replacen("GET", "HEAD", 1).as_bytes());
    let raw = c.read_response(true).expect("an answer to HEAD");
    assert_eq!(
        (raw.status, raw.header("upgrade")),
        (426, Some("websocket"))
    );
    assert!(raw.body.is_empty());
    // A valid request: 101, the RFC's accept value, the chosen subprotocol.
    let mut s = connect(srv.addr);
    let req =
        upgrade_request("Sec-WebSocket-Protocol: v1.chat, v2.chat\r\n").replace("/ws", "/proto");
    s.write_all(req.as_bytes()).expect("send");
    let head = read_head(&mut s).to_ascii_lowercase();
    assert!(
        head.starts_with("http/1.1 101 switching protocols\r\n"),
        "{head}"
    );
    assert!(
        head.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo=\r\n"),
        "{head}"
    );
    assert!(
        head.contains("sec-websocket-protocol: v2.chat\r\n"),
        "{head}"
    );
    assert!(head.contains("connection: upgrade\r\n") && head.contains("upgrade: websocket\r\n"));
    assert!(!head.contains("content-length") && !head.contains("transfer-encoding"));
}

fn echo_text_and_binary(engine: Engine) {
    let srv = start(engine, ws_app);
    let mut ws = client(srv.addr, "/ws");
    for i in 0..100 {
        ws.send(Message::text(format!("hello {i}"))).expect("send");
        assert_eq!(
            ws.read().expect("read"),
            Message::text(format!("hello {i}"))
        );
    }
    let big: Vec<u8> = (0..60_000u32).map(|i| i as u8).collect();
    ws.send(Message::binary(big.clone())).expect("send");
    assert_eq!(ws.read().expect("read"), Message::binary(big));
    // A burst of frames larger in all than the reactor's 64 KiB WebSocket read buffer, so
    // that frames straddle reads (compared by length and checksum: a mismatch would print
    // megabytes).
    let sizes: Vec<usize> = (0..12).map(|i| 20_000 + 3_001 * i).collect();
    for (i, &n) in sizes.iter().enumerate() {
        let data: Vec<u8> = (0..n).map(|j| (i + j % 251) as u8).collect();
        ws.write(Message::binary(data)).expect("write");
    }
    ws.flush().expect("flush");
    for (i, &n) in sizes.iter().enumerate() {
        let want: Vec<u8> = (0..n).map(|j| (i + j % 251) as u8).collect();
        let got = ws.read().expect("read").into_data();
        assert!(
            got[..] == want[..],
            "message {i}: {} bytes back, {n} sent",
            got.len()
        );
    }
    // A burst: 200 messages in flight before the first reply is read.
    for i in 0..200 {
        ws.write(Message::text(i.to_string())).expect("write");
    }
    ws.flush().expect("flush");
    for i in 0..200 {
        assert_eq!(ws.read().expect("read"), Message::text(i.to_string()));
    }
    ws.send(Message::Ping("p".into())).expect("ping");
    assert_eq!(ws.read().expect("read"), Message::Pong("p".into()));
}

/// Settings at their largest values neither panic the engine's thread nor abort the process:
/// the WebSocket echoes, and the server answers plain requests after it.
fn extreme_settings_are_served(engine: Engine) {
    let srv = start(engine, ws_app);
    let mut ws = client(srv.addr, "/huge");
    ws.send(Message::text("big settings")).expect("send");
    assert_eq!(ws.read().expect("read"), Message::text("big settings"));
    let mut c = support::Client::new(srv.addr);
    assert_eq!(
        c.request("GET /plain", "").status,
        426,
        "the engine still serves"
    );
}

/// A WebSocket message that is never finished is charged to the server's memory budget: a
/// client that sends fragment after fragment of one message (no message limit on its route)
/// is closed with 1013 (try again later) once no room can be made, long before its fragments
/// reach 64 MiB; what it held is given back, and another WebSocket is served after it.
fn an_unfinished_message_is_held_to_the_memory_budget(engine: Engine) {
    use tungstenite::protocol::frame::Frame;
    use tungstenite::protocol::frame::coding::{Data, OpCode};
    const BUDGET: usize = 1 << 20;
    const FRAGMENT: usize = 64 * 1024;
    let cfg = support::Config {
        memory_budget: BUDGET,
        ..support::Config::default()
    };
    let srv = support::start_with(engine, cfg, ws_app);
    let mut ws = client(srv.addr, "/huge");
    let mut sent = 0;
    let mut opcode = OpCode::Data(Data::Binary);
    // Fragments until the server closes (bounded: 64 MiB).
    while sent < 64 << 20 {
        let frame = Frame::message(vec![b'x'; FRAGMENT], opcode, false);
        if ws.send(Message::Frame(frame)).is_err() {
            break;
        }
        sent += FRAGMENT;
        opcode = OpCode::Data(Data::Continue);
    }
    assert_eq!(
        close_code(&mut ws),
        Some(CloseCode::Again),
        "closed with 1013 after {sent} bytes sent"
    );
    eprintln!("{engine:?}: closed with 1013 after {sent} bytes sent");
    assert!(sent < 32 << 20, "closed only after {sent} bytes");
    // Given back when the server drops the connection, just after the close frame went out.
    support::stats_within(
        Duration::from_secs(5),
        || srv.stats(),
        "what it held is given back",
        |s| s.memory_held == 0,
    );
    assert!(
        srv.stats()
            .refusals(twinhttp::stats::Refusal::SessionOverBudget)
            >= 1
    );
    let mut other = client(srv.addr, "/ws");
    other.send(Message::text("after")).expect("send");
    assert_eq!(other.read().expect("read"), Message::text("after"));
}

/// tungstenite's input buffer keeps room for the largest frame it was sent: while it holds
/// one (here a first fragment of 1 MiB, with the message unfinished), the budget counts it
/// beside the message being gathered; once the message is out and everything sent, the
/// connection makes its context anew and the charge goes back to nothing.
fn a_large_frame_is_charged_until_its_buffer_is_given_back(engine: Engine) {
    use support::ws_raw::{self, BINARY_FIRST, CONTINUATION_LAST};
    const FRAGMENT: usize = 1 << 20;
    // The frame's bytes: 14 of header (a 64-bit length and the mask) and the payload.
    const FRAME: u64 = FRAGMENT as u64 + 14;
    const ALLOWANCE: u64 = 16 * 1024;
    let srv = start(engine, ws_raw::lengths);
    let mut s = ws_raw::open(srv.addr, "/");
    ws_raw::send(&mut s, BINARY_FIRST, FRAGMENT);
    // Its pong: the fragment has been read whole.
    ws_raw::ping_pong(&mut s);
    let held = srv.stats().memory_held;
    assert!(
        (2 * (FRAME - ALLOWANCE)..2 * (FRAME - ALLOWANCE) + 64).contains(&held),
        "the unfinished message and tungstenite's buffer for its frame: {held} bytes held"
    );
    ws_raw::send(&mut s, CONTINUATION_LAST, 10);
    assert_eq!(
        ws_raw::read(&mut s),
        (ws_raw::TEXT, (FRAGMENT + 10).to_string())
    );
    // Its pong comes after the step in which the context was made anew.
    ws_raw::ping_pong(&mut s);
    assert_eq!(srv.stats().memory_held, 0, "given back");
    // The connection works on, on its new context.
    ws_raw::send(&mut s, ws_raw::BINARY, 3 * FRAGMENT);
    assert_eq!(
        ws_raw::read(&mut s),
        (ws_raw::TEXT, (3 * FRAGMENT).to_string())
    );
    ws_raw::ping_pong(&mut s);
    assert_eq!(srv.stats().memory_held, 0);
}

/// A large message goes out in frames of 256 KiB (the first with the message's opcode, the
/// rest continuations, the last with FIN), which a client joins up: tungstenite's output buffer
/// holds a frame, not the message.
fn a_large_message_goes_out_in_frames(engine: Engine) {
    use support::ws_raw;
    const SIZE: usize = 1 << 20;
    let srv = start(engine, ws_raw::lengths);
    let mut s = ws_raw::open(srv.addr, "/");
    ws_raw::send_text(&mut s, &(SIZE + 1).to_string());
    assert_eq!(ws_raw::skip(&mut s), (ws_raw::BINARY, 5, SIZE as u64 + 1));
    // A message that fits a frame goes in one.
    ws_raw::send_text(&mut s, "1000");
    assert_eq!(ws_raw::skip(&mut s), (ws_raw::BINARY, 1, 1000));
    // tungstenite's client joins the frames up.
    let mut ws = client(srv.addr, "/");
    ws.send(Message::text(SIZE.to_string())).expect("send");
    assert_eq!(ws.read().expect("read"), Message::binary(vec![0u8; SIZE]));
}

/// The same while the server's close waits for the peer's: fragments sent after the server's
/// close frame (here its idle timeout's 1001) are held to the budget too, and the connection
/// ends instead of gathering them for the close timeout.
fn a_closing_websocket_is_held_to_the_memory_budget(engine: Engine) {
    use tungstenite::protocol::frame::Frame;
    use tungstenite::protocol::frame::coding::{Data, OpCode};
    const FRAGMENT: usize = 64 * 1024;
    let cfg = support::Config {
        memory_budget: 1 << 20,
        ..support::Config::default()
    };
    let srv = support::start_with(engine, cfg, ws_app);
    let mut ws = client(srv.addr, "/idle-huge");
    assert_eq!(
        close_code(&mut ws),
        Some(CloseCode::Away),
        "the idle timeout's close"
    );
    // Raw masked frames on the socket: the client library sends nothing after a close.
    let socket = ws.get_mut();
    let mut sent = 0;
    let mut opcode = OpCode::Data(Data::Binary);
    while sent < 64 << 20 {
        let mut frame = Frame::message(vec![b'x'; FRAGMENT], opcode, false);
        frame.header_mut().mask = Some([1, 2, 3, 4]);
        let mut bytes = Vec::new();
        frame.format(&mut bytes).expect("a frame");
        if socket.write_all(&bytes).is_err() {
            break;
        }
        sent += FRAGMENT;
        opcode = OpCode::Data(Data::Continue);
    }
    eprintln!("{engine:?}: closing connection ended after {sent} bytes sent");
    assert!(sent < 32 << 20, "read on while closing: {sent} bytes");
}

fn frames_sent_with_the_upgrade_request_are_not_lost(engine: Engine) {
    let srv = start(engine, ws_app);
    let mut s = connect(srv.addr);
    // The request and a masked text frame ("hello", zero mask) in one write.
    let mut bytes = upgrade_request("").into_bytes();
    bytes.extend_from_slice(&[0x81, 0x85, 0, 0, 0, 0]);
    bytes.extend_from_slice(b"hello");
    s.write_all(&bytes).expect("send");
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101"));
    let mut frame = [0u8; 7];
    s.read_exact(&mut frame).expect("echo");
    assert_eq!(&frame, b"\x81\x05hello");
}

/// A client that writes a lot and reads nothing for a while: the server's output blocks, it
/// stops reading, the client's writes block too; once the client reads, everything flows again
/// (on the thread-pool engine the parked WebSocket is woken by its socket becoming writable).
fn a_client_that_reads_late_gets_every_echo(engine: Engine) {
    const N: usize = 200;
    const LEN: usize = 60_000;
    let srv = start(engine, ws_app);
    let mut s = connect(srv.addr);
    s.write_all(upgrade_request("").as_bytes())
        .expect("upgrade");
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101"));
    let mut w = s.try_clone().expect("clone");
    // 12 MB of masked binary frames (zero mask key), more than loopback socket buffers hold.
    let writer = std::thread::spawn(move || {
        for i in 0..N {
            let mut frame = vec![0x82, 0xFE];
            frame.extend_from_slice(&(LEN as u16).to_be_bytes());
            frame.extend_from_slice(&[0, 0, 0, 0]);
            frame.extend((0..LEN).map(|j| (i + j % 251) as u8));
            w.write_all(&frame).expect("write");
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut head = [0u8; 4];
    let mut payload = vec![0u8; LEN];
    for i in 0..N {
        s.read_exact(&mut head).expect("echo head");
        assert_eq!(head[..2], [0x82, 126], "message {i}");
        assert_eq!(usize::from(u16::from_be_bytes([head[2], head[3]])), LEN);
        s.read_exact(&mut payload).expect("echo payload");
        assert!(
            payload
                .iter()
                .enumerate()
                .all(|(j, &b)| b == (i + j % 251) as u8),
            "message {i} corrupted"
        );
    }
    writer.join().expect("writer");
}

fn close_handshake_is_echoed(engine: Engine) {
    let srv = start(engine, ws_app);
    let mut ws = client(srv.addr, "/ws");
    ws.close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "bye".into(),
    }))
    .expect("close");
    match ws.read() {
        Ok(Message::Close(Some(f))) => assert_eq!(f.code, CloseCode::Normal),
        other => panic!("expected the close echo, got {other:?}"),
    }
    // Then the server closes the TCP connection.
    assert!(matches!(
        ws.read(),
        Err(tungstenite::Error::ConnectionClosed)
    ));
    let mut s = ws.into_inner();
    assert_eq!(s.read(&mut [0u8; 1]).unwrap_or(0), 0);
}

fn limits_and_protocol_errors_close_with_their_codes(engine: Engine) {
    let srv = start(engine, ws_app);
    let mut ws = client(srv.addr, "/ws");
    ws.send(Message::binary(vec![7u8; 100_000])).expect("send");
    assert_eq!(close_code(&mut ws), Some(CloseCode::Size));

    // Invalid UTF-8 in a text frame: 1007.
    let mut s = connect(srv.addr);
    let mut bytes = upgrade_request("").into_bytes();
    bytes.extend_from_slice(&[0x81, 0x82, 0, 0, 0, 0, 0xC3, 0x28]);
    s.write_all(&bytes).expect("send");
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101"));
    let mut frame = [0u8; 4];
    s.read_exact(&mut frame).expect("close frame");
    assert_eq!(frame[0], 0x88);
    assert_eq!(u16::from_be_bytes([frame[2], frame[3]]), 1007);

    // An unmasked client frame is a protocol error: 1002.
    let mut s = connect(srv.addr);
    let mut bytes = upgrade_request("").into_bytes();
    bytes.extend_from_slice(&[0x81, 0x02, b'h', b'i']);
    s.write_all(&bytes).expect("send");
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101"));
    s.read_exact(&mut frame).expect("close frame");
    assert_eq!(u16::from_be_bytes([frame[2], frame[3]]), 1002);

    // A 64-bit payload length with its most significant bit set (RFC 6455 §5.2: it MUST be 0)
    // is a malformed frame, not a large one: 1002, not 1009.
    let mut s = connect(srv.addr);
    let mut bytes = upgrade_request("").into_bytes();
    bytes.extend_from_slice(&[0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4]);
    s.write_all(&bytes).expect("send");
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101"));
    s.read_exact(&mut frame).expect("close frame");
    assert_eq!(u16::from_be_bytes([frame[2], frame[3]]), 1002);

    // The server still serves.
    let mut ws = client(srv.addr, "/ws");
    ws.send(Message::text("still here")).expect("send");
    assert_eq!(ws.read().expect("read"), Message::text("still here"));
}

/// A peer flooding a WebSocket whose handler is slow does not starve another connection: the
/// engines yield after a budget of messages (with one worker on the thread-pool server, one loop
/// on the reactor).
fn a_flooding_websocket_does_not_starve_the_others(engine: Engine) {
    let cfg = Config {
        workers: 1,
        ..Config::default()
    };
    let srv = start_with(engine, cfg, |req: &mut Request<'_>| {
        let slow = req.path() == "/slow";
        match req.upgrade_websocket() {
            Ok(u) => u.accept(move |ws: &WsSender, msg: WsMessage| {
                if slow {
                    std::thread::sleep(Duration::from_millis(1));
                } else {
                    let _ = ws.send(msg);
                }
            }),
            Err(r) => r,
        }
    });
    let mut other = client(srv.addr, "/echo");
    let mut flood = client(srv.addr, "/slow");
    // About 2 s of handler time, all buffered at the server at once.
    for i in 0..2000 {
        flood.write(Message::text(i.to_string())).expect("write");
    }
    flood.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(50));
    let started = std::time::Instant::now();
    other.send(Message::text("hi")).expect("send");
    assert_eq!(other.read().expect("echo"), Message::text("hi"));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the echo waited {:?}",
        started.elapsed()
    );
}

/// Echoes, and keeps every connection's sender for pushes.
struct EchoRegistry(Senders);

impl WsHandler for EchoRegistry {
    fn on_open(&mut self, ws: &WsSender) {
        self.0.lock().expect("lock").push(ws.clone());
    }
    fn on_message(&mut self, ws: &WsSender, msg: WsMessage) {
        let _ = ws.send(msg);
    }
}

/// Pushes from several threads racing with each connection's own echoes: every message arrives,
/// each source's in order (the engines' wake-ups and their "running" flag under contention).
fn pushes_race_with_echoes(engine: Engine) {
    const CONNS: usize = 24;
    const PUSHERS: usize = 3;
    const EACH: usize = 150;
    let senders: Senders = Arc::default();
    let keep = senders.clone();
    let srv = start(engine, move |req: &mut Request<'_>| {
        match req.upgrade_websocket() {
            Ok(u) => u.accept(EchoRegistry(keep.clone())),
            Err(r) => r,
        }
    });
    let clients: Vec<_> = (0..CONNS).map(|_| client(srv.addr, "/")).collect();
    let all = wait_for_senders(&senders, CONNS);
    let readers: Vec<_> = clients
        .into_iter()
        .map(|mut ws| {
            std::thread::spawn(move || {
                ws.get_mut()
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .expect("timeout");
                for i in 0..EACH {
                    ws.write(Message::text(format!("e{i}"))).expect("write");
                }
                ws.flush().expect("flush");
                let mut next_echo = 0;
                let mut next_push = [0usize; PUSHERS];
                while next_echo < EACH || next_push.iter().any(|&n| n < EACH) {
                    let msg = ws.read().expect("read");
                    let text = msg.to_text().expect("text");
                    if let Some(i) = text.strip_prefix('e') {
                        assert_eq!(i, next_echo.to_string(), "echo order");
                        next_echo += 1;
                    } else {
                        let (t, j) = text.split_once(':').expect("push");
                        let t: usize = t.parse().expect("pusher");
                        assert_eq!(j, next_push[t].to_string(), "push order of {t}");
                        next_push[t] += 1;
                    }
                }
            })
        })
        .collect();
    let pushers: Vec<_> = (0..PUSHERS)
        .map(|t| {
            let all = all.clone();
            std::thread::spawn(move || {
                for j in 0..EACH {
                    for s in &all {
                        s.send(format!("{t}:{j}")).expect("push");
                    }
                }
            })
        })
        .collect();
    for p in pushers {
        p.join().expect("pusher");
    }
    for r in readers {
        r.join().expect("reader");
    }
}

/// Keeps every connection's sender, and reports `on_close`.
struct Registry {
    senders: Senders,
    closed: mpsc::Sender<Option<u16>>,
}

impl WsHandler for Registry {
    fn on_open(&mut self, ws: &WsSender) {
        self.senders.lock().expect("lock").push(ws.clone());
    }
    fn on_message(&mut self, _: &WsSender, _: WsMessage) {}
    fn on_close(&mut self, frame: Option<CloseFrame>) {
        let _ = self.closed.send(frame.map(|f| u16::from(f.code)));
    }
}

/// Every open connection's sender.
type Senders = Arc<Mutex<Vec<WsSender>>>;

fn registry_server(engine: Engine) -> (TestServer, Senders, mpsc::Receiver<Option<u16>>) {
    let senders = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let s = senders.clone();
    let tx = Mutex::new(tx);
    let srv = start(engine, move |req: &mut Request<'_>| {
        match req.upgrade_websocket() {
            Ok(u) => u.accept(Registry {
                senders: s.clone(),
                closed: tx.lock().expect("lock").clone(),
            }),
            Err(r) => r,
        }
    });
    (srv, senders, rx)
}

fn wait_for_senders(senders: &Mutex<Vec<WsSender>>, n: usize) -> Vec<WsSender> {
    for _ in 0..500 {
        let got = senders.lock().expect("lock").clone();
        if got.len() >= n {
            return got;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{n} connections did not open");
}

fn push_from_another_thread(engine: Engine) {
    let (srv, senders, closed) = registry_server(engine);
    let mut clients: Vec<_> = (0..3).map(|_| client(srv.addr, "/")).collect();
    let senders = wait_for_senders(&senders, 3);
    // The clients send nothing: the engine is waiting on their sockets when the push comes.
    std::thread::sleep(Duration::from_millis(50));
    let pusher = std::thread::spawn(move || {
        for (i, s) in senders.iter().enumerate() {
            s.send(format!("to {i}")).expect("push");
            s.send(vec![i as u8; 3]).expect("push");
        }
        senders
    });
    let mut got: Vec<String> = Vec::new();
    for c in &mut clients {
        let text = c.read().expect("pushed text");
        got.push(text.to_text().expect("text").to_owned());
        assert!(matches!(c.read().expect("pushed binary"), Message::Binary(b) if b.len() == 3));
    }
    got.sort();
    assert_eq!(got, ["to 0", "to 1", "to 2"]);
    let senders = pusher.join().expect("pusher");
    // A client that goes away: its sender reports it, and on_close runs once.
    let mut gone = clients.remove(0);
    gone.close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }))
    .expect("close");
    let _ = gone.read();
    drop(gone);
    let code = closed
        .recv_timeout(Duration::from_secs(5))
        .expect("on_close");
    assert_eq!(code, Some(1000));
    let mut refused = false;
    for _ in 0..200 {
        if senders
            .iter()
            .any(|s| s.send("late").is_err() && s.is_closed())
        {
            refused = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(refused, "the closed connection's sender reports it");
}

fn shutdown_closes_with_1001(engine: Engine) {
    let (srv, senders, closed) = registry_server(engine);
    let mut ws = client(srv.addr, "/");
    wait_for_senders(&senders, 1);
    let (done_tx, done_rx) = mpsc::channel();
    let stopper = std::thread::spawn(move || {
        let _ = done_tx.send(srv.shutdown(Duration::from_secs(10)));
    });
    assert_eq!(close_code(&mut ws), Some(CloseCode::Away));
    drop(ws);
    stopper.join().expect("stopper");
    assert!(done_rx.recv().expect("shutdown result").is_ok());
    assert_eq!(
        closed
            .recv_timeout(Duration::from_secs(5))
            .expect("on_close"),
        Some(1001)
    );
}

/// A client that never answers the server's close frame: shutdown still ends, once the closing
/// handshake's timeout has passed.
fn shutdown_does_not_wait_for_a_silent_client(engine: Engine) {
    let srv = start(engine, |req: &mut Request<'_>| {
        match req.upgrade_websocket() {
            Ok(u) => u
                .with_config(WsConfig::default().close_timeout(Duration::from_millis(300)))
                .accept(|ws: &WsSender, msg: WsMessage| {
                    let _ = ws.send(msg);
                }),
            Err(r) => r,
        }
    });
    // Upgraded by hand and then silent: the client never reads or answers.
    let mut silent = connect(srv.addr);
    silent
        .write_all(upgrade_request("").as_bytes())
        .expect("upgrade");
    assert!(read_head(&mut silent).starts_with("HTTP/1.1 101"));
    let mut ws = client(srv.addr, "/");
    ws.send(Message::text("x")).expect("send");
    assert_eq!(ws.read().expect("echo"), Message::text("x"));
    let started = std::time::Instant::now();
    let (done_tx, done_rx) = mpsc::channel();
    let stopper = std::thread::spawn(move || {
        let _ = done_tx.send(srv.shutdown(Duration::from_secs(10)));
    });
    // The cooperative client gets its 1001 and answers it.
    assert_eq!(close_code(&mut ws), Some(CloseCode::Away));
    let result = done_rx
        .recv_timeout(Duration::from_secs(8))
        .expect("shutdown returned");
    assert!(result.is_ok(), "{result:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        started.elapsed()
    );
    stopper.join().expect("stopper");
    drop(silent);
}

/// A WebSocket whose 101 went out as shutdown began is closed as an open one is: a 1001 and the
/// closing handshake, and the shutdown ends in time. The client begins the shutdown the moment
/// it reads its 101, racing the server's start of the session, many times over. (The server
/// engine with parking closed it without either when the shutdown came first: its parker
/// refused the session, and a client that upgraded a moment before a signal saw its connection
/// drop; about 1 run in 10 of the signals test hit it.)
fn a_websocket_upgraded_as_shutdown_begins_gets_1001(engine: Engine) {
    for round in 0..100 {
        let srv = start(engine, ws_app);
        let mut ws = client(srv.addr, "/ws");
        srv.shutdown_handle().shutdown();
        assert_eq!(close_code(&mut ws), Some(CloseCode::Away), "round {round}");
        drop(ws);
        let result = srv.shutdown(Duration::from_secs(10));
        assert!(result.is_ok(), "round {round}: {result:?}");
    }
}

fn panicking_callback_closes_with_1011(engine: Engine) {
    let srv = start(engine, ws_app);
    let mut ws = client(srv.addr, "/panic");
    ws.send(Message::text("boom")).expect("send");
    assert_eq!(close_code(&mut ws), Some(CloseCode::Error));
    // Counted with the handlers' panics (it was not).
    srv.stats_until("the panic counted", |st| st.panics == 1);
    let mut ws = client(srv.addr, "/ws");
    ws.send(Message::text("alive")).expect("send");
    assert_eq!(ws.read().expect("read"), Message::text("alive"));
    assert_eq!(srv.stats().panics, 1);
}

/// An echo handler whose `Drop` panics.
struct EchoPanicsWhenDropped;

impl WsHandler for EchoPanicsWhenDropped {
    fn on_message(&mut self, ws: &WsSender, msg: WsMessage) {
        let _ = ws.send(msg);
    }
}

impl Drop for EchoPanicsWhenDropped {
    fn drop(&mut self) {
        panic!("a websocket handler panics when dropped");
    }
}

/// A handler's `Drop` is handler code: where its connection ends (after a closing handshake,
/// or cut), a panic there is caught and counted, and the thread that dropped it (an event
/// loop, a worker, a session's thread) goes on (it was not caught).
fn a_handler_that_panics_when_dropped_is_counted(engine: Engine) {
    let srv = start(engine, ws_app);
    let mut ws = client(srv.addr, "/panics-when-dropped");
    ws.send(Message::text("one")).expect("send");
    assert_eq!(ws.read().expect("read"), Message::text("one"));
    ws.close(None).expect("close");
    assert_eq!(close_code(&mut ws), None, "the close echoed, then the end");
    srv.stats_until("the first panic counted", |st| st.panics == 1);
    let mut ws = client(srv.addr, "/panics-when-dropped");
    ws.send(Message::text("two")).expect("send");
    assert_eq!(ws.read().expect("read"), Message::text("two"));
    drop(ws);
    srv.stats_until("the second panic counted", |st| st.panics == 2);
    // Fresh clients, spread over the reactor's loops.
    for i in 0..4 {
        let mut ws = client(srv.addr, "/ws");
        ws.send(Message::text("alive")).expect("send");
        assert_eq!(
            ws.read().expect("read"),
            Message::text("alive"),
            "client {i}"
        );
    }
    assert_eq!(srv.stats().panics, 2);
}

/// A handler that panics on a message, and again when dropped (on the state the first panic
/// left).
struct PanicsTwice;

impl WsHandler for PanicsTwice {
    fn on_message(&mut self, _: &WsSender, _: WsMessage) {
        panic!("a websocket callback panics");
    }
}

impl Drop for PanicsTwice {
    fn drop(&mut self) {
        panic!("and its handler when dropped");
    }
}

/// One panic a handler, as one a response body: a `Drop` that panics after a callback did is
/// logged, not counted again (found by review: counted twice).
fn a_handler_that_panics_and_then_panics_when_dropped_is_counted_once(engine: Engine) {
    let srv = start(engine, ws_app);
    let mut ws = client(srv.addr, "/panics-twice");
    ws.send(Message::text("boom")).expect("send");
    assert_eq!(close_code(&mut ws), Some(CloseCode::Error));
    drop(ws);
    srv.until_none_open();
    // Its handler is dropped as its connection ends, on whichever thread ends it.
    let mut ws = client(srv.addr, "/ws");
    ws.send(Message::text("alive")).expect("send");
    assert_eq!(ws.read().expect("read"), Message::text("alive"));
    assert_eq!(srv.stats().panics, 1);
}

fn generic_upgrade_and_blocking_websocket(engine: Engine) {
    let srv = start(engine, ws_app);
    let mut s = connect(srv.addr);
    s.write_all(
        b"GET /raw HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: x-echo\r\n\r\nearly",
    )
    .expect("send");
    let head = read_head(&mut s);
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    assert!(head.contains("upgrade: x-echo\r\n") || head.contains("Upgrade: x-echo\r\n"));
    let mut early = [0u8; 5];
    s.read_exact(&mut early).expect("early bytes echoed");
    assert_eq!(&early, b"early");
    s.write_all(b"later").expect("send");
    s.read_exact(&mut early).expect("echo");
    assert_eq!(&early, b"later");
    // A request with a body switches once its body is read (RFC 9110 §7.8): the bytes after
    // the body are the new protocol's.
    let mut s = connect(srv.addr);
    s.write_all(
        b"POST /raw HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: x-echo\r\n\
          Content-Length: 4\r\n\r\nbodyafter",
    )
    .expect("send");
    let head = read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    s.read_exact(&mut early)
        .expect("the bytes after the body echoed");
    assert_eq!(&early, b"after");
    // Without Connection: upgrade the switch is refused.
    let (raw, _) = probe(
        srv.addr,
        b"GET /raw HTTP/1.1\r\nHost: t\r\nUpgrade: x-echo\r\n\r\n",
    );
    assert_eq!(raw.status, 426);
    // It names the protocol the handler offered, with the `upgrade` connection option.
    assert_eq!(raw.header("upgrade"), Some("x-echo"));
    assert_eq!(raw.header("connection"), Some("upgrade, close"));
    // The handler can take the TCP stream itself out of the upgraded connection.
    let mut s = connect(srv.addr);
    s.write_all(
        b"GET /raw-tcp HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: x-echo\r\n\r\nearly",
    )
    .expect("send");
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101 "));
    let mut rest = String::new();
    s.read_to_string(&mut rest).expect("read to the end");
    assert_eq!(rest, "tcp:early");

    let mut ws = client(srv.addr, "/blocking");
    ws.send(Message::text("own loop")).expect("send");
    assert_eq!(ws.read().expect("read"), Message::text("own loop"));
}

/// A generic switch goes only to a protocol the client's `Upgrade` lists (RFC 9110 §7.8), and
/// its `101` carries no framing fields the handler set (a 1xx has no content).
fn a_switch_goes_only_to_a_protocol_the_client_offered(engine: Engine) {
    let srv = start(engine, |_: &mut Request<'_>| {
        Response::upgrade("x-echo", |_| {})
            .with_header("Content-Length", "5")
            .with_header("Transfer-Encoding", "chunked")
    });
    for upgrade in ["", "Upgrade: h2c\r\n", "Upgrade: x-echo-not\r\n"] {
        let request = format!("GET / HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\n{upgrade}\r\n");
        let (raw, _) = probe(srv.addr, request.as_bytes());
        assert_eq!(raw.status, 426, "{upgrade:?}");
        assert_eq!(raw.header("upgrade"), Some("x-echo"), "{upgrade:?}");
    }
    for upgrade in ["h2c, X-Echo/2", "x-echo", "h2c\r\nUpgrade: x-echo"] {
        let mut s = connect(srv.addr);
        let request = format!(
            "GET / HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: {upgrade}\r\n\r\n"
        );
        s.write_all(request.as_bytes()).expect("send");
        let head = read_head(&mut s).to_ascii_lowercase();
        assert!(
            head.starts_with("http/1.1 101 switching protocols\r\n"),
            "{head}"
        );
        assert!(
            !head.contains("content-length") && !head.contains("transfer-encoding"),
            "{head}"
        );
    }
    // A value with other bytes (obs-text) still lists what it lists.
    let mut s = connect(srv.addr);
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: x-echo, y\xff\r\n\r\n",
    )
    .expect("send");
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101 "));
}

/// Holds `on_open` until the test's word, and reports `on_close`'s frame.
struct HeldOpen {
    release: crossbeam_channel::Receiver<()>,
    closed: crossbeam_channel::Sender<Option<u16>>,
}

impl WsHandler for HeldOpen {
    fn on_open(&mut self, _: &WsSender) {
        let _ = self.release.recv();
    }
    fn on_message(&mut self, _: &WsSender, _: WsMessage) {}
    fn on_close(&mut self, frame: Option<CloseFrame>) {
        let _ = self.closed.send(frame.map(|f| u16::from(f.code)));
    }
}

/// A reactor with pool dispatch whose WebSocket handler holds `on_open` until `release` says,
/// and reports `on_close`'s code; a client has upgraded and sent an unmasked text frame, a
/// protocol error the server closed with 1002 before hanging up (read to the end here).
struct FailedWhileAway {
    reactor: twinhttp::reactor::Reactor,
    release: crossbeam_channel::Sender<()>,
    close_seen: crossbeam_channel::Receiver<Option<u16>>,
}

fn failed_while_away() -> FailedWhileAway {
    use twinhttp::reactor::{Dispatch, Reactor};
    let (release, released) = crossbeam_channel::bounded::<()>(0);
    let (closed, close_seen) = crossbeam_channel::bounded::<Option<u16>>(1);
    let reactor = Reactor::builder()
        .loops(1)
        .dispatch(Dispatch::Pool(2))
        .serve("127.0.0.1:0", move |req: &mut Request<'_>| {
            match req.upgrade_websocket() {
                Ok(u) => u.accept(HeldOpen {
                    release: released.clone(),
                    closed: closed.clone(),
                }),
                Err(r) => r,
            }
        })
        .expect("reactor starts");
    let mut s = connect(reactor.local_addr());
    s.write_all(upgrade_request("").as_bytes()).expect("send");
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101 "));
    s.write_all(&[0x81, 0x02, b'h', b'i']).expect("send");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest)
        .expect("the close frame, then the end");
    assert_eq!(
        &rest[..4],
        &[0x88, 0x02, 0x03, 0xea],
        "a close frame with 1002: {rest:?}"
    );
    FailedWhileAway {
        reactor,
        release,
        close_seen,
    }
}

/// With pool dispatch, a connection the server fails while its handler is still on a worker
/// (`on_open` held) reports the frame the server sent to `on_close` once the handler is back,
/// not `None`.
#[test]
fn with_pool_dispatch_on_close_gets_the_frame_sent_while_the_handler_was_away() {
    let f = failed_while_away();
    // The connection is gone; its handler comes back from `on_open`.
    f.release.send(()).expect("on_open waits");
    let frame = f
        .close_seen
        .recv_timeout(Duration::from_secs(10))
        .expect("on_close runs");
    assert_eq!(frame, Some(1002));
    f.reactor
        .shutdown(Duration::from_secs(5))
        .expect("shutdown");
}

/// The same at shutdown: the loop whose connection went while its handler was on a worker
/// stays until the handler is back, so that `on_close` runs (it was dropped unrun, and the
/// shutdown said all was well).
#[test]
fn with_pool_dispatch_on_close_runs_when_the_handler_comes_back_during_shutdown() {
    let f = failed_while_away();
    let addr = f.reactor.local_addr();
    // Shutdown begins while the handler is away; once it refuses new connections, the loop
    // has seen it (and with no connection left, it used to end there).
    let reactor = f.reactor;
    let shutdown = std::thread::spawn(move || reactor.shutdown(Duration::from_secs(10)));
    let began = std::time::Instant::now();
    while TcpStream::connect(addr).is_ok() {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "the shutdown begins"
        );
        std::thread::yield_now();
    }
    f.release.send(()).expect("on_open waits");
    let frame = f
        .close_seen
        .recv_timeout(Duration::from_secs(10))
        .expect("on_close runs");
    assert_eq!(frame, Some(1002));
    shutdown
        .join()
        .expect("the shutdown thread")
        .expect("a clean shutdown");
}

fn idle_ping_and_timeout(engine: Engine) {
    let srv = start_with(engine, Config::default(), |req: &mut Request<'_>| match req
        .upgrade_websocket()
    {
        Ok(u) => u
            .with_config(
                WsConfig::default()
                    .ping_interval(Some(Duration::from_millis(100)))
                    .idle_timeout(Some(Duration::from_millis(400))),
            )
            .accept(|_: &WsSender, _: WsMessage| {}),
        Err(r) => r,
    });
    let mut ws = client(srv.addr, "/");
    // The server pings a quiet client; tungstenite queues the pong but sends it only on the
    // next read or write, so a client that stops reading stays silent and is closed for it.
    match ws.read().expect("server ping") {
        Message::Ping(_) => {}
        other => panic!("expected a ping, got {other:?}"),
    }
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(close_code(&mut ws), Some(CloseCode::Away));
}

engine_tests!(
    a_large_frame_is_charged_until_its_buffer_is_given_back,
    a_large_message_goes_out_in_frames,
    a_closing_websocket_is_held_to_the_memory_budget,
    an_unfinished_message_is_held_to_the_memory_budget,
    extreme_settings_are_served,
    a_switch_goes_only_to_a_protocol_the_client_offered,
    upgrade_edge_cases,
    echo_text_and_binary,
    frames_sent_with_the_upgrade_request_are_not_lost,
    a_client_that_reads_late_gets_every_echo,
    close_handshake_is_echoed,
    limits_and_protocol_errors_close_with_their_codes,
    push_from_another_thread,
    pushes_race_with_echoes,
    a_flooding_websocket_does_not_starve_the_others,
    shutdown_closes_with_1001,
    shutdown_does_not_wait_for_a_silent_client,
    a_websocket_upgraded_as_shutdown_begins_gets_1001,
    panicking_callback_closes_with_1011,
    a_handler_that_panics_when_dropped_is_counted,
    a_handler_that_panics_and_then_panics_when_dropped_is_counted_once,
    generic_upgrade_and_blocking_websocket,
    idle_ping_and_timeout,
);
