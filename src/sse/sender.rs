//! Queueing events from any thread: the sender, the queue it shares with its stream, and the
//! queue's part in the server's memory budget.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use super::{Event, SendError, SseConfig};
use crate::http::budget::{self, Attempt, Held, Queued, Room};
use crate::http::session::{Wake, WakeFlag};

#[derive(Default)]
pub(super) struct Queue {
    pub(super) bytes: Vec<u8>,
    pub(super) flow: Flow,
    /// Bytes the stream moved from `bytes` into its output and has not written yet.
    pub(super) in_out: usize,
    /// From the stream's start: what the client has not taken (`bytes` and `in_out`), charged
    /// to the server's budget past the allowance each holder has.
    pub(super) held: Option<Held>,
    /// Since when the charge is above nothing: how long the client has been slow to take
    /// what it is sent, by which streams are dropped (oldest first).
    pub(super) over_since: Option<Instant>,
}

impl Queue {
    /// The stream is over: what is queued is dropped and no longer counts.
    pub(super) fn close(&mut self) {
        self.flow = Flow::Closed;
        self.bytes = Vec::new();
        self.in_out = 0;
        self.held = None;
        self.over_since = None;
    }

    /// What the client has not taken.
    pub(super) fn unsent(&self) -> usize {
        self.bytes.len().saturating_add(self.in_out)
    }

    /// After the charge changed: since when it is above nothing.
    pub(super) fn mark(&mut self) {
        let over = self.held.as_ref().is_some_and(|held| held.bytes() > 0);
        match (over, self.over_since) {
            (true, None) => self.over_since = Some(Instant::now()),
            (false, Some(_)) => self.over_since = None,
            _ => {}
        }
    }
}

/// Where a stream is, as its senders see it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Flow {
    #[default]
    Open,
    /// Ending after what is queued: [`SseSender::close`], or server shutdown.
    Ending,
    /// The connection is gone (or the stream never started, as for a HEAD request).
    Closed,
    /// Dropped for the server's memory budget: the connection closes on its next turn.
    Shed,
}

pub(super) struct Shared {
    pub(super) queue: Mutex<Queue>,
    pub(super) notified: WakeFlag,
    /// Set by the engine when the stream starts; pushes before it just queue.
    pub(super) waker: OnceLock<Box<dyn Wake>>,
    pub(super) config: SseConfig,
}

/// The stream end the response (and then the engine) holds: when it goes, the senders see
/// [`SendError::Closed`] (also when the stream was never started, as for a HEAD request).
pub(super) struct Stream(pub(super) Arc<Shared>);

impl Drop for Stream {
    fn drop(&mut self) {
        lock(&self.0.queue).close();
    }
}

impl Shared {
    /// The stream ends after what is queued ([`SseSender::close`], the last sender dropped).
    fn end(&self) {
        {
            let mut q = lock(&self.queue);
            if q.flow != Flow::Open {
                return;
            }
            q.flow = Flow::Ending;
        }
        self.wake();
    }

    /// Wakes the stream's engine to write what was queued (once per batch of pushes).
    fn wake(&self) {
        if self.notified.should_wake() {
            if let Some(w) = self.waker.get() {
                w.wake();
            }
        }
    }
}

/// What every clone of one stream's sender shares: when the last one goes, nothing more can
/// be sent, and the stream ends after what is queued, as on [`SseSender::close`].
pub(super) struct Senders(pub(super) Arc<Shared>);

