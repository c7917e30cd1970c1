//! Idle parking: keep-alive connections waiting for their next request, and WebSockets and
//! event streams between messages, sit in one poller, watched by one thread, instead of each
//! holding a worker. A readable connection goes back on the worker queue; an HTTP connection idle
//! past the timeout is closed, a WebSocket or event stream whose timer is due goes to a worker to
//! act on it. A push from a WebSocket's or event stream's sender queues its parked connection at
//! once.
//!
//! A connection is registered once, on its first park, under a key it keeps for life,
//! edge-triggered and never re-armed: parking costs no system call. (Every supported poller,
//! epoll and kqueue, has edge-triggered mode; the parker refuses to start on one that lacks it.) An event for a connection that is not parked (bytes that arrived while a worker
//! served it) is remembered, and its next park returns it to that worker to serve again. The worker
//! parks a connection only once a read found its socket empty (EAGAIN), so every byte still to
//! come, and the end of input, raises an event of its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use crossbeam_channel::{Sender, TrySendError};
use polling::{Event, Events, Poller};
use slab::Slab;

use super::backlog::Backlog;
use super::connection::{Connection, Job};
use super::head::{self, Drives, Outcome};
use crate::engine::{Control, wait_events};
use crate::http::date::DateLine;
use crate::http::driver::Rules;
use crate::http::pools::{self, Pools};
use crate::http::session::Wake;
use crate::timers::{Due, Fired, Timers};

/// Working sets and heads the parker thread keeps for the connections it drives (the rest go
/// round through the shared overflow).
const PARKER_KEEPS: usize = 64;

/// Registered connections, parked or not, and the deadlines of the parked ones, always changed
/// together under one lock.
struct Parked {
    entries: Slab<Entry>,
    /// The parked connections' deadlines, by entry key. A connection taken out keeps its
    /// timer entry (a keep-alive connection parks again with a later deadline, which then
    /// costs no change to the set); an entry that comes due for a connection that is not
    /// parked, or parked with a later deadline, goes or moves ([`Timers`]).
    timers: Timers,
    /// Registered WebSockets and event streams (parked or not): shutdown waits for them to end
    /// (closing handshakes, queued events).
    sessions: usize,
    /// Shutdown began: HTTP connections are closed instead of parked; WebSockets and event
    /// streams still park while they end.
    stopping: bool,
    /// The parker thread has ended: nothing parks any more.
    closed: bool,
    /// The workers' queue, for connections woken by a sender; `None` once closed, so the
    /// workers see the queue end.
    queue: Option<Sender<Job>>,
    /// Connections woken by a sender while the queue was full: the parker thread sends them.
    pending: Vec<Job>,
}

/// One registered connection: parked (`slot`) or being served by a worker.
#[derive(Default)]
struct Entry {
    slot: Option<Slot>,
    /// The parked connection's deadline (none while a worker has it), and its timer entry.
    due: Due,
    /// An event came while a worker had the connection: its next park requeues it at once.
    ready: bool,
    /// A WebSocket or an event stream (counted in `Parked::sessions`).
    session: bool,
}

struct Slot {
    conn: Connection,
}

impl Parked {
    /// Takes a parked connection out of its slot; it has no deadline here until it parks again.
    fn take(&mut self, key: usize) -> Option<Connection> {
        let entry = self.entries.get_mut(key)?;
        let slot = entry.slot.take()?;
        self.timers.set(key, &mut entry.due, None);
        slot.conn.counters().unparked();
        Some(slot.conn)
    }
}

/// A connection's place in the parker: its registration key, given back when the connection
/// is dropped (closed) wherever that happens.
pub(crate) struct Ticket {
    parker: Weak<Parker>,
    key: usize,
}

impl Ticket {
    pub(crate) fn key(&self) -> usize {
        self.key
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // A connection is never dropped while the parker's lock is held (the parker drops the
        // connections it closes after unlocking), so this cannot deadlock.
        if let Some(parker) = self.parker.upgrade() {
            let mut parked = parker.lock();
            if parked
                .entries
                .get(self.key)
                .is_some_and(|e| e.slot.is_none())
            {
                let mut entry = parked.entries.remove(self.key);
                parked.timers.remove(self.key, &mut entry.due);
                if entry.session {
                    parked.sessions -= 1;
                    if parked.stopping && parked.sessions == 0 {
                        // The parker thread waits for the last one to end.
                        drop(parked);
                        let _ = parker.poller.notify();
                    }
                }
            }
        }
    }
}

