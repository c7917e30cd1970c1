//! The parker's thread: it waits on the poller, drives the connections that had an event (their
//! core driver reads heads and bodies, writes what the socket takes, lingers), closes those
//! whose time is up, and hands the ones with handler work to the workers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use polling::Events;

use super::super::backlog::{Backlog, QueueGone};
use super::super::connection::{Connection, Job};
use super::super::head::{self, Drives, Outcome};
use super::{PARKER_KEEPS, Parked, Parker};
use crate::engine::wait_events;
use crate::http::date::DateLine;
use crate::http::pools::Pools;
use crate::timers::Fired;

impl Parker {
    /// The parker thread: hands ready connections to the workers, closes idle HTTP connections
    /// whose time is up and hands WebSockets and event streams whose timer is due to a worker.
    /// At shutdown idle HTTP connections close, the others are driven here until their
    /// exchange allows it (a head part-way waits here for the rest or its deadline, never on a
    /// worker), WebSockets go to the workers to close with 1001 and event streams to end after
    /// what is queued; the thread ends when the last registered connection has.
    pub(crate) fn run(self: &Arc<Self>) {
        let _ended = Ended(self);
        let Some(queue) = self.lock().life.queue().cloned() else {
            return;
        };
        let mut pass = Pass::new(self);
        loop {
            let timeout = pass.timeout(self);
            wait_events(&self.poller, &mut pass.events, timeout, "parker");
            let now = Instant::now();
            if pass.gather(self, now) == Gathered::Last {
                return;
            }
            pass.expire(self, now);
            if pass.hand_out(self, &queue, now).is_err() {
                return;
            }
        }
    }
}

/// What one pass of the parker thread took out of the parked set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gathered {
    /// Connections to drive, close or hand on (perhaps none).
    Some,
    /// Shutdown, and nothing is left: the thread ends.
    Last,
}

/// The parker thread's state between passes: what each pass gathers, and what it carries on.
struct Pass {
    events: Events,
    /// Connections with an event, or with their turn to run again: driven here, then handed on.
    ready: Vec<Connection>,
    /// HTTP connections whose deadline passed: their drivers decide.
    expired: Vec<Connection>,
    /// Connections for the workers (sessions woken by their senders, parked again ones).
    jobs: Vec<Job>,
    /// Connections whose turn ended with more to do: driven again at the next pass.
    again: Vec<Connection>,
    backlog: Backlog,
    /// Buffers lent to the connections driven here come back from the workers.
    drives: Drives,
    /// Set when shutdown has just run every parked connection once, or the last held-back
    /// connection went out: look again at once (no event will come) whether the thread may end.
    recheck: bool,
}

impl Pass {
    fn new(parker: &Parker) -> Pass {
        Pass {
            events: Events::new(),
            ready: Vec::new(),
            expired: Vec::new(),
            jobs: Vec::new(),
            again: Vec::new(),
            backlog: Backlog::default(),
            drives: Drives {
                rules: parker.rules.clone(),
                pools: Pools::sharing(PARKER_KEEPS, parker.pools.clone()),
                date: DateLine::new(),
            },
            recheck: false,
        }
    }

    /// How long the next wait for events may last: not at all with work left over, else until
    /// the next deadline.
    fn timeout(&mut self, parker: &Parker) -> Option<Duration> {
        if std::mem::take(&mut self.recheck) || !self.again.is_empty() {
            return Some(Duration::ZERO);
        }
        let parked = parker.lock();
        match parked.again.is_empty() {
            true => (parked.timers.next()).map(|d| d.saturating_duration_since(Instant::now())),
            false => Some(Duration::ZERO),
        }
    }

