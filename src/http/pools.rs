//! An engine's pool of exchange working sets (read and write buffers), read buffers and request
//! heads, one per event loop. The connection driver borrows them while bytes flow and gives
//! them back when its connection goes idle, so an idle connection holds none.

use crate::http::buf::ReadBuf;
use crate::http::driver::busy::Busy;
use crate::http::request::RequestHead;
use crate::ws::WS_READ_BUF;

/// Buffers and heads lent to connections while bytes flow, taken back when they go idle.
#[derive(Default)]
pub(crate) struct Pools {
    /// Working sets of exchanges, boxed (a connection holds one by pointer while busy).
    #[allow(clippy::vec_box)]
    busy: Vec<Box<Busy>>,
    reads: Vec<ReadBuf>,
    /// Larger read buffers for WebSocket connections (`WS_READ_BUF` each). Like every pooled
    /// buffer one is held only while unread bytes are pending.
    ws_reads: Vec<ReadBuf>,
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
    pub(crate) fn busy(&mut self) -> Box<Busy> {
        self.busy.pop().unwrap_or_else(|| Box::new(Busy::new()))
    }
    pub(crate) fn give_busy(&mut self, mut b: Box<Busy>) {
        if self.busy.len() < POOL_KEEP {
            b.recycle();
            self.busy.push(b);
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
