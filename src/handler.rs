//! The one `Handler` trait both engines run.

use std::sync::Arc;

use crate::{Request, Response};

/// Turns a request into a response. One trait for both engines: the same value runs on the
/// thread-pool [`server`](crate::server) and on the reactor, unchanged.
///
/// # Blocking
///
/// On the thread-pool server a handler runs on a worker thread and may block (read a file, call a
/// database, sleep): only that worker waits. On the reactor with inline dispatch a handler runs on
/// the event loop and must not block, or every connection on that loop waits; with pool dispatch
/// it runs on a worker and may block as on the server.
///
/// # Panics
///
/// A handler that panics costs its request a `500 Internal Server Error` and its connection;
/// the engine's threads live on.
///
/// # Examples
///
/// Any `Fn(&mut Request) -> Response` closure is a handler:
///
/// ```
/// use twinhttp::{Handler, Request, Response};
/// fn assert_handler(_: impl Handler) {}
/// assert_handler(|req: &mut Request<'_>| match req.path() {
///     "/" => Response::text("Hello, World!"),
///     _ => Response::new(404),
/// });
/// ```
pub trait Handler: Send + Sync + 'static {
    /// Answers one request.
    fn handle(&self, req: &mut Request<'_>) -> Response;
}

impl<F> Handler for F
where
    F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
{
    fn handle(&self, req: &mut Request<'_>) -> Response {
        self(req)
    }
}

impl<H: Handler + ?Sized> Handler for Arc<H> {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        (**self).handle(req)
    }
}
