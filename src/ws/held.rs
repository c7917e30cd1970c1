//! The memory a WebSocket's tungstenite context holds, charged to the server's budget: the
//! unfinished incoming message, and its input and output buffers while they are larger than a
//! working buffer.
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
//! connection makes tungstenite's context anew ([`Held::may_renew`]), which gives the
//! allocation back, and the charge with it. A frame no larger than a working buffer (16 KiB,
//! or the configured read buffer size if larger) grew nothing worth giving back: it is neither
//! charged nor renewed for. Only the message's charge decides whether input is refused
//! ([`Held::is_charged`]): the buffer's is what was, not what is coming.
//!
//! Its output buffer grows to the bytes written to it between two flushes (a frame of a large
//! message, see `fragments.rs`, or the messages taken at a time) and keeps that capacity too:
//! while output waits, the sender's queue counts those bytes; once everything is out, the
//! capacity is charged here if it is larger than a working buffer, and given back by the same
//! renewal.
//!
//! [`WsConfig::max_message_size`]: super::WsConfig::max_message_size
//! [`WsConfig::max_frame_size`]: super::WsConfig::max_frame_size

use tungstenite::Message;

use super::frames::Frames;
use crate::http::budget::{self, ALLOWANCE, Budget};

/// A masked control frame's header: 2 bytes and the 4-byte mask (its payload is at most 125).
const CONTROL_HEADER: usize = 6;

/// Bytes of the message being gathered and of tungstenite's buffers, and their charges (each
/// past the budget's allowance).
pub(super) struct Held {
    bytes: usize,
    /// The frames in what tungstenite was handed.
    frames: Frames,
    /// Messages tungstenite returned.
    returned: u64,
    /// A buffer that held no larger a frame is a working buffer: kept, and not charged.
    keep: usize,
    /// Bytes written to tungstenite since everything was last out.
    out_pending: usize,
    /// The most bytes written to it between two flushes since its context was made: about its
    /// output buffer's capacity.
    out_largest: usize,
    /// The message being gathered's charge.
    message: budget::Held,
    /// The buffers': the input buffer past what the message being gathered holds of it, the
    /// output buffer once everything is out.
    buffers: budget::Held,
}

impl Held {
    /// `read_buffer`: the size tungstenite's input buffer is made with.
    pub(super) fn new(budget: &Budget, read_buffer: usize) -> Self {
        Held {
            bytes: 0,
            frames: Frames::default(),
            returned: 0,
            keep: read_buffer.max(ALLOWANCE),
            out_pending: 0,
            out_largest: 0,
            message: budget.charge(),
            buffers: budget.charge(),
        }
    }

    /// Where the frames stand, for the next read ([`Held::took`] gets them back).
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

    /// `n` bytes of a message were written to tungstenite.
    pub(super) fn wrote(&mut self, n: usize) {
        self.out_pending = self.out_pending.saturating_add(n);
        self.out_largest = self.out_largest.max(self.out_pending);
    }

    /// Bytes written to tungstenite since everything was last out.
    #[cfg(test)]
    pub(super) fn out_pending(&self) -> usize {
        self.out_pending
    }

    /// Everything written to tungstenite is out.
    pub(super) fn flushed(&mut self) {
        self.out_pending = 0;
        self.hold();
    }

    /// Memory that exists already: held whether or not it fits. tungstenite's input buffer is
    /// as large as the largest frame it held, or the frame arriving (counted in the message
    /// being gathered), whichever is larger; its output buffer as large as the most written
    /// between two flushes (counted in the sender's queue until it is out). A working buffer's
    /// size is not charged.
    fn hold(&mut self) {
        self.message.hold(self.bytes);
        let largest = self.frames.largest();
        let input = match largest > self.keep {
            true => largest.saturating_sub(self.frames.arriving()),
            false => 0,
        };
        let output = match self.out_largest > self.keep && self.out_pending == 0 {
            true => self.out_largest,
            false => 0,
        };
        self.buffers.hold(input.saturating_add(output));
    }

