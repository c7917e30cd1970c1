//! Where a request body waits for its handler: in memory up to
//! [`Limits::max_body_in_memory`](crate::Limits::max_body_in_memory), beyond it in an anonymous
//! temporary file (the way Puma and nginx keep large bodies off the heap). A body is read whole
//! before its handler runs, so a slow upload costs a descriptor and disk space, bounded by
//! `max_body_bytes`, not memory and never a worker. The file has no name: it is gone when
//! dropped, after its exchange, a panic or a client that left.

use std::fs::File;
use std::io::{self, Cursor, Read, Seek, SeekFrom, Write};

use crate::http::budget::{ALLOWANCE, Budget, Held};

/// The most bytes of a body going to its file held before they are written out: a write per
/// piece instead of one per read, and little memory held per upload whatever the threshold.
const PIECE: usize = 64 * 1024;

/// A body arriving, and the memory it holds charged to the server's budget (past the
/// allowance each holder has: small bodies touch no shared counter).
pub(crate) struct Spool {
    store: Store,
    held: Option<Held>,
    /// The body's length when its head declared one (`Content-Length`).
    declared: Option<u64>,
}

/// Where the bytes of a body arriving are.
enum Store {
    /// Payload so far, no more than the in-memory threshold.
    Memory(Vec<u8>),
    /// Past the threshold (or the budget): the bytes so far, in a temporary file and (the
    /// latest, no more than [`PIECE`]) in `pending`, written out once it fills: a large body
    /// is written in pieces rather than one write per read.
    File { file: File, pending: Vec<u8> },
}

impl Spool {
    /// An empty body of `declared` bytes, if its head said: one declared past the threshold
    /// goes to its file from its first byte (never copied there from memory), one within it
    /// never takes more memory than its length.
    pub(crate) fn new(declared: Option<u64>) -> Spool {
        Spool {
            store: Store::Memory(Vec::new()),
            held: None,
            declared,
        }
    }

    /// Appends payload; the body moves to a temporary file when it would pass `threshold`
    /// bytes in memory or the server's memory budget. What memory it holds is charged by
    /// capacity. An error: the file could not be made or written (no space left, no writable
    /// temporary folder).
    pub(crate) fn push(
        &mut self,
        payload: &[u8],
        threshold: usize,
        budget: &Budget,
    ) -> io::Result<()> {
        match &mut self.store {
            Store::Memory(bytes) => {
                let upto = self
                    .declared
                    .map_or(threshold, |n| usize::try_from(n).unwrap_or(usize::MAX));
                if upto <= threshold && keep(bytes, payload, upto, &mut self.held, budget) {
                    bytes.extend_from_slice(payload);
                    return Ok(());
                }
                let file = tempfile::tempfile()?;
                let pending = std::mem::take(bytes);
                self.store = Store::File { file, pending };
                self.push(payload, threshold, budget)
            }
            Store::File { file, pending } => {
                let piece = threshold.min(PIECE);
                if keep(pending, payload, piece, &mut self.held, budget) {
                    pending.extend_from_slice(payload);
                    return Ok(());
                }
                file.write_all(pending)?;
                *pending = Vec::new();
                self.held = None;
                file.write_all(payload)
            }
        }
    }

    /// The whole body, ready to be read from its start.
    pub(crate) fn finish(self) -> io::Result<Received> {
        let Spool { store, held, .. } = self;
        match store {
            Store::Memory(bytes) => Ok(Received::Memory {
                bytes: Cursor::new(bytes),
                _charge: held,
            }),
            Store::File { mut file, pending } => {
                file.write_all(&pending)?;
                drop((pending, held));
                file.seek(SeekFrom::Start(0))?;
                Ok(Received::File(file))
            }
        }
    }
}

/// Whether `payload` may join `bytes` in memory: within `upto` (the threshold, or the body's
/// declared length within it), and the capacity that takes within the budget (charged to
/// `held` past the allowance, made when first needed). The capacity doubles from what the
/// first payload needs, as a `Vec`'s would, never past `upto`: a client that declares a large
/// body and sends a byte holds about twice what it sent, not its declared length. An
/// allocation that fails sends the body to its file.
fn keep(
    bytes: &mut Vec<u8>,
    payload: &[u8],
    upto: usize,
    held: &mut Option<Held>,
    budget: &Budget,
) -> bool {
    let need = bytes.len().saturating_add(payload.len());
    if need > upto {
        return false;
    }
    let cap = bytes.capacity();
    if need <= cap {
        return true;
    }
    let grown = cap.saturating_mul(2).max(need).min(upto);
    if grown > ALLOWANCE && !held.get_or_insert_with(|| budget.charge()).try_hold(grown) {
        return false;
    }
    if bytes.try_reserve_exact(grown - bytes.len()).is_err() {
        if let Some(held) = held {
            held.hold(cap);
        }
        return false;
    }
    true
}

/// A request body that arrived whole, as its handler reads it.
#[derive(Debug)]
pub(crate) enum Received {
    /// No body.
    Empty,
    /// Streamed: the handler reads it from the connection as it arrives, through its engine
    /// ([`Driver::read_body`](crate::http::driver::Driver::read_body)).
    Streamed,
    /// In memory, charged to the budget until the exchange ends.
    Memory {
        bytes: Cursor<Vec<u8>>,
        _charge: Option<Held>,
    },
    File(File),
}

