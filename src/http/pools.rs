//! An engine's pool of exchange working sets (read and write buffers), read buffers and request
//! heads, one per thread that drives connections (an event loop; the thread-pool engine's parker
//! and each worker). The connection driver borrows them while bytes flow and gives them back
//! when its connection goes idle, so an idle connection holds none. Where connections move
//! between threads (the parker lends, a worker takes back), the threads' pools share what
//! they do not keep through a [`Shared`] overflow, so a busy keep-alive connection costs no
//! allocation.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use crate::http::buf::ReadBuf;
use crate::http::driver::busy::Busy;
use crate::http::request_head::RequestHead;
use crate::ws::WS_READ_BUF;

/// Buffers and heads lent to connections while bytes flow, taken back when they go idle.
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
    /// Items kept here at most; more go to `shared` (or are freed).
    keep: usize,
    shared: Option<Arc<Shared>>,
}

impl Default for Pools {
    fn default() -> Self {
        Pools {
            busy: Vec::new(),
            reads: Vec::new(),
            ws_reads: Vec::new(),
            heads: Vec::new(),
            keep: POOL_KEEP,
            shared: None,
        }
    }
}

/// Working sets and heads going round between threads' pools: bounded channels, each side
/// takes what the other gave (dropped when full). (The thread-pool engine's.)
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) struct Shared {
    busy: (Sender<Box<Busy>>, Receiver<Box<Busy>>),
    heads: (Sender<Box<RequestHead>>, Receiver<Box<RequestHead>>),
}

#[cfg_attr(not(feature = "server"), allow(dead_code))]
impl Shared {
    /// An overflow that holds at most `n` items of each kind.
    pub(crate) fn new(n: usize) -> Arc<Shared> {
        Arc::new(Shared {
            busy: crossbeam_channel::bounded(n.max(1)),
            heads: crossbeam_channel::bounded(n.max(1)),
        })
    }
}

/// Pooled items kept at most; more are freed.
pub(crate) const POOL_KEEP: usize = 256;

/// WebSocket read buffers kept at most per loop (`WS_READ_BUF` each).
const WS_POOL_KEEP: usize = 32;

impl Pools {
    /// A thread's pools that keep `keep` items of each kind and share the rest.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn sharing(keep: usize, shared: Arc<Shared>) -> Pools {
        Pools {
            keep,
            shared: Some(shared),
            ..Pools::default()
        }
    }

    pub(crate) fn read(&mut self) -> ReadBuf {
        self.reads.pop().unwrap_or_default()
    }
    pub(crate) fn ws_read(&mut self) -> ReadBuf {
        self.ws_reads
            .pop()
            .unwrap_or_else(|| ReadBuf::with_len(WS_READ_BUF))
    }
    /// A read buffer for a session that reads to a short read and grows its buffer up to
    /// `WS_READ_BUF` as messages need: one that grew before if the pool has it (they come back
    /// to `ws_reads`), else a new one of the usual size.
    pub(crate) fn growing_read(&mut self) -> ReadBuf {
        self.ws_reads.pop().unwrap_or_else(|| self.read())
    }
    pub(crate) fn give_read(&mut self, mut b: ReadBuf) {
        if b.len() == WS_READ_BUF {
            if self.ws_reads.len() < WS_POOL_KEEP.min(self.keep.max(1)) {
                b.clear();
                self.ws_reads.push(b);
            }
        } else if self.reads.len() < self.keep.max(1) {
            b.reset();
            self.reads.push(b);
        }
    }
    #[inline]
    pub(crate) fn busy(&mut self) -> Box<Busy> {
        self.busy
            .pop()
            .or_else(|| self.shared.as_ref()?.busy.1.try_recv().ok())
            .unwrap_or_else(|| Box::new(Busy::new()))
    }
    pub(crate) fn give_busy(&mut self, mut b: Box<Busy>) {
        b.recycle();
        match &self.shared {
            _ if self.busy.len() < self.keep => self.busy.push(b),
            Some(shared) => drop(shared.busy.0.try_send(b)),
            None => {}
        }
    }
    pub(crate) fn head(&mut self) -> Box<RequestHead> {
        self.heads
            .pop()
            .or_else(|| self.shared.as_ref()?.heads.1.try_recv().ok())
            .unwrap_or_default()
    }
    pub(crate) fn give_head(&mut self, h: Box<RequestHead>) {
        if !h.worth_keeping() {
            return;
        }
        match &self.shared {
            _ if self.heads.len() < self.keep => self.heads.push(h),
            Some(shared) => drop(shared.heads.0.try_send(h)),
            None => {}
        }
    }
}
