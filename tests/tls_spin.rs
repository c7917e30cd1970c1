//! A WebSocket client over TLS that sends many frames in one record and then stops reading
//! costs the server no CPU: the turn that ends waiting to write, with decrypted input still
//! inside rustls, waits for the writable edge instead of being served again at once (it once
//! was, on the server engine: a worker spinning as long as the client did not read). It reads
//! this process's CPU time, so it is the only test in its binary, and it runs each engine
//! configuration in turn.
#![cfg(feature = "tls")]
mod support;

use std::io::{Read, Write};
use std::time::Duration;

use support::tls::{Pki, small_receive_buffer_client, small_send_buffer_listener};
use support::{Config, Engine, On, echo_websocket, start_on};
use twinhttp::tls::rustls;

/// CPU seconds this process has used (user + system; the process CPU-time clock, which every
/// Unix has, rather than /proc).
fn cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

fn frames_then_silence(engine: Engine) {
    let pki = Pki::new();
    let (listener, addr) = small_send_buffer_listener();
    let _srv = start_on(
        engine,
        Config {
            tls: Some(pki.server.clone()),
            response_rate: None,
            ..Config::default()
        },
        On::Listener(listener),
        echo_websocket,
    );
    let tcp = small_receive_buffer_client(addr);
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    let conn = rustls::ClientConnection::new(pki.client.clone(), name).expect("a client");
    let mut s = rustls::StreamOwned::new(conn, tcp);
    // The upgrade and 120 masked binary frames of 120 bytes, in one TLS record: more than the
    // first read's 8 KiB, so decrypted input stays inside rustls; the echoes fill the socket.
    let mut out = b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".to_vec();
    for _ in 0..120 {
        out.extend_from_slice(&[0x82, 0x80 | 120, 0, 0, 0, 0]);
        out.extend_from_slice(&[b'z'; 120]);
    }
    assert!(out.len() < 16_384, "one record");
    s.write_all(&out).expect("send");
    s.flush().expect("flush");
    // Settle, then measure while the client reads nothing.
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_seconds();
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_seconds() - before;
    assert!(
        used < 0.5,
        "{engine:?}: {used:.2} s of CPU in 2 s while the client did not read"
    );
    // Then every echo arrives once the client reads.
    s.get_mut()
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    let want = 120 * 122;
    loop {
        let head = all.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
        if head.is_some_and(|h| all.len() - h >= want) {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
        }
    }
    let head = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |p| p + 4);
    assert_eq!(all.len() - head, want, "{engine:?}: every echo");
}

#[test]
fn a_websocket_client_that_stops_reading_costs_no_cpu() {
    for engine in Engine::all() {
        frames_then_silence(engine);
    }
}
