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

use crossbeam_channel::{Sender, TrySendError};
use polling::Poller;
use slab::Slab;

use super::connection::{Connection, Job, Watch};
use crate::engine::Control;
use crate::http::driver::Rules;
use crate::http::pools;
use crate::http::session::Wake;
use crate::timers::{Due, Timers};

mod thread;

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
    /// Serving, stopping or ended, with the workers' queue while it is not ended.
    life: Life,
    /// Connections woken by a sender while the queue was full: the parker thread sends them.
    pending: Vec<Job>,
    /// Connections whose turn on a worker ran out of budget with the core's work next (a
    /// file's next MiB): the parker thread drives them on.
    again: Vec<Connection>,
}

/// Where the parker is in its life. While it is not ended it holds the workers' queue (for
/// connections woken by a sender); ended, it has given it up, so the workers see the queue end.
enum Life {
    /// Parking connections.
    Serving(Sender<Job>),
    /// Shutdown began: every registered connection (parked or with a worker) goes on here until
    /// it ends — its driver closes an HTTP connection as soon as its exchange allows, a
    /// WebSocket or event stream ends its way —, and the parker thread waits for the last; a
    /// connection the acceptor hands over now is not taken in.
    Stopping(Sender<Job>),
    /// The parker thread has ended: nothing parks any more.
    Ended,
}

impl Life {
    fn queue(&self) -> Option<&Sender<Job>> {
        match self {
            Life::Serving(queue) | Life::Stopping(queue) => Some(queue),
            Life::Ended => None,
        }
    }

    fn is_stopping(&self) -> bool {
        matches!(self, Life::Stopping(_))
    }

    /// Shutdown began; true when it had not before.
    fn stop(&mut self) -> bool {
        match std::mem::replace(self, Life::Ended) {
            Life::Serving(queue) => {
                *self = Life::Stopping(queue);
                true
            }
            was => {
                *self = was;
                false
            }
        }
    }

    /// The parker thread ends: the queue's sender, given up (to be dropped unlocked).
    fn end(&mut self) -> Option<Sender<Job>> {
        match std::mem::replace(self, Life::Ended) {
            Life::Serving(queue) | Life::Stopping(queue) => Some(queue),
            Life::Ended => None,
        }
    }
}

/// One registered connection: where it is, and its deadline here.
#[derive(Default)]
struct Entry {
    place: Place,
    /// The parked connection's deadline (none while a worker has it), and its timer entry.
    due: Due,
}

/// Where a registered connection is.
enum Place {
    /// In the parker's poller.
    Parked(Connection),
    /// With a worker (or the parker thread driving it). `ready`: an event came meanwhile, so
    /// its next park hands it back at once.
    Away { ready: bool },
}

impl Default for Place {
    fn default() -> Self {
        Place::Away { ready: false }
    }
}

impl Entry {
    fn is_parked(&self) -> bool {
        matches!(self.place, Place::Parked(_))
    }

    /// An event came for it: true when it is parked (to be taken out); if not, it is marked
    /// for its next park.
    fn event(&mut self) -> bool {
        match &mut self.place {
            Place::Parked(_) => true,
            Place::Away { ready } => {
                *ready = true;
                false
            }
        }
    }

    /// Whether an event came while it was away (and forgets it).
    fn take_ready(&mut self) -> bool {
        match &mut self.place {
            Place::Away { ready } => std::mem::take(ready),
            Place::Parked(_) => false,
        }
    }
}