/// The wake-up of a WebSocket's or event stream's sender: queues the parked connection at once,
/// or has it served again at its next park when a worker has it.
pub(crate) struct WakeParked {
    parker: Weak<Parker>,
    key: usize,
}

impl Wake for WakeParked {
    fn wake(&self) {
        if let Some(parker) = self.parker.upgrade() {
            parker.wake(self.key);
        }
    }
}

/// What became of a connection handed to [`Parker::park`].
pub(crate) enum Parking {
    /// Parked (or closed, if it could not be registered).
    Parked,
    /// An event came while it was being served: serve it again now.
    Ready(Connection),
    /// Parking has ended (shutdown): the caller closes it.
    Refused(Connection),
}

/// The parker: one poller, one thread, any number of idle connections.
pub(crate) struct Parker {
    poller: Arc<Poller>,
    /// The rules of the HTTP connections driven here (heads and bodies read here, not on a worker).
    rules: Rules,
    /// Buffers lent here come back to the workers' pools, and go round through this.
    pools: Arc<pools::Shared>,
    parked: Mutex<Parked>,
    control: Arc<Control>,
    /// The parker thread holds connections the full worker queue would not take: a worker that
    /// takes a job wakes it to hand them on ([`Parker::job_taken`]).
    backlogged: AtomicBool,
}

impl std::fmt::Debug for Parker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parker").finish_non_exhaustive()
    }
}

