//! The compression layer over real sockets on every engine configuration: a response body
//! compressed as it streams holds its encoder's state (a window and match tables, 0.3-1.5 MiB)
//! for as long as its client takes to read it, so that state counts to the server's memory
//! budget. Past what the budget leaves for it, streams go out as they are (still varying by
//! `Accept-Encoding`); the state goes back when a stream ends.
#![cfg(feature = "compression")]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;

use support::{Config, Engine, TestServer, connect, read_head, start_with};
use twinhttp::layer::{Compression, HandlerExt};
use twinhttp::{Body, Request, Response};

/// Letters in no order a coder finds: about five bits of output each, so a stream of them
/// fills the socket's buffers however it is compressed.
struct Letters(u64);

impl Read for Letters {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        for b in buf.iter_mut() {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = b'a' + ((self.0 >> 33) % 26) as u8;
        }
        Ok(buf.len())
    }
}

/// 64 MiB of text, streamed: no client here reads it all.
fn endless(_: &mut Request<'_>) -> Response {
    Response::new(200)
        .with_content_type("text/plain")
        .with_body(Body::reader(Letters(1).take(64 << 20)))
}

/// Asks for the stream in brotli and reads only its head (and whatever is on its way).
fn open(srv: &TestServer) -> (TcpStream, String) {
    let mut s = connect(srv.addr);
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nAccept-Encoding: br\r\n\r\n")
        .expect("send");
    let head = read_head(&mut s).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("vary: accept-encoding"), "{head}");
    (s, head)
}

fn streams_compressed_on_the_fly_count_to_the_memory_budget(engine: Engine) {
    // 4 MiB: room for two brotli encoders (1.5 MiB each) under the 15/16 that optional
    // memory may take, not three.
    let budget = 4 << 20;
    let srv = start_with(
        engine,
        Config {
            memory_budget: budget,
            ..Config::default()
        },
        endless.layer(Compression::new()),
    );
    let (first, head) = open(&srv);
    assert!(head.contains("content-encoding: br"), "{head}");
    let (_second, head) = open(&srv);
    assert!(head.contains("content-encoding: br"), "{head}");
    let held = srv.stats().memory_held;
    assert!(held >= 3 << 20, "two encoders' state is held: {held}");
    assert!(held <= budget as u64, "{held}");
    // No room for a third: it goes out as it is.
    let (mut third, head) = open(&srv);
    assert!(!head.contains("content-encoding"), "{head}");
    let mut plain = [0u8; 16];
    third.read_exact(&mut plain).expect("body");
    assert!(
        plain.iter().rev().take(4).all(u8::is_ascii_lowercase),
        "letters, not brotli: {plain:?}"
    );
    // A stream that ends gives its state back, and the next one is compressed.
    drop(first);
    srv.stats_until("the first stream's state given back", |s| {
        s.memory_held < 2 << 20
    });
    let (_fourth, head) = open(&srv);
    assert!(head.contains("content-encoding: br"), "{head}");
}

engine_tests!(streams_compressed_on_the_fly_count_to_the_memory_budget);
