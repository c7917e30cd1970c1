//! The hello server used for benchmarks.
//!
//! `cargo run --release --example hello --features server -- --addr 127.0.0.1:8080`
//! (`--engine reactor [--dispatch pool]` for the reactor; `--help` for every option)
//!
//! Routes: `GET /` → `Hello, World!`; `GET /cpu?us=N` → N microseconds of CPU work (100, at
//! most 1,000,000); `GET /sleep?ms=N` → a blocking wait of N ms (10, at most 10,000; a stand-in
//! for a database call); a value that is not a number or is over its bound → 400; `GET /ws` → a
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
        "/cpu" => match number(req, "us", 100, 1_000_000) {
            Ok(us) => {
                let until = Instant::now() + Duration::from_micros(us);
                let mut x = 0u64;
                while Instant::now() < until {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
                Response::text("done")
            }
            Err(refused) => refused,
        },
        "/sleep" => match number(req, "ms", 10, 10_000) {
            Ok(ms) => {
                std::thread::sleep(Duration::from_millis(ms));
                Response::text("slept")
            }
            Err(refused) => refused,
        },
        "/ws" => match req.upgrade_websocket() {
            Ok(upgrade) => upgrade.accept(|ws: &WsSender, msg: WsMessage| {
                let _ = ws.send(msg);
            }),
            Err(refusal) => refusal,
        },
        _ => Response::new(404),
    }
}

/// The query parameter `name` as a number up to `max`, `default` without one, and a 400 saying
/// what is wrong when it is not a number or is over `max` (a worker held for hours would hold
/// up the server's shutdown too).
fn number(req: &Request<'_>, name: &str, default: u64, max: u64) -> Result<u64, Response> {
    let refused = |why: String| Response::new(400).with_body(why);
    match req.query_param(name).map(|n| n.parse::<u64>()) {
        None => Ok(default),
        Some(Ok(n)) if n <= max => Ok(n),
        Some(Ok(_)) => Err(refused(format!("{name} is over {max}\n"))),
        Some(Err(_)) => Err(refused(format!("{name} is not a number\n"))),
    }
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
