//! Live counters, the same on both engines: what nginx's `stub_status` shows (connections
//! accepted and handled, requests; connections active, reading, writing, waiting) and what this
//! design adds (parked and queued connections, connections per loop, WebSocket and event-stream
//! sessions, refusals by reason, handler panics, threads), read as one [`Stats`] snapshot from
//! [`Server::stats`](crate::server::Server::stats), [`Reactor::stats`](crate::reactor::Reactor::stats)
//! or a [`StatsHandle`].
//!
//! The counters are relaxed atomics, and the ones the hot path touches (requests, and the gauge
//! of what each connection is doing) sit in cache-padded slots, one per engine thread, summed
//! when read: no two threads write the same cache line per request. Each open connection is
//! counted in exactly one state (waiting, reading, queued, writing, closing, a WebSocket, an event
//! stream, upgraded) at a time, held by the guard that counts it open, and moves between them
//! through that guard (one decrement, one increment), so once the server is quiescent the gauges
//! add up to `active` exactly. While requests are in flight a snapshot is a moment's view
//! of counters read one after the other: the gauges may not add up to `active` at that instant.
//!
//! ```no_run
//! use twinhttp::{Response, handler_fn, reactor::Reactor};
//!
//! let reactor = Reactor::builder().serve("127.0.0.1:8080", handler_fn(|_| Response::text("hi")))?;
//! let stats = reactor.stats();
//! println!("{} open, {} waiting, {} requests", stats.active, stats.waiting, stats.requests);
//! # Ok::<(), twinhttp::Error>(())
//! ```

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

use crate::http::budget::Budget;

#[cfg(feature = "metrics")]
mod publish;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use publish::publish;

pub use crate::http::refusal::Refusal;

/// What an open connection is doing; each is counted in exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Activity {
    /// Nothing of its next request has come (a new or idle keep-alive connection).
    Waiting = 0,
    /// Part of a request head has come.
    Reading,
    /// A whole request head is buffered and it waits for a worker (server engine).
    Queued,
    /// A request is being served: its body read, its handler run, its response written.
    Writing,
    /// Its last response is out and what its client still sends is dropped (a lingering close).
    Closing,
    /// A WebSocket session.
    WebSocket,
    /// An event stream.
    EventStream,
    /// Taken over by a handler's upgrade, on a thread of its own.
    Upgraded,
}

impl From<crate::http::driver::Stage> for Activity {
    fn from(stage: crate::http::driver::Stage) -> Self {
        use crate::http::driver::Stage;
        match stage {
            Stage::Waiting => Activity::Waiting,
            Stage::Reading => Activity::Reading,
            Stage::Writing => Activity::Writing,
            Stage::Closing => Activity::Closing,
        }
    }
}

impl crate::http::driver::Tally for Counters {
    fn budget(&self) -> &Budget {
        &self.budget
    }
    fn request(&self, _: &crate::http::request_head::RequestHead) {
        Counters::request(self);
    }
    fn refused(&self, why: Refusal) {
        Counters::refused(self, why);
    }
    fn panics(&self) -> &Panics {
        Counters::panics(self)
    }
}

impl From<crate::http::session::Kind> for Activity {
    fn from(kind: crate::http::session::Kind) -> Self {
        match kind {
            crate::http::session::Kind::WebSocket => Activity::WebSocket,
            crate::http::session::Kind::EventStream => Activity::EventStream,
        }
    }
}

const ACTIVITIES: usize = 8;

/// Engine threads' slots (a power of two); more threads than this share them (still exact,
/// only contended).
const SLOTS: usize = 16;

/// A thread's slot index (below `SLOTS`), the same for every server it works for.
#[inline]
fn slot_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SLOT.with(|s| {
        let mut i = s.get();
        if i == usize::MAX {
            i = NEXT.fetch_add(1, Relaxed) & (SLOTS - 1);
            s.set(i);
        }
        i
    })
}

