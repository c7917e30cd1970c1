//! The one `Handler` trait both engines run.

use std::io::Read;
use std::sync::Arc;

use crate::http::address::Address;
use crate::http::answer::Answer;
use crate::http::panics::{Panicked, Panics, catch};
use crate::http::request_head::RequestHead;
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
/// it runs on a worker and may block as on the server. The same holds for a streamed response
/// body ([`Body::chunks`](crate::Body::chunks), [`Body::reader`](crate::Body::reader)): its
/// pieces are produced where the handler ran (with pool dispatch, each on a worker).
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

    /// Whether this request's body reaches the handler as it arrives, instead of whole before
    /// it runs. Asked once the request's head has come (`req`'s body is empty then). Default:
    /// no. Opt in with [`streaming`] for a handler that must process a large upload on the
    /// fly; see there what it costs. A panic here is caught, logged and counted, and the body
    /// is then read whole first.
    fn streams_body(&self, req: &Request<'_>) -> bool {
        let _ = req;
        false
    }
}

/// A handler that reads its request bodies as they arrive, for uploads too large to wait for
/// whole or to be processed on the fly. Every other handler gets its body whole, read by the
/// engine before it runs, so that a slow client holds no thread.
///
/// What it costs: on the thread-pool server, such a handler holds its worker while its client
/// sends, for as long as the minimum body rate (`min_request_body_rate`, 240 B/s by default)
/// lets it: a 16 MiB body at 240 B/s is 19 hours. A few slow clients of a streaming route can
/// take every worker. Reading faster than the client sends waits on the socket; a body slower
/// than the minimum rate fails the read with [`std::io::ErrorKind::TimedOut`] and is answered
/// `408`. A body the handler leaves unread closes the connection after its response. On the
/// reactor, whose event loops cannot wait for one handler, bodies are read whole whatever the
/// handler asks (a streaming handler there works, unchanged, on its whole body).
///
/// ```no_run
/// use std::io::Read;
/// use twinhttp::{Response, Router, handler_fn, streaming};
///
/// let router = Router::new().route_to("/upload", &["POST"], streaming(handler_fn(|req| {
///     let mut total = 0u64;
///     let mut chunk = [0u8; 64 * 1024];
///     loop {
///         match req.body().read(&mut chunk) {
///             Ok(0) => break Response::text(format!("{total} bytes")),
///             Ok(n) => total += n as u64, // process the chunk here
///             Err(_) => break Response::new(400), // the engine answers 400/408/413 itself
///         }
///     }
/// })));
/// # let _ = router;
/// ```
pub fn streaming<H: Handler>(handler: H) -> Streaming<H> {
    Streaming(handler)
}

/// A handler whose request bodies stream: made by [`streaming`].
#[derive(Debug, Clone)]
pub struct Streaming<H>(H);

impl<H: Handler> Handler for Streaming<H> {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        self.0.handle(req)
    }

    fn streams_body(&self, _: &Request<'_>) -> bool {
        true
    }
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

    fn streams_body(&self, req: &Request<'_>) -> bool {
        (**self).streams_body(req)
    }
}

/// Asks `handler` whether the request of `head` streams its body. Handler code, asked where
/// the engine drives the connection (a worker, the parker): a panic is caught, logged and
/// counted in `panics`, and the body is read whole before the handler runs, as by default.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) fn streams_body<H: Handler + ?Sized>(
    handler: &H,
    head: &RequestHead,
    panics: &Panics,
) -> bool {
    let asked = catch(|| handler.streams_body(&Request::new(head, &mut std::io::empty(), None)));
    match asked {
        Ok(streams) => streams,
        Err(Panicked) => {
            panics.count();
            log::error!(
                "handler panicked deciding whether {} {} streams its body; reading it first",
                head.method(),
                head.path()
            );
            false
        }
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
    let outcome =
        catch(|| handler.handle(&mut Request::new(head, body, peer).within(counters.budget())));
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