impl Parker {
    /// A parker that hands ready connections to the workers through `queue`.
    pub(crate) fn new(
        rules: Rules,
        pools: Arc<pools::Shared>,
        control: Arc<Control>,
        queue: Sender<Job>,
    ) -> std::io::Result<Self> {
        let poller = Poller::new()?;
        if !poller.supports_edge() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "the thread-pool engine parks connections edge-triggered, which this platform's poller cannot do",
            ));
        }
        Ok(Parker {
            poller: Arc::new(poller),
            rules,
            pools,
            parked: Mutex::new(Parked {
                entries: Slab::new(),
                timers: Timers::default(),
                sessions: 0,
                stopping: false,
                closed: false,
                queue: Some(queue),
                pending: Vec::new(),
            }),
            control,
            backlogged: AtomicBool::new(false),
        })
    }

    /// The parker thread holds connections back: the next job a worker takes wakes it. (Set
    /// before the parker's last try, and fenced, see [`Parker::job_taken`].)
    pub(super) fn ask_to_be_woken(&self) {
        self.backlogged.store(true, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    /// A worker took a job from the queue: if the parker thread holds connections back for
    /// room in it, it is woken to hand them on. The fence pairs with the parker's flag-then-try
    /// (each side writes, fences, then reads what the other wrote), so one of the two sees
    /// the other: a job taken just after the parker found the queue full always wakes it.
    pub(crate) fn job_taken(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.backlogged.load(Ordering::Relaxed) && self.backlogged.swap(false, Ordering::SeqCst)
        {
            let _ = self.poller.notify();
        }
    }

    /// Takes a new connection from the acceptor: it waits here, costing no worker, until its
    /// first request head is buffered. Refused (shutdown): closed.
    pub(crate) fn admit(self: &Arc<Self>, conn: Connection) {
        match self.park(conn) {
            Parking::Parked => {}
            // Never for a connection parked for the first time.
            Parking::Ready(conn) | Parking::Refused(conn) => drop(conn),
        }
    }

    /// The poller to notify so the parker thread sees a shutdown.
    pub(crate) fn waker(&self) -> Arc<Poller> {
        self.poller.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Parked> {
        // Nothing under this lock can panic half-way through an update; a poisoned lock still
        // holds consistent data.
        self.parked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parks `conn` until it is readable (a WebSocket or event stream: readable, writable or
    /// woken by its sender), its deadline passes, or shutdown. The socket is registered on its
    /// first park; later parks cost no system call (edge-triggered). A
    /// connection that had an event while it was being served comes back as
    /// [`Parking::Ready`]. Returns the connection when parking has ended (shutdown); the caller
    /// closes it.
    pub(crate) fn park(self: &Arc<Self>, mut conn: Connection) -> Parking {
        conn.settle();
        let mut parked = self.lock();
        if parked.closed || (parked.stopping && !conn.is_long_lived()) {
            drop(parked);
            return Parking::Refused(conn);
        }
        // A session a worker was running when the shutdown sweep took every parked connection
        // has not acted on it yet: it runs once more (nothing would wake it before its next timer).
        if parked.stopping && conn.session().is_some_and(|s| !s.has_shut_down()) {
            drop(parked);
            return Parking::Ready(conn);
        }
        // Nothing that holds a ticket may be dropped before `parked` is unlocked.
        let (conn, key) = match conn.ticket_key() {
            Some(key) => {
                let Some(entry) = parked.entries.get_mut(key) else {
                    drop(parked);
                    return Parking::Refused(conn);
                };
                if std::mem::take(&mut entry.ready) {
                    drop(parked);
                    return Parking::Ready(conn);
                }
                (conn, key)
            }
            None => match self.register(&mut parked, conn) {
                Ok(registered) => registered,
                Err(unregistered) => {
                    // Not registered (out of memory): closed, and the entry freed by the
                    // ticket, once unlocked.
                    drop(parked);
                    drop(unregistered);
                    return Parking::Parked;
                }
            },
        };
        // Output held back by its transport (a TLS handshake flight the socket did not take)
        // goes out with the next read: the parker is woken when the socket takes more, too.
        // Edge-triggered, the wider interest costs nothing until the socket was full.
        if !conn.is_long_lived() && conn.waits_to_write() && conn.set_edge(Event::all(key)).is_err()
        {
            drop(parked);
            return Parking::Refused(conn);
        }
        let deadline = conn.phase.deadline();
        // The parker thread sleeps until the earliest timer entry: wake it for an earlier one.
        // With one idle timeout for all HTTP connections that is only when none is pending.
        let wake = deadline.is_some_and(|d| parked.timers.next().is_none_or(|first| d < first));
        let Parked {
            entries, timers, ..
        } = &mut *parked;
        if let Some(entry) = entries.get_mut(key) {
            timers.set(key, &mut entry.due, deadline);
            conn.counters().parked();
            entry.slot = Some(Slot { conn });
        }
        drop(parked);
        if wake {
            let _ = self.poller.notify();
        }
        Parking::Parked
    }

    /// Parks a connection the parker thread drove (waiting for its client, or lingering).
    /// One that cannot park at shutdown while its exchange is under way comes back: a worker
    /// finishes it.
    fn park_again(self: &Arc<Self>, conn: Connection) -> Option<Connection> {
        match self.park(conn) {
            Parking::Parked => None,
            // It had no slot while it was driven here, so no event marked it ready.
            Parking::Ready(conn) => Some(conn),
            Parking::Refused(conn) if conn.closes_at_shutdown() => None,
            Parking::Refused(conn) => Some(conn),
        }
    }

    /// Registers a connection that has no key yet (under the lock). On failure the ticket
    /// (and the connection, unless registering closed it) come back to be dropped unlocked.
    #[allow(clippy::type_complexity, clippy::result_large_err)]
    fn register(
        self: &Arc<Self>,
        parked: &mut Parked,
        conn: Connection,
    ) -> Result<(Connection, usize), (Option<Connection>, Ticket)> {
        let key = parked.entries.insert(Entry::default());
        let ticket = Ticket {
            parker: Arc::downgrade(self),
            key,
        };
        let conn = conn.into_registered(&self.poller, ticket)?;
        Ok((conn, key))
    }

    /// Enrolls a connection that became a WebSocket or an event stream (its head is out):
    /// registered for reads and writes, counted so that shutdown waits for it to end. Returns
    /// the wake-up its sender uses. `Err(Some(conn))`: refused (shutdown began after its answer
    /// — a shutdown under way answers an upgrade 503 in the core —, or the poller failed): it
    /// closes; `Err(None)`: the connection is gone.
    // The connection comes back by value in the error, as it does from `register`.
    #[allow(clippy::result_large_err)]
    pub(crate) fn enroll(
        self: &Arc<Self>,
        conn: Connection,
    ) -> Result<(Connection, WakeParked), Option<Connection>> {
        let mut parked = self.lock();
        if parked.stopping || parked.closed {
            drop(parked);
            return Err(Some(conn));
        }
        let (conn, key) = match conn.ticket_key() {
            Some(key) => {
                if conn.set_edge(Event::all(key)).is_err() {
                    drop(parked);
                    return Err(Some(conn));
                }
                (conn.into_long_lived(), key)
            }
            None => match self.register(&mut parked, conn.into_long_lived()) {
                Ok(registered) => registered,
                Err((conn, ticket)) => {
                    drop(parked);
                    drop(ticket);
                    return Err(conn);
                }
            },
        };
        if let Some(entry) = parked.entries.get_mut(key) {
            if !entry.session {
                entry.session = true;
                parked.sessions += 1;
            }
        }
        drop(parked);
        let wake = WakeParked {
            parker: Arc::downgrade(self),
            key,
        };
        Ok((conn, wake))
    }

    /// Puts a connection with more work behind the others on the worker queue. Gives it back
    /// when the queue is full or gone (the caller goes on with it).
    // The connection comes back by value in the error, as it does from `register`.
    #[allow(clippy::result_large_err)]
    pub(crate) fn requeue(&self, conn: Connection) -> Result<(), Connection> {
        let Some(queue) = self.lock().queue.clone() else {
            return Err(conn);
        };
        queue
            .try_send(Job::from(conn))
            .map_err(|e| e.into_inner().into_connection())
    }

    /// A sender pushed to the connection under `key`: queue it if it is parked, else have its
    /// next park hand it back.
    fn wake(&self, key: usize) {
        let mut parked = self.lock();
        let Some(entry) = parked.entries.get_mut(key) else {
            return;
        };
        if entry.slot.is_none() {
            entry.ready = true;
            return;
        }
        let Some(queue) = parked.queue.clone() else {
            return;
        };
        let Some(conn) = parked.take(key) else {
            return;
        };
        drop(parked);
        // Never block here: the pusher may be a worker, and the workers drain the queue.
        match queue.try_send(Job::from(conn)) {
            Ok(()) => {}
            Err(TrySendError::Full(job)) => {
                self.lock().pending.push(job);
                let _ = self.poller.notify();
            }
            // The workers are gone: dropping closes it.
            Err(TrySendError::Disconnected(job)) => drop(job),
        }
    }

    /// The parker thread: hands ready connections to the workers, closes idle HTTP connections
    /// whose time is up and hands WebSockets and event streams whose timer is due to a worker.
    /// At shutdown idle HTTP connections close, WebSockets go to the workers to close with 1001
    /// and event streams to end after what is queued; the thread ends when the last has.
    pub(crate) fn run(self: &Arc<Self>) {
        let _ended = Ended(self);
        let Some(queue) = self.lock().queue.clone() else {
            return;
        };
        let mut events = Events::new();
        let mut ready = Vec::new();
        let mut expired = Vec::new();
        let mut jobs = Vec::new();
        let mut backlog = Backlog::default();
        // Buffers lent to the connections driven here come back from the workers.
        let mut drives = Drives {
            rules: self.rules.clone(),
            pools: Pools::sharing(PARKER_KEEPS, self.pools.clone()),
            date: DateLine::new(),
        };
        let counters = &self.control.counters;
        // Set when shutdown has just run every parked connection once: look again at once
        // (without waiting for an event nobody will send) whether the thread may end.
        let mut recheck = false;
        loop {
            let timeout = if std::mem::take(&mut recheck) {
                Some(std::time::Duration::ZERO)
            } else {
                self.lock()
                    .timers
                    .next()
                    .map(|d| d.saturating_duration_since(Instant::now()))
            };
            wait_events(&self.poller, &mut events, timeout, "parker");
            let now = Instant::now();
            {
                let mut parked = self.lock();
                if !parked.stopping && self.control.is_shutting_down() {
                    parked.stopping = true;
                    recheck = true;
                    let keys: Vec<usize> = parked
                        .entries
                        .iter()
                        .filter(|(_, e)| e.slot.is_some())
                        .map(|(key, _)| key)
                        .collect();
                    for key in keys {
                        // Every parked connection runs once more, as on the reactor: a request
                        // already in its socket is answered (with `Connection: close`); an idle
                        // one, or part of a head, closes when it cannot park again.
                        if let Some(conn) = parked.take(key) {
                            ready.push(conn);
                        }
                    }
                }
                if parked.stopping && parked.sessions == 0 && ready.is_empty() && backlog.is_empty()
                {
                    // Later parks are refused and their connections closed by the worker.
                    parked.closed = true;
                    let last = (parked.queue.take(), std::mem::take(&mut parked.pending));
                    drop(parked);
                    // Dropped unlocked: each connection's ticket takes the lock to leave.
                    drop(last);
                    return;
                }
                for ev in events.iter() {
                    let Some(entry) = parked.entries.get_mut(ev.key) else {
                        continue;
                    };
                    if entry.slot.is_none() {
                        entry.ready = true;
                    } else if let Some(conn) = parked.take(ev.key) {
                        ready.push(conn);
                    }
                }
                while let Some((at, key)) = parked.timers.pop_due(now) {
                    let Parked {
                        entries, timers, ..
                    } = &mut *parked;
                    let Some(entry) = entries.get_mut(key) else {
                        continue;
                    };
                    if timers.fired(key, &mut entry.due, at, now) == Fired::Moved {
                        continue;
                    }
                    match parked.take(key) {
                        Some(conn) if conn.is_long_lived() => ready.push(conn),
                        Some(conn) => expired.push(conn),
                        None => {}
                    }
                }
                jobs.append(&mut parked.pending);
            }
            // Unlocked: driving, writing a 408 and dropping (closing a connection frees its
            // entry: its ticket takes the lock) happen here.
            for conn in expired.drain(..) {
                let to_worker = match head::expire(conn, &mut drives, counters, now) {
                    Outcome::Park(conn) => self.park_again(conn),
                    Outcome::Ready(conn) => Some(conn),
                    Outcome::Close => None,
                };
                if let Some(conn) = to_worker {
                    jobs.push(Job::from(conn));
                }
            }
            let held_back = !backlog.is_empty();
            if backlog.flush(&queue, self).is_err() {
                return;
            }
            // The last held-back connection went out while shutting down: nothing else may
            // wake this thread to see that it can end (no deadline is left, and a worker wakes
            // it only while it holds some back), so look again at once.
            if held_back && backlog.is_empty() && self.control.is_shutting_down() {
                recheck = true;
            }
            for job in jobs.drain(..) {
                if backlog.hand(&queue, job, self).is_err() {
                    return;
                }
            }
            // Each connection goes to a worker as soon as its request is read, not after the
            // whole batch: the workers start while the next ones are read.
            let closing = self.control.is_shutting_down();
            for conn in ready.drain(..) {
                let conn = if conn.is_long_lived() {
                    conn
                } else {
                    match head::drive(conn, &mut drives, counters, now, closing) {
                        Outcome::Ready(conn) => conn,
                        Outcome::Park(conn) => match self.park_again(conn) {
                            Some(conn) => conn,
                            None => continue,
                        },
                        Outcome::Close => continue,
                    }
                };
                if backlog.hand(&queue, Job::from(conn), self).is_err() {
                    return;
                }
            }
        }
    }
}

/// However the parker thread ends (a panic included), parking ends with it: later parks are
/// refused and their connections closed, instead of waiting in a poller nobody watches.
struct Ended<'a>(&'a Parker);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            log::error!("the parker thread panicked: new connections are closed");
        }
        let mut parked = self.0.lock();
        parked.closed = true;
        let last = (parked.queue.take(), std::mem::take(&mut parked.pending));
        drop(parked);
        // Dropped unlocked: each connection's ticket takes the lock to leave.
        drop(last);
    }
}
