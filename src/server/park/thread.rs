//! The parker's thread: it waits on the poller, drives the connections that had an event (their
//! core driver reads heads and bodies, writes what the socket takes, lingers), closes those
//! whose time is up, and hands the ones with handler work to the workers.

use std::sync::Arc;
use std::time::Instant;

use polling::Events;

use super::super::backlog::Backlog;
use super::super::connection::Job;
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
        let mut events = Events::new();
        let mut ready = Vec::new();
        let mut expired = Vec::new();
        let mut jobs = Vec::new();
        // Connections whose turn ended with more to do: driven again at the next pass.
        let mut again = Vec::new();
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
            let timeout = if std::mem::take(&mut recheck) || !again.is_empty() {
                Some(std::time::Duration::ZERO)
            } else {
                let parked = self.lock();
                match parked.again.is_empty() {
                    true => parked
                        .timers
                        .next()
                        .map(|d| d.saturating_duration_since(Instant::now())),
                    false => Some(std::time::Duration::ZERO),
                }
            };
            wait_events(&self.poller, &mut events, timeout, "parker");
            let now = Instant::now();
            ready.append(&mut again);
            {
                let mut parked = self.lock();
                ready.append(&mut parked.again);
                if self.control.is_shutting_down() && parked.life.stop() {
                    recheck = true;
                    let keys: Vec<usize> = parked
                        .entries
                        .iter()
                        .filter(|(_, e)| e.is_parked())
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
                if parked.life.is_stopping()
                    && parked.entries.is_empty()
                    && ready.is_empty()
                    && backlog.is_empty()
                {
                    // Later parks are refused and their connections closed by the worker.
                    let last = (parked.life.end(), std::mem::take(&mut parked.pending));
                    drop(parked);
                    // Dropped unlocked: each connection's ticket takes the lock to leave.
                    drop(last);
                    return;
                }
                for ev in events.iter() {
                    let Some(entry) = parked.entries.get_mut(ev.key) else {
                        continue;
                    };
                    if entry.event() {
                        if let Some(conn) = parked.take(ev.key) {
                            ready.push(conn);
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
                    Outcome::Again(conn) => {
                        again.push(conn);
                        None
                    }
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
                        Outcome::Again(conn) => {
                            again.push(conn);
                            continue;
                        }
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
