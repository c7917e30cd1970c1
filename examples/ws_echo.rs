//! WebSocket echo: accepts the upgrade on any path and sends every text and binary message back
//! unchanged. The server the Autobahn conformance run and the WebSocket benchmarks use.
//!
//! `cargo run --release --example ws_echo --features server -- --addr 127.0.0.1:9001`
//! (`--engine reactor [--dispatch pool]` for the reactor; `--help` for every option)

mod support;

use twinhttp::ws::{RequestExt, WsMessage, WsSender};
use twinhttp::{Request, Response};

fn echo(req: &mut Request<'_>) -> Response {
    match req.upgrade_websocket() {
        Ok(upgrade) => upgrade.accept(|ws: &WsSender, msg: WsMessage| {
            let _ = ws.send(msg);
        }),
        Err(refusal) => refusal,
    }
}

fn main() {
    support::Args::run("ws_echo", echo);
}