/// One thread's share of the hot counters. Gauges are kept as wrapping `u64`s: a connection
/// entering an activity on one thread and leaving it on another adds one here and subtracts one
/// there, and the sum over the slots is exact.
#[derive(Default)]
struct Slot {
    requests: AtomicU64,
    gauges: [AtomicU64; ACTIVITIES],
}

pub(crate) use crate::http::panics::Panics;

/// The counters of one running engine, shared by its threads (in its `Control`).
pub(crate) struct Counters {
    slots: Box<[CachePadded<Slot>; SLOTS]>,
    /// Connections accepted (`handled`, nginx's, is these less those over capacity).
    accepted: AtomicU64,
    panics: Panics,
    blocking_handlers: AtomicU64,
    over_capacity: AtomicU64,
    header_timeouts: AtomicU64,
    too_slow: AtomicU64,
    heads_over_budget: AtomicU64,
    /// Engine-answered statuses 400–599, by `status - 400`.
    statuses: Box<[AtomicU64]>,
    /// Connections in the server engine's parker (under its lock).
    parked: AtomicU64,
    /// Connections on each reactor loop, stored by the loop itself.
    loops: Box<[CachePadded<AtomicUsize>]>,
    /// The engine's memory budget, with its own counts.
    budget: Budget,
}

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counters").finish_non_exhaustive()
    }
}

impl Default for Counters {
    fn default() -> Self {
        Counters::new(0, Budget::default())
    }
}

impl Counters {
    /// Counters for an engine with `loops` event loops (0: the server engine) and its memory
    /// budget.
    pub(crate) fn new(loops: usize, budget: Budget) -> Self {
        Counters {
            slots: Box::new(std::array::from_fn(|_| CachePadded::new(Slot::default()))),
            accepted: AtomicU64::new(0),
            panics: Panics::default(),
            blocking_handlers: AtomicU64::new(0),
            over_capacity: AtomicU64::new(0),
            header_timeouts: AtomicU64::new(0),
            too_slow: AtomicU64::new(0),
            heads_over_budget: AtomicU64::new(0),
            statuses: (400..600).map(|_| AtomicU64::new(0)).collect(),
            parked: AtomicU64::new(0),
            loops: (0..loops)
                .map(|_| CachePadded::new(AtomicUsize::new(0)))
                .collect(),
            budget,
        }
    }

    /// The engine's memory budget.
    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    #[inline]
    fn slot(&self) -> &Slot {
        // In bounds: the index is masked to below SLOTS, the array's length.
        &self.slots[slot_index() & (SLOTS - 1)]
    }

    /// A connection was accepted (one over `max_connections` is then also refused,
    /// [`Refusal::OverCapacity`]).
    pub(crate) fn accepted(&self) {
        self.accepted.fetch_add(1, Relaxed);
    }

    /// A request head was read in full.
    #[inline]
    pub(crate) fn request(&self) {
        self.slot().requests.fetch_add(1, Relaxed);
    }

    /// A handler panicked.
    pub(crate) fn panicked(&self) {
        self.panics.count();
    }

    /// Where handler code outside a request (a WebSocket's callbacks, an upgraded connection's,
    /// handler code the server drops) counts its panics.
    pub(crate) fn panics(&self) -> &Panics {
        &self.panics
    }

    /// An inline handler call held its event loop past the warning threshold.
    pub(crate) fn blocking_handler(&self) {
        self.blocking_handlers.fetch_add(1, Relaxed);
    }

    /// The engine answered or closed a connection itself.
    pub(crate) fn refused(&self, why: Refusal) {
        let counter = match why {
            Refusal::OverCapacity => &self.over_capacity,
            Refusal::HeaderTimeout => &self.header_timeouts,
            Refusal::TooSlow => &self.too_slow,
            Refusal::HeadOverBudget => &self.heads_over_budget,
            Refusal::BodyOverBudget => return self.budget.body_refused(),
            Refusal::SessionOverBudget => return self.budget.session_dropped(),
            Refusal::Status(s) => match self.statuses.get(usize::from(s).wrapping_sub(400)) {
                Some(c) => c,
                None => return,
            },
        };
        counter.fetch_add(1, Relaxed);
    }

