//! What a router wraps its handlers in: its application state, for the handlers of a router
//! nested into another ([`Stated`]), and a layer around each route ([`Router::route_layer`]).

use std::sync::Arc;

use super::Router;
use crate::http::request::{RouteParams, State};
use crate::layer::{Layer, Layered};
use crate::{Handler, Request, Response};

/// A nested router's handler, run with that router's state.
pub(super) struct Stated {
    pub(super) state: Arc<State>,
    pub(super) inner: Arc<dyn Handler>,
}

impl Handler for Stated {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        run(req, None, Some(&*self.state), &*self.inner)
    }

    fn streams_body(&self, req: &Request<'_>) -> bool {
        self.inner.streams_body(req)
    }
}

/// Runs `handler` on `req` with a route's `params` and a router's `state` (each, when `None`,
/// as the request had them); what the handler put on the request comes back to it.
pub(super) fn run(
    req: &mut Request<'_>,
    params: Option<&RouteParams<'_>>,
    state: Option<&State>,
    handler: &dyn Handler,
) -> Response {
    let mut routed = req.routed(params, state);
    let response = handler.handle(&mut routed);
    let extensions = routed.take_extensions();
    req.return_extensions(extensions);
    response
}

/// One layer, shared by the routes it wraps.
struct Shared<L>(Arc<L>);

impl<L: Layer> Layer for Shared<L> {
    fn call(&self, req: &mut Request<'_>, next: crate::layer::Next<'_>) -> Response {
        self.0.call(req, next)
    }
}

impl Router {
    /// Wraps each handler this router has now (its routes', its fallback, its nested routers'
    /// fallbacks) in `layer`, one value shared by all: what a router to [nest](Router::nest)
    /// uses to keep its layer once its routes are merged into another. Routes added later are
    /// not wrapped, and what the router answers itself (`404`, `405`) does not pass through
    /// the layer; to wrap those too, wrap the whole router instead
    /// ([`HandlerExt::layer`](crate::layer::HandlerExt::layer)).
    pub fn route_layer<L: Layer>(mut self, layer: L) -> Router {
        let layer = Arc::new(layer);
        let wrap = |handler: Arc<dyn Handler>| -> Arc<dyn Handler> {
            Arc::new(Layered::new(Shared(layer.clone()), handler))
        };
        self.map_handlers(wrap);
        self
    }

    /// Shares `state` with every handler of this router: [`Request::state`] gives it to them,
    /// with no clone per route or per request. A router nested into another keeps its own
    /// (the innermost router's state is the one a handler sees).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use twinhttp::{Request, Response, Router};
    ///
    /// struct App {
    ///     hits: AtomicU64,
    /// }
    ///
    /// fn hit(req: &mut Request<'_>) -> Response {
    ///     let Some(app) = req.state::<App>() else {
    ///         return Response::new(500);
    ///     };
    ///     Response::text(format!("{}", app.hits.fetch_add(1, Ordering::Relaxed) + 1))
    /// }
    ///
    /// let router = Router::new().get("/hit", hit).with_state(App { hits: AtomicU64::new(0) });
    /// # let _ = router;
    /// ```
    pub fn with_state<S: Send + Sync + 'static>(mut self, state: S) -> Router {
        self.state = Some(Arc::new(state));
        self
    }
}
