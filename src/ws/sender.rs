//! Pushing to a WebSocket from any thread: the sender's queue and its wake-ups.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use tungstenite::Bytes;
use tungstenite::protocol::CloseFrame;
use tungstenite::protocol::frame::coding::CloseCode;

use super::WsMessage;
use crate::http::session::{Wake, WakeFlag};
use crate::net::transport::Address;

/// Why a [`WsSender`] could not queue a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The connection is closed or closing: nothing more can be sent.
    Closed,
    /// The send queue holds [`WsConfig::max_send_queue`](super::WsConfig::max_send_queue) bytes the peer has not taken yet.
    Full,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::Closed => "websocket closed",
            SendError::Full => "websocket send queue full",
        })
    }
}

impl std::error::Error for SendError {}

/// An item queued by a sender.
pub(crate) enum Out {
    Msg(tungstenite::Message),
    Close(Option<CloseFrame>),
}

#[derive(Default)]
pub(crate) struct Queue {
    pub(crate) items: VecDeque<Out>,
    /// Bytes the peer has not taken yet: queued here, or taken by the connection and not yet
    /// all written out (`in_flight`). The limit bounds both, so a slow peer costs at most the
    /// limit however often the connection takes the queue.
    bytes: usize,
    in_flight: usize,
    closed: bool,
}

struct SenderShared {
    queue: Mutex<Queue>,
    /// Set while the engine is running this connection or a wake-up is pending: a push then
    /// needs no wake-up of its own.
    notified: WakeFlag,
    waker: Box<dyn Wake>,
    limit: usize,
    peer: Option<Address>,
}

/// Pushes messages to one WebSocket connection from any thread. Cheap to clone.
#[derive(Clone)]
pub struct WsSender {
    shared: Arc<SenderShared>,
}

impl fmt::Debug for WsSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WsSender")
            .field("peer", &self.shared.peer)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl WsSender {
    pub(crate) fn new(waker: Box<dyn Wake>, limit: usize, peer: Option<Address>) -> Self {
        WsSender {
            shared: Arc::new(SenderShared {
                queue: Mutex::new(Queue::default()),
                notified: WakeFlag::new(true),
                waker,
                limit,
                peer,
            }),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Nothing under this lock panics; a poisoned queue is still consistent.
        self.shared.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, out: Out, len: usize) -> Result<(), SendError> {
        {
            let mut q = self.queue();
            if q.closed {
                return Err(SendError::Closed);
            }
            if q.bytes > 0 && q.bytes + len > self.shared.limit {
                return Err(SendError::Full);
            }
            q.bytes += len;
            q.items.push_back(out);
        }
        if self.shared.notified.should_wake() {
            self.shared.waker.wake();
        }
        Ok(())
    }

    /// Queues a text or binary message.
    pub fn send(&self, msg: impl Into<WsMessage>) -> Result<(), SendError> {
        let msg = msg.into();
        let len = msg.len();
        self.push(Out::Msg(msg.into()), len)
    }

    /// Queues a ping (payload at most 125 bytes; longer is cut).
    pub fn ping(&self, payload: &[u8]) -> Result<(), SendError> {
        let p = Bytes::copy_from_slice(&payload[..payload.len().min(125)]);
        self.push(Out::Msg(tungstenite::Message::Ping(p)), 0)
    }

    /// Starts the closing handshake with `code` and `reason` (cut to fit 123 bytes). Messages
    /// queued before it are sent first.
    pub fn close(&self, code: CloseCode, reason: &str) -> Result<(), SendError> {
        let mut end = reason.len().min(123);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        let frame = CloseFrame {
            code,
            reason: reason[..end].to_owned().into(),
        };
        self.push(Out::Close(Some(frame)), 0)
    }

    /// True once the connection is closed or closing: sends fail from then on.
    pub fn is_closed(&self) -> bool {
        self.queue().closed
    }

    /// The peer's address, TCP or Unix.
    pub fn peer(&self) -> Option<&Address> {
        self.shared.peer.as_ref()
    }

    /// The peer's TCP address (`None` for a peer on a Unix domain socket: see
    /// [`WsSender::peer`]).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.shared.peer.as_ref().and_then(Address::tcp)
    }

    /// Takes everything queued (the engine calls this while it runs the connection).
    pub(crate) fn take(&self, into: &mut VecDeque<Out>) {
        let mut q = self.queue();
        q.in_flight = q.bytes;
        into.append(&mut q.items);
    }

    /// Everything the connection took is written out: it no longer counts against the limit.
    pub(crate) fn flushed(&self) {
        let mut q = self.queue();
        q.bytes = q.bytes.saturating_sub(q.in_flight);
        q.in_flight = 0;
    }

    /// The engine is running this connection: pushes need not wake it.
    pub(crate) fn running(&self) {
        self.shared.notified.running();
    }

    /// The engine is about to wait: later pushes wake it. True when something was queued in
    /// between (run again instead of waiting).
    pub(crate) fn settle(&self) -> bool {
        self.shared
            .notified
            .settle(|| !self.queue().items.is_empty())
    }

    /// No more sends: the connection is closing.
    pub(crate) fn mark_closed(&self) {
        let mut q = self.queue();
        q.closed = true;
        q.items.clear();
        q.bytes = 0;
        q.in_flight = 0;
    }
}
