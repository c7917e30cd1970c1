//! What a connection's level-triggered registration reports, following what its steps wait for.
//!
//! Writing is armed exactly while a step waits to write. Reading is dropped lazily: only when
//! readable events keep coming while the connection does not read (a request on the pool, a
//! response streaming out, output backed up), which a level-triggered registration would
//! otherwise report at every wait. Dropping it at once would cost two `epoll_ctl` per pooled
//! request.

use polling::Event;

use crate::http::driver::WaitFor;

/// Whether the registration reports input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    /// Armed: the connection reads, or has not yet been told of input it does not read.
    Armed,
    /// Armed, but a readable event came while the connection did not read: at the next one,
    /// reading is disarmed.
    Stray,
    /// Disarmed after readable events kept coming while the connection did not read.
    Off,
}

/// A connection's interest: what its registration is armed for.
#[derive(Debug)]
pub(crate) struct Interest {
    reading: Reading,
    write: bool,
}

/// What the loop does with the registration after a step.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Rearm {
    /// It stays as it is.
    Keep,
    /// It changes to this interest.
    To(Event),
    /// Input was reported that nothing asked for: a hang-up or an error, which a
    /// level-triggered registration reports at every wait. The peer is gone.
    PeerGone,
}

impl Interest {
    /// A new connection waits for its first request.
    pub(crate) fn new() -> Interest {
        Interest {
            reading: Reading::Armed,
            write: false,
        }
    }

    /// The interest for what the step waits for, after a wake-up that did or did not report
    /// the connection `readable`.
    #[inline]
    pub(crate) fn follow(&mut self, key: usize, on: WaitFor, readable: bool) -> Rearm {
        // The usual step: it reads on, armed as before.
        if on == WaitFor::Input && self.reading == Reading::Armed && !self.write {
            return Rearm::Keep;
        }
        let (read, write) = (on.reads(), on.writes());
        let reading = match (read, readable, self.reading) {
            (true, _, _) => Reading::Armed,
            (false, false, now) => now,
            (false, true, Reading::Armed) => Reading::Stray,
            (false, true, Reading::Stray) => Reading::Off,
            (false, true, Reading::Off) => return Rearm::PeerGone,
        };
        let armed_before = self.armed();
        self.reading = reading;
        self.write = write;
        match self.armed() == armed_before {
            true => Rearm::Keep,
            false => Rearm::To(self.event(key)),
        }
    }

    /// Whether reading and writing are armed.
    fn armed(&self) -> (bool, bool) {
        (self.reading != Reading::Off, self.write)
    }

    /// The one place an event is made for a registration.
    fn event(&self, key: usize) -> Event {
        match self.armed() {
            (true, true) => Event::all(key),
            (false, true) => Event::writable(key),
            (true, false) => Event::readable(key),
            (false, false) => Event::none(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: usize = 7;

    fn readable_only() -> Rearm {
        Rearm::To(Event::readable(KEY))
    }

    #[test]
    fn a_reading_connection_keeps_its_registration() {
        let mut i = Interest::new();
        assert_eq!(i.follow(KEY, WaitFor::Input, true), Rearm::Keep);
        assert_eq!(i.follow(KEY, WaitFor::Input, false), Rearm::Keep);
    }

    #[test]
    fn writing_is_armed_while_a_step_waits_to_write() {
        let mut i = Interest::new();
        assert_eq!(
            i.follow(KEY, WaitFor::Both, false),
            Rearm::To(Event::all(KEY))
        );
        assert_eq!(i.follow(KEY, WaitFor::Both, false), Rearm::Keep);
        assert_eq!(i.follow(KEY, WaitFor::Input, false), readable_only());
    }

    #[test]
    fn reading_is_dropped_at_the_second_stray_event_only() {
        let mut i = Interest::new();
        // A request went to the pool: not reading, nothing reported yet.
        assert_eq!(i.follow(KEY, WaitFor::Wake, false), Rearm::Keep);
        // The first readable event while not reading keeps the registration.
        assert_eq!(i.follow(KEY, WaitFor::Wake, true), Rearm::Keep);
        // The second drops reading.
        assert_eq!(
            i.follow(KEY, WaitFor::Wake, true),
            Rearm::To(Event::none(KEY))
        );
        // Reading again re-arms it, and the count of stray events starts over.
        assert_eq!(i.follow(KEY, WaitFor::Input, false), readable_only());
        assert_eq!(i.follow(KEY, WaitFor::Wake, true), Rearm::Keep);
        assert_eq!(
            i.follow(KEY, WaitFor::Output, true),
            Rearm::To(Event::writable(KEY))
        );
    }

    #[test]
    fn input_reported_with_reading_off_means_the_peer_is_gone() {
        let mut i = Interest::new();
        i.follow(KEY, WaitFor::Output, true);
        assert_eq!(
            i.follow(KEY, WaitFor::Output, true),
            Rearm::To(Event::writable(KEY))
        );
        assert_eq!(i.follow(KEY, WaitFor::Output, false), Rearm::Keep);
        assert_eq!(i.follow(KEY, WaitFor::Output, true), Rearm::PeerGone);
    }
}
