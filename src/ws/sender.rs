//! Pushing to a WebSocket from any thread: the sender's queue and its wake-ups.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tungstenite::Bytes;
use tungstenite::protocol::CloseFrame;
use tungstenite::protocol::frame::coding::CloseCode;

use super::WsMessage;
use crate::http::budget::{self, Attempt, Budget, Enlisted, Held, Queued, Room};
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

/// Most bytes a connection takes from its queue at a time. tungstenite copies what it is
/// given into a buffer that grows by doubling, so what waits for a slow peer waits here, in
/// the queue, counted to the byte.
const TAKE_BYTES: usize = 64 * 1024;

pub(crate) struct Queue {
    /// What is queued, each with the bytes it counts.
    items: VecDeque<(Out, usize)>,
    /// Since when `bytes` is past the allowance the budget leaves each queue, counted again
    /// from each time the peer took all the connection had taken: about the age of its oldest
    /// unsent data, by which sessions are dropped (oldest first).
    over_since: Option<Instant>,
    /// Bytes the peer has not taken yet: queued here, or taken by the connection and not yet
    /// all written out (`in_flight`). The limit bounds both, so a slow peer costs at most the
    /// limit however often the connection takes the queue.
    bytes: usize,
    in_flight: usize,
    /// `bytes`, charged to the server's memory budget.
    held: Held,
    flow: Flow,
}

/// Whether a queue takes messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Open,
    /// The connection is closing or closed.
    Closed,
    /// Dropped for the server's memory budget (its unsent data was the oldest): the
    /// connection closes on its next turn.
    Shed,
}

struct SenderShared {
    queue: Mutex<Queue>,
    /// Set while the engine is running this connection or a wake-up is pending: a push then
    /// needs no wake-up of its own.
    notified: WakeFlag,
    waker: Box<dyn Wake>,
    limit: usize,
    peer: Option<Address>,
    /// On the budget's list of sessions it may drop (and wake).
    enlisted: Enlisted,
    /// The connection stopped reading its input while the budget was spent.
    paused: AtomicBool,
}

impl Queued for SenderShared {
    fn oldest(&self) -> Option<Instant> {
        let q = lock(&self.queue);
        match q.flow {
            // A queue charged nothing frees nothing.
            Flow::Open if q.held.bytes() > 0 => q.over_since,
            _ => None,
        }
    }

    fn shed(&self) {
        {
            let mut q = lock(&self.queue);
            if q.flow != Flow::Open {
                return;
            }
            q.flow = Flow::Shed;
            q.empty();
            q.held.budget().session_dropped();
        }
        // Always: a connection waiting for its peer to take output does not look at its
        // queue, and the flag may say a wake-up is pending when none will come.
        self.waker.wake();
    }

    fn resume(&self) {
        if self.enlisted.budget().unpause(&self.paused) {
            // Always, as for `shed`: a paused connection waits for nothing else.
            self.waker.wake();
        }
    }
}

