//! The memory a WebSocket's unfinished incoming message holds, charged to the server's budget.
//!
//! tungstenite gathers a message's frames (up to [`WsConfig::max_message_size`]) before it
//! returns it, and does not say how much it holds meanwhile. The connection counts what it
//! hands tungstenite instead: every byte read since the last data message ended is part of
//! the message being gathered, or of the frames before it, except the control frames (pings,
//! pongs) that may come between its fragments, which are taken off again. A client's frames are
//! masked, so a control frame of `n` payload bytes (at most 125) is `n + 6` bytes on the wire.
//! What tungstenite read ahead of a finished message is not counted. Nor is the input buffer it
//! keeps: it reserves room for a frame's whole declared length (up to
//! [`WsConfig::max_frame_size`], 16 MiB by default) and keeps that allocation for the
//! connection's life, so an idle connection that once received a large frame holds about that
//! much uncharged (`docs/http-behaviour.md`, memory budget).
//!
//! [`WsConfig::max_message_size`]: super::WsConfig::max_message_size
//! [`WsConfig::max_frame_size`]: super::WsConfig::max_frame_size

use tungstenite::Message;

use crate::http::budget::{Budget, Held};

/// A masked control frame's header: 2 bytes and the 4-byte mask (its payload is at most 125).
const CONTROL_HEADER: usize = 6;

/// Bytes of the message being gathered, and their charge (past the budget's allowance).
pub(super) struct Incoming {
    bytes: usize,
    held: Held,
}

impl Incoming {
    pub(super) fn new(budget: &Budget) -> Self {
        Incoming {
            bytes: 0,
            held: budget.charge(),
        }
    }

    /// tungstenite took `n` more bytes, and returned `read` (`None`: no message yet).
    pub(super) fn took(&mut self, n: usize, read: Option<&Message>) {
        self.bytes = match read {
            None => self.bytes.saturating_add(n),
            Some(Message::Ping(p) | Message::Pong(p)) => self
                .bytes
                .saturating_add(n)
                .saturating_sub(p.len().saturating_add(CONTROL_HEADER)),
            // A message ended: nothing is gathered now.
            Some(Message::Text(_) | Message::Binary(_)) => 0,
            // A close frame (or a raw frame) ends no message being gathered.
            Some(_) => self.bytes.saturating_add(n),
        };
        // Memory that exists already: held whether or not it fits.
        self.held.hold(self.bytes);
    }

    /// True when the message being gathered is charged to the budget (past the allowance).
    pub(super) fn is_charged(&self) -> bool {
        self.held.bytes() > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::budget::ALLOWANCE;

    #[test]
    fn fragments_are_charged_until_the_message_ends_and_pings_between_them_are_not() {
        let budget = Budget::new(1 << 20);
        let mut incoming = Incoming::new(&budget);
        incoming.took(ALLOWANCE, None);
        assert_eq!(budget.held(), 0, "the allowance is free");
        incoming.took(1000, None);
        assert_eq!(budget.held(), 1000);
        // A ping of 10 bytes read between two fragments: its 16 bytes are not the message's.
        incoming.took(16, Some(&Message::Ping(vec![0; 10].into())));
        assert_eq!(budget.held(), 1000);
        assert!(incoming.is_charged());
        incoming.took(500, Some(&Message::binary(vec![0; 100])));
        assert_eq!(budget.held(), 0, "the message ended");
        assert!(!incoming.is_charged());
        incoming.took(ALLOWANCE + 10, None);
        drop(incoming);
        assert_eq!(budget.held(), 0, "given back when the connection goes");
    }
}