    /// A connection moved from one activity to another (on this thread's slot).
    #[inline]
    pub(crate) fn moved(&self, from: Activity, to: Activity) {
        let slot = self.slot();
        slot.gauges[from as usize].fetch_sub(1, Relaxed);
        slot.gauges[to as usize].fetch_add(1, Relaxed);
    }

    /// A connection opened in `a`.
    pub(crate) fn enter(&self, a: Activity) {
        self.slot().gauges[a as usize].fetch_add(1, Relaxed);
    }

    /// A connection closed in `a`.
    pub(crate) fn leave(&self, a: Activity) {
        self.slot().gauges[a as usize].fetch_sub(1, Relaxed);
    }

    /// A connection entered the server engine's parker (under its lock).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn parked(&self) {
        self.parked.fetch_add(1, Relaxed);
    }

    /// A connection left the server engine's parker (under its lock).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn unparked(&self) {
        self.parked.fetch_sub(1, Relaxed);
    }

    /// Reactor loop `i` holds `n` connections now.
    pub(crate) fn loop_holds(&self, i: usize, n: usize) {
        if let Some(l) = self.loops.get(i) {
            l.store(n, Relaxed);
        }
    }

    /// A snapshot; `active` and `threads` come from the engine.
    pub(crate) fn snapshot(&self, active: usize, threads: usize) -> Stats {
        let mut gauges = [0u64; ACTIVITIES];
        let mut requests = 0u64;
        for slot in self.slots.iter() {
            requests = requests.wrapping_add(slot.requests.load(Relaxed));
            for (sum, g) in gauges.iter_mut().zip(&slot.gauges) {
                *sum = sum.wrapping_add(g.load(Relaxed));
            }
        }
        // A sum read while connections move may be briefly below zero: shown as 0.
        let gauge = |a: Activity| {
            let g = gauges[a as usize];
            if g > u64::MAX / 2 { 0 } else { g }
        };
        let mut refused = vec![
            (Refusal::OverCapacity, self.over_capacity.load(Relaxed)),
            (Refusal::HeaderTimeout, self.header_timeouts.load(Relaxed)),
            (Refusal::TooSlow, self.too_slow.load(Relaxed)),
            (
                Refusal::HeadOverBudget,
                self.heads_over_budget.load(Relaxed),
            ),
        ];
        let (bodies, sessions) = self.budget.refusals();
        refused.push((Refusal::BodyOverBudget, bodies));
        refused.push((Refusal::SessionOverBudget, sessions));
        for (status, c) in (400u16..).zip(self.statuses.iter()) {
            let n = c.load(Relaxed);
            if n > 0 {
                refused.push((Refusal::Status(status), n));
            }
        }
        let over_capacity = self.over_capacity.load(Relaxed);
        // Read after the refusals: a connection refused meanwhile is not handled twice over.
        let accepted = self.accepted.load(Relaxed).max(over_capacity);
        Stats {
            accepted,
            handled: accepted - over_capacity,
            requests,
            active: active as u64,
            waiting: gauge(Activity::Waiting),
            reading: gauge(Activity::Reading),
            queued: gauge(Activity::Queued),
            writing: gauge(Activity::Writing),
            closing: gauge(Activity::Closing),
            websockets: gauge(Activity::WebSocket),
            event_streams: gauge(Activity::EventStream),
            upgraded: gauge(Activity::Upgraded),
            parked: self.parked.load(Relaxed),
            per_loop: self.loops.iter().map(|l| l.load(Relaxed) as u64).collect(),
            refused,
            panics: self.panics.counted(),
            blocking_handlers: self.blocking_handlers.load(Relaxed),
            threads: threads as u64,
            memory_held: self.budget.held() as u64,
            memory_budget: self.budget.limit() as u64,
            reads_paused: self.budget.reads_paused(),
        }
    }
}

