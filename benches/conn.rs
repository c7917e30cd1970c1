//! The sans-I/O connection state machine alone: requests per second with no sockets.
#![allow(missing_docs)] // criterion_group! generates an undocumented fn
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use twinhttp::bench::Pipeline;
use twinhttp::{Request, Response};

fn hello(_: &mut Request<'_>) -> Response {
    Response::text("Hello, World!")
}

fn echo_len(req: &mut Request<'_>) -> Response {
    let n = std::io::copy(req.body(), &mut std::io::sink()).unwrap_or(0);
    Response::text(n.to_string())
}

fn conn(c: &mut Criterion) {
    let one = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec();
    let sixteen = one.repeat(16);
    let mut upload =
        b"POST /up HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..16 {
        upload.extend_from_slice(b"1000\r\n");
        upload.extend_from_slice(&[b'u'; 4096]);
        upload.extend_from_slice(b"\r\n");
    }
    upload.extend_from_slice(b"0\r\n\r\n");

    let mut g = c.benchmark_group("conn");
    let mut p = Pipeline::default();
    g.throughput(Throughput::Elements(1));
    g.bench_function("keepalive_hello", |b| {
        b.iter(|| p.serve(black_box(&one), &hello))
    });
    g.throughput(Throughput::Elements(16));
    g.bench_function("pipelined_16_hello", |b| {
        b.iter(|| p.serve(black_box(&sixteen), &hello))
    });
    g.throughput(Throughput::Bytes(64 * 1024));
    g.bench_function("chunked_upload_64KiB", |b| {
        b.iter(|| p.serve(black_box(&upload), &echo_len))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = conn
}
criterion_main!(benches);
