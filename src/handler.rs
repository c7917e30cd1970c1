//! The one `Handler` trait both engines run.

use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::http::address::Address;
use crate::http::conn::Answer;
use crate::http::request::RequestHead;
use crate::stats::Counters;
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

/// A handler of a closure, naming the closure's argument type so that it needs no annotation:
/// `serve(addr, |req| ...)` alone cannot tell the closure's argument type (E0282), and
/// `serve(addr, handler_fn(|req| ...))` can. The one obvious way to write a handler inline.
///
/// ```no_run
/// use twinhttp::{Response, handler_fn, reactor::Reactor};
///
/// let reactor = Reactor::builder().serve(
///     "127.0.0.1:8080",
///     handler_fn(|req| match req.path() {
///         "/" => Response::text("Hello, World!"),
///         _ => Response::new(404),
///     }),
/// )?;
/// # reactor.shutdown(std::time::Duration::from_secs(1))?;
/// # Ok::<(), twinhttp::Error>(())
/// ```
pub fn handler_fn<F>(f: F) -> F
where
    F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
{
    f
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

/// Runs `handler` for one request. A panic is caught, logged and counted (the core answers it
/// with a 500 and closes the connection), so it costs one request and never an engine thread.
pub(crate) fn answer<H: Handler + ?Sized>(
    handler: &H,
    head: &RequestHead,
    body: &mut dyn Read,
    peer: Option<&Address>,
    counters: &Counters,
) -> Answer {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        handler.handle(&mut Request::new(head, body, peer))
    }));
    match outcome {
        Ok(response) => Answer::Returned(response),
        Err(_) => {
            counters.panicked();
            log::error!(
                "handler panicked on {} {}; answering 500",
                head.method(),
                head.path()
            );
            Answer::Panicked
        }
    }
}
