//! tokio-tungstenite 0.30 on tokio's multi-thread runtime (a worker per core), a task per
//! connection. `tokio_tungstenite_echo PORT [READ_BUFFER_BYTES]`.
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port = peer_routes::port();
    let read_buffer = peer_routes::arg_number(2);
    let config = read_buffer.map(|n| WebSocketConfig::default().read_buffer_size(n));
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("tokio-tungstenite echo on 127.0.0.1:{port}");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let Ok(mut ws) = tokio_tungstenite::accept_async_with_config(stream, config).await
            else {
                return;
            };
            while let Some(Ok(m)) = ws.next().await {
                if (m.is_text() || m.is_binary()) && ws.send(m).await.is_err() {
                    return;
                }
            }
        });
    }
}
