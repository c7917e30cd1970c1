//! The hello server used for benchmarks.
//!
//! `cargo run --release --example hello --features server -- --addr 127.0.0.1:8080`
//! (`--engine reactor [--dispatch pool]` for the reactor; `--help` for every option)
//!
//! Routes: `GET /` → `Hello, World!`; `GET /cpu?us=N` → N microseconds of CPU work;
//! `GET /sleep?ms=N` → a blocking wait of N ms (a stand-in for a database call); `GET /ws` → a
//! WebSocket echo (for the idle-connection bench); `GET /client` → the client's address and
//! scheme as the server sees them (behind a proxy: `--proxy-protocol`, `--trusted-proxy`).

mod support;

use std::time::{Duration, Instant};

use twinhttp::ws::{RequestExt, WsMessage, WsSender};
use twinhttp::{Engine, Request, Response};

fn hello(req: &mut Request<'_>) -> Response {
    match req.path() {
        "/" => Response::text("Hello, World!"),
        "/client" => {
            let ip = req
                .client_ip()
                .map_or_else(|| "-".to_owned(), |ip| ip.to_string());
            Response::text(format!("{ip} {}\n", req.scheme()))
        }
        "/cpu" => {
            let us = number(req, "us").unwrap_or(100);
            let until = Instant::now() + Duration::from_micros(us);
            let mut x = 0u64;
            while Instant::now() < until {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            Response::text("done")
        }
        "/sleep" => {
            let ms = number(req, "ms").unwrap_or(10);
            std::thread::sleep(Duration::from_millis(ms));
            Response::text("slept")
        }
        "/ws" => match req.upgrade_websocket() {
            Ok(upgrade) => upgrade.accept(|ws: &WsSender, msg: WsMessage| {
                let _ = ws.send(msg);
            }),
            Err(refusal) => refusal,
        },
        _ => Response::new(404),
    }
}

/// The query parameter `name` as a number, if it is one.
fn number(req: &Request<'_>, name: &str) -> Option<u64> {
    req.query_param(name)?.parse().ok()
}

fn main() {
    support::init_logger();
    let signals = support::Signals::install("hello");
    let args = support::Args::parse();
    // The engine is one value chosen at run time (`--engine server|reactor`, `--dispatch
    // inline|pool`); every setting is made once on one builder, whichever engine serves, and
    // the running server is one type.
    let engine: Engine = args.engine();
    let builder = args.configure(engine.builder().idle_timeout(Duration::from_secs(60)));
    let running = args.start(builder, hello).unwrap_or_else(|e| {
        eprintln!("error: {e}"); // names the address
        std::process::exit(1)
    });
    support::say_listening("hello", &running, &args);
    support::until_signal(running, "hello", signals);
}
