//! The hello server on the reactor engine; needs no Cargo feature.
//!
//! `cargo run --release --example hello_reactor` (takes the same options as `hello`; the engine
//! is the reactor, inline dispatch unless `--dispatch pool`; `--engine server` and the server
//! engine's options are refused).

mod support;

use twinhttp::{Request, Response};

fn hello(req: &mut Request<'_>) -> Response {
    match req.path() {
        "/" => Response::text("Hello, World!"),
        _ => Response::new(404),
    }
}

fn main() {
    support::init_logger();
    let signals = support::Signals::install("hello_reactor");
    let args = support::Args::parse_for_engine("hello_reactor", "reactor");
    let running = args.serve(hello);
    support::say(&format!(
        "hello_reactor: listening on http://{} ({})",
        running.local_addr(),
        args.label()
    ));
    support::until_signal(running, "hello_reactor", signals);
}
