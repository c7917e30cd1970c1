//! End to end over loopback: an in-process client against each engine configuration, one
//! keep-alive round trip and one 16-deep pipelined batch per iteration.
#![allow(missing_docs)] // criterion_group! generates an undocumented fn

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use twinhttp::{Request, Response};

fn hello(_: &mut Request<'_>) -> Response {
    Response::text("Hello, World!")
}

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n";

struct Client {
    stream: TcpStream,
    /// Length of one response (fixed: the Date value always has 29 bytes).
    len: usize,
    buf: Vec<u8>,
}

impl Client {
    fn new(addr: SocketAddr) -> Client {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        stream.write_all(REQUEST).expect("send");
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while !got.ends_with(b"Hello, World!") {
            let n = stream.read(&mut buf).expect("read");
            got.extend_from_slice(&buf[..n]);
        }
        Client {
            stream,
            len: got.len(),
            buf: vec![0; got.len() * 16],
        }
    }

    fn round_trips(&mut self, batch: &[u8], n: usize) {
        self.stream.write_all(batch).expect("send");
        self.stream
            .read_exact(&mut self.buf[..self.len * n])
            .expect("responses");
    }
}

fn bench_engine(c: &mut Criterion, name: &str, addr: SocketAddr) {
    let mut client = Client::new(addr);
    let sixteen = REQUEST.repeat(16);
    let mut g = c.benchmark_group(format!("e2e/{name}"));
    g.throughput(Throughput::Elements(1));
    g.bench_function("keepalive_round_trip", |b| {
        b.iter(|| client.round_trips(REQUEST, 1))
    });
    g.throughput(Throughput::Elements(16));
    g.bench_function("pipelined_16", |b| {
        b.iter(|| client.round_trips(&sixteen, 16))
    });
    g.finish();
}

fn engines(c: &mut Criterion) {
    common::each_engine(hello as fn(&mut Request<'_>) -> Response, |name, addr| {
        bench_engine(c, name, addr)
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(4));
    targets = engines
}
criterion_main!(benches);
