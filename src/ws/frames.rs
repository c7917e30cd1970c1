//! Where the bytes handed to tungstenite stand against the peer's frames, read from their headers
//! as the bytes pass (RFC 6455 section 5.2): how large a frame tungstenite's input buffer has
//! had to hold, and whether that buffer is empty now, so the connection can charge the first
//! and give the buffer back at the second.
//!
//! tungstenite reserves room for a frame's whole length in its input buffer and keeps that
//! allocation for the connection's life; it says neither how large the buffer is nor what is in
//! it. Its buffer is empty exactly when every byte handed to it belongs to a frame that is
//! complete and that it has parsed: the frames that end a unit of its reading (a data frame
//! with FIN, a control frame) are counted here, the messages it returned by the connection.
//! Nothing here decides what a frame means; tungstenite still parses and checks every byte.

/// The longest frame header: 2 bytes, an 8-byte extended length and a 4-byte mask.
const LONGEST_HEADER: usize = 14;

/// The frames seen so far in what tungstenite was handed.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Frames {
    at: At,
    /// Frames seen whole that end a unit of tungstenite's reading: a data or continuation frame
    /// with FIN, or a control frame. It returns one message for each.
    ends: u64,
    /// A data frame without FIN was seen and the continuation with FIN has not come: tungstenite
    /// holds an unfinished message.
    fragmented: bool,
    /// Bytes of the largest frame (header and payload) seen whole since
    /// [`Frames::forget_largest`]. A frame still arriving is the message being gathered's.
    largest: usize,
}

#[derive(Clone, Copy, Debug, Default)]
enum At {
    /// Between frames.
    #[default]
    Boundary,
    /// In a header that came in pieces: its bytes so far.
    Split {
        head: [u8; LONGEST_HEADER],
        have: usize,
    },
    /// In a frame's payload.
    Payload {
        /// Payload bytes still to come.
        left: u64,
        /// Bytes of the frame seen so far, header included.
        seen: usize,
        /// The header's first byte: FIN and the opcode.
        b0: u8,
    },
    /// A header announced a 64-bit length with its most significant bit set, which RFC 6455
    /// section 5.2 forbids: tungstenite fails the connection at it (as a frame too large), and
    /// nothing after it is followed.
    Malformed,
}

impl Frames {
    /// tungstenite was handed `bytes`, the next of the stream.
    pub(super) fn saw(&mut self, mut bytes: &[u8]) {
        loop {
            if let At::Malformed = self.at {
                return;
            }
            if let At::Payload { left, seen, b0 } = &mut self.at {
                let Some(rest) = usize::try_from(*left)
                    .ok()
                    .and_then(|left| bytes.get(left..))
                else {
                    // The payload goes on past these bytes.
                    *left -= bytes.len() as u64;
                    *seen = seen.saturating_add(bytes.len());
                    return;
                };
                let (size, b0) = (seen.saturating_add(bytes.len() - rest.len()), *b0);
                self.frame_ended(size, b0);
                bytes = rest;
            }
            if bytes.is_empty() {
                return;
            }
            bytes = self.header(bytes);
        }
    }

    /// Bytes at a header: read whole where they hold it (the usual case), else kept until it is
    /// complete. Returns what follows.
    fn header<'b>(&mut self, bytes: &'b [u8]) -> &'b [u8] {
        if let (At::Boundary, Some(&b1)) = (self.at, bytes.get(1)) {
            if let Some((header, rest)) = bytes.split_at_checked(header_len(b1)) {
                self.at = payload_after(header);
                return rest;
            }
        }
        let (mut head, have) = match self.at {
            At::Split { head, have } => (head, have),
            _ => ([0; LONGEST_HEADER], 0),
        };
        let Some((&byte, rest)) = bytes.split_first() else {
            return bytes;
        };
        if let Some(slot) = head.get_mut(have) {
            *slot = byte;
        }
        let have = have + 1;
        self.at = if have >= 2 && have == header_len(head[1]) {
            payload_after(&head)
        } else {
            At::Split { head, have }
        };
        rest
    }

    /// A frame of `size` bytes whose header began with `b0` has all come.
    fn frame_ended(&mut self, size: usize, b0: u8) {
        let fin = b0 & 0x80 != 0;
        let opcode = b0 & 0x0f;
        self.largest = self.largest.max(size);
        // A control frame (opcode 8 and up) or the last frame of a data message.
        self.ends += u64::from(opcode >= 8 || fin);
        match (opcode, fin) {
            // A data frame without FIN: a message begins or goes on. So does one tungstenite
            // will refuse (a continuation with no message begun, a reserved opcode): it waits
            // in its buffer to be parsed and fail the connection, and must not be let go.
            (0..=7, false) => self.fragmented = true,
            (0, true) => self.fragmented = false,
            _ => {}
        }
        self.at = At::Boundary;
    }

    /// True when tungstenite, having returned `returned` messages, holds nothing in its input
    /// buffer and no unfinished message: every byte it was handed is in frames it has parsed.
    pub(super) fn all_parsed(&self, returned: u64) -> bool {
        matches!(self.at, At::Boundary) && self.ends == returned && !self.fragmented
    }

    /// Bytes of the largest frame tungstenite's input buffer has held since it was last made.
    pub(super) fn largest(&self) -> usize {
        self.largest
    }

    /// Bytes of the frame arriving, header included (0 between frames).
    pub(super) fn arriving(&self) -> usize {
        match self.at {
            At::Payload { seen, .. } => seen,
            At::Boundary | At::Split { .. } | At::Malformed => 0,
        }
    }

    /// A header announced a length RFC 6455 forbids (its most significant bit set): the
    /// connection fails as a protocol error (1002), not as a frame too large.
    pub(super) fn malformed(&self) -> bool {
        matches!(self.at, At::Malformed)
    }

    /// tungstenite's input buffer was made anew.
    pub(super) fn forget_largest(&mut self) {
        self.largest = 0;
    }
}

