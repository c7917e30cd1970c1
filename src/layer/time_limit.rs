//! A time limit per handler: what a layer can do about a handler that takes too long when
//! handlers are blocking code on threads.

use std::time::{Duration, Instant};

use super::{Layer, Next};
use crate::{Request, Response};

/// When the handler's time is up, as [`TimeLimit`] puts it on the request: a handler that
/// does long work in steps checks it between them and stops early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline(pub Instant);

impl Deadline {
    /// True once the time is up.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.0
    }

    /// The time left (zero once it passed).
    pub fn left(&self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }
}

/// The time-limit layer: the handler inside gets `limit` to answer. It cannot be stopped: a
/// handler is plain blocking code on a thread (a worker, or the event loop itself with inline
/// dispatch), and no thread is ever cut short. What the layer does:
///
/// - it puts a [`Deadline`] on the request, for a handler that works in steps to check and
///   stop early (a query with a timeout of its own, a loop over pages);
/// - when the handler returns after its deadline anyway, its response is dropped and the client
///   gets `503 Service Unavailable` (with `Retry-After: 1`), and the overrun is logged at
///   `warn` with the request's method and path.
///
/// What it does not do: free the thread sooner, or answer before the handler returns. A
/// blocking handler with no deadline of its own holds its worker as long as it runs; on the
/// reactor with inline dispatch it holds its whole loop (`blocking_warning` reports that).
///
/// ```
/// use std::time::Duration;
/// use twinhttp::layer::{Deadline, HandlerExt, TimeLimit};
/// use twinhttp::{Response, handler_fn};
///
/// let report = handler_fn(|req| {
///     let deadline = req.extension::<Deadline>().copied();
///     let mut pages = 0;
///     while pages < 100 && !deadline.is_some_and(|d| d.passed()) {
///         pages += 1; // one page of work
///     }
///     Response::text(format!("{pages} pages"))
/// })
/// .layer(TimeLimit::new(Duration::from_secs(2)));
/// # let _ = report;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TimeLimit {
    limit: Duration,
}

impl TimeLimit {
    /// A limit of `limit` per request.
    pub fn new(limit: Duration) -> TimeLimit {
        TimeLimit { limit }
    }
}

impl Layer for TimeLimit {
    fn call(&self, req: &mut Request<'_>, next: Next<'_>) -> Response {
        let started = Instant::now();
        let Some(deadline) = started.checked_add(self.limit) else {
            return next.run(req);
        };
        req.insert_extension(Deadline(deadline));
        let response = next.run(req);
        if Instant::now() <= deadline {
            return response;
        }
        log::warn!(
            "{} {} took {:?}, over its limit of {:?}: answered 503",
            req.method(),
            req.path(),
            started.elapsed(),
            self.limit
        );
        Response::text("the server took too long to answer\n")
            .with_status(503)
            .with_header("retry-after", "1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler_fn;
    use crate::layer::HandlerExt;
    use crate::testing::TestRequest;

    #[test]
    fn a_late_answer_becomes_503_and_a_handler_that_watches_its_deadline_stops_in_time() {
        let app = handler_fn(|req| match req.path() {
            "/slow" => {
                std::thread::sleep(Duration::from_millis(600));
                Response::text("late")
            }
            "/steps" => {
                let deadline = req.extension::<Deadline>().copied();
                let mut steps = 0u32;
                while !deadline.is_some_and(|d| d.passed()) {
                    std::thread::sleep(Duration::from_millis(2));
                    steps += 1;
                }
                Response::text(format!("stopped after {steps} steps"))
            }
            _ => Response::text("quick"),
        })
        .layer(TimeLimit::new(Duration::from_millis(200)));
        let slow = TestRequest::get("/slow").call(&app);
        assert_eq!(
            (slow.status(), slow.header("retry-after")),
            (503, Some("1"))
        );
        assert_eq!(
            TestRequest::get("/").call(&app).text().expect("a body"),
            "quick"
        );
        // Its loop sees the deadline pass; its answer is just past it: 503 all the same, the
        // point being that it stopped (the test would hang otherwise).
        let steps = TestRequest::get("/steps").call(&app);
        assert_eq!(steps.status(), 503);
        let huge = handler_fn(|_| Response::text("fine")).layer(TimeLimit::new(Duration::MAX));
        assert_eq!(TestRequest::get("/").call(&huge).status(), 200);
    }
}
