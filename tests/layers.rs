//! Layers, extensions and application state over real sockets, on every engine configuration:
//! a layer around the whole router answers early or passes a value to the routes, a layer
//! around a nested router's routes changes their responses, and each router's state reaches
//! its own routes.
mod support;

use std::sync::atomic::{AtomicU64, Ordering};

use support::{Client, Engine, start};
use twinhttp::layer::{HandlerExt, layer_fn};
use twinhttp::{Request, Response, Router};

#[derive(Clone)]
struct User(String);

struct Hits(AtomicU64);

fn me(req: &mut Request<'_>) -> Response {
    let user = req
        .extension::<User>()
        .map_or("-", |u| u.0.as_str())
        .to_owned();
    let hits = req
        .state::<Hits>()
        .map_or(0, |h| h.0.fetch_add(1, Ordering::Relaxed) + 1);
    Response::text(format!("{user} {hits}"))
}

fn app() -> impl twinhttp::Handler {
    let api = Router::new()
        .get("/me", me)
        .with_state(Hits(AtomicU64::new(0)))
        .route_layer(layer_fn(|req, next| {
            next.run(req).with_header("x-api", "v1")
        }));
    Router::new()
        .get("/", |req| {
            Response::text(if req.state::<Hits>().is_some() {
                "state"
            } else {
                "none"
            })
        })
        .nest("/api", api)
        .layer(layer_fn(|req, next| {
            let Some(user) = req.header("x-user").map(str::to_owned) else {
                return Response::new(401);
            };
            req.insert_extension(User(user));
            next.run(req)
        }))
}

fn layers_extensions_and_state(engine: Engine) {
    let srv = start(engine, app());
    let mut c = Client::new(srv.addr);
    // Answered early by the outer layer: no route runs.
    assert_eq!(c.request("GET /api/me", "").status, 401);
    let r = c.request("GET /api/me", "X-User: ada\r\n");
    assert_eq!((r.status, r.header("x-api")), (200, Some("v1")));
    assert_eq!(r.text(), "ada 1");
    assert_eq!(c.request("GET /api/me", "X-User: bob\r\n").text(), "bob 2");
    let r = c.request("GET /", "X-User: ada\r\n");
    assert_eq!((r.text().as_str(), r.header("x-api")), ("none", None));
}

engine_tests!(layers_extensions_and_state);