/// A header's length, from its second byte: 2, the extended length's 2 or 8, the mask's 4.
fn header_len(b1: u8) -> usize {
    let extended = match b1 & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    let mask = if b1 & 0x80 != 0 { 4 } else { 0 };
    2 + extended + mask
}

/// The payload a header announces (`header`: at least the header's bytes).
fn payload_after(header: &[u8]) -> At {
    let byte = |i: usize| header.get(i).copied().unwrap_or(0);
    let (b0, b1) = (byte(0), byte(1));
    let left = match b1 & 0x7f {
        126 => u64::from(u16::from_be_bytes([byte(2), byte(3)])),
        127 => (2..10).fold(0u64, |n, i| (n << 8) | u64::from(byte(i))),
        short => u64::from(short),
    };
    if left >> 63 != 0 {
        return At::Malformed;
    }
    At::Payload {
        left,
        seen: header_len(b1),
        b0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A masked client frame: `b0` (FIN and opcode) and a payload of `len` bytes.
    fn frame(b0: u8, len: usize) -> Vec<u8> {
        let mut f = vec![b0];
        match len {
            0..=125 => f.push(0x80 | len as u8),
            126..=0xffff => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&[1, 2, 3, 4]);
        f.resize(f.len() + len, 0xaa);
        f
    }

    #[test]
    fn frames_are_followed_byte_by_byte_and_in_one_piece_alike() {
        let mut stream = frame(0x82, 70_000); // binary, FIN, 64-bit length
        stream.extend(frame(0x81, 200)); // text, FIN, 16-bit length
        stream.extend(frame(0x89, 0)); // ping, empty
        for piece in [1, 3, stream.len()] {
            let mut frames = Frames::default();
            for chunk in stream.chunks(piece) {
                frames.saw(chunk);
            }
            assert!(frames.all_parsed(3), "piece {piece}");
            assert!(!frames.all_parsed(2), "a message not returned yet");
            assert_eq!(frames.largest(), 70_000 + 14);
        }
    }

    #[test]
    fn a_partial_frame_or_an_unfinished_message_is_not_all_parsed() {
        let mut frames = Frames::default();
        let big = frame(0x82, 100_000);
        frames.saw(&big[..50_000]);
        assert!(!frames.all_parsed(0));
        assert_eq!(frames.largest(), 0, "counted once whole");
        frames.saw(&big[50_000..]);
        assert!(frames.all_parsed(1));
        assert_eq!(frames.largest(), 100_014);
        frames.forget_largest();
        assert_eq!(frames.largest(), 0);

        // A fragmented message: text without FIN, a ping between, a continuation with FIN.
        frames.saw(&frame(0x01, 10));
        assert!(
            !frames.all_parsed(1),
            "tungstenite holds the first fragment"
        );
        frames.saw(&frame(0x89, 4));
        assert!(
            !frames.all_parsed(2),
            "the ping came back, the message did not"
        );
        frames.saw(&frame(0x80, 10));
        assert!(frames.all_parsed(3));
        // A continuation without FIN and no message begun, or a reserved opcode: tungstenite
        // refuses it once it parses it, which it has not while it holds it.
        for stray in [0x00, 0x03, 0x87] {
            let mut frames = Frames::default();
            frames.saw(&frame(stray, 4));
            assert!(!frames.all_parsed(0), "{stray:#x}");
        }
        // Two bytes of the next header.
        frames.saw(&frame(0x82, 5)[..2]);
        assert!(!frames.all_parsed(3));
    }

    #[test]
    fn a_length_with_its_top_bit_set_is_malformed_in_one_piece_or_byte_by_byte() {
        let mut bad = vec![0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4];
        bad.extend_from_slice(&frame(0x82, 3));
        let mut whole = Frames::default();
        whole.saw(&bad);
        let mut bytewise = Frames::default();
        for b in &bad {
            assert!(!bytewise.malformed(), "not before its length is whole");
            bytewise.saw(std::slice::from_ref(b));
            if bytewise.malformed() {
                break;
            }
        }
        for frames in [whole, bytewise] {
            assert!(frames.malformed());
            assert!(!frames.all_parsed(0));
            assert_eq!(frames.arriving(), 0);
        }
        // The largest length a frame may announce is still a length.
        let mut frames = Frames::default();
        frames.saw(&[
            0x82, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4,
        ]);
        assert!(!frames.malformed());
        assert_eq!(frames.arriving(), 14);
    }
}
