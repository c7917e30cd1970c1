//! Heap allocations per keep-alive request on the hello path, for each engine configuration.
//! A counting global allocator counts every allocation in this process; the client below
//! allocates nothing while measuring (a static request, a fixed read buffer), so what is counted
//! is the server's. The only test in this binary, so nothing else allocates meanwhile. A
//! layer that does nothing, around a router with state, adds none on the event-driven path.
mod support;
use std::io::{Read, Write};

use support::counting::{self, Counting};
use support::{Config, Engine, start_with};
use twinhttp::layer::{HandlerExt, layer_fn};
use twinhttp::{Request, Response};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn hello(_: &mut Request<'_>) -> Response {
    Response::text("Hello, World!")
}

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: alloc\r\n\r\n";

/// One request and its whole response, without allocating: the response has a fixed length
/// (the Date value always has 29 bytes), learned on the first exchange.
fn exchange(s: &mut std::net::TcpStream, buf: &mut [u8; 512], len: usize) {
    s.write_all(REQUEST).expect("send");
    s.read_exact(&mut buf[..len]).expect("response");
}

fn response_len(s: &mut std::net::TcpStream) -> usize {
    s.write_all(REQUEST).expect("send");
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let n = s.read(&mut buf).expect("read");
        got.extend_from_slice(&buf[..n]);
        if got.ends_with(b"Hello, World!") {
            return got.len();
        }
    }
}

fn per_request(engine: Engine, handler: impl twinhttp::Handler) -> f64 {
    let srv = start_with(
        engine,
        Config {
            workers: 2,
            ..Config::default()
        },
        handler,
    );
    let mut s = std::net::TcpStream::connect(srv.addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let len = response_len(&mut s);
    let mut buf = [0u8; 512];
    for _ in 0..1000 {
        exchange(&mut s, &mut buf, len); // warm-up: pools, caches, the Date of this second
    }
    const N: u64 = 20_000;
    let before = counting::allocations();
    for _ in 0..N {
        exchange(&mut s, &mut buf, len);
    }
    let after = counting::allocations();
    (after - before) as f64 / N as f64
}

#[test]
fn allocations_per_keep_alive_request() {
    let mut report = String::new();
    let mut results = Vec::new();
    for engine in Engine::all() {
        let a = per_request(engine, hello);
        report.push_str(&format!("{engine:?}: {a:.3} allocations per request\n"));
        results.push((engine, a));
    }
    // A layer that does nothing, around a router with state: the same path, nothing more.
    let layered = twinhttp::Router::new()
        .get("/", hello)
        .with_state(7u32)
        .layer(layer_fn(|req, next| next.run(req)));
    let a = per_request(Engine::ReactorInline, layered);
    report.push_str(&format!(
        "ReactorInline, a router with state in a layer: {a:.3} allocations per request\n"
    ));
    results.push((Engine::ReactorInline, a));
    println!("{report}");
    for (engine, a) in results {
        match engine {
            // The target: the event-driven hello path allocates nothing, layered or not.
            Engine::ReactorInline => assert!(a < 0.01, "{report}"),
            // The others hand requests between threads; a regression guard, not a target.
            _ => assert!(a < 4.0, "{report}"),
        }
    }
}
