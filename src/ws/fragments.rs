//! A large outgoing message goes out as frames of [`OUT_FRAME`] bytes (RFC 6455 §5.4), each
//! written once the one before is out, instead of whole: tungstenite formats what it is given
//! into its output buffer, which would grow to the message's size (up to the 64 MiB a message
//! may have) and, to a peer that takes it slowly, move what is left to the buffer's front after
//! every write. A frame at a time keeps its buffer at a frame and each write's move small.

use tungstenite::protocol::frame::Frame;
use tungstenite::protocol::frame::coding::{Data, OpCode};
use tungstenite::{Bytes, Message};

/// The largest frame a message goes out in.
pub(super) const OUT_FRAME: usize = 256 * 1024;

/// What is left of a message going out in frames.
pub(super) struct Fragments {
    rest: Bytes,
    /// The message's opcode (its first frame's; the others are continuations).
    op: Data,
    first: bool,
}

impl Fragments {
    /// `m` whole if it fits a frame; else its first frame, and the rest to go out.
    pub(super) fn split(m: Message) -> (Message, Option<Fragments>) {
        let (rest, op) = match m {
            Message::Binary(b) if b.len() > OUT_FRAME => (b, Data::Binary),
            Message::Text(t) if t.len() > OUT_FRAME => (Bytes::from(t), Data::Text),
            m => return (m, None),
        };
        let mut fragments = Fragments {
            rest,
            op,
            first: true,
        };
        let first = fragments.next_frame();
        (first, Some(fragments))
    }

    /// The next frame (the last one has FIN).
    pub(super) fn next_frame(&mut self) -> Message {
        let chunk = self.rest.split_to(self.rest.len().min(OUT_FRAME));
        let op = match std::mem::replace(&mut self.first, false) {
            true => self.op,
            false => Data::Continue,
        };
        Message::Frame(Frame::message(
            chunk,
            OpCode::Data(op),
            self.rest.is_empty(),
        ))
    }

    /// True once the last frame was taken.
    pub(super) fn done(&self) -> bool {
        self.rest.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_message_goes_out_in_frames_that_join_up_to_it() {
        let payload: Vec<u8> = (0..OUT_FRAME * 2 + 10).map(|i| i as u8).collect();
        let (first, rest) = Fragments::split(Message::binary(payload.clone()));
        let mut rest = rest.expect("larger than a frame");
        let mut frames = vec![first];
        while !rest.done() {
            frames.push(rest.next_frame());
        }
        assert_eq!(frames.len(), 3);
        let mut joined = Vec::new();
        for (i, frame) in frames.into_iter().enumerate() {
            let Message::Frame(f) = frame else {
                panic!("a frame")
            };
            let expected_op = if i == 0 { Data::Binary } else { Data::Continue };
            assert_eq!(f.header().opcode, OpCode::Data(expected_op));
            assert_eq!(f.header().is_final, i == 2);
            joined.extend_from_slice(f.payload());
        }
        assert_eq!(joined, payload);
        // A message that fits a frame goes whole.
        let (whole, rest) = Fragments::split(Message::text("short"));
        assert!(rest.is_none());
        assert_eq!(whole, Message::text("short"));
    }
}
