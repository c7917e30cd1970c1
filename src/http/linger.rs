//! A lingering close, sans-I/O: after a response that ends a connection whose framing is lost
//! (an error answered mid-request, a body left unread), the engine shuts its write side, then
//! reads and drops what the client still sends until the client closes, a byte budget is spent or
//! a deadline passes. Closing at once instead would answer the unread input with a reset, which
//! can destroy the response still in flight to the client.

use std::io::{ErrorKind, Read};
use std::time::{Duration, Instant};

use crate::deadline;

/// How long a lingering close waits for the client to finish sending.
pub(crate) const LINGER_TIME: Duration = Duration::from_secs(1);
/// How many bytes a lingering close reads and drops at the most.
pub(crate) const LINGER_BYTES: usize = 16 * 1024 * 1024;
/// How many of them one turn reads before other connections get theirs.
pub(crate) const LINGER_BYTES_PER_TURN: usize = 256 * 1024;

/// What one turn of a lingering close came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drained {
    /// The stream is empty: wait for more, until the deadline.
    Wait,
    /// The turn's share was read and more may be there: drive it again after the others.
    More,
    /// The lingering is over (the peer closed, the read failed or the budget is spent): close.
    Over,
}

/// A connection in its lingering close: what it may still read, and until when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Linger {
    until: Option<Instant>,
    left: usize,
}

impl Linger {
    /// Starts lingering at `now`.
    pub(crate) fn new(now: Instant) -> Self {
        Linger {
            until: deadline::after(now, LINGER_TIME),
            left: LINGER_BYTES,
        }
    }

    /// When to give up and close.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.until
    }

    /// `n` bytes were read and dropped. False when the connection should close now: the client
    /// closed (`n == 0`) or the byte budget is spent.
    pub(crate) fn dropped(&mut self, n: usize) -> bool {
        self.left = self.left.saturating_sub(n);
        n > 0 && self.left > 0
    }

    /// One turn on a non-blocking stream: reads and drops what the peer sent, up to
    /// [`LINGER_BYTES_PER_TURN`], until the stream is empty or the lingering is over.
    pub(crate) fn drain(&mut self, stream: &mut (impl Read + ?Sized)) -> Drained {
        let mut scratch = [0u8; 4096];
        let mut turn = 0;
        loop {
            if turn >= LINGER_BYTES_PER_TURN {
                return Drained::More;
            }
            match stream.read(&mut scratch) {
                Ok(n) if self.dropped(n) => turn += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Drained::Wait,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Ok(_) | Err(_) => return Drained::Over,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_on_eof_budget_or_deadline() {
        let now = Instant::now();
        let mut l = Linger::new(now);
        assert_eq!(l.deadline(), Some(now + LINGER_TIME));
        assert!(l.dropped(100));
        assert!(!l.dropped(0), "the client closed");
        let mut l = Linger::new(now);
        assert!(l.dropped(LINGER_BYTES - 1));
        assert!(!l.dropped(1), "budget spent");
    }

    #[test]
    fn a_turn_reads_its_share_then_yields() {
        let mut l = Linger::new(Instant::now());
        let flood = vec![0u8; LINGER_BYTES_PER_TURN * 2 + 10];
        let mut stream = &flood[..];
        assert_eq!(l.drain(&mut stream), Drained::More);
        assert_eq!(stream.len(), LINGER_BYTES_PER_TURN + 10);
        assert_eq!(l.drain(&mut stream), Drained::More);
        // The end of a slice reads as the peer closing.
        assert_eq!(l.drain(&mut stream), Drained::Over);
    }
}
