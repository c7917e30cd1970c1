//! A loop's pool of read buffers, write buffers and request heads. Connections borrow them while
//! bytes flow and give them back when they go idle, so an idle connection holds none.

use crate::http::buf::ReadBuf;
use crate::http::request::RequestHead;
use crate::ws::WS_READ_BUF;

/// Buffers and heads lent to connections while bytes flow, taken back when they go idle.
#[derive(Default)]
pub(crate) struct Pools {
    reads: Vec<ReadBuf>,
    /// Larger read buffers for WebSocket connections (`WS_READ_BUF` each). Like every pooled
    /// buffer one is held only while unread bytes are pending.
    ws_reads: Vec<ReadBuf>,
    writes: Vec<Vec<u8>>,
    // Boxed: a head moves between a connection, the pool and pool jobs as one pointer, and an
    // idle connection's slot stays small.
    #[allow(clippy::vec_box)]
    heads: Vec<Box<RequestHead>>,
}

/// Pooled items kept at most; more are freed.
const POOL_KEEP: usize = 256;

/// WebSocket read buffers kept at most per loop (`WS_READ_BUF` each).
const WS_POOL_KEEP: usize = 32;

impl Pools {
    pub(crate) fn read(&mut self) -> ReadBuf {
        self.reads.pop().unwrap_or_default()
    }
    pub(crate) fn ws_read(&mut self) -> ReadBuf {
        self.ws_reads
            .pop()
            .unwrap_or_else(|| ReadBuf::with_len(WS_READ_BUF))
    }
    pub(crate) fn give_read(&mut self, mut b: ReadBuf) {
        if b.len() == WS_READ_BUF {
            if self.ws_reads.len() < WS_POOL_KEEP {
                b.clear();
                self.ws_reads.push(b);
            }
        } else if self.reads.len() < POOL_KEEP {
            b.reset();
            self.reads.push(b);
        }
    }
    pub(crate) fn write(&mut self) -> Vec<u8> {
        self.writes
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(16 * 1024))
    }
    pub(crate) fn give_write(&mut self, mut b: Vec<u8>) {
        if self.writes.len() < POOL_KEEP && b.capacity() <= 256 * 1024 {
            b.clear();
            self.writes.push(b);
        }
    }
    pub(crate) fn head(&mut self) -> Box<RequestHead> {
        self.heads.pop().unwrap_or_default()
    }
    pub(crate) fn give_head(&mut self, h: Box<RequestHead>) {
        if self.heads.len() < POOL_KEEP && h.buf.capacity() <= 64 * 1024 {
            self.heads.push(h);
        }
    }
}
