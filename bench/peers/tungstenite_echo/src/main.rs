//! tungstenite 0.30 over std's blocking sockets, one OS thread per connection: the plain blocking
//! WebSocket echo. `tungstenite_echo PORT [READ_BUFFER_BYTES]` (tungstenite's default read
//! buffer is 128 KiB per connection, zero-filled, so resident; 4096 cuts idle memory about 6x).
use std::net::TcpListener;

use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, accept_with_config};

fn main() {
    let port = peer_routes::port();
    let read_buffer = peer_routes::arg_number(2);
    let config = read_buffer.map(|n| WebSocketConfig::default().read_buffer_size(n));
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind");
    eprintln!("tungstenite (thread per connection) echo on 127.0.0.1:{port}");
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let _ = stream.set_nodelay(true);
        std::thread::spawn(move || {
            let Ok(mut ws) = accept_with_config(stream, config) else {
                return;
            };
            loop {
                match ws.read() {
                    Ok(m @ (Message::Text(_) | Message::Binary(_))) => {
                        if ws.send(m).is_err() {
                            return;
                        }
                    }
                    // Pings are answered and a close echoed by tungstenite itself.
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        });
    }
}
