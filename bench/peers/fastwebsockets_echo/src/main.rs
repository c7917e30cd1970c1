//! fastwebsockets 0.10 on tokio's multi-thread runtime (a worker per core), a task per
//! connection; the upgrade is read by hand (fastwebsockets' own needs hyper), then
//! `WebSocket::after_handshake` with a `FragmentCollector`, automatic pong and close.
//! `fastwebsockets_echo PORT`.
use fastwebsockets::{FragmentCollector, OpCode, Role, WebSocket};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Reads the upgrade request and answers 101; `None` if the peer went or sent no key.
async fn upgrade(stream: &mut TcpStream) -> Option<()> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || head.len() > 16 * 1024 {
            return None;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let key = std::str::from_utf8(&head).ok()?.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("sec-websocket-key")
            .then(|| value.trim().to_owned())
    })?;
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    stream.write_all(response.as_bytes()).await.ok()
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port = peer_routes::port();
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("fastwebsockets echo on 127.0.0.1:{port}");
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            if upgrade(&mut stream).await.is_none() {
                return;
            }
            let mut ws = WebSocket::after_handshake(stream, Role::Server);
            ws.set_auto_close(true);
            ws.set_auto_pong(true);
            let mut ws = FragmentCollector::new(ws);
            while let Ok(frame) = ws.read_frame().await {
                let echoed = match frame.opcode {
                    OpCode::Close => return,
                    OpCode::Text | OpCode::Binary => ws.write_frame(frame).await,
                    _ => Ok(()),
                };
                if echoed.is_err() {
                    return;
                }
            }
        });
    }
}