impl Drop for Senders {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// Sends events to one event stream from any thread. Cheap to clone.
///
/// Made with its response by [`Response::event_stream`](crate::Response::event_stream): return the response from the handler
/// and keep the sender (in a thread, a list of subscribers, a channel's consumer). A send only
/// queues the event and wakes the engine, which writes it; it never blocks on the client. It fails
/// with [`SendError::Closed`] once the client has gone, [`close`](SseSender::close) was called or
/// the server shut down (drop the sender then), and with [`SendError::Full`] while the client is
/// [`SseConfig::max_queue`] bytes or more behind. When the last clone of a sender is dropped the
/// stream ends after what is queued, as on `close`.
///
/// # Examples
///
/// One stream per request, fed by a thread until the client leaves:
///
/// ```
/// use std::time::Duration;
/// use twinhttp::sse::{Event, SendError};
/// use twinhttp::{Request, Response};
///
/// fn clock(req: &mut Request<'_>) -> Response {
///     let resume = req.last_event_id().and_then(|id| id.parse().ok()).unwrap_or(0u64);
///     let (response, events) = Response::event_stream();
///     std::thread::spawn(move || {
///         for id in resume + 1.. {
///             match events.send(Event::data(format!("tick {id}")).id(id.to_string())) {
///                 Ok(()) | Err(SendError::Full) => {} // Full: this client lags; skip a tick
///                 Err(_) => break,                    // Closed: the client went away
///             }
///             std::thread::sleep(Duration::from_secs(1));
///         }
///     });
///     response
/// }
/// # let _ = twinhttp::handler_fn(clock);
/// ```
#[derive(Clone)]
pub struct SseSender {
    pub(super) senders: Arc<Senders>,
}

impl std::fmt::Debug for SseSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseSender")
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl SseSender {
    fn shared(&self) -> &Shared {
        &self.senders.0
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        lock(&self.shared().queue)
    }

    fn push(&self, f: impl FnOnce(&mut Queue)) -> Result<(), SendError> {
        {
            let mut q = self.queue();
            if q.flow != Flow::Open {
                return Err(SendError::Closed);
            }
            // What the client has not taken: queued, and moved to the output and not written.
            if q.unsent() >= self.shared().config.max_queue {
                return Err(SendError::Full);
            }
            let before = q.bytes.len();
            f(&mut q);
            if !charge(&mut q) {
                let event = q.bytes.split_off(before);
                drop(q);
                self.fit(event)?;
            }
        }
        self.shared().wake();
        Ok(())
    }

    /// Past the server's budget: room is made for `event` ([`budget::make_room`]), then it
    /// is queued.
    fn fit(&self, event: Vec<u8>) -> Result<(), SendError> {
        budget::make_room(|last| {
            let mut q = self.queue();
            if q.flow != Flow::Open {
                return Attempt::Done(Err(SendError::Closed));
            }
            let with = q.unsent().saturating_add(event.len());
            if let Some(held) = q.held.as_mut() {
                match held.room(with, last) {
                    Room::Fits => {}
                    Room::Short(budget) => return Attempt::Short(budget),
                    Room::Refused => return Attempt::Done(Err(SendError::Full)),
                }
            }
            q.bytes.extend_from_slice(&event);
            q.mark();
            Attempt::Done(Ok(()))
        })
    }

    /// Queues an event. `Err(Closed)` once the client went away or the stream ended.
    pub fn send(&self, event: Event) -> Result<(), SendError> {
        self.push(|q| event.encode(&mut q.bytes))
    }

    /// Queues a comment line (ignored by clients; a keep-alive).
    pub fn comment(&self, text: &str) -> Result<(), SendError> {
        self.push(|q| {
            q.bytes.extend_from_slice(b": ");
            q.bytes
                .extend(text.bytes().filter(|&b| b != b'\r' && b != b'\n'));
            q.bytes.extend_from_slice(b"\n\n");
        })
    }

    /// Ends the stream once what is queued has been written (also when the queue is full).
    /// Dropping the last clone of a sender does the same.
    pub fn close(&self) {
        self.shared().end();
    }

    /// True once the stream ended (the client went away, [`SseSender::close`], or shutdown).
    pub fn is_closed(&self) -> bool {
        self.queue().flow != Flow::Open
    }
}

/// Charges what a push added (past `before`) to the server's budget; false when it does not
/// fit (and nothing was taken).
pub(super) fn charge(q: &mut Queue) -> bool {
    let unsent = q.unsent();
    if !q.held.as_mut().is_none_or(|held| held.try_hold(unsent)) {
        return false;
    }
    q.mark();
    true
}

impl Queued for Shared {
    fn oldest(&self) -> Option<Instant> {
        let q = lock(&self.queue);
        match (q.flow, &q.held) {
            // A stream that holds nothing frees nothing.
            (Flow::Open, Some(held)) if held.bytes() > 0 => q.over_since,
            _ => None,
        }
    }

    fn shed(&self) {
        {
            let mut q = lock(&self.queue);
            if q.flow != Flow::Open {
                return;
            }
            if let Some(held) = q.held.as_mut() {
                held.set(0);
                held.budget().session_dropped();
            }
            q.flow = Flow::Shed;
            q.bytes = Vec::new();
            q.in_out = 0;
            q.over_since = None;
        }
        // Always: a stream waiting for its client to take output does not look at its
        // queue, and the flag may say a wake-up is pending when none will come.
        if let Some(w) = self.waker.get() {
            w.wake();
        }
    }
}

/// Nothing under the queue's lock panics; a poisoned queue is still consistent.
pub(super) fn lock(q: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    q.lock().unwrap_or_else(|e| e.into_inner())
}
