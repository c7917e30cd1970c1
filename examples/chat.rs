//! A chat room: every message a WebSocket client sends is broadcast to every connected client
//! through their `WsSender`s. `GET /` serves a small HTML page that connects to `/ws`.
//!
//! `cargo run --release --example chat --features server` then open http://127.0.0.1:8080/ in
//! two browser tabs (`--engine reactor [--dispatch pool]` as for `hello`).

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use twinhttp::ws::{CloseFrame, RequestExt, WsHandler, WsMessage, WsSender};
use twinhttp::{Request, Response};

/// Everyone in the room, by connection number.
#[derive(Clone, Default)]
struct Room {
    members: Arc<Mutex<HashMap<u64, WsSender>>>,
    next: Arc<AtomicU64>,
}

impl Room {
    fn broadcast(&self, text: &str) {
        let members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        for ws in members.values() {
            // A member whose queue is full or who is leaving misses the message.
            let _ = ws.send(text);
        }
    }
}

/// One member's connection.
struct Member {
    room: Room,
    id: u64,
}

impl WsHandler for Member {
    fn on_open(&mut self, ws: &WsSender) {
        self.room
            .members
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.id, ws.clone());
        self.room.broadcast(&format!("* user{} joined", self.id));
    }

    fn on_message(&mut self, _: &WsSender, msg: WsMessage) {
        if let Some(text) = msg.as_text() {
            self.room.broadcast(&format!("user{}: {text}", self.id));
        }
    }

    fn on_close(&mut self, _: Option<CloseFrame>) {
        self.room
            .members
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        self.room.broadcast(&format!("* user{} left", self.id));
    }
}

const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>twinhttp chat</title></head>
<body>
<h1>twinhttp chat</h1>
<pre id="log" style="height:20em;overflow:auto;border:1px solid #ccc"></pre>
<form id="f"><input id="msg" autocomplete="off" autofocus><button>send</button></form>
<script>
const log = document.getElementById("log");
const ws = new WebSocket(`ws://${location.host}/ws`);
ws.onmessage = (e) => { log.textContent += e.data + "\n"; log.scrollTop = log.scrollHeight; };
ws.onclose = () => { log.textContent += "* disconnected\n"; };
document.getElementById("f").onsubmit = (e) => {
  e.preventDefault();
  const input = document.getElementById("msg");
  if (input.value) { ws.send(input.value); input.value = ""; }
};
</script>
</body></html>
"#;

fn main() {
    let room = Room::default();
    let app = move |req: &mut Request<'_>| match req.path() {
        "/" => Response::html(PAGE),
        "/ws" => match req.upgrade_websocket() {
            Ok(upgrade) => upgrade.accept(Member {
                room: room.clone(),
                id: room.next.fetch_add(1, Ordering::Relaxed) + 1,
            }),
            Err(refusal) => refusal,
        },
        _ => Response::new(404),
    };
    support::Args::run("chat", app);
}
