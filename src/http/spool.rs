//! Where a request body waits for its handler: in memory up to
//! [`Limits::max_body_in_memory`](crate::Limits::max_body_in_memory), beyond it in an anonymous
//! temporary file (the way Puma and nginx keep large bodies off the heap). A body is read whole
//! before its handler runs, so a slow upload costs a descriptor and disk space, bounded by
//! `max_body_bytes`, not memory and never a worker. The file has no name: it is gone when
//! dropped, after its exchange, a panic or a client that left.

use std::fs::File;
use std::io::{self, Cursor, Read, Seek, SeekFrom, Write};

/// A body arriving.
pub(crate) enum Spool {
    /// Payload so far, no more than the in-memory threshold.
    Memory(Vec<u8>),
    /// Past the threshold: the bytes so far, in a temporary file and (the latest, fewer than
    /// the threshold) in `pending`, written out once it fills: a large body is written in
    /// pieces of the threshold's size rather than one per read.
    File { file: File, pending: Vec<u8> },
}

impl Spool {
    pub(crate) fn new() -> Spool {
        Spool::Memory(Vec::new())
    }

    /// Appends payload; the body moves to a temporary file when it would pass `threshold`
    /// bytes in memory. An error: the file could not be made or written (no space left, no
    /// writable temporary folder).
    pub(crate) fn push(&mut self, payload: &[u8], threshold: usize) -> io::Result<()> {
        match self {
            Spool::Memory(bytes) if bytes.len().saturating_add(payload.len()) <= threshold => {
                bytes.extend_from_slice(payload);
                Ok(())
            }
            Spool::Memory(bytes) => {
                let file = tempfile::tempfile()?;
                let pending = std::mem::take(bytes);
                *self = Spool::File { file, pending };
                self.push(payload, threshold)
            }
            Spool::File { file, pending } => {
                if pending.len().saturating_add(payload.len()) > threshold {
                    file.write_all(pending)?;
                    pending.clear();
                }
                if payload.len() > threshold {
                    return file.write_all(payload);
                }
                pending.extend_from_slice(payload);
                Ok(())
            }
        }
    }

    /// The whole body, ready to be read from its start.
    pub(crate) fn finish(self) -> io::Result<Received> {
        match self {
            Spool::Memory(bytes) => Ok(Received::Memory(Cursor::new(bytes))),
            Spool::File { mut file, pending } => {
                file.write_all(&pending)?;
                file.seek(SeekFrom::Start(0))?;
                Ok(Received::File(file))
            }
        }
    }
}

/// A request body that arrived whole, as its handler reads it.
#[derive(Debug)]
pub(crate) enum Received {
    Memory(Cursor<Vec<u8>>),
    File(File),
}

impl Received {
    /// No body.
    pub(crate) fn empty() -> Received {
        Received::Memory(Cursor::new(Vec::new()))
    }
}

impl Read for Received {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Received::Memory(bytes) => bytes.read(buf),
            Received::File(file) => file.read(buf),
        }
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            Received::Memory(bytes) => bytes.read_to_end(buf),
            Received::File(file) => file.read_to_end(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(spool: Spool) -> Vec<u8> {
        let mut out = Vec::new();
        spool
            .finish()
            .and_then(|mut r| r.read_to_end(&mut out))
            .expect("reads");
        out
    }

    #[test]
    fn stays_in_memory_up_to_the_threshold() {
        let mut s = Spool::new();
        s.push(b"abcd", 8).expect("memory");
        s.push(b"efgh", 8).expect("memory");
        assert!(matches!(s, Spool::Memory(_)));
        assert_eq!(read_all(s), b"abcdefgh");
    }

    #[test]
    fn moves_to_a_file_past_it_with_every_byte() {
        let mut s = Spool::new();
        s.push(b"abcd", 8).expect("memory");
        s.push(b"efghi", 8).expect("file");
        assert!(matches!(s, Spool::File { .. }));
        s.push(b"jk", 8).expect("file");
        assert_eq!(read_all(s), b"abcdefghijk");
    }

    #[test]
    fn a_zero_threshold_spools_every_body() {
        let mut s = Spool::new();
        s.push(b"x", 0).expect("file");
        assert!(matches!(s, Spool::File { .. }));
        assert_eq!(read_all(s), b"x");
    }
}
