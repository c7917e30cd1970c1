//! Idle parking: keep-alive connections waiting for their next request sit in one poller,
//! watched by one thread, instead of each holding a worker. A readable connection goes back on
//! the worker queue; one idle past the timeout is closed.
//!
//! A connection is registered once, on its first park, under a key it keeps for life. Where the
//! poller supports it the registration is edge-triggered and never re-armed: parking costs no
//! system call. An event for a connection that is not parked (bytes that arrived while a worker
//! served it) is remembered, and its next park returns it to that worker to serve again. The worker
//! parks a connection only once a short read showed its socket drained, so every byte still to
//! come raises an event of its own.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use polling::{Event, Events, Poller};
use slab::Slab;

use super::worker::{Connection, Job};
use crate::engine::{Control, wait_events};

/// Registered connections, parked or not, and the idle deadlines of the parked ones, always
/// changed together under one lock.
#[derive(Default)]
struct Parked {
    entries: Slab<Entry>,
    /// `(deadline, generation, key)`, ordered by deadline: expiry pops from the front and a
    /// woken connection removes its own entry, so the set holds exactly the parked connections
    /// and a wake-up costs O(log n) whatever their number.
    deadlines: BTreeSet<(Instant, u64, usize)>,
    generation: u64,
    closed: bool,
}

/// One registered connection: parked (`slot`) or being served by a worker.
#[derive(Default)]
struct Entry {
    slot: Option<Slot>,
    /// An event came while a worker had the connection: its next park requeues it at once.
    ready: bool,
}

struct Slot {
    conn: Connection,
    deadline: Instant,
    generation: u64,
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
                parked.entries.remove(self.key);
            }
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
    /// Registrations are edge-triggered (epoll, kqueue) rather than oneshot and re-armed.
    edge: bool,
    idle_timeout: Duration,
    parked: Mutex<Parked>,
    control: Arc<Control>,
}

impl std::fmt::Debug for Parker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parker")
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

impl Parker {
    pub(crate) fn new(idle_timeout: Duration, control: Arc<Control>) -> std::io::Result<Self> {
        let poller = Poller::new()?;
        Ok(Parker {
            edge: poller.supports_edge(),
            poller: Arc::new(poller),
            idle_timeout,
            parked: Mutex::new(Parked::default()),
            control,
        })
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

    /// Whether parked connections are registered edge-triggered: then a worker must see the
    /// socket drained (a short read) before it parks a connection.
    pub(crate) fn edge(&self) -> bool {
        self.edge
    }

    /// Parks `conn` until it is readable or idle too long. The socket is registered on its
    /// first park; later parks cost no system call (edge-triggered) or one re-arm (oneshot).
    /// A connection that had an event while it was being served comes back as [`Parking::Ready`].
    /// Returns the connection when parking has ended (shutdown); the caller closes it.
    pub(crate) fn park(self: &Arc<Self>, mut conn: Connection) -> Parking {
        let mut parked = self.lock();
        if parked.closed {
            drop(parked);
            return Parking::Refused(conn);
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
                    conn.woken(Instant::now());
                    return Parking::Ready(conn);
                }
                if !self.edge && conn.rearm(Event::readable(key)).is_err() {
                    drop(parked);
                    return Parking::Refused(conn);
                }
                (conn, key)
            }
            None => {
                let key = parked.entries.insert(Entry::default());
                let ticket = Ticket {
                    parker: Arc::downgrade(self),
                    key,
                };
                match conn.into_registered(&self.poller, self.edge, ticket) {
                    Ok(conn) => (conn, key),
                    Err((conn, ticket)) => {
                        // Not registered (out of memory): closed, and the entry freed by the
                        // ticket, once unlocked.
                        drop(parked);
                        drop(conn);
                        drop(ticket);
                        return Parking::Parked;
                    }
                }
            }
        };
        parked.generation += 1;
        let generation = parked.generation;
        let deadline = Instant::now() + self.idle_timeout;
        // Deadlines only grow (one idle timeout for all), so a new one is the earliest only when
        // none is pending; then the parker may be asleep without a timeout and must be woken.
        let wake = parked.deadlines.is_empty();
        parked.deadlines.insert((deadline, generation, key));
        if let Some(entry) = parked.entries.get_mut(key) {
            entry.slot = Some(Slot {
                conn,
                deadline,
                generation,
            });
        }
        drop(parked);
        if wake {
            let _ = self.poller.notify();
        }
        Parking::Parked
    }

    /// The parker thread: hands readable connections to the workers, closes expired ones.
    pub(crate) fn run(&self, queue: &Sender<Job>) {
        let mut events = Events::new();
        let mut ready = Vec::new();
        let mut expired = Vec::new();
        loop {
            let timeout = self
                .lock()
                .deadlines
                .first()
                .map(|&(d, _, _)| d.saturating_duration_since(Instant::now()));
            wait_events(&self.poller, &mut events, timeout, "parker");
            let now = Instant::now();
            {
                let mut parked = self.lock();
                if self.control.is_shutting_down() {
                    // Shutdown: parked connections are idle, so they close; later parks are
                    // refused and their connections closed by the worker.
                    parked.closed = true;
                    parked.deadlines.clear();
                    expired.extend(parked.entries.iter_mut().filter_map(|(_, e)| e.slot.take()));
                    drop(parked);
                    // Dropped unlocked: each connection's ticket takes the lock to leave.
                    drop(expired);
                    return;
                }
                for ev in events.iter() {
                    let Some(entry) = parked.entries.get_mut(ev.key) else {
                        continue;
                    };
                    match entry.slot.take() {
                        Some(slot) => {
                            parked
                                .deadlines
                                .remove(&(slot.deadline, slot.generation, ev.key));
                            ready.push(slot.conn);
                        }
                        None => entry.ready = true,
                    }
                }
                while let Some(&(deadline, _, key)) = parked.deadlines.first() {
                    if deadline > now {
                        break;
                    }
                    parked.deadlines.pop_first();
                    if let Some(slot) = parked.entries.get_mut(key).and_then(|e| e.slot.take()) {
                        expired.push(slot);
                    }
                }
            }
            // Dropping a connection closes it and frees its entry (its ticket takes the lock).
            expired.clear();
            for mut conn in ready.drain(..) {
                conn.woken(now);
                if queue.send(Job::from(conn)).is_err() {
                    return;
                }
            }
        }
    }
}
