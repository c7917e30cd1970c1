//! The memory a WebSocket's incoming side holds, charged to the server's budget: the unfinished
//! message, and tungstenite's input buffer while it is larger than a working buffer.
//!
//! tungstenite gathers a message's frames (up to [`WsConfig::max_message_size`]) before it
//! returns it, and does not say how much it holds meanwhile. The connection counts what it
//! hands tungstenite instead: every byte read since the last data message ended is part of
//! the message being gathered, or of the frames before it, except the control frames (pings,
//! pongs) that may come between its fragments, which are taken off again. A client's frames are
//! masked, so a control frame of `n` payload bytes (at most 125) is `n + 6` bytes on the wire.
//!
//! tungstenite's input buffer reserves room for a frame's whole length (up to
//! [`WsConfig::max_frame_size`], 16 MiB by default) and keeps that allocation for the
//! connection's life. The largest frame it has held ([`Frames`]) is charged beside the
//! message being gathered (less the frame arriving, whose bytes the message counts and which
//! goes into the same buffer); once the buffer is empty and everything sent is out, the
//! connection makes tungstenite's context anew ([`Incoming::may_renew`]), which gives the
//! allocation back, and the charge with it. A frame no larger than a working buffer (16 KiB,
//! or the configured read buffer size if larger) grew nothing worth giving back: it is neither
//! charged nor renewed for. Only the message's charge decides whether input is refused
//! ([`Incoming::is_charged`]): the buffer's is what was, not what is coming.
//!
//! [`WsConfig::max_message_size`]: super::WsConfig::max_message_size
//! [`WsConfig::max_frame_size`]: super::WsConfig::max_frame_size

use tungstenite::Message;

use super::frames::Frames;
use crate::http::budget::{ALLOWANCE, Budget, Held};

/// A masked control frame's header: 2 bytes and the 4-byte mask (its payload is at most 125).
const CONTROL_HEADER: usize = 6;

/// Bytes of the message being gathered and of tungstenite's input buffer, and their charges
/// (each past the budget's allowance).
pub(super) struct Incoming {
    bytes: usize,
    /// The frames in what tungstenite was handed.
    frames: Frames,
    /// Messages tungstenite returned.
    returned: u64,
    /// A buffer that held no larger a frame is a working buffer: kept, and not charged.
    keep: usize,
    /// The message being gathered's charge.
    message: Held,
    /// The input buffer's, past what the message being gathered holds of it.
    buffer: Held,
}

impl Incoming {
    /// `read_buffer`: the size tungstenite's input buffer is made with.
    pub(super) fn new(budget: &Budget, read_buffer: usize) -> Self {
        Incoming {
            bytes: 0,
            frames: Frames::default(),
            returned: 0,
            keep: read_buffer.max(ALLOWANCE),
            message: budget.charge(),
            buffer: budget.charge(),
        }
    }

    /// Where the frames stand, for the next read ([`Incoming::took`] gets them back).
    pub(super) fn frames(&self) -> Frames {
        self.frames
    }

    /// tungstenite took `n` more bytes, which brought the frames to `frames`, and returned
    /// `read` (`None`: no message yet).
    pub(super) fn took(&mut self, n: usize, frames: Frames, read: Option<&Message>) {
        self.frames = frames;
        self.returned += u64::from(read.is_some());
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
        self.hold();
    }

    /// Memory that exists already: held whether or not it fits. tungstenite's input buffer is
    /// as large as the largest frame it held, or the frame arriving (counted in the message
    /// being gathered), whichever is larger; a working buffer's size is not charged.
    fn hold(&mut self) {
        self.message.hold(self.bytes);
        let largest = self.frames.largest();
        let buffer = match largest > self.keep {
            true => largest.saturating_sub(self.frames.arriving()),
            false => 0,
        };
        self.buffer.hold(buffer);
    }

    /// True when tungstenite's input buffer held a frame larger than a working buffer and is
    /// empty now, with no message unfinished: a new context would hold nothing less.
    pub(super) fn may_renew(&self) -> bool {
        self.frames.largest() > self.keep && self.frames.all_parsed(self.returned)
    }

    /// tungstenite's context was made anew: its input buffer is a working buffer again.
    pub(super) fn renewed(&mut self) {
        self.frames.forget_largest();
        self.hold();
    }

    /// True when the message being gathered is charged to the budget (past the allowance).
    pub(super) fn is_charged(&self) -> bool {
        self.message.bytes() > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::budget::ALLOWANCE;

    #[test]
    fn fragments_are_charged_until_the_message_ends_and_pings_between_them_are_not() {
        let budget = Budget::new(1 << 20);
        let mut incoming = Incoming::new(&budget, 1024);
        let frames = Frames::default();
        incoming.took(ALLOWANCE, frames, None);
        assert_eq!(budget.held(), 0, "the allowance is free");
        incoming.took(1000, frames, None);
        assert_eq!(budget.held(), 1000);
        // A ping of 10 bytes read between two fragments: its 16 bytes are not the message's.
        incoming.took(16, frames, Some(&Message::Ping(vec![0; 10].into())));
        assert_eq!(budget.held(), 1000);
        assert!(incoming.is_charged());
        incoming.took(500, frames, Some(&Message::binary(vec![0; 100])));
        assert_eq!(budget.held(), 0, "the message ended");
        assert!(!incoming.is_charged());
        incoming.took(ALLOWANCE + 10, frames, None);
        drop(incoming);
        assert_eq!(budget.held(), 0, "given back when the connection goes");
    }

    /// A masked binary frame with FIN and a 64-bit length.
    fn binary_frame(len: usize) -> Vec<u8> {
        let mut f = vec![0x82, 0x80 | 127];
        f.extend_from_slice(&(len as u64).to_be_bytes());
        f.extend_from_slice(&[0; 4]);
        f.resize(f.len() + len, 0);
        f
    }

    #[test]
    fn the_input_buffer_is_charged_until_the_context_is_renewed() {
        let budget = Budget::new(1 << 24);
        let mut incoming = Incoming::new(&budget, 1024);
        let mut frames = incoming.frames();
        let big = binary_frame(1 << 20);
        frames.saw(&big[..1000]);
        incoming.took(1000, frames, None);
        assert!(!incoming.may_renew(), "the frame is still arriving");
        frames.saw(&big[1000..]);
        let msg = Message::binary(vec![0; 1 << 20]);
        incoming.took(big.len() - 1000, frames, Some(&msg));
        // The message was returned; tungstenite's buffer still has room for its frame.
        assert_eq!(budget.held(), big.len() - ALLOWANCE);
        assert!(incoming.may_renew());
        incoming.renewed();
        assert_eq!(budget.held(), 0);
        assert!(!incoming.may_renew());

        // Two bytes of the next frame read ahead: tungstenite's buffer is not empty, so it is
        // kept, and charged.
        let mut frames = incoming.frames();
        let next = binary_frame(1 << 20);
        frames.saw(&next[..next.len() - 1]);
        incoming.took(next.len() - 1, frames, None);
        frames.saw(&next[next.len() - 1..]);
        frames.saw(&binary_frame(10)[..2]);
        incoming.took(3, frames, Some(&msg));
        assert!(!incoming.may_renew(), "the next frame has begun");
        assert_eq!(budget.held(), next.len() - ALLOWANCE);
        // A small frame (no larger than a working buffer) is not renewed for.
        let mut incoming = Incoming::new(&budget, 1024);
        let mut frames = incoming.frames();
        frames.saw(&binary_frame(ALLOWANCE - 100));
        incoming.took(ALLOWANCE - 86, frames, Some(&msg));
        assert!(!incoming.may_renew());
    }
}
