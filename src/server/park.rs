//! Idle parking: keep-alive connections waiting for their next request sit in one poller,
//! watched by one thread, instead of each holding a worker. A readable connection goes back on
//! the worker queue; one idle past the timeout is closed.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use polling::{Event, Events, Poller};
use slab::Slab;

use super::worker::{Connection, Job};
use crate::engine::{Control, wait_events};

/// Parked connections and their idle deadlines, always changed together under one lock.
#[derive(Default)]
struct Parked {
    slots: Slab<Slot>,
    /// `(deadline, generation, key)`, ordered by deadline: expiry pops from the front and a
    /// woken connection removes its own entry, so the set holds exactly the parked connections
    /// and a wake-up costs O(log n) whatever their number.
    deadlines: BTreeSet<(Instant, u64, usize)>,
    generation: u64,
    closed: bool,
}

struct Slot {
    conn: Connection,
    deadline: Instant,
    generation: u64,
}

/// The parker: one poller, one thread, any number of idle connections.
pub(crate) struct Parker {
    poller: Arc<Poller>,
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
        Ok(Parker {
            poller: Arc::new(Poller::new()?),
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

    /// Parks `conn` until it is readable or idle too long. The socket is registered (once per
    /// connection) or re-armed: one `epoll_ctl` per park, no wake-up of the parker thread.
    /// Returns the connection when parking has ended (shutdown); the caller closes it.
    pub(crate) fn park(&self, conn: Connection) -> Result<(), Connection> {
        let mut parked = self.lock();
        if parked.closed {
            return Err(conn);
        }
        let key = parked.slots.vacant_key();
        let Ok(conn) = conn.into_armed(&self.poller, Event::readable(key)) else {
            // Could not register (out of memory): the connection was dropped, i.e. closed.
            return Ok(());
        };
        parked.generation += 1;
        let generation = parked.generation;
        let deadline = Instant::now() + self.idle_timeout;
        // Deadlines only grow (one idle timeout for all), so a new one is the earliest only when
        // none is pending; then the parker may be asleep without a timeout and must be woken.
        let wake = parked.deadlines.is_empty();
        parked.deadlines.insert((deadline, generation, key));
        parked.slots.insert(Slot {
            conn,
            deadline,
            generation,
        });
        drop(parked);
        if wake {
            let _ = self.poller.notify();
        }
        Ok(())
    }

    /// The parker thread: hands readable connections to the workers, closes expired ones.
    pub(crate) fn run(&self, queue: &Sender<Job>) {
        let mut events = Events::new();
        let mut ready = Vec::new();
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
                    let Parked {
                        slots, deadlines, ..
                    } = &mut *parked;
                    deadlines.clear();
                    slots.clear();
                    return;
                }
                for ev in events.iter() {
                    if let Some(slot) = parked.slots.try_remove(ev.key) {
                        parked
                            .deadlines
                            .remove(&(slot.deadline, slot.generation, ev.key));
                        ready.push(slot.conn);
                    }
                }
                while let Some(&(deadline, _, key)) = parked.deadlines.first() {
                    if deadline > now {
                        break;
                    }
                    parked.deadlines.pop_first();
                    // Dropping the connection deletes its registration and closes it.
                    drop(parked.slots.try_remove(key));
                }
            }
            for mut conn in ready.drain(..) {
                conn.woken(now);
                if queue.send(Job::from(conn)).is_err() {
                    return;
                }
            }
        }
    }
}
