//! Where a request body waits for its handler: in memory up to
//! [`Limits::max_body_in_memory`](crate::Limits::max_body_in_memory), beyond it in an anonymous
//! temporary file (the way Puma and nginx keep large bodies off the heap). A body is read whole
//! before its handler runs, so a slow upload costs a descriptor and disk space, bounded by
//! `max_body_bytes`, not memory and never a worker. The file has no name: it is gone when
//! dropped, after its exchange, a panic or a client that left.

use std::fs::File;
use std::io::{self, Cursor, Read, Seek, SeekFrom, Write};

use crate::http::budget::Held;

/// A body arriving, and the memory it holds charged to the server's budget.
pub(crate) struct Spool {
    store: Store,
    held: Held,
}

/// Where the bytes of a body arriving are.
enum Store {
    /// Payload so far, no more than the in-memory threshold.
    Memory(Vec<u8>),
    /// Past the threshold (or the budget): the bytes so far, in a temporary file and (the
    /// latest, no more than the threshold) in `pending`, written out once it fills: a large
    /// body is written in pieces of the threshold's size rather than one per read.
    File { file: File, pending: Vec<u8> },
}

impl Spool {
    /// An empty body, its memory charged to `held`.
    pub(crate) fn new(held: Held) -> Spool {
        Spool {
            store: Store::Memory(Vec::new()),
            held,
        }
    }

    /// Appends payload; the body moves to a temporary file when it would pass `threshold`
    /// bytes in memory or the server's memory budget. What memory it holds is charged by
    /// capacity. An error: the file could not be made or written (no space left, no writable
    /// temporary folder).
    pub(crate) fn push(&mut self, payload: &[u8], threshold: usize) -> io::Result<()> {
        match &mut self.store {
            Store::Memory(bytes) => {
                if keep(bytes, payload, threshold, &mut self.held) {
                    bytes.extend_from_slice(payload);
                    return Ok(());
                }
                let file = tempfile::tempfile()?;
                let pending = std::mem::take(bytes);
                self.store = Store::File { file, pending };
                self.push(payload, threshold)
            }
            Store::File { file, pending } => {
                if keep(pending, payload, threshold, &mut self.held) {
                    pending.extend_from_slice(payload);
                    return Ok(());
                }
                file.write_all(pending)?;
                *pending = Vec::new();
                self.held.set(0);
                file.write_all(payload)
            }
        }
    }

    /// The whole body, ready to be read from its start.
    pub(crate) fn finish(self) -> io::Result<Received> {
        let Spool { store, mut held } = self;
        match store {
            Store::Memory(bytes) => Ok(Received::Memory {
                bytes: Cursor::new(bytes),
                _charge: held,
            }),
            Store::File { mut file, pending } => {
                file.write_all(&pending)?;
                held.set(0);
                file.seek(SeekFrom::Start(0))?;
                Ok(Received::File(file))
            }
        }
    }
}

/// Whether `payload` may join `bytes` in memory: within `threshold`, and the capacity that
/// takes within the budget (charged to `held`, which holds `bytes`'s capacity). The capacity
/// doubles, up to the threshold, as a `Vec`'s would.
fn keep(bytes: &mut Vec<u8>, payload: &[u8], threshold: usize, held: &mut Held) -> bool {
    let need = bytes.len().saturating_add(payload.len());
    if need > threshold {
        return false;
    }
    let cap = bytes.capacity();
    if need <= cap {
        return true;
    }
    let grown = need.max(cap.saturating_mul(2).min(threshold));
    if !held.try_grow(grown - cap) {
        return false;
    }
    bytes.reserve_exact(grown - bytes.len());
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
        _charge: Held,
    },
    File(File),
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
    use crate::http::budget::Budget;

    fn spool(budget: &Budget) -> Spool {
        Spool::new(budget.charge())
    }

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

    #[test]
    fn stays_in_memory_up_to_the_threshold_charged_to_the_budget() {
        let budget = Budget::default();
        let mut s = spool(&budget);
        s.push(b"abcd", 8).expect("memory");
        s.push(b"efgh", 8).expect("memory");
        assert!(!in_file(&s));
        assert_eq!(budget.held(), 8);
        assert_eq!(read_all(s), b"abcdefgh");
        assert_eq!(budget.held(), 0, "given back with the body");
    }

    #[test]
    fn goes_to_a_file_when_the_budget_is_spent() {
        let budget = Budget::new(6);
        let mut s = spool(&budget);
        s.push(b"abcd", 8).expect("memory");
        s.push(b"efg", 8).expect("file");
        assert!(in_file(&s), "7 bytes do not fit a budget of 6");
        assert_eq!(budget.held(), 0);
        assert_eq!(read_all(s), b"abcdefg");
    }

    #[test]
    fn moves_to_a_file_past_it_with_every_byte() {
        let budget = Budget::default();
        let mut s = spool(&budget);
        s.push(b"abcd", 8).expect("memory");
        s.push(b"efghi", 8).expect("file");
        assert!(in_file(&s));
        s.push(b"jk", 8).expect("file");
        assert_eq!(read_all(s), b"abcdefghijk");
    }

    #[test]
    fn a_zero_threshold_spools_every_body() {
        let budget = Budget::default();
        let mut s = spool(&budget);
        s.push(b"x", 0).expect("file");
        assert!(in_file(&s));
        assert_eq!(read_all(s), b"x");
    }
}
