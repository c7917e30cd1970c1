//! One event loop: a poller, its listener, its connections in a slab, their deadlines, and the
//! buffer pool they borrow from.

use std::sync::Arc;
use std::time::{Duration, Instant};

use polling::{Event, Events, Poller};
use slab::Slab;

use super::Config;
use super::blocking::Blocking;
use super::connection::{Connection, Cx, Next, Rearm, Wakes};
use super::inbox::Inbox;
use super::pool::{Done, Job, PoolSender};
use crate::Handler;
use crate::engine::{Control, OpenGuard, wait_events};
use crate::http::date::DateLine;
use crate::http::driver::{Driver, Rules};
use crate::http::pools::Pools;
use crate::net::acceptor::{self, Admission};
use crate::net::sys::Registered;
use crate::net::transport::{Address, Listener, Stream};
use crate::net::upgrade;
use crate::timers::{Fired, Timers};

/// The listener's key; connection keys are slab indices (polling reserves `usize::MAX`).
const LISTENER: usize = usize::MAX - 1;
/// Connections accepted per wake-up before the others get their turn.
const ACCEPT_BUDGET: usize = 64;

/// A connection accepted by the acceptor thread, on its way to a loop.
pub(crate) type Accepted = (Stream, Address, OpenGuard);

/// What a loop is built from.
pub(crate) struct Parts<H> {
    pub(crate) poller: Arc<Poller>,
    /// The loop's own listener ([`super::Accept::ReusePort`]), or none when an acceptor thread
    /// hands it connections.
    pub(crate) listener: Option<Listener>,
    pub(crate) handler: Arc<H>,
    pub(crate) cfg: Arc<Config>,
    pub(crate) control: Arc<Control>,
    pub(crate) pool: Option<PoolSender>,
    pub(crate) completions: Arc<Inbox<Done>>,
    pub(crate) accepted: Arc<Inbox<Accepted>>,
    /// The loop's place in the counters' connections per loop.
    pub(crate) index: usize,
}

/// Where a loop's new connections come from.
enum Intake {
    /// Its own listener ([`super::Accept::ReusePort`]). `paused_until`: accepting is paused
    /// after descriptor exhaustion, until then.
    Listening {
        listener: Registered<Listener>,
        paused_until: Option<Instant>,
    },
    /// The acceptor thread hands it connections ([`super::Accept::Thread`]).
    Fed,
    /// Shutdown began: no more.
    Stopping,
}

impl Intake {
    /// When a paused listener listens again.
    fn resumes_at(&self) -> Option<Instant> {
        match self {
            Intake::Listening { paused_until, .. } => *paused_until,
            Intake::Fed | Intake::Stopping => None,
        }
    }
}

pub(crate) struct EventLoop<H> {
    poller: Arc<Poller>,
    intake: Intake,
    admission: Admission,
    conns: Slab<Connection>,
    /// Every connection's deadline: a wake-up only touches the due ones.
    timers: Timers,
    pools: Pools,
    next_id: u64,
    handler: Arc<H>,
    cfg: Arc<Config>,
    /// The rules the connections' drivers follow, from `cfg`.
    rules: Rules,
    control: Arc<Control>,
    pool: Option<PoolSender>,
    completions: Arc<Inbox<Done>>,
    /// Connections from the acceptor thread ([`super::Accept::Thread`]).
    accepted: Arc<Inbox<Accepted>>,
    /// Connections with work left after their budget, run again before the next wait: key
    /// and id, so that a connection closed meanwhile (its slot perhaps reused by a new one)
    /// is not run in its place. (Poll events need no such check: each key comes once per
    /// wait, and a connection is only closed by its own event within the events' loop, its
    /// registration removed before its slot is reused.)
    again: Vec<(usize, u64)>,
    /// WebSockets whose senders queued messages from other threads.
    wakes: Arc<Wakes>,
    index: usize,
    /// Times inline handler calls (off with pool dispatch).
    blocking: Blocking,
    /// The `Date` line of the loop's responses.
    date: DateLine,
    /// Jobs on the pool that answer back: a request's handler, a streamed body's piece, a
    /// session's callbacks (a WebSocket's). At shutdown the loop stays until each is back: what
    /// comes back for a connection that went meanwhile is handler code, dropped here caught (a
    /// response, its body) or given its last calls (a WebSocket's `on_close`); with the loop
    /// gone, it was dropped uncaught on the worker that answered.
    away: usize,
}

