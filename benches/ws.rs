//! WebSocket echo round trips over loopback per engine configuration: a tungstenite client sends
//! one message and waits for its echo, 32 B and 64 KiB binary messages.
#![allow(missing_docs)] // criterion_group! generates an undocumented fn

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tungstenite::{Message, WebSocket};
use twinhttp::ws::{RequestExt, WsMessage, WsSender};
use twinhttp::{Request, Response};

fn echo(req: &mut Request<'_>) -> Response {
    match req.upgrade_websocket() {
        Ok(u) => u.accept(|ws: &WsSender, msg: WsMessage| {
            let _ = ws.send(msg);
        }),
        Err(r) => r,
    }
}

fn client(addr: SocketAddr) -> WebSocket<TcpStream> {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    tungstenite::client(format!("ws://{addr}/"), stream)
        .expect("handshake")
        .0
}

fn bench_engine(c: &mut Criterion, name: &str, addr: SocketAddr) {
    let mut ws = client(addr);
    let mut g = c.benchmark_group(format!("ws/{name}"));
    for size in [32usize, 64 * 1024] {
        let payload = tungstenite::Bytes::from(vec![0x5a; size]);
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(format!("echo_{size}B"), |b| {
            b.iter(|| {
                ws.send(Message::Binary(payload.clone())).expect("send");
                match ws.read().expect("echo") {
                    Message::Binary(b) => assert_eq!(b.len(), size),
                    other => panic!("unexpected {other:?}"),
                }
            })
        });
    }
    g.finish();
}

fn engines(c: &mut Criterion) {
    common::each_engine(echo as fn(&mut Request<'_>) -> Response, |name, addr| {
        bench_engine(c, name, addr)
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(4));
    targets = engines
}
criterion_main!(benches);
