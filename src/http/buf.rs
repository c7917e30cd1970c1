//! The read buffer engines lend to a connection while it is being served.

/// A byte buffer with a filled window `[start, end)`, compacted instead of shifted per consume.
#[derive(Debug)]
pub(crate) struct ReadBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

/// Bytes a read buffer starts with; it grows (up to the caller's cap) only when a head needs it.
pub(crate) const INITIAL_READ_BUF: usize = 8 * 1024;

impl Default for ReadBuf {
    fn default() -> Self {
        ReadBuf::new()
    }
}

impl ReadBuf {
    pub(crate) fn new() -> Self {
        ReadBuf::with_len(INITIAL_READ_BUF)
    }

    /// An empty buffer of `len` bytes.
    pub(crate) fn with_len(len: usize) -> Self {
        ReadBuf {
            buf: vec![0; len],
            start: 0,
            end: 0,
        }
    }

    /// The buffer's size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// Grows the buffer to `len` bytes, keeping what it holds.
    pub(crate) fn grow(&mut self, len: usize) {
        if len > self.buf.len() {
            self.buf.resize(len, 0);
        }
    }

    /// Drops unconsumed bytes, keeping the size.
    pub(crate) fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// The bytes read and not yet consumed.
    pub(crate) fn filled(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Marks `n` bytes from the front as used.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Space to read into, making room by compacting and, when the unconsumed bytes already fill
    /// the buffer, growing it up to `cap` bytes. Empty when the buffer is full at `cap`.
    #[inline]
    pub(crate) fn spare(&mut self, cap: usize) -> &mut [u8] {
        if self.end == self.buf.len() && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() && self.buf.len() < cap {
            let grown = (self.buf.len().max(1024) * 2).min(cap);
            self.buf.resize(grown, 0);
        }
        &mut self.buf[self.end..]
    }

    /// Records that `n` bytes were written into [`ReadBuf::spare`].
    #[inline]
    pub(crate) fn filled_by(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Drops unconsumed bytes and brings the buffer back to the initial size: shrunk if a
    /// large head grew it, grown if it was [fitted](ReadBuf::fitted) to a small partial head.
    #[inline]
    pub(crate) fn reset(&mut self) {
        self.start = 0;
        self.end = 0;
        if self.buf.len() > INITIAL_READ_BUF {
            self.buf.truncate(INITIAL_READ_BUF);
            self.buf.shrink_to_fit();
        } else if self.buf.len() < INITIAL_READ_BUF {
            self.buf.resize(INITIAL_READ_BUF, 0);
        }
    }

    /// A copy of the unconsumed bytes in a buffer about their size (a power of two, at least
    /// 256 bytes), when that is under a quarter of this one: a partial head that waits holds
    /// what came, not a whole read buffer. `None`: keep this one.
    pub(crate) fn fitted(&self) -> Option<ReadBuf> {
        let held = self.filled().len();
        if held.saturating_mul(4) > self.len() {
            return None;
        }
        let mut small = ReadBuf::with_len(held.next_power_of_two().max(256));
        small.push(self.filled());
        Some(small)
    }

    /// Appends bytes read elsewhere.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let spare = self.spare(usize::MAX);
            let n = spare.len().min(rest.len());
            spare[..n].copy_from_slice(&rest[..n]);
            self.filled_by(n);
            rest = &rest[n..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ReadBuf;

    #[test]
    fn grow_keeps_unconsumed_bytes_and_clear_keeps_the_size() {
        let mut b = ReadBuf::with_len(4);
        b.push(b"abcd");
        b.consume(1);
        b.grow(16);
        assert_eq!((b.len(), b.filled()), (16, &b"bcd"[..]));
        b.grow(8); // never shrinks
        assert_eq!(b.len(), 16);
        assert_eq!(b.spare(0).len(), 16 - 4);
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.len(), 16);
        let mut big = ReadBuf::new();
        big.grow(4 * super::INITIAL_READ_BUF);
        big.reset(); // a grown buffer goes back to the initial size
        assert_eq!(big.len(), super::INITIAL_READ_BUF);
    }

    #[test]
    fn fitted_keeps_the_bytes_in_a_buffer_their_size() {
        let mut b = ReadBuf::new();
        b.push(b"xxGET / HT");
        b.consume(2);
        let small = b.fitted().expect("much smaller");
        assert_eq!((small.len(), small.filled()), (256, &b"GET / HT"[..]));
        b.push(&[b'a'; 3000]);
        assert!(b.fitted().is_none(), "over a quarter: kept");
        let mut small = small;
        small.reset();
        assert_eq!(
            small.len(),
            super::INITIAL_READ_BUF,
            "back to a whole read buffer"
        );
    }
}