/// Nothing under a queue's lock panics; a poisoned queue is still consistent.
fn lock(q: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    q.lock().unwrap_or_else(|e| e.into_inner())
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
    pub(crate) fn new(
        waker: Box<dyn Wake>,
        limit: usize,
        peer: Option<Address>,
        budget: &Budget,
    ) -> Self {
        let shared = Arc::new_cyclic(|me: &std::sync::Weak<SenderShared>| {
            let me: std::sync::Weak<dyn Queued> = me.clone();
            SenderShared {
                queue: Mutex::new(Queue {
                    items: VecDeque::new(),
                    over_since: None,
                    bytes: 0,
                    in_flight: 0,
                    held: budget.charge(),
                    flow: Flow::Open,
                }),
                notified: WakeFlag::new(true),
                waker,
                limit,
                peer,
                enlisted: budget.enlist(me),
                paused: AtomicBool::new(false),
            }
        });
        WsSender { shared }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        lock(&self.shared.queue)
    }

    fn push(&self, out: Out, len: usize) -> Result<(), SendError> {
        let mut out = Some(out);
        budget::make_room(|last| {
            let mut q = self.queue();
            if q.flow != Flow::Open {
                return Attempt::Done(Err(SendError::Closed));
            }
            let with = q.bytes.saturating_add(len);
            if q.bytes > 0 && with > self.shared.limit {
                return Attempt::Done(Err(SendError::Full));
            }
            match q.held.room(with, last) {
                Room::Fits => {}
                Room::Short(budget) => return Attempt::Short(budget),
                Room::Refused => return Attempt::Done(Err(SendError::Full)),
            }
            q.bytes = with;
            if q.over_since.is_none() && q.held.bytes() > 0 {
                q.over_since = Some(Instant::now());
            }
            if let Some(out) = out.take() {
                q.items.push_back((out, len));
            }
            Attempt::Done(Ok(()))
        })?;
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
        self.queue().flow != Flow::Open
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

    /// Takes what is queued, up to [`TAKE_BYTES`] (at least one message), for the
    /// connection to write, once what it took before is all out ([`WsSender::flushed`]). False: the connection is to be dropped for the
    /// server's memory budget.
    pub(crate) fn take(&self, into: &mut VecDeque<Out>) -> bool {
        let mut q = self.queue();
        if q.flow == Flow::Shed {
            return false;
        }
        if q.in_flight > 0 {
            // What it took before is not all out: the rest waits here, counted.
            return true;
        }
        let mut taken = 0;
        while taken < TAKE_BYTES {
            let Some((out, len)) = q.items.pop_front() else {
                break;
            };
            into.push_back(out);
            taken += len;
        }
        q.in_flight = taken;
        true
    }

    /// Everything the connection took is written out: it no longer counts against the limit
    /// or the budget.
    pub(crate) fn flushed(&self) {
        let mut q = self.queue();
        q.bytes = q.bytes.saturating_sub(q.in_flight);
        q.in_flight = 0;
        let left = q.bytes;
        q.held.hold(left);
        // What is left came after what the peer just took: the age of its oldest unsent data
        // starts now (if it is still over its allowance).
        q.over_since = (q.held.bytes() > 0).then(Instant::now);
    }

    /// Whether the connection may read its peer's input: not while the server's memory budget
    /// is spent (a message read may be sent on to many); it is woken when there is room.
    pub(crate) fn may_read(&self) -> bool {
        self.shared.enlisted.budget().may_read(&self.shared.paused)
    }

    /// The server's memory budget this connection is charged to.
    pub(crate) fn budget(&self) -> &Budget {
        self.shared.enlisted.budget()
    }

    /// The connection reads no more (it is going away): off the budget's paused count.
    pub(crate) fn unpause(&self) {
        self.shared.enlisted.budget().unpause(&self.shared.paused);
    }

    /// Drops the sessions whose unsent data is oldest until what is held falls to where paused
    /// input resumes (at most [`budget::DROPS_PER_MESSAGE`]); true when the connection may
    /// read.
    pub(crate) fn make_room(&self) -> bool {
        let budget = self.shared.enlisted.budget();
        for _ in 0..budget::DROPS_PER_MESSAGE {
            if !budget.has_paused_input() || !budget.shed_oldest() {
                break;
            }
        }
        self.may_read()
    }

    /// The engine is running this connection: pushes need not wake it.
    pub(crate) fn running(&self) {
        self.shared.notified.running();
    }

    /// The engine is about to wait: later pushes wake it. True when something was queued in
    /// between (run again instead of waiting).
    pub(crate) fn settle(&self) -> bool {
        self.shared.notified.settle(|| {
            let q = self.queue();
            !q.items.is_empty() || q.flow == Flow::Shed
        })
    }

    /// No more sends: the connection is closing.
    pub(crate) fn mark_closed(&self) {
        let mut q = self.queue();
        if q.flow == Flow::Open {
            q.flow = Flow::Closed;
        }
        q.empty();
    }
}

impl Queue {
    /// Nothing queued or in flight any more.
    fn empty(&mut self) {
        self.items.clear();
        self.bytes = 0;
        self.in_flight = 0;
        self.over_since = None;
        self.held.set(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::budget::ALLOWANCE;
    use crate::http::session::memory::{Wakes, waker};

    fn sender(wakes: &Arc<Wakes>, budget: &Budget) -> WsSender {
        WsSender::new(waker(wakes), 1 << 20, None, budget)
    }

    #[test]
    fn past_the_budget_the_session_slow_the_longest_goes_first() {
        let wakes = Arc::new(Wakes::default());
        let budget = Budget::new(300);
        let old = sender(&wakes, &budget);
        let young = sender(&wakes, &budget);
        assert_eq!(old.send(vec![0u8; ALLOWANCE + 200]), Ok(()));
        assert_eq!(
            young.send(vec![0u8; ALLOWANCE]),
            Ok(()),
            "within its allowance"
        );
        assert_eq!(budget.held(), 200);
        assert_eq!(young.send(vec![0u8; 50]), Ok(()));
        // 350 bytes past the allowances do not fit in 300: the session over its allowance
        // the longest goes.
        assert_eq!(young.send(vec![0u8; 100]), Ok(()));
        assert!(old.is_closed());
        assert_eq!(old.send(vec![0u8; 1]), Err(SendError::Closed));
        assert!(
            !old.take(&mut VecDeque::new()),
            "its connection is told to close"
        );
        assert!(!young.is_closed());
        assert_eq!(budget.held(), 150);
        assert_eq!(budget.refusals(), (0, 1));
        // What the peer has taken no longer counts.
        let mut out = VecDeque::new();
        assert!(young.take(&mut out));
        assert_eq!(out.len(), 3);
        young.flushed();
        assert_eq!(budget.held(), 0);
        drop(young);
        drop(old);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn with_nothing_unsent_a_message_goes_past_the_budget_once() {
        let wakes = Arc::new(Wakes::default());
        let budget = Budget::new(100);
        let only = sender(&wakes, &budget);
        assert_eq!(
            only.send(vec![0u8; ALLOWANCE + 150]),
            Ok(()),
            "nothing of it waited"
        );
        assert_eq!(budget.held(), 150);
        // Now it is the one over its allowance: the next message past the budget drops it.
        assert_eq!(only.send(vec![0u8; 10]), Err(SendError::Closed));
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_session_within_its_allowance_is_never_dropped() {
        let wakes = Arc::new(Wakes::default());
        let budget = Budget::new(0);
        let small = sender(&wakes, &budget);
        let big = sender(&wakes, &budget);
        assert_eq!(small.send(vec![0u8; 100]), Ok(()));
        assert_eq!(
            big.send(vec![0u8; ALLOWANCE + 1]),
            Ok(()),
            "past the budget once"
        );
        assert_eq!(big.send(vec![0u8; 1]), Err(SendError::Closed));
        assert!(!small.is_closed(), "it held nothing of the budget");
    }

    #[test]
    fn a_take_is_at_most_take_bytes_and_at_least_one_message() {
        let wakes = Arc::new(Wakes::default());
        let budget = Budget::default();
        let s = sender(&wakes, &budget);
        for _ in 0..3 {
            assert_eq!(s.send(vec![0u8; TAKE_BYTES / 2]), Ok(()));
        }
        assert_eq!(s.send(vec![0u8; TAKE_BYTES * 2]), Ok(()));
        let mut out = VecDeque::new();
        assert!(s.take(&mut out));
        assert_eq!(out.len(), 2, "two halves make a take");
        assert!(s.take(&mut out));
        assert_eq!(out.len(), 2, "nothing more until they are out");
        s.flushed();
        out.clear();
        assert!(s.take(&mut out));
        assert_eq!(out.len(), 2, "the third half, then the large one");
        assert_eq!(budget.held(), TAKE_BYTES / 2 + TAKE_BYTES * 2 - ALLOWANCE);
    }
}