/// A snapshot of an engine's counters. Counters (`accepted`, `requests`, ...) only grow;
/// gauges (`active`, `waiting`, ...) are the number right now. Once the server is quiescent,
/// `active = waiting + reading + queued + writing + closing + websockets + event_streams +
/// upgraded` exactly.
///
/// The same type on both engines, from `Server::stats`, [`Reactor::stats`](crate::reactor::Reactor::stats)
/// or a [`StatsHandle`] taken from either builder before serving (for the server's own handler
/// to report them). Taking one reads relaxed atomics, summing the per-thread slots the counters
/// live in; nothing is emitted on the hot path. With feature `metrics`, `publish` hands a
/// snapshot to the `metrics` facade.
///
/// # Examples
///
/// ```no_run
/// use twinhttp::stats::Refusal;
/// use twinhttp::{Response, handler_fn, reactor::Reactor};
///
/// let mut builder = Reactor::builder();
/// let stats = builder.stats_handle();
/// let reactor = builder.serve("127.0.0.1:8080", handler_fn(move |_| {
///     let s = stats.stats();
///     Response::text(format!(
///         "{} open ({} idle), {} requests, {} refused over capacity, {} panics\n",
///         s.active,
///         s.waiting,
///         s.requests,
///         s.refusals(Refusal::OverCapacity),
///         s.panics,
///     ))
/// }))?;
/// # reactor.shutdown(std::time::Duration::from_secs(1))?;
/// # Ok::<(), twinhttp::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Connections accepted, refused ones included (nginx `accepts`).
    pub accepted: u64,
    /// Connections accepted and admitted under `max_connections` (nginx `handled`).
    pub handled: u64,
    /// Request heads read in full, including those whose body or upgrade the engine then
    /// refused (counted in `refused` too); a head the engine could not read is in `refused` only.
    pub requests: u64,
    /// Open connections, of every activity below (nginx `Active connections`).
    pub active: u64,
    /// Connections with nothing of their next request yet: new and idle keep-alive ones
    /// (nginx `Waiting`; a TLS handshake under way is counted here, as nginx counts it: reading
    /// begins with the request's first byte).
    pub waiting: u64,
    /// Connections with part of a request head received (nginx `Reading`).
    pub reading: u64,
    /// Connections with a whole head buffered, waiting for a worker (server engine; its queue).
    pub queued: u64,
    /// Connections with a request being served: body, handler, response (nginx `Writing`).
    pub writing: u64,
    /// Connections in a lingering close after an error or an unread body.
    pub closing: u64,
    /// Open WebSocket sessions.
    pub websockets: u64,
    /// Open event streams (server-sent events).
    pub event_streams: u64,
    /// Connections a handler took over with `Response::upgrade`.
    pub upgraded: u64,
    /// Connections waiting in the server engine's parker (idle, partial heads, lingering, and
    /// parked WebSockets and event streams between messages); 0 on the reactor.
    pub parked: u64,
    /// Connections held by each reactor loop, in loop order; empty on the server engine.
    pub per_loop: Vec<u64>,
    /// Refusals by reason: every named reason, then each engine-answered status that occurred.
    pub refused: Vec<(Refusal, u64)>,
    /// Handler panics: a request's handler (answered `500`, its connection closed), a
    /// WebSocket callback (closed with 1011), an upgraded connection's callback (its
    /// connection closed), a streamed response body producing a piece (its response cut), or
    /// the `Drop` of handler code the server drops: a response body, an upgrade's callback or
    /// a WebSocket handler whose switch was refused or never made, a WebSocket handler once
    /// its connection ended (one a body or WebSocket handler: a `Drop` that panics after a
    /// piece or a callback did is logged, not counted again).
    pub panics: u64,
    /// Handler calls, and pieces of streamed response bodies, that held a reactor loop longer
    /// than its blocking-warning threshold (inline dispatch;
    /// [`reactor::Builder::blocking_warning`]); 0 on the server engine and with pool dispatch.
    ///
    /// [`reactor::Builder::blocking_warning`]: crate::reactor::Builder::blocking_warning
    pub blocking_handlers: u64,
    /// The engine's threads alive: workers, loops, pool workers, the parker and the acceptor,
    /// and the threads of detached connections.
    pub threads: u64,
    /// Bytes held now against the memory budget: request bodies in memory, response tails
    /// waiting for their clients, WebSocket and event-stream send queues, and WebSocket
    /// messages still being received.
    pub memory_held: u64,
    /// The memory budget (`memory_budget` on either builder).
    pub memory_budget: u64,
    /// Times a WebSocket stopped reading its peer's input with fifteen sixteenths of the memory
    /// budget held (it reads again once what is held falls to seven eighths).
    pub reads_paused: u64,
}

