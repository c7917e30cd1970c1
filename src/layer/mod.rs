//! Layers: code that runs around a handler (the whole router, one route, a nested router),
//! before and after it. A layer can answer early without calling the handler, change the
//! request on its way in (a typed [extension](crate::Request::insert_extension) the handler
//! reads: a user, a request id), and change the response on its way out.
//!
//! A layer is a [`Layer`]: any `Fn(&mut Request, Next) -> Response` closure is one
//! ([`layer_fn`] names its argument types). [`HandlerExt::layer`] wraps any handler in one and
//! is a handler itself, so layers compose: `handler.layer(inner).layer(outer)` runs `outer`
//! first. Handlers here are blocking and synchronous, so a layer is too: it calls
//! [`Next::run`] at most once, on its own thread, and what it does before and after is plain
//! code. A layer costs one indirect call per request and allocates nothing of its own
//! (`tests/allocations.rs`).
//!
//! Order matters where a layer answers: a response made inside a layer passes only the layers
//! outside it. Put [`Cors`] (and [`RequestIds`]) outside the layers that may answer early (an
//! authorization check, [`TimeLimit`]'s 503), or a browser sees their answers without CORS
//! headers and reports a CORS error instead of the status.
//!
//! ```
//! use twinhttp::layer::{HandlerExt, layer_fn};
//! use twinhttp::{Response, Router};
//!
//! /// Who the request is from, as the layer found it.
//! #[derive(Clone)]
//! struct User(String);
//!
//! let api = Router::new()
//!     .get("/me", |req| match req.extension::<User>() {
//!         Some(User(name)) => Response::text(format!("hello, {name}")),
//!         None => Response::new(500),
//!     })
//!     .layer(layer_fn(|req, next| {
//!         let Some(name) = req.header("x-user").map(str::to_owned) else {
//!             return Response::new(401); // answered early: the routes never run
//!         };
//!         req.insert_extension(User(name));
//!         next.run(req).with_header("x-served-by", "twinhttp")
//!     }));
//! # let _ = api;
//! ```

#[cfg(feature = "compression")]
mod compression;
mod cors;
#[cfg(feature = "compression")]
pub(crate) mod encoder;
mod request_id;
mod time_limit;

#[cfg(feature = "compression")]
#[cfg_attr(docsrs, doc(cfg(feature = "compression")))]
pub use compression::Compression;
pub use cors::Cors;
pub use request_id::{RequestId, RequestIds};
pub use time_limit::{Deadline, TimeLimit};

use crate::{Handler, Request, Response};

/// The rest of the chain, for a layer to run: the layers inside it, then the handler. Run
/// once (it is consumed); a layer outside a [`Router`](crate::Router) runs before the router
/// shares its state, so [`Request::state`] there is `None`.
pub struct Next<'a> {
    inner: &'a dyn Handler,
}

impl Next<'_> {
    /// Runs the rest of the chain on `req` and returns its response.
    pub fn run(self, req: &mut Request<'_>) -> Response {
        self.inner.handle(req)
    }
}

impl std::fmt::Debug for Next<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Next")
    }
}

/// Code around a handler: given the request and the rest of the chain, it returns the
/// response, calling [`Next::run`] to get the handler's (or not, to answer early).
pub trait Layer: Send + Sync + 'static {
    /// Answers `req`, running `next` for the handler's response where it wants it.
    fn call(&self, req: &mut Request<'_>, next: Next<'_>) -> Response;
}

impl<F> Layer for F
where
    F: Fn(&mut Request<'_>, Next<'_>) -> Response + Send + Sync + 'static,
{
    fn call(&self, req: &mut Request<'_>, next: Next<'_>) -> Response {
        self(req, next)
    }
}

/// A layer of a closure, naming the closure's argument types so that it needs no annotation
/// (as [`handler_fn`](crate::handler_fn) does for handlers).
pub fn layer_fn<F>(f: F) -> F
where
    F: Fn(&mut Request<'_>, Next<'_>) -> Response + Send + Sync + 'static,
{
    f
}

/// A handler wrapped in a layer: made by [`HandlerExt::layer`].
#[derive(Clone, Debug)]
pub struct Layered<L, H> {
    layer: L,
    inner: H,
}

impl<L, H> Layered<L, H> {
    pub(crate) fn new(layer: L, inner: H) -> Self {
        Layered { layer, inner }
    }
}

impl<L: Layer, H: Handler> Handler for Layered<L, H> {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        self.layer.call(req, Next { inner: &self.inner })
    }

    /// As the handler inside says: a layer does not change how a body arrives.
    fn streams_body(&self, req: &Request<'_>) -> bool {
        self.inner.streams_body(req)
    }
}

/// Wrapping any handler in layers.
pub trait HandlerExt: Handler + Sized {
    /// This handler inside `layer`: the layer runs first, and runs this handler through its
    /// [`Next`]. The result is a handler, to serve, to route to, or to wrap again (the last
    /// layer added runs first).
    fn layer<L: Layer>(self, layer: L) -> Layered<L, Self> {
        Layered { layer, inner: self }
    }
}

