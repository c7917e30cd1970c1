//! When a request head is due: the one deadline policy both engines follow between requests.
//!
//! A connection's first head is due in full within the header-read timeout of its accept (a
//! client that connects and sends nothing is held no longer than one that sends slowly). After
//! a response, a connection with nothing buffered may stay idle for the idle timeout; once the
//! first byte of its next head comes (or a pipelined head already waits in the buffer) that head
//! is due in full within the header-read timeout. The engines keep a [`HeadDue`] per
//! connection and ask it for the instant to wait until; what a passed deadline means
//! (close quietly, or `408`) is [`Conn::request_timed_out`](super::conn::Conn::request_timed_out).

use std::time::{Duration, Instant};

use crate::deadline;

/// How long a connection whose first head has not come still waits for it once shutdown
/// begins.
const FIRST_HEAD_AT_SHUTDOWN: Duration = Duration::from_secs(1);

/// Where the next request head stands, with the instant it is due by (`None`: never, for a
/// timeout too long to add to the clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeadDue {
    /// The connection's first head, due in full by this (counted from the accept).
    First(Option<Instant>),
    /// Nothing of the next head has come since the last response: idle until this.
    Idle(Option<Instant>),
    /// Part of a head came (or a pipelined head waits in the buffer): due in full by this.
    Started(Option<Instant>),
}

impl HeadDue {
    /// A connection accepted at `now`.
    pub(crate) fn first(now: Instant, header_read: Duration) -> HeadDue {
        HeadDue::First(deadline::after(now, header_read))
    }

    /// A response was given at `now`; `buffered`: bytes of the next request are already in.
    pub(crate) fn after_response(
        now: Instant,
        buffered: bool,
        header_read: Duration,
        idle: Duration,
    ) -> HeadDue {
        match buffered {
            true => HeadDue::Started(deadline::after(now, header_read)),
            false => HeadDue::Idle(deadline::after(now, idle)),
        }
    }

    /// Bytes of a head came at `now`: an idle connection's head is due from its first byte; a
    /// first or started head keeps its deadline.
    #[inline]
    pub(crate) fn bytes_came(self, now: Instant, header_read: Duration) -> HeadDue {
        match self {
            HeadDue::Idle(_) => HeadDue::Started(deadline::after(now, header_read)),
            due => due,
        }
    }

    /// Shutdown began at `now`: a connection whose first head has not come keeps waiting for
    /// it a moment more (its client may have sent it already: a connection accepted just
    /// before a hand-over to another process), never past its own deadline. Others as they
    /// were.
    pub(crate) fn at_shutdown(self, now: Instant) -> HeadDue {
        match self {
            HeadDue::First(until) => {
                let grace = deadline::after(now, FIRST_HEAD_AT_SHUTDOWN);
                HeadDue::First(match (until, grace) {
                    (Some(until), Some(grace)) => Some(until.min(grace)),
                    (until, grace) => until.or(grace),
                })
            }
            due => due,
        }
    }

    /// True while the connection's first head has not come.
    pub(crate) fn awaits_first(self) -> bool {
        matches!(self, HeadDue::First(_))
    }

    /// The instant to wait until.
    pub(crate) fn until(self) -> Option<Instant> {
        match self {
            HeadDue::First(until) | HeadDue::Idle(until) | HeadDue::Started(until) => until,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: Duration = Duration::from_secs(10);
    const IDLE: Duration = Duration::from_secs(60);

    #[test]
    fn at_shutdown_a_first_head_gets_a_moment_never_more_than_its_deadline() {
        let now = Instant::now();
        let first = HeadDue::first(now, HEAD).at_shutdown(now);
        assert_eq!(first.until(), Some(now + FIRST_HEAD_AT_SHUTDOWN));
        assert!(first.awaits_first());
        // Again later: it does not move.
        assert_eq!(first.at_shutdown(now + HEAD).until(), first.until());
        let soon = HeadDue::first(now, Duration::from_millis(10)).at_shutdown(now);
        assert_eq!(soon.until(), Some(now + Duration::from_millis(10)));
        let idle = HeadDue::after_response(now, false, HEAD, IDLE);
        assert_eq!(idle.at_shutdown(now), idle);
        assert!(!idle.awaits_first());
    }

    #[test]
    fn the_policy_table() {
        let t0 = Instant::now();
        let s = |n| t0 + Duration::from_secs(n);
        // (state, event at second 5) -> state
        let first = HeadDue::first(t0, HEAD);
        assert_eq!(first, HeadDue::First(Some(s(10))));
        assert_eq!(
            first.bytes_came(s(5), HEAD),
            first,
            "the first head counts from the accept"
        );
        let idle = HeadDue::after_response(t0, false, HEAD, IDLE);
        assert_eq!(idle, HeadDue::Idle(Some(s(60))));
        assert_eq!(
            idle.bytes_came(s(5), HEAD),
            HeadDue::Started(Some(s(15))),
            "a later head counts from its first byte"
        );
        let pipelined = HeadDue::after_response(t0, true, HEAD, IDLE);
        assert_eq!(pipelined, HeadDue::Started(Some(s(10))));
        assert_eq!(pipelined.bytes_came(s(5), HEAD), pipelined);
        assert_eq!(HeadDue::first(t0, Duration::MAX).until(), None);
        assert_eq!(
            HeadDue::after_response(t0, false, HEAD, Duration::MAX).until(),
            None
        );
    }
}