impl Stats {
    /// How many times the engine refused for `why` (0 if never).
    ///
    /// ```
    /// use twinhttp::stats::{Refusal, Stats};
    /// assert_eq!(Stats::default().refusals(Refusal::Status(431)), 0);
    /// ```
    pub fn refusals(&self, why: Refusal) -> u64 {
        self.refused
            .iter()
            .find(|(r, _)| *r == why)
            .map_or(0, |&(_, n)| n)
    }

    /// All refusals, whatever the reason.
    pub fn refusals_total(&self) -> u64 {
        self.refused.iter().map(|&(_, n)| n).sum()
    }
}

/// Reads a running engine's [`Stats`] from any thread; cheap to clone, and usable inside the
/// engine's own handler (made before it serves: [`server::Builder::stats_handle`],
/// [`reactor::Builder::stats_handle`]). A handle whose engine is gone reads the last counts.
///
/// [`server::Builder::stats_handle`]: crate::server::Builder::stats_handle
/// [`reactor::Builder::stats_handle`]: crate::reactor::Builder::stats_handle
#[derive(Clone, Debug, Default)]
pub struct StatsHandle(
    pub(crate) std::sync::Arc<std::sync::OnceLock<std::sync::Arc<crate::engine::Control>>>,
);

impl StatsHandle {
    /// The counters now; all zero before the engine starts.
    pub fn stats(&self) -> Stats {
        match self.0.get() {
            Some(control) => control.stats(),
            None => Stats::default(),
        }
    }
}

/// A builder's [`StatsHandle`], handed out before `serve` and bound by it. A clone of the builder
/// starts without one: each engine served binds its own (a handle bound to a clone's engine
/// would read the wrong server).
#[derive(Debug, Default)]
pub(crate) struct HandleSlot(Option<StatsHandle>);

impl Clone for HandleSlot {
    fn clone(&self) -> Self {
        HandleSlot(None)
    }
}

impl HandleSlot {
    /// The handle, made on the first call.
    pub(crate) fn get(&mut self) -> StatsHandle {
        self.0.get_or_insert_with(StatsHandle::default).clone()
    }

    /// The handle, if one was handed out.
    pub(crate) fn handed_out(&self) -> Option<&StatsHandle> {
        self.0.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn gauges_add_up_across_threads() {
        let c = Arc::new(Counters::default());
        c.enter(Activity::Waiting);
        c.moved(Activity::Waiting, Activity::Reading);
        let other = c.clone();
        let moved = std::thread::spawn(move || other.moved(Activity::Reading, Activity::Writing));
        assert!(moved.join().is_ok());
        c.moved(Activity::Writing, Activity::WebSocket);
        let s = c.snapshot(1, 0);
        assert_eq!(
            (s.websockets, s.reading, s.writing, s.waiting),
            (1, 0, 0, 0)
        );
        c.leave(Activity::WebSocket);
        let s = c.snapshot(0, 0);
        assert_eq!((s.websockets, s.reading, s.writing), (0, 0, 0));
    }

    #[test]
    fn refusals_by_reason() {
        let c = Counters::default();
        c.refused(Refusal::Status(431));
        c.refused(Refusal::Status(431));
        c.refused(Refusal::Status(200)); // never counted: not an error status
        c.accepted();
        c.refused(Refusal::OverCapacity);
        c.accepted();
        let s = c.snapshot(0, 0);
        assert_eq!(s.refusals(Refusal::Status(431)), 2);
        assert_eq!(s.refusals(Refusal::OverCapacity), 1);
        assert_eq!((s.accepted, s.handled), (2, 1));
        assert_eq!(s.refusals_total(), 3);
    }
}