impl<H: Handler> HandlerExt for H {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Router;
    use crate::testing::TestRequest;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Clone)]
    struct User(&'static str);

    fn whoami(req: &mut Request<'_>) -> Response {
        match req.extension::<User>() {
            Some(User(name)) => Response::text(*name),
            None => Response::text("nobody"),
        }
    }

    #[test]
    fn layers_run_outermost_first_around_the_handler_and_change_its_response() {
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (inner_log, outer_log) = (order.clone(), order.clone());
        let handler = crate::handler_fn(whoami)
            .layer(layer_fn(move |req, next| {
                inner_log.lock().map(|mut o| o.push("inner")).ok();
                req.insert_extension(User("ada"));
                next.run(req).with_header("x-inner", "1")
            }))
            .layer(layer_fn(move |req, next| {
                outer_log.lock().map(|mut o| o.push("outer")).ok();
                let response = next.run(req);
                // What the handler saw, and what the inner layer added to its response.
                assert_eq!(response.header("x-inner"), Some("1"));
                response.with_header("x-outer", "1")
            }));
        let response = TestRequest::get("/").call(&handler);
        assert_eq!(response.header("x-outer"), Some("1"));
        assert_eq!(response.text().expect("a body"), "ada");
        assert_eq!(*order.lock().expect("the log"), ["outer", "inner"]);
    }

    #[test]
    fn a_layer_answers_early_without_running_the_handler() {
        let ran = std::sync::Arc::new(AtomicU64::new(0));
        let counted = ran.clone();
        let handler = crate::handler_fn(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
            Response::text("secret")
        })
        .layer(layer_fn(|req, next| match req.header("authorization") {
            Some("Bearer ok") => next.run(req),
            _ => Response::new(401),
        }));
        assert_eq!(TestRequest::get("/").call(&handler).status(), 401);
        let allowed = TestRequest::get("/").header("Authorization", "Bearer ok");
        assert_eq!(allowed.call(&handler).text().expect("a body"), "secret");
        assert_eq!(ran.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn extensions_reach_routes_through_a_router_and_come_back_out() {
        let router = Router::new()
            .get("/me/{id}", |req| {
                let name = req.extension::<User>().map_or("nobody", |u| u.0);
                req.insert_extension(7u32);
                Response::text(format!("{name} {}", req.param("id").unwrap_or("")))
            })
            .layer(layer_fn(|req, next| {
                req.insert_extension(User("grace"));
                let response = next.run(req);
                // The route's own extension is seen on the way out.
                let seen = req.extension::<u32>().copied().unwrap_or(0);
                response.with_header("x-seen", seen.to_string())
            }));
        let response = TestRequest::get("/me/3").call(&router);
        assert_eq!(response.header("x-seen"), Some("7"));
        assert_eq!(response.text().expect("a body"), "grace 3");
    }

    #[test]
    fn route_layers_wrap_a_nested_routers_routes_and_state_follows_it() {
        struct Count(AtomicU64);
        let api = Router::new()
            .get("/hits", |req| {
                let count = req
                    .state::<Count>()
                    .map_or(0, |c| c.0.fetch_add(1, Ordering::Relaxed) + 1);
                Response::text(count.to_string())
            })
            .with_state(Count(AtomicU64::new(0)))
            .route_layer(layer_fn(|req, next| {
                next.run(req).with_header("x-api", "1")
            }));
        let app = Router::new()
            .get("/", |req| {
                Response::text(if req.state::<Count>().is_some() {
                    "state"
                } else {
                    "none"
                })
            })
            .nest("/api", api);
        let first = TestRequest::get("/api/hits").call(&app);
        assert_eq!(first.header("x-api"), Some("1"));
        assert_eq!(first.text().expect("a body"), "1");
        assert_eq!(
            TestRequest::get("/api/hits")
                .call(&app)
                .text()
                .expect("a body"),
            "2"
        );
        // The outer router has no state, and its routes are not in the layer.
        let root = TestRequest::get("/").call(&app);
        assert_eq!(root.header("x-api"), None);
        assert_eq!(root.text().expect("a body"), "none");
    }

    #[test]
    fn a_layer_keeps_a_streaming_handlers_answer() {
        let streaming = crate::streaming(crate::handler_fn(|_| Response::new(204)))
            .layer(layer_fn(|req, next| next.run(req)));
        let plain =
            crate::handler_fn(|_| Response::new(204)).layer(layer_fn(|req, next| next.run(req)));
        let head = crate::http::request_head::RequestHead::parsed(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n",
        );
        let panics = crate::stats::Panics::default();
        assert!(crate::handler::streams_body(&streaming, &head, &panics));
        assert!(!crate::handler::streams_body(&plain, &head, &panics));
    }
}
