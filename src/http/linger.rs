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

    /// One step on a non-blocking stream: reads and drops what the peer sent until the stream
    /// is empty (true: wait for more) or the lingering is over (false: close, because the peer
    /// closed, the read failed or the byte budget is spent).
    pub(crate) fn drain(&mut self, stream: &mut (impl Read + ?Sized)) -> bool {
        let mut scratch = [0u8; 4096];
        loop {
            match stream.read(&mut scratch) {
                Ok(n) if self.dropped(n) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Ok(_) | Err(_) => return false,
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
}