impl Received {
    /// The handler has returned: the body goes. One that holds nothing (`Empty`, `Streamed`, every
    /// bodyless request's) is forgotten, which leaks nothing and skips the enum's drop glue, an
    /// out-of-line call once a request.
    #[inline]
    pub(crate) fn release(self) {
        match self {
            Received::Empty | Received::Streamed => std::mem::forget(self),
            held => drop(held),
        }
    }
}

impl Read for Received {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Received::Empty => Ok(0),
            Received::Streamed => Err(io::ErrorKind::Unsupported.into()),
            Received::Memory { bytes, .. } => bytes.read(buf),
            Received::File(file) => file.read(buf),
        }
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            Received::Empty => Ok(0),
            Received::Streamed => Err(io::ErrorKind::Unsupported.into()),
            Received::Memory { bytes, .. } => bytes.read_to_end(buf),
            Received::File(file) => file.read_to_end(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_file(s: &Spool) -> bool {
        matches!(s.store, Store::File { .. })
    }

    fn read_all(spool: Spool) -> Vec<u8> {
        let mut out = Vec::new();
        spool
            .finish()
            .and_then(|mut r| r.read_to_end(&mut out))
            .expect("reads");
        out
    }

    /// `n` bytes of a pattern that shows a byte lost or moved.
    fn bytes(n: usize, from: usize) -> Vec<u8> {
        (from..from + n).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn stays_in_memory_up_to_the_threshold_charged_past_the_allowance() {
        let budget = Budget::default();
        let mut s = Spool::new(None);
        let threshold = ALLOWANCE * 4;
        s.push(&bytes(ALLOWANCE, 0), threshold, &budget)
            .expect("memory");
        assert_eq!(
            budget.held(),
            0,
            "a body within the allowance is not charged"
        );
        s.push(&bytes(ALLOWANCE, ALLOWANCE), threshold, &budget)
            .expect("memory");
        assert!(!in_file(&s));
        assert_eq!(budget.held(), ALLOWANCE, "its capacity past the allowance");
        assert_eq!(read_all(s), bytes(ALLOWANCE * 2, 0));
        assert_eq!(budget.held(), 0, "given back with the body");
    }

    #[test]
    fn goes_to_a_file_when_the_budget_is_spent() {
        let budget = Budget::new(100);
        let mut s = Spool::new(None);
        let threshold = ALLOWANCE * 4;
        s.push(&bytes(ALLOWANCE, 0), threshold, &budget)
            .expect("memory");
        s.push(&bytes(200, ALLOWANCE), threshold, &budget)
            .expect("file");
        assert!(
            in_file(&s),
            "200 bytes past the allowance do not fit a budget of 100"
        );
        assert_eq!(budget.held(), 0);
        assert_eq!(read_all(s), bytes(ALLOWANCE + 200, 0));
    }

    #[test]
    fn moves_to_a_file_past_the_threshold_with_every_byte() {
        let budget = Budget::default();
        let mut s = Spool::new(None);
        s.push(b"abcd", 8, &budget).expect("memory");
        s.push(b"efghi", 8, &budget).expect("file");
        assert!(in_file(&s));
        s.push(b"jk", 8, &budget).expect("file");
        assert_eq!(read_all(s), b"abcdefghijk");
    }

    #[test]
    fn in_its_file_a_body_holds_at_most_a_piece_whatever_the_threshold() {
        let budget = Budget::default();
        let mut s = Spool::new(None);
        let threshold = PIECE * 4;
        let total = threshold + PIECE * 3;
        for at in (0..total).step_by(1024) {
            s.push(&bytes(1024, at), threshold, &budget).expect("push");
            if let Store::File { pending, .. } = &s.store {
                assert!(pending.capacity() <= PIECE, "{} held", pending.capacity());
            }
        }
        assert!(in_file(&s));
        assert_eq!(read_all(s), bytes(total, 0));
    }

    #[test]
    fn a_declared_length_decides_at_the_first_byte() {
        let budget = Budget::default();
        let threshold = ALLOWANCE * 4;
        let mut past = Spool::new(Some(threshold as u64 + 1));
        past.push(b"a", threshold, &budget).expect("file");
        assert!(
            in_file(&past),
            "declared past the threshold: to its file at once"
        );
        assert_eq!(budget.held(), 0);
        let mut within = Spool::new(Some(threshold as u64));
        within.push(b"a", threshold, &budget).expect("memory");
        let Store::Memory(mem) = &within.store else {
            panic!("declared within the threshold: in memory");
        };
        assert_eq!(mem.capacity(), 1, "what it needs, not its length");
        assert_eq!(read_all(within), b"a");
        assert_eq!(read_all(past), b"a");
        // Doubling, never past its declared length.
        let length = ALLOWANCE * 3;
        let mut grows = Spool::new(Some(length as u64));
        grows
            .push(&bytes(ALLOWANCE * 2, 0), threshold, &budget)
            .expect("memory");
        grows
            .push(&bytes(1, 0), threshold, &budget)
            .expect("memory");
        let Store::Memory(held) = &grows.store else {
            panic!("within the threshold: in memory");
        };
        assert_eq!(held.capacity(), length);
        assert_eq!(budget.held(), length - ALLOWANCE);
    }

    #[test]
    fn a_zero_threshold_spools_every_body() {
        let budget = Budget::default();
        let mut s = Spool::new(None);
        s.push(b"x", 0, &budget).expect("file");
        assert!(in_file(&s));
        assert_eq!(read_all(s), b"x");
    }
}