impl<H: Handler> EventLoop<H> {
    pub(crate) fn new(parts: Parts<H>) -> std::io::Result<Self> {
        if !parts.poller.supports_level() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "the reactor registers connections level-triggered, which this platform's poller cannot do",
            ));
        }
        let intake = match parts.listener {
            Some(l) => Intake::Listening {
                listener: Registered::level(parts.poller.clone(), l, Event::readable(LISTENER))?,
                paused_until: None,
            },
            None => Intake::Fed,
        };
        // Only inline calls hold a loop; pool workers are the pool's.
        let blocking = Blocking::new(
            match parts.pool {
                None => parts.cfg.blocking_warning,
                Some(_) => None,
            },
            parts.control.clone(),
        );
        Ok(EventLoop {
            poller: parts.poller.clone(),
            intake,
            admission: Admission::new(
                parts.control.clone(),
                parts.cfg.settings.max_connections,
                parts.cfg.settings.wrap.clone(),
            ),
            conns: Slab::new(),
            timers: Timers::default(),
            pools: Pools::default(),
            next_id: 0,
            handler: parts.handler,
            rules: parts.cfg.rules(),
            cfg: parts.cfg,
            control: parts.control,
            pool: parts.pool,
            completions: parts.completions,
            accepted: parts.accepted,
            again: Vec::new(),
            wakes: Arc::new(Inbox::new(parts.poller.clone())),
            index: parts.index,
            blocking,
            date: DateLine::new(),
            away: 0,
        })
    }

    pub(crate) fn run(mut self) {
        let mut events = Events::new();
        let mut done = Vec::new();
        let mut accepted = Vec::new();
        let mut again = Vec::new();
        let mut woken = Vec::new();
        loop {
            let now = Instant::now();
            let timeout = if self.again.is_empty() {
                let next = [self.timers.next(), self.intake.resumes_at()]
                    .into_iter()
                    .flatten()
                    .min();
                next.map(|d| d.saturating_duration_since(now))
            } else {
                Some(Duration::ZERO)
            };
            wait_events(&self.poller, &mut events, timeout, "event loop");
            // Moves on past inline handler code's time (`ready`), so the connections after a
            // slow handler do not take deadlines from before it.
            let mut now = Instant::now();
            if !self.is_stopping() && self.control.is_shutting_down() {
                self.begin_shutdown(now);
            }
            for ev in events.iter() {
                if ev.key == LISTENER {
                    self.accept(now);
                } else {
                    now = self.ready(ev.key, now, ev.readable);
                }
            }
            self.accepted.take(&mut accepted);
            // Accepted before the shutdown began: served as any other (a fresh connection gets
            // a moment for its first request).
            for (stream, peer, open) in accepted.drain(..) {
                self.add(stream, peer, open, now);
            }
            self.completions.take(&mut done);
            for d in done.drain(..) {
                self.complete(d, now);
            }
            self.wakes.take(&mut woken);
            for (key, id) in woken.drain(..) {
                if self.conns.get(key).is_some_and(|c| c.id == id) {
                    now = self.ready(key, now, false);
                }
            }
            std::mem::swap(&mut again, &mut self.again);
            for (key, id) in again.drain(..) {
                if let Some(conn) = self.conns.get_mut(key).filter(|c| c.id == id) {
                    conn.queued = false;
                    now = self.ready(key, now, false);
                }
            }
            self.expire(now);
            // One store per wake-up, by the one thread that changes it.
            (self.control.counters).loop_holds(self.index, self.conns.len());
            if self.is_stopping() && self.conns.is_empty() && self.away == 0 {
                return;
            }
        }
    }

    /// Shutdown began on this loop.
    fn is_stopping(&self) -> bool {
        matches!(self.intake, Intake::Stopping)
    }

    /// A turn of connection `key`; `readable` when a readable event brought it.
    fn cx(
        &mut self,
        now: Instant,
        key: usize,
        readable: bool,
    ) -> (Cx<'_, H>, &mut Slab<Connection>) {
        let closing = self.is_stopping();
        (
            Cx {
                handler: &self.handler,
                cfg: &self.cfg,
                rules: &self.rules,
                pools: &mut self.pools,
                pool: self.pool.as_ref(),
                now,
                closing,
                key,
                wakes: &self.wakes,
                counters: &self.control.counters,
                blocking: &mut self.blocking,
                date: &mut self.date,
                readable,
                away: &mut self.away,
            },
            &mut self.conns,
        )
    }

    /// Drives a connection; `readable` when a readable event (or a hang-up) brought it here.
    /// Returns the time its turn ended, later than `now` when inline handler code ran.
    fn ready(&mut self, key: usize, now: Instant, readable: bool) -> Instant {
        let (mut cx, conns) = self.cx(now, key, readable);
        let Some(conn) = conns.get_mut(key) else {
            return now;
        };
        let next = conn.drive(&mut cx);
        let ended = cx.now;
        self.apply(key, next, readable);
        ended
    }

    fn complete(&mut self, done: Done, now: Instant) {
        self.away = self.away.saturating_sub(1);
        match done {
            Done::Http {
                key,
                id,
                head,
                answered,
            } => {
                let (mut cx, conns) = self.cx(now, key, false);
                match conns.get_mut(key) {
                    Some(conn) if conn.id == id => {
                        conn.complete(head, answered, &mut cx);
                        let next = conn.drive(&mut cx);
                        self.apply(key, next, false);
                    }
                    // Its connection went away while the handler ran.
                    _ => {
                        cx.pools.give_head(head);
                        answered.drop_caught(cx.counters.panics());
                    }
                }
            }
            Done::Produced {
                key,
                id,
                out,
                produced,
            } => {
                let (mut cx, conns) = self.cx(now, key, false);
                let unwanted = match conns.get_mut(key).filter(|c| c.id == id) {
                    Some(conn) => {
                        let unwanted = conn.produced(out, produced);
                        let next = conn.drive(&mut cx);
                        self.apply(key, next, false);
                        unwanted
                    }
                    // The connection went while its body's piece was made.
                    None => produced.into_body(),
                };
                if let (Some(body), Some(pool)) = (unwanted, &self.pool) {
                    pool.send(Job::Discard(body));
                }
            }
            Done::Session { key, id, mut work } => {
                let (mut cx, conns) = self.cx(now, key, false);
                match conns.get_mut(key) {
                    Some(conn) if conn.id == id => {
                        let next = conn.work_done(work, &mut cx);
                        self.apply(key, next, false);
                    }
                    // The connection went while its handler was away: `on_close` is still due.
                    _ => {
                        if work.close_due() {
                            if let Some(pool) = &self.pool {
                                pool.send(Job::Last(work));
                            }
                        }
                    }
                }
            }
        }
    }

    /// Carries out what a connection's step decided: wait with a deadline, run again, close.
    fn apply(&mut self, key: usize, next: Next, readable: bool) {
        if let Some(conn) = self.conns.get_mut(key) {
            conn.settle();
        }
        match next {
            Next::Close => self.close(key),
            Next::Again => {
                if let Some(conn) = self.conns.get_mut(key) {
                    if !std::mem::replace(&mut conn.queued, true) {
                        self.again.push((key, conn.id));
                    }
                }
            }
            Next::Detach => {
                let Some(mut conn) = self.conns.try_remove(key) else {
                    return;
                };
                self.timers.remove(key, &mut conn.due);
                if let Some(d) = conn.into_detached() {
                    upgrade::detach(&self.control, d.stream, d.leftover, d.then, d.open);
                }
            }
            Next::Wait { on, deadline } => {
                let Some(conn) = self.conns.get_mut(key) else {
                    return;
                };
                self.timers.set(key, &mut conn.due, deadline);
                match conn.interest.follow(key, on, readable) {
                    Rearm::Keep => {}
                    Rearm::To(event) => {
                        if conn.socket().set_level(event).is_err() {
                            self.close(key);
                        }
                    }
                    Rearm::PeerGone => self.close(key),
                }
            }
        }
    }

    fn close(&mut self, key: usize) {
        if let Some(mut conn) = self.conns.try_remove(key) {
            self.timers.remove(key, &mut conn.due);
            let counters = &self.control.counters;
            conn.finish(
                self.pool.as_ref(),
                &mut self.pools,
                &mut self.blocking,
                counters,
            );
            conn.release_all(&mut self.pools);
        }
    }

    fn expire(&mut self, now: Instant) {
        if let Intake::Listening {
            listener,
            paused_until,
        } = &mut self.intake
        {
            if paused_until.is_some_and(|t| t <= now) {
                *paused_until = None;
                let _ = listener.set_level(Event::readable(LISTENER));
            }
        }
        while let Some((at, key)) = self.timers.pop_due(now) {
            if let Some(conn) = self.conns.get_mut(key) {
                if self.timers.fired(key, &mut conn.due, at, now) == Fired::Moved {
                    continue;
                }
                if conn.expire(
                    &mut self.pools,
                    now,
                    &mut self.date,
                    &self.rules,
                    &self.control.counters,
                ) {
                    self.ready(key, now, false);
                    continue;
                }
            }
            self.close(key);
        }
    }

    fn accept(&mut self, now: Instant) {
        for _ in 0..ACCEPT_BUDGET {
            let Intake::Listening { listener, .. } = &self.intake else {
                return;
            };
            match self.admission.accept(listener.get()) {
                acceptor::Accepted::Conn(stream, peer, open) => self.add(stream, peer, open, now),
                acceptor::Accepted::Handled => {}
                acceptor::Accepted::Drained => break,
                acceptor::Accepted::Pause(pause) => {
                    let Intake::Listening {
                        listener,
                        paused_until,
                    } = &mut self.intake
                    else {
                        return;
                    };
                    // Never sleep on the loop: pause accepting and keep serving the rest.
                    *paused_until = Some(now.checked_add(pause).unwrap_or(now));
                    // Level-triggered, the pending connections would be reported at every
                    // wait: stop listening until the pause is over.
                    if listener.set_level(Event::none(LISTENER)).is_err() {
                        log::error!("cannot pause the listener");
                    }
                    return;
                }
            }
        }
    }

    /// Registers a new connection, armed for its first request.
    fn add(&mut self, stream: Stream, peer: Address, open: OpenGuard, now: Instant) {
        let key = self.conns.vacant_key();
        // Level-triggered, a connection waits for input from the start and its interest changes
        // only with what it waits for; bytes, or an end of input, left in the socket are
        // reported again at the next wait, so a step may stop at a short read.
        let socket = Registered::level(self.poller.clone(), stream, Event::readable(key));
        let Ok(socket) = socket else {
            return;
        };
        self.next_id += 1;
        let driver = Driver::new(self.cfg.settings.access_log, Some(&peer), now, &self.rules);
        let first = driver.first_deadline();
        let mut conn = Connection::new(socket, self.next_id, peer, driver, open);
        self.timers.set(key, &mut conn.due, first);
        self.conns.insert(conn);
    }

    /// Stop accepting; run every connection once so a request already in its socket buffer is
    /// answered (with `Connection: close`); idle ones close, busy ones after their response.
    fn begin_shutdown(&mut self, now: Instant) {
        self.intake = Intake::Stopping;
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        let mut now = now;
        for key in keys {
            now = self.ready(key, now, false);
        }
    }
}
