//! The cost of compressing a response, per response size and coding: a handler returning a
//! JSON body of 1 KiB, 16 KiB and 256 KiB, behind `layer::Compression`, called as an engine
//! would (`testing::TestRequest`), with the body read out whole, for `identity` (the layer
//! only), `gzip` (level 1), `br` (quality 3) and `zstd` (level 3). Throughput is the
//! uncompressed bytes; the compressed size is printed once per case.
#![allow(missing_docs)] // criterion_group! generates an undocumented fn
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use twinhttp::layer::{Compression, HandlerExt};
use twinhttp::testing::TestRequest;
use twinhttp::{Handler, Response, handler_fn};

/// A JSON array of objects, about `size` bytes: what an API answers.
fn json(size: usize) -> String {
    let mut out = String::from("[");
    let mut i = 0;
    while out.len() < size {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "{{\"id\":{i},\"name\":\"item {i}\",\"tags\":[\"a\",\"b\"],\"price\":{}.{}}}",
            i * 7 % 100,
            i % 10
        ));
        i += 1;
    }
    out.push(']');
    out
}

fn api(body: String) -> impl Handler {
    handler_fn(move |_| Response::text(body.clone()).with_content_type("application/json"))
        .layer(Compression::new())
}

fn compression(c: &mut Criterion) {
    let mut group = c.benchmark_group("compression");
    for size in [1024, 16 * 1024, 256 * 1024] {
        let body = json(size);
        let app = api(body.clone());
        group.throughput(Throughput::Bytes(body.len() as u64));
        for coding in ["identity", "gzip", "br", "zstd"] {
            let request = TestRequest::get("/items").header("Accept-Encoding", coding);
            let sent = request.call(&app).bytes().map_or(0, |b| b.len());
            println!("{coding} {size}: {} bytes -> {sent} bytes", body.len());
            group.bench_with_input(BenchmarkId::new(coding, size), &request, |b, request| {
                b.iter(|| black_box(request.call(&app).bytes().map(|b| b.len())))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, compression);
criterion_main!(benches);