    /// Under the lock: takes out the connections that had an event, whose deadline passed, or
    /// that shutdown runs once more, and the jobs posted for the workers; at shutdown with
    /// nothing left, ends parking.
    fn gather(&mut self, parker: &Parker, now: Instant) -> Gathered {
        self.ready.append(&mut self.again);
        let mut parked = parker.lock();
        self.ready.append(&mut parked.again);
        if parker.control.is_shutting_down() && parked.life.stop() {
            self.recheck = true;
            let keys: Vec<usize> = (parked.entries.iter())
                .filter(|(_, e)| e.is_parked())
                .map(|(key, _)| key)
                .collect();
            for key in keys {
                // Every parked connection runs once more, as on the reactor: a request already
                // in its socket is answered (with `Connection: close`); an idle one, or part of
                // a head, closes when it cannot park again.
                if let Some(conn) = parked.take(key) {
                    self.ready.push(conn);
                }
            }
        }
        if parked.life.is_stopping()
            && parked.entries.is_empty()
            && self.ready.is_empty()
            && self.backlog.is_empty()
        {
            // Later parks are refused and their connections closed by the worker.
            let last = (parked.life.end(), std::mem::take(&mut parked.pending));
            drop(parked);
            // Dropped unlocked: each connection's ticket takes the lock to leave.
            drop(last);
            return Gathered::Last;
        }
        for ev in self.events.iter() {
            let Some(entry) = parked.entries.get_mut(ev.key) else {
                continue;
            };
            if entry.event() {
                if let Some(conn) = parked.take(ev.key) {
                    self.ready.push(conn);
                }
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
                Some(conn) if conn.is_long_lived() => self.ready.push(conn),
                Some(conn) => self.expired.push(conn),
                None => {}
            }
        }
        self.jobs.append(&mut parked.pending);
        Gathered::Some
    }

    /// Unlocked: the expired connections' drivers decide (a `408` to write, a close; closing
    /// a connection frees its entry: its ticket takes the lock).
    fn expire(&mut self, parker: &Arc<Parker>, now: Instant) {
        let counters = &parker.control.counters;
        for conn in self.expired.drain(..) {
            let to_worker = match head::expire(conn, &mut self.drives, counters, now) {
                Outcome::Park(conn) => parker.park_again(conn),
                Outcome::Ready(conn) => Some(conn),
                Outcome::Again(conn) => {
                    self.again.push(conn);
                    None
                }
                Outcome::Close => None,
            };
            if let Some(conn) = to_worker {
                self.jobs.push(Job::from(conn));
            }
        }
    }

    /// Hands the workers what is held back, the jobs, and each ready connection as soon as
    /// its request is read (not after the whole batch: the workers start while the next ones
    /// are read). `Err`: the workers' queue has gone.
    fn hand_out(
        &mut self,
        parker: &Arc<Parker>,
        queue: &Sender<Job>,
        now: Instant,
    ) -> Result<(), QueueGone> {
        let held_back = !self.backlog.is_empty();
        self.backlog.flush(queue, parker)?;
        // The last held-back connection went out while shutting down: nothing else may wake
        // this thread to see that it can end (no deadline is left, and a worker wakes it only
        // while it holds some back), so look again at once.
        if held_back && self.backlog.is_empty() && parker.control.is_shutting_down() {
            self.recheck = true;
        }
        for job in self.jobs.drain(..) {
            self.backlog.hand(queue, job, parker)?;
        }
        let closing = parker.control.is_shutting_down();
        let counters = &parker.control.counters;
        for conn in self.ready.drain(..) {
            let conn = if conn.is_long_lived() {
                conn
            } else {
                match head::drive(conn, &mut self.drives, counters, now, closing) {
                    Outcome::Ready(conn) => conn,
                    Outcome::Park(conn) => match parker.park_again(conn) {
                        Some(conn) => conn,
                        None => continue,
                    },
                    Outcome::Again(conn) => {
                        self.again.push(conn);
                        continue;
                    }
                    Outcome::Close => continue,
                }
            };
            self.backlog.hand(queue, Job::from(conn), parker)?;
        }
        Ok(())
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
        let last = (
            parked.life.end(),
            std::mem::take(&mut parked.pending),
            std::mem::take(&mut parked.again),
        );
        drop(parked);
        // Dropped unlocked: each connection's ticket takes the lock to leave.
        drop(last);
    }
}