    /// True when one of tungstenite's buffers grew past a working buffer and both are empty
    /// now (everything written is out, every byte read is in frames it returned), with no
    /// message unfinished: a new context would hold nothing less.
    pub(super) fn may_renew(&self) -> bool {
        let grew = self.frames.largest().max(self.out_largest) > self.keep;
        grew && self.out_pending == 0 && self.frames.all_parsed(self.returned)
    }

    /// tungstenite's context was made anew: its buffers are working buffers again.
    pub(super) fn renewed(&mut self) {
        self.frames.forget_largest();
        self.out_largest = 0;
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
        let mut held = Held::new(&budget, 1024);
        let frames = Frames::default();
        held.took(ALLOWANCE, frames, None);
        assert_eq!(budget.held(), 0, "the allowance is free");
        held.took(1000, frames, None);
        assert_eq!(budget.held(), 1000);
        // A ping of 10 bytes read between two fragments: its 16 bytes are not the message's.
        held.took(16, frames, Some(&Message::Ping(vec![0; 10].into())));
        assert_eq!(budget.held(), 1000);
        assert!(held.is_charged());
        held.took(500, frames, Some(&Message::binary(vec![0; 100])));
        assert_eq!(budget.held(), 0, "the message ended");
        assert!(!held.is_charged());
        held.took(ALLOWANCE + 10, frames, None);
        drop(held);
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
        let mut held = Held::new(&budget, 1024);
        let mut frames = held.frames();
        let big = binary_frame(1 << 20);
        frames.saw(&big[..1000]);
        held.took(1000, frames, None);
        assert!(!held.may_renew(), "the frame is still arriving");
        frames.saw(&big[1000..]);
        let msg = Message::binary(vec![0; 1 << 20]);
        held.took(big.len() - 1000, frames, Some(&msg));
        // The message was returned; tungstenite's buffer still has room for its frame.
        assert_eq!(budget.held(), big.len() - ALLOWANCE);
        assert!(held.may_renew());
        held.renewed();
        assert_eq!(budget.held(), 0);
        assert!(!held.may_renew());

        // Two bytes of the next frame read ahead: tungstenite's buffer is not empty, so it is
        // kept, and charged.
        let mut frames = held.frames();
        let next = binary_frame(1 << 20);
        frames.saw(&next[..next.len() - 1]);
        held.took(next.len() - 1, frames, None);
        frames.saw(&next[next.len() - 1..]);
        frames.saw(&binary_frame(10)[..2]);
        held.took(3, frames, Some(&msg));
        assert!(!held.may_renew(), "the next frame has begun");
        assert_eq!(budget.held(), next.len() - ALLOWANCE);
        // A small frame (no larger than a working buffer) is not renewed for.
        let mut held = Held::new(&budget, 1024);
        let mut frames = held.frames();
        frames.saw(&binary_frame(ALLOWANCE - 100));
        held.took(ALLOWANCE - 86, frames, Some(&msg));
        assert!(!held.may_renew());
    }

    #[test]
    fn the_output_buffer_is_charged_once_out_until_the_context_is_renewed() {
        let budget = Budget::new(1 << 24);
        let mut held = Held::new(&budget, 1024);
        held.wrote(1 << 20);
        assert_eq!(
            budget.held(),
            0,
            "while it waits, the sender's queue counts it"
        );
        assert!(!held.may_renew(), "not out yet");
        held.flushed();
        assert_eq!(
            budget.held(),
            (1 << 20) - ALLOWANCE,
            "out: the capacity stays"
        );
        assert!(held.may_renew());
        held.renewed();
        assert_eq!(budget.held(), 0);
        // Small messages grow nothing worth giving back.
        held.wrote(1000);
        held.wrote(1000);
        held.flushed();
        assert!(!held.may_renew());
        assert_eq!(budget.held(), 0);
    }
}
