//! A WebSocket client over a bare socket that allocates nothing for a frame's payload: frames of
//! any length are sent from a static block of zeros (masked with a zero key, which leaves them
//! as they are), so a test that counts the process's memory counts the server's.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use twinhttp::Request;
use twinhttp::Response;
use twinhttp::ws::{RequestExt, WsMessage, WsSender};

/// Opcode and FIN bits of the frames the tests send.
pub const BINARY: u8 = 0x82;
pub const BINARY_FIRST: u8 = 0x02;
pub const CONTINUATION_LAST: u8 = 0x80;
pub const PING: u8 = 0x89;
pub const TEXT: u8 = 0x81;
pub const PONG: u8 = 0x8a;

static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// A WebSocket that answers each message with its length in bytes, as text, after dropping it.
pub fn lengths(req: &mut Request<'_>) -> Response {
    match req.upgrade_websocket() {
        Ok(u) => u.accept(|ws: &WsSender, msg: WsMessage| {
            let len = msg.len();
            drop(msg);
            let _ = ws.send(len.to_string());
        }),
        Err(refusal) => refusal,
    }
}

/// A connection whose opening handshake on `path` has completed.
pub fn open(addr: SocketAddr, path: &str) -> TcpStream {
    let mut s = super::connect(addr);
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    s.write_all(request.as_bytes()).expect("upgrade");
    let head = super::read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    s
}

/// Sends a masked frame: `b0` (FIN and opcode) and `len` zero bytes of payload.
pub fn send(s: &mut TcpStream, b0: u8, len: usize) {
    let mut head = [0u8; 14];
    head[0] = b0;
    let n = match len {
        0..=125 => {
            head[1] = 0x80 | len as u8;
            2
        }
        126..=0xffff => {
            head[1] = 0x80 | 126;
            head[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            4
        }
        _ => {
            head[1] = 0x80 | 127;
            head[2..10].copy_from_slice(&(len as u64).to_be_bytes());
            10
        }
    };
    // The mask key: four zero bytes.
    s.write_all(&head[..n + 4]).expect("frame header");
    let mut left = len;
    while left > 0 {
        let chunk = left.min(ZEROS.len());
        s.write_all(&ZEROS[..chunk]).expect("payload");
        left -= chunk;
    }
}

/// Reads one unmasked frame of at most 125 bytes: its first byte and its payload.
pub fn read(s: &mut TcpStream) -> (u8, String) {
    let mut head = [0u8; 2];
    s.read_exact(&mut head).expect("frame header");
    let mut payload = [0u8; 125];
    let len = usize::from(head[1] & 0x7f);
    assert!(len <= 125, "a short frame");
    s.read_exact(&mut payload[..len]).expect("payload");
    (
        head[0],
        String::from_utf8_lossy(&payload[..len]).into_owned(),
    )
}

/// Sends a ping and waits for its pong: the server has read everything sent before it, and
/// has gone once more through its step that follows a read.
pub fn ping_pong(s: &mut TcpStream) {
    send(s, PING, 0);
    assert_eq!(read(s).0, PONG);
}
