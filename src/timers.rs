//! An engine's deadlines (a reactor loop's connections, the server engine's parked ones), kept
//! lazily so that a deadline moving later costs nothing.
//!
//! Every keep-alive response moves its connection's idle deadline later. Moving an entry in an
//! ordered set on each one (a remove and an insert in a `BTreeSet`) was about 600 instructions
//! per request, an eighth of the reactor's user-space work (`bench/instructions.sh`). Here a
//! connection's entry is never later than its deadline, so the loop still wakes in time, but a
//! deadline that moves later leaves its entry where it is; when that entry comes due, the entry
//! moves to the deadline as it is then. An entry moves at most once per timeout period, however
//! many requests the connection serves in it; a deadline that moves earlier (a head or body
//! deadline after an idle one) moves its entry at once.

use std::collections::BTreeSet;
use std::time::Instant;

/// A connection's deadline and the entry in [`Timers`] that stands for it (never later).
#[derive(Debug, Default)]
pub(crate) struct Due {
    deadline: Option<Instant>,
    entry: Option<Instant>,
}

/// What an entry that came due means for its connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fired {
    /// The connection's deadline is due: expire it.
    Due,
    /// The deadline moved later (the entry moved with it), or went: nothing to do now.
    Moved,
}

/// `(entry, key)` for every connection with a deadline: the earliest first. A key is a
/// connection's place (a slab key) while it is there: [`Timers::remove`] when it leaves.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    entries: BTreeSet<(Instant, usize)>,
}

impl Timers {
    /// Sets `key`'s deadline (none: no deadline); `due` is that connection's.
    pub(crate) fn set(&mut self, key: usize, due: &mut Due, deadline: Option<Instant>) {
        due.deadline = deadline;
        let Some(deadline) = deadline else {
            // The entry stays: when it comes due, it finds no deadline and goes.
            return;
        };
        if due.entry.is_some_and(|entry| entry <= deadline) {
            return;
        }
        if let Some(entry) = due.entry.replace(deadline) {
            self.entries.remove(&(entry, key));
        }
        self.entries.insert((deadline, key));
    }

    /// Removes `key`'s entry: the connection leaves the loop.
    pub(crate) fn remove(&mut self, key: usize, due: &mut Due) {
        due.deadline = None;
        if let Some(entry) = due.entry.take() {
            self.entries.remove(&(entry, key));
        }
    }

    /// When the loop must wake next.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.entries.first().map(|&(entry, _)| entry)
    }

    /// Takes out the earliest entry if it is due at `now`: its time and key.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, usize)> {
        match self.entries.first() {
            Some(&(entry, _)) if entry <= now => self.entries.pop_first(),
            _ => None,
        }
    }

    /// The entry `(at, key)` taken by [`Timers::pop_due`] was `due`'s: whether its deadline is
    /// due, or it moved later (the entry is put back at it) or went.
    pub(crate) fn fired(&mut self, key: usize, due: &mut Due, at: Instant, now: Instant) -> Fired {
        if due.entry != Some(at) {
            return Fired::Moved;
        }
        due.entry = None;
        match due.deadline {
            Some(deadline) if deadline > now => {
                due.entry = Some(deadline);
                self.entries.insert((deadline, key));
                Fired::Moved
            }
            Some(_) => {
                due.deadline = None;
                Fired::Due
            }
            None => Fired::Moved,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(ms: u64, base: Instant) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn a_deadline_moving_later_keeps_its_entry_until_it_comes_due() {
        let t0 = Instant::now();
        let (mut timers, mut due) = (Timers::default(), Due::default());
        timers.set(3, &mut due, Some(at(100, t0)));
        for ms in [150, 200, 250] {
            timers.set(3, &mut due, Some(at(ms, t0)));
        }
        assert_eq!(timers.entries.len(), 1);
        assert_eq!(timers.next(), Some(at(100, t0)));
        assert_eq!(timers.pop_due(at(99, t0)), None);
        let (entry, key) = timers.pop_due(at(100, t0)).expect("due");
        assert_eq!(
            timers.fired(key, &mut due, entry, at(100, t0)),
            Fired::Moved
        );
        assert_eq!(timers.next(), Some(at(250, t0)));
        let (entry, key) = timers.pop_due(at(250, t0)).expect("due");
        assert_eq!(timers.fired(key, &mut due, entry, at(250, t0)), Fired::Due);
        assert_eq!(timers.next(), None);
    }

    #[test]
    fn a_deadline_moving_earlier_moves_its_entry_at_once() {
        let t0 = Instant::now();
        let (mut timers, mut due) = (Timers::default(), Due::default());
        timers.set(1, &mut due, Some(at(1000, t0)));
        timers.set(1, &mut due, Some(at(10, t0)));
        assert_eq!(timers.entries.len(), 1);
        let (entry, key) = timers.pop_due(at(10, t0)).expect("due");
        assert_eq!(timers.fired(key, &mut due, entry, at(10, t0)), Fired::Due);
    }

    #[test]
    fn a_cleared_deadline_leaves_an_entry_that_goes_when_due_and_removal_takes_it() {
        let t0 = Instant::now();
        let (mut timers, mut due) = (Timers::default(), Due::default());
        timers.set(1, &mut due, Some(at(10, t0)));
        timers.set(1, &mut due, None);
        let (entry, key) = timers.pop_due(at(10, t0)).expect("due");
        assert_eq!(timers.fired(key, &mut due, entry, at(10, t0)), Fired::Moved);
        assert_eq!(timers.next(), None);

        let mut other = Due::default();
        timers.set(2, &mut other, Some(at(20, t0)));
        timers.remove(2, &mut other);
        assert_eq!(timers.next(), None);
    }
}
