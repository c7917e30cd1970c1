//! The warning for a handler that blocks its event loop. With inline dispatch a handler runs on
//! the loop, and nothing else on that loop (other connections' requests, accepts, deadlines)
//! runs until it returns; a handler that sleeps or waits on I/O stalls them all, and so does a
//! streamed body whose next piece waits. Each inline call, and each piece of a streamed body
//! produced on the loop (a reader's or an iterator's: handler code; not a file's, which the
//! core reads as it sends one by `sendfile`), and each turn of a WebSocket or event stream whose
//! callbacks run on the loop (and its last callbacks as the connection goes), is timed on the
//! coarse monotonic clock (a few nanoseconds, no system call); one that held the loop past the
//! threshold is counted in `Stats::blocking_handlers` and, at most once every [`WARN_EVERY`]
//! per loop, logged at warn level (a handler's with its method and path).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::Control;
use crate::http::request_head::RequestHead;
use crate::stats::Counters;

/// At most one warning per loop in this long (each call is still counted).
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The smallest threshold: the coarse clock ticks every few milliseconds (4 ms at the usual
/// 250 Hz), so below this a fast call that straddles a tick would be taken for a slow one.
const MIN_THRESHOLD: Duration = Duration::from_millis(10);

/// What ran on the loop: a handler call, the production of a streamed body's pieces (handler
/// code too: `Body::chunks`, `Body::reader`), or a session's turn with its callbacks (a
/// WebSocket's `on_message` and the rest).
#[derive(Clone, Copy)]
enum Holder<'a> {
    Handler(&'a RequestHead),
    Body,
    Session,
}

/// One loop's timing of its inline handler calls.
pub(crate) struct Blocking {
    threshold: Option<Duration>,
    last_warning: Option<Instant>,
    /// The server's: whether shutdown began while a call held the loop.
    control: Arc<Control>,
}

impl Blocking {
    /// Warns past `threshold` (at least 10 ms); `None`: off (the calls are still timed: the
    /// loop's clock moves on by the time they held it).
    pub(crate) fn new(threshold: Option<Duration>, control: Arc<Control>) -> Self {
        Blocking {
            threshold: threshold.map(|t| t.max(MIN_THRESHOLD)),
            last_warning: None,
            control,
        }
    }

    /// Whether the server's shutdown began while a call held the loop for `held` (which the
    /// loop, held, has not seen yet). Only a call that held it for a tick of the coarse clock
    /// or more is asked about.
    #[inline]
    pub(crate) fn shutdown_began_while(&self, held: Duration) -> bool {
        !held.is_zero() && self.control.is_shutting_down()
    }

    /// A handler call begins: its start.
    #[inline]
    pub(crate) fn start(&self) -> Duration {
        coarse_now()
    }

    /// The call for `head`'s request that began at `started` returned: how long it held the
    /// loop (the loop's clock moves on by it).
    #[inline]
    pub(crate) fn returned(
        &mut self,
        started: Duration,
        head: &RequestHead,
        counters: &Counters,
    ) -> Duration {
        let held = coarse_now().saturating_sub(started);
        if self.threshold.is_some_and(|threshold| held > threshold) {
            self.held_too_long(held, Holder::Handler(head), counters);
        }
        held
    }

    /// A streamed body's piece, whose production began at `started`, is made: how long it
    /// held the loop.
    pub(crate) fn produced(&mut self, started: Duration, counters: &Counters) -> Duration {
        let held = coarse_now().saturating_sub(started);
        if self.threshold.is_some_and(|threshold| held > threshold) {
            self.held_too_long(held, Holder::Body, counters);
        }
        held
    }

    /// A session's turn, which began at `started` and ran its callbacks inline, is over: how
    /// long it held the loop.
    pub(crate) fn session_ran(&mut self, started: Duration, counters: &Counters) -> Duration {
        let held = coarse_now().saturating_sub(started);
        if self.threshold.is_some_and(|threshold| held > threshold) {
            self.held_too_long(held, Holder::Session, counters);
        }
        held
    }

    #[cold]
    fn held_too_long(&mut self, held: Duration, holder: Holder<'_>, counters: &Counters) {
        counters.blocking_handler();
        let now = Instant::now();
        if self
            .last_warning
            .is_some_and(|t| now.saturating_duration_since(t) < WARN_EVERY)
        {
            return;
        }
        self.last_warning = Some(now);
        let what = match holder {
            Holder::Handler(head) => format!("a handler, on {} {},", head.method(), head.path()),
            Holder::Body => "a streamed response body, producing its next piece,".to_owned(),
            Holder::Session => "a WebSocket's or event stream's callbacks".to_owned(),
        };
        log::warn!(
            "{what} held its event loop for {} ms: with inline dispatch nothing else on the loop \
             runs meanwhile; run blocking handlers with Dispatch::Pool (this warning: at most \
             once every {} s per loop)",
            held.as_millis(),
            WARN_EVERY.as_secs()
        );
    }
}

/// `began` moved on by the `held` time inline handler code took (on the coarse clock, whose
/// ticks are milliseconds apart: most calls held it for none).
#[inline]
pub(crate) fn later(began: Instant, held: Duration) -> Instant {
    if held.is_zero() {
        return began;
    }
    began.checked_add(held).unwrap_or(began)
}

/// The coarse monotonic clock (updated every tick, read without a system call where the kernel
/// offers it), as time since its epoch.
#[inline]
fn coarse_now() -> Duration {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let id = rustix::time::ClockId::MonotonicCoarse;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let id = rustix::time::ClockId::Monotonic;
    let t = rustix::time::clock_gettime(id);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}