impl Parked {
    /// Takes a parked connection out of its slot; it has no deadline here until it parks again.
    fn take(&mut self, key: usize) -> Option<Connection> {
        let entry = self.entries.get_mut(key)?;
        if !entry.is_parked() {
            return None;
        }
        let Place::Parked(conn) = std::mem::take(&mut entry.place) else {
            return None;
        };
        self.timers.set(key, &mut entry.due, None);
        conn.counters().unparked();
        Some(conn)
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
            if parked.entries.get(self.key).is_some_and(|e| !e.is_parked()) {
                let mut entry = parked.entries.remove(self.key);
                parked.timers.remove(self.key, &mut entry.due);
                if parked.life.is_stopping() && parked.entries.is_empty() {
                    // The parker thread waits for the last connection to end.
                    drop(parked);
                    let _ = parker.poller.notify();
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
                life: Life::Serving(queue),
                pending: Vec::new(),
                again: Vec::new(),
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
        // At shutdown a connection registered here goes on here, its driver closing it as soon
        // as its exchange allows (as on the reactor), and never holds a worker to wait on its
        // client; one the acceptor has just handed over is not taken in, nor one idle between
        // exchanges (driven before shutdown began, it waits for a next request: its worker
        // closes it with the shutdown's rules; parked, it would keep its idle deadline).
        let fresh = conn.ticket_key().is_none();
        let refused = match parked.life {
            Life::Serving(_) => false,
            Life::Stopping(_) => fresh || conn.closes_at_shutdown(),
            Life::Ended => true,
        };
        if refused {
            drop(parked);
            return Parking::Refused(conn);
        }
        // A session a worker was running when the shutdown sweep took every parked connection
        // has not acted on it yet: it runs once more (nothing would wake it before its next timer).
        if parked.life.is_stopping() && conn.session().is_some_and(|s| !s.has_shut_down()) {
            drop(parked);
            return Parking::Ready(conn);
        }
        // Its turn ran out with no handler code next: driven on by the parker thread. (An event
        // that came meanwhile stays marked: its next park hands it back.)
        if conn.yielded() {
            parked.again.push(conn);
            drop(parked);
            let _ = self.poller.notify();
            return Parking::Parked;
        }
        // Nothing that holds a ticket may be dropped before `parked` is unlocked.
        let (mut conn, key) = match conn.ticket_key() {
            Some(key) => {
                let Some(entry) = parked.entries.get_mut(key) else {
                    drop(parked);
                    return Parking::Refused(conn);
                };
                if entry.take_ready() {
                    drop(parked);
                    return Parking::Ready(conn);
                }
                (conn, key)
            }
            None => match self.register(&mut parked, conn, None) {
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
        // Its registration reports what it waits for now (a change costs an `epoll_ctl`).
        if conn.watch().is_err() {
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
            entry.place = Place::Parked(conn);
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
            // A worker drives it with the shutdown's rules (an idle one, its driver closes).
            Parking::Refused(conn) => Some(conn),
        }
    }

    /// Registers a connection that has no key yet (under the lock), reporting `watch` (`None`:
    /// what it waits for now). On failure the ticket and the connection come back, to be
    /// dropped unlocked.
    #[allow(clippy::type_complexity, clippy::result_large_err)]
    fn register(
        self: &Arc<Self>,
        parked: &mut Parked,
        conn: Connection,
        watch: Option<Watch>,
    ) -> Result<(Connection, usize), (Connection, Ticket)> {
        let key = parked.entries.insert(Entry::default());
        let ticket = Ticket {
            parker: Arc::downgrade(self),
            key,
        };
        let watch = watch.unwrap_or_else(|| conn.wants());
        let conn = conn.into_registered(&self.poller, ticket, watch)?;
        Ok((conn, key))
    }

    /// Enrolls a connection that became a WebSocket or an event stream (its head is out):
    /// registered for reads and writes (shutdown waits for it to end, as for every registered
    /// connection). Returns the wake-up its sender uses. `Err(conn)`: refused (shutdown began after its answer — a
    /// shutdown under way answers an upgrade 503 in the core —, or the poller failed): it
    /// closes.
    // The connection comes back by value in the error, as it does from `register`.
    #[allow(clippy::result_large_err)]
    pub(crate) fn enroll(
        self: &Arc<Self>,
        conn: Connection,
    ) -> Result<(Connection, WakeParked), Connection> {
        let mut parked = self.lock();
        if !matches!(parked.life, Life::Serving(_)) {
            drop(parked);
            return Err(conn);
        }
        let (conn, key) = match conn.ticket_key() {
            // Registered for reads and writes from now on: its phase becomes the session's as
            // soon as this returns (the session needs the wake-up made here).
            Some(key) => {
                let mut conn = conn;
                if conn.watch_for(Watch::Both).is_err() {
                    drop(parked);
                    return Err(conn);
                }
                (conn, key)
            }
            None => match self.register(&mut parked, conn, Some(Watch::Both)) {
                Ok(registered) => registered,
                Err((conn, ticket)) => {
                    drop(parked);
                    drop(ticket);
                    return Err(conn);
                }
            },
        };
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
        let Some(queue) = self.lock().life.queue().cloned() else {
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
        if !entry.event() {
            return;
        }
        let Some(queue) = parked.life.queue().cloned() else {
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
}
