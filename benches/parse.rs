//! Request-head parsing and chunked decoding throughput.
#![allow(missing_docs)] // criterion_group! generates an undocumented fn
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use twinhttp::bench::{HeadParser, decode_chunked};

const SMALL: &[u8] = b"GET / HTTP/1.1\r\nHost: localhost:8080\r\n\r\n";
const BROWSER: &[u8] = b"GET /wp-content/uploads/2010/03/hello-kitty-darth-vader-pink.jpg HTTP/1.1\r\n\
Host: www.kittyhell.com\r\n\
User-Agent: Mozilla/5.0 (Macintosh; U; Intel Mac OS X 10_6_3; ja-JP-mac; rv:1.9.2.3) Gecko/20100401 Firefox/3.6.3 Pathtraq/0.9\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n\
Accept-Language: ja,en-us;q=0.7,en;q=0.3\r\n\
Accept-Encoding: gzip,deflate\r\n\
Accept-Charset: Shift_JIS,utf-8;q=0.7,*;q=0.7\r\n\
Keep-Alive: 115\r\n\
Connection: keep-alive\r\n\
Cookie: wp_ozh_wsa_visits=2; wp_ozh_wsa_visit_lasttime=xxxxxxxxxx; __utma=xxxxxxxxx.xxxxxxxxxx.xxxxxxxxxx.xxxxxxxxxx.xxxxxxxxxx.x; __utmz=xxxxxxxxx.xxxxxxxxxx.x.x.utmccn=(referral)|utmcsr=reader.livedoor.com|utmcct=/reader/|utmcmd=referral\r\n\r\n";

fn heads(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse_head");
    for (name, bytes) in [("small", SMALL), ("browser", BROWSER)] {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        let mut p = HeadParser::default();
        g.bench_function(name, |b| b.iter(|| p.parse(black_box(bytes))));
    }
    g.finish();
}

fn chunked(c: &mut Criterion) {
    let mut body = Vec::new();
    for _ in 0..64 {
        body.extend_from_slice(b"400\r\n");
        body.extend_from_slice(&[b'x'; 1024]);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let mut g = c.benchmark_group("chunked");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("decode_64x1KiB", |b| {
        b.iter(|| decode_chunked(black_box(&body)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = heads, chunked
}
criterion_main!(benches);
