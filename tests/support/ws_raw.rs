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

/// A WebSocket that answers each message with its length in bytes, as text, after dropping it;
/// a text message that is a number `N` is answered with `N` zero bytes, binary.
pub fn lengths(req: &mut Request<'_>) -> Response {
    match req.upgrade_websocket() {
        Ok(u) => u.accept(|ws: &WsSender, msg: WsMessage| {
            let asked = match &msg {
                WsMessage::Text(t) => t.as_str().parse::<usize>().ok(),
                WsMessage::Binary(_) => None,
            };
            let len = msg.len();
            drop(msg);
            let _ = match asked {
                Some(n) => ws.send(vec![0u8; n]),
                None => ws.send(len.to_string()),
            };
        }),
        Err(refusal) => refusal,
    }
}

/// Sends a masked text frame.
pub fn send_text(s: &mut TcpStream, text: &str) {
    let len = text.len();
    assert!(len <= 125, "a short text");
    s.write_all(&[TEXT, 0x80 | len as u8, 0, 0, 0, 0])
        .expect("frame header");
    s.write_all(text.as_bytes()).expect("payload");
}

/// Reads one unmasked message of any length, in one frame or several (the server sends a large
/// one in frames), its payload read into a fixed block and dropped: its first frame's first
/// byte with FIN set (as a message of one frame would have it), its frames, and its length.
pub fn skip(s: &mut TcpStream) -> (u8, usize, u64) {
    let mut first = None;
    let (mut frames, mut total) = (0, 0u64);
    loop {
        let mut head = [0u8; 2];
        s.read_exact(&mut head).expect("frame header");
        let len = match head[1] & 0x7f {
            126 => {
                let mut ext = [0u8; 2];
                s.read_exact(&mut ext).expect("length");
                u64::from(u16::from_be_bytes(ext))
            }
            127 => {
                let mut ext = [0u8; 8];
                s.read_exact(&mut ext).expect("length");
                u64::from_be_bytes(ext)
            }
            short => u64::from(short),
        };
        let mut block = [0u8; 16 * 1024];
        let mut left = len;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            s.read_exact(&mut block[..n]).expect("payload");
            left -= n as u64;
        }
        first.get_or_insert(head[0] | 0x80);
        frames += 1;
        total += len;
        if head[0] & 0x80 != 0 {
            return (first.unwrap_or(0), frames, total);
        }
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
