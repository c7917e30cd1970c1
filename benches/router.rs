//! The cost of routing: a handler called directly beside the same handler behind a `Router` of
//! 20 routes (a static route, a route with parameters, a nested one, a miss), alone and on the
//! whole keep-alive hello path of the sans-I/O core (parse, handler, response head and body).
#![allow(missing_docs)] // criterion_group! generates an undocumented fn
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use twinhttp::bench::{OneRequest, Pipeline};
use twinhttp::{Request, Response, Router};

fn hello(_: &mut Request<'_>) -> Response {
    Response::text("Hello, World!")
}

/// Reads its parameter, as a routed handler does.
fn user(req: &mut Request<'_>) -> Response {
    black_box(req.param("id"));
    Response::text("Hello, World!")
}

/// 20 routes of a small JSON API: 16 at the top, 4 nested under `/api/v1/admin`.
fn twenty_routes() -> Router {
    let admin = Router::new()
        .get("/stats", hello)
        .get("/users", hello)
        .post("/users/{id}/ban", user)
        .get("/audit/{*rest}", hello);
    Router::new()
        .get("/", hello)
        .get("/health", hello)
        .get("/static/{*path}", hello)
        .get("/api/v1/users", hello)
        .post("/api/v1/users", hello)
        .get("/api/v1/users/{id}", user)
        .put("/api/v1/users/{id}", user)
        .delete("/api/v1/users/{id}", user)
        .get("/api/v1/users/{id}/posts", user)
        .get("/api/v1/users/{id}/posts/{post}", user)
        .get("/api/v1/posts", hello)
        .post("/api/v1/posts", hello)
        .get("/api/v1/posts/{id}", user)
        .get("/api/v1/posts/{id}/comments", user)
        .get("/api/v1/tags", hello)
        .get("/api/v1/tags/{tag}", hello)
        .nest("/api/v1/admin", admin)
}

fn request(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").into_bytes()
}

fn one(target: &str) -> OneRequest {
    OneRequest::new(&request(target)).expect("a request head")
}

fn router(c: &mut Criterion) {
    let routes = twenty_routes();
    let mut g = c.benchmark_group("router/call");
    g.throughput(Throughput::Elements(1));
    let root = one("/");
    g.bench_function("plain_handler", |b| b.iter(|| black_box(root.call(&hello))));
    g.bench_function("router_static", |b| {
        b.iter(|| black_box(root.call(&routes)))
    });
    let param = one("/api/v1/users/12345");
    g.bench_function("router_param", |b| {
        b.iter(|| black_box(param.call(&routes)))
    });
    let two = one("/api/v1/users/12345/posts/678");
    g.bench_function("router_two_params", |b| {
        b.iter(|| black_box(two.call(&routes)))
    });
    let nested = one("/api/v1/admin/users/7/ban");
    g.bench_function("router_nested", |b| {
        b.iter(|| black_box(nested.call(&routes)))
    });
    let miss = one("/api/v1/nothing/here");
    g.bench_function("router_404", |b| b.iter(|| black_box(miss.call(&routes))));
    g.finish();

    // The hello path of the core, with and without the router in front of the handler (the same
    // request: the plain handler ignores its path).
    let mut g = c.benchmark_group("router/conn");
    g.throughput(Throughput::Elements(1));
    let mut p = Pipeline::default();
    let param = request("/api/v1/users/12345");
    g.bench_function("keepalive_plain_handler", |b| {
        b.iter(|| p.serve(black_box(&param), &hello))
    });
    g.bench_function("keepalive_router_param", |b| {
        b.iter(|| p.serve(black_box(&param), &routes))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = router
}
criterion_main!(benches);
