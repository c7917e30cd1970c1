//! Server-sent events (`text/event-stream`) on both engines.
//!
//! [`Response::event_stream`] returns the response and an [`SseSender`]; the handler hands the
//! sender to whatever produces events (a thread, a broadcaster) and returns the response. The
//! engine then writes each event as it is sent, a heartbeat comment when the stream has been
//! quiet for [`SseConfig::heartbeat`], and ends the stream when the client goes away (the sender
//! reports [`SendError::Closed`]), when [`SseSender::close`] is called, or at server shutdown.
//! An open stream costs no thread: on the thread-pool server it is parked between events like an
//! idle keep-alive connection (with [`Parking::Off`](crate::server::Parking::Off) or
//! [`Parking::Http`](crate::server::Parking::Http), a thread of its own); on the reactor it is a state of its connection.
//!
//! ```
//! use twinhttp::{Request, Response};
//! use twinhttp::sse::Event;
//!
//! fn clock(req: &mut Request<'_>) -> Response {
//!     let resume_after: u64 = req.last_event_id().and_then(|id| id.parse().ok()).unwrap_or(0);
//!     let (response, events) = Response::event_stream();
//!     std::thread::spawn(move || {
//!         for id in resume_after + 1.. {
//!             let tick = Event::data(format!("tick {id}")).id(id.to_string());
//!             if events.send(tick).is_err() {
//!                 break; // the client went away
//!             }
//!             std::thread::sleep(std::time::Duration::from_secs(1));
//!         }
//!     });
//!     response
//! }
//! # let _ = clock;
//! ```

use std::fmt;
use std::io::ErrorKind;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::Response;
use crate::deadline;
use crate::http::budget::{Enlisted, Held, Queued};
use crate::http::conn::Encoder;
use crate::http::response::{Body, BodyKind};
use crate::http::session::{
    Callbacks, Duplex, Io, Next, Session, Start, Takeover, Wake, WakeFlag, Work,
};
use crate::rate::{Meter, MinRate};

/// Why an [`SseSender`] could not queue an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The stream ended: the client went away, [`SseSender::close`] was called, or the server
    /// shut down. Nothing more can be sent.
    Closed,
    /// The queue holds [`SseConfig::max_queue`] bytes the client has not taken yet.
    Full,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::Closed => "event stream closed",
            SendError::Full => "event stream queue full",
        })
    }
}

impl std::error::Error for SendError {}

/// One event. Fields with line breaks are cleaned: `id` and `event` lose them, `data` is sent as
/// one `data:` line per line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Event {
    id: Option<String>,
    event: Option<String>,
    retry: Option<u64>,
    data: String,
}

impl Event {
    /// An event carrying `data` (may span lines).
    pub fn data(data: impl Into<String>) -> Event {
        Event {
            data: data.into(),
            ..Event::default()
        }
    }

    /// Sets the event id (the client sends the last one back as `Last-Event-ID` when it
    /// reconnects).
    pub fn id(mut self, id: impl Into<String>) -> Event {
        self.id = Some(id.into());
        self
    }

    /// Sets the event type (`event:`), which the browser dispatches on.
    pub fn event(mut self, name: impl Into<String>) -> Event {
        self.event = Some(name.into());
        self
    }

    /// Sets the client's reconnection delay in milliseconds (`retry:`).
    pub fn retry(mut self, ms: u64) -> Event {
        self.retry = Some(ms);
        self
    }

    /// The event in the wire format, ending with the blank line.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let one_line = |out: &mut Vec<u8>, name: &str, v: &str| {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend(v.bytes().filter(|&b| b != b'\r' && b != b'\n'));
            out.push(b'\n');
        };
        if let Some(id) = &self.id {
            one_line(out, "id", id);
        }
        if let Some(e) = &self.event {
            one_line(out, "event", e);
        }
        if let Some(r) = self.retry {
            one_line(out, "retry", &r.to_string());
        }
        // `lines` splits on \n and \r\n; a lone \r also ends a line in event streams.
        for line in self
            .data
            .split('\n')
            .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
        {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out.push(b'\n');
    }
}

/// Settings of an event stream.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct SseConfig {
    /// A comment line is sent after this long without an event, so proxies and clients see a
    /// live stream and a vanished client is noticed (`None`: never). Default 15 s.
    pub heartbeat: Option<Duration>,
    /// Bytes of events queued and not yet written beyond which [`SseSender::send`] fails with
    /// [`SendError::Full`]. Default 1 MiB.
    pub max_queue: usize,
}

impl Default for SseConfig {
    fn default() -> Self {
        SseConfig {
            heartbeat: Some(Duration::from_secs(15)),
            max_queue: 1 << 20,
        }
    }
}

impl SseConfig {
    /// Sets [`SseConfig::heartbeat`].
    pub fn heartbeat(mut self, every: Option<Duration>) -> Self {
        self.heartbeat = every;
        self
    }
    /// Sets [`SseConfig::max_queue`].
    pub fn max_queue(mut self, bytes: usize) -> Self {
        self.max_queue = bytes;
        self
    }
}

#[derive(Default)]
struct Queue {
    bytes: Vec<u8>,
    flow: Flow,
    /// From the stream's start: what the client has not taken (these bytes, and those the
    /// stream moved into its output and has not written), charged to the server's budget.
    held: Option<Held>,
    /// When the oldest of `bytes` was queued.
    queued_since: Option<Instant>,
    /// When the oldest bytes the stream moved into its output, not yet written, were queued.
    out_since: Option<Instant>,
}

impl Queue {
    /// The stream is over: what is queued is dropped and no longer counts.
    fn close(&mut self) {
        self.flow = Flow::Closed;
        self.bytes = Vec::new();
        self.held = None;
        self.queued_since = None;
        self.out_since = None;
    }
}

/// Where a stream is, as its senders see it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Flow {
    #[default]
    Open,
    /// Ending after what is queued: [`SseSender::close`], or server shutdown.
    Ending,
    /// The connection is gone (or the stream never started, as for a HEAD request).
    Closed,
    /// Dropped for the server's memory budget: the connection closes on its next turn.
    Shed,
}

struct Shared {
    queue: Mutex<Queue>,
    notified: WakeFlag,
    /// Set by the engine when the stream starts; pushes before it just queue.
    waker: OnceLock<Box<dyn Wake>>,
    config: SseConfig,
}

/// The stream end the response (and then the engine) holds: when it goes, the senders see
/// [`SendError::Closed`] (also when the stream was never started, as for a HEAD request).
struct Stream(Arc<Shared>);

impl Drop for Stream {
    fn drop(&mut self) {
        lock(&self.0.queue).close();
    }
}

/// Sends events to one event stream from any thread. Cheap to clone.
///
/// Made with its response by [`Response::event_stream`]: return the response from the handler
/// and keep the sender (in a thread, a list of subscribers, a channel's consumer). A send only
/// queues the event and wakes the engine, which writes it; it never blocks on the client. It fails
/// with [`SendError::Closed`] once the client has gone, [`close`](SseSender::close) was called or
/// the server shut down (drop the sender then), and with [`SendError::Full`] while the client is
/// more than [`SseConfig::max_queue`] bytes behind.
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
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SseSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseSender")
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl SseSender {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        lock(&self.shared.queue)
    }

    fn push(&self, f: impl FnOnce(&mut Queue)) -> Result<(), SendError> {
        {
            let mut q = self.queue();
            if q.flow != Flow::Open {
                return Err(SendError::Closed);
            }
            if q.bytes.len() >= self.shared.config.max_queue {
                return Err(SendError::Full);
            }
            let before = q.bytes.len();
            f(&mut q);
            if !charge(&mut q, before) {
                let event = q.bytes.split_off(before);
                drop(q);
                self.fit(event)?;
            }
        }
        self.wake();
        Ok(())
    }

    fn wake(&self) {
        if self.shared.notified.should_wake() {
            if let Some(w) = self.shared.waker.get() {
                w.wake();
            }
        }
    }

    /// Past the server's budget: the sessions whose unsent data is oldest go (perhaps this
    /// one) until `event` fits, then it is queued. When no session holds unsent data, it goes
    /// anyway (past the budget by one event); after [`SHEDS_PER_PUSH`] drops it is refused.
    fn fit(&self, event: Vec<u8>) -> Result<(), SendError> {
        let mut last = false;
        for sheds in 0.. {
            let budget = {
                let mut q = self.queue();
                if q.flow != Flow::Open {
                    return Err(SendError::Closed);
                }
                let budget = match q.held.as_mut() {
                    None => None,
                    Some(held) => {
                        if held.try_grow(event.len()) {
                            None
                        } else if !last && sheds < SHEDS_PER_PUSH {
                            Some(held.budget().clone())
                        } else if held.bytes() == 0 {
                            held.grow(event.len());
                            None
                        } else {
                            return Err(SendError::Full);
                        }
                    }
                };
                if budget.is_none() {
                    if q.bytes.is_empty() {
                        q.queued_since = Some(Instant::now());
                    }
                    q.bytes.extend_from_slice(&event);
                    return Ok(());
                }
                budget
            };
            last = !budget.is_some_and(|b| b.shed_oldest());
        }
        Err(SendError::Full)
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

    /// Ends the stream once what is queued has been written.
    pub fn close(&self) {
        let _ = self.push(|q| q.flow = Flow::Ending);
    }

    /// True once the stream ended (the client went away, [`SseSender::close`], or shutdown).
    pub fn is_closed(&self) -> bool {
        self.queue().flow != Flow::Open
    }
}

/// Reads of 512 bytes an event stream makes per turn to drop what its client sends (it
/// should send nothing) before the other connections get their turn.
const INPUT_READS_PER_TURN: usize = 64;

/// How many sessions one event may drop to fit in the server's memory budget.
const SHEDS_PER_PUSH: usize = 8;

/// Charges what a push added (past `before`) to the server's budget; false when it does not
/// fit (and nothing was taken).
fn charge(q: &mut Queue, before: usize) -> bool {
    let added = q.bytes.len() - before;
    if !q.held.as_mut().is_none_or(|held| held.try_grow(added)) {
        return false;
    }
    if before == 0 && added > 0 {
        q.queued_since = Some(Instant::now());
    }
    true
}

impl Queued for Shared {
    fn oldest(&self) -> Option<Instant> {
        let q = lock(&self.queue);
        match (q.flow, &q.held) {
            // A stream that holds nothing frees nothing.
            (Flow::Open, Some(held)) if held.bytes() > 0 => q.out_since.or(q.queued_since),
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
            q.queued_since = None;
            q.out_since = None;
        }
        // Always: a stream waiting for its client to take output does not look at its
        // queue, and the flag may say a wake-up is pending when none will come.
        if let Some(w) = self.waker.get() {
            w.wake();
        }
    }
}

impl Response {
    /// A `text/event-stream` response and the sender that feeds it (default [`SseConfig`]).
    pub fn event_stream() -> (Response, SseSender) {
        Response::event_stream_with(SseConfig::default())
    }

    /// A `text/event-stream` response with `config`, and the sender that feeds it.
    pub fn event_stream_with(config: SseConfig) -> (Response, SseSender) {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            notified: WakeFlag::new(true),
            waker: OnceLock::new(),
            config,
        });
        let response = Response::new(200)
            .with_content_type("text/event-stream")
            .with_header("Cache-Control", "no-cache")
            .with_body(Body {
                kind: BodyKind::Session(Box::new(Stream(shared.clone()))),
            });
        (response, SseSender { shared })
    }
}

/// An event stream being written: the engine-independent driver.
struct SseConn {
    _stream: Stream,
    shared: Arc<Shared>,
    encoder: Encoder,
    out: Vec<u8>,
    written: usize,
    last_write: Instant,
    /// The stream is over: write what is left (and the last chunk), then close.
    ending: bool,
    /// The minimum rate of output while the client does not take it all.
    rate: Option<MinRate>,
    sent: Meter,
    /// Bytes of the queue in `out`, still charged to the budget until written.
    charged: usize,
    /// On the budget's list of sessions it may drop.
    _enlisted: Enlisted,
}

impl SseConn {
    fn new(stream: Stream, start: Start) -> Self {
        let Start {
            waker,
            now,
            rate,
            encoder,
            budget,
            ..
        } = start;
        let _ = stream.0.waker.set(waker);
        {
            // What was queued before the stream started counts from now.
            let mut q = lock(&stream.0.queue);
            let mut held = budget.charge();
            held.grow(q.bytes.len());
            q.held = Some(held);
        }
        let me: std::sync::Weak<dyn Queued> = Arc::downgrade(&stream.0) as _;
        SseConn {
            _enlisted: budget.enlist(me),
            shared: stream.0.clone(),
            _stream: stream,
            encoder,
            out: Vec::new(),
            written: 0,
            last_write: now,
            ending: false,
            rate,
            sent: Meter::new(rate),
            charged: 0,
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        lock(&self.shared.queue)
    }

    /// Server shutdown: end the stream after what is queued.
    fn end_after_queue(&mut self) {
        let mut q = self.queue();
        if q.flow == Flow::Open {
            q.flow = Flow::Ending;
        }
    }

    /// Marks the sender closed (the connection is going away): what is queued is dropped and
    /// no longer counts.
    fn sender_closed(&mut self) {
        self.queue().close();
    }

    /// Writes what is queued (and a heartbeat when due), watches for the client going away.
    fn run(&mut self, sock: &mut dyn Duplex, now: Instant) -> Next {
        self.shared.notified.running();
        if lock(&self.shared.queue).flow == Flow::Shed {
            return self.closed();
        }
        // The client sends nothing on an event stream; end of input means it went away. What
        // it sends anyway is dropped, up to a share per turn.
        let mut scratch = [0u8; 512];
        let mut input_left = false;
        for reads in 0.. {
            if reads == INPUT_READS_PER_TURN {
                input_left = true;
                break;
            }
            match sock.read(&mut scratch) {
                Ok(0) => return self.closed(),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.closed(),
            }
        }
        loop {
            if self.written == self.out.len() {
                self.out.clear();
                self.written = 0;
                // Everything is out: the next backlog is measured afresh.
                self.sent = Meter::new(self.rate);
                let mut q = lock(&self.shared.queue);
                if let Some(held) = q.held.as_mut() {
                    held.shrink(std::mem::take(&mut self.charged));
                }
                q.out_since = None;
                if q.flow == Flow::Shed {
                    drop(q);
                    return self.closed();
                }
                if !q.bytes.is_empty() {
                    self.encoder.encode(&q.bytes, &mut self.out);
                    self.charged = q.bytes.len();
                    q.bytes.clear();
                    q.out_since = q.queued_since.take();
                }
                if q.flow != Flow::Open && !self.ending {
                    self.ending = true;
                    self.encoder.finish(&mut self.out);
                }
                drop(q);
                let beat = self.shared.config.heartbeat;
                if self.out.is_empty()
                    && beat
                        .and_then(|b| deadline::after(self.last_write, b))
                        .is_some_and(|d| now >= d)
                {
                    self.encoder.encode(b":\n\n", &mut self.out);
                }
            }
            if self.written == self.out.len() {
                // A transport that holds output (TLS) gets it out before the stream waits.
                match sock.flush() {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        return Next::Wait {
                            write: true,
                            deadline: self.sent.deadline(now),
                        };
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => return self.closed(),
                }
                if self.ending {
                    return self.closed();
                }
                let queue = &self.shared.queue;
                let pending = || {
                    let q = lock(queue);
                    !q.bytes.is_empty() || q.flow != Flow::Open
                };
                if self.shared.notified.settle(pending) {
                    continue;
                }
                if input_left {
                    return Next::Again;
                }
                let deadline = (self.shared.config.heartbeat)
                    .and_then(|b| deadline::after(self.last_write, b));
                return Next::Wait {
                    write: false,
                    deadline,
                };
            }
            match sock.write(&self.out[self.written..]) {
                Ok(0) => return self.closed(),
                Ok(n) => {
                    self.written += n;
                    self.last_write = now;
                    self.sent.moved(now, n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    // A client that takes the stream slower than the minimum rate is dropped.
                    let stalled = self.sent.deadline(now);
                    if stalled.is_some_and(|d| now >= d) {
                        return self.closed();
                    }
                    return Next::Wait {
                        write: true,
                        deadline: stalled,
                    };
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.closed(),
            }
        }
    }

    fn closed(&mut self) -> Next {
        self.sender_closed();
        Next::Close
    }
}

impl Takeover for Stream {
    fn start(self: Box<Self>, start: Start) -> Box<dyn Session> {
        Box::new(SseConn::new(*self, start))
    }
}

/// An event stream has no callbacks and reads nothing but the end of its client's input.
impl Session for SseConn {
    fn drive(&mut self, io: &mut Io<'_>, now: Instant, _: Callbacks) -> Next {
        self.run(io.stream, now)
    }
    /// The heartbeat is due: the next turn writes it.
    fn expire(&mut self, _: &mut Io<'_>, _: Instant) {}
    fn shutdown(&mut self, _: &mut Io<'_>, _: Instant) {
        self.end_after_queue()
    }
    fn finish(&mut self, _: Callbacks) -> Option<Box<dyn Work>> {
        self.sender_closed();
        None
    }
    fn take_work(&mut self) -> Option<Box<dyn Work>> {
        None
    }
    fn put_back(&mut self, _: Box<dyn Work>, _: &mut Io<'_>) {}
    fn keeps_input(&self) -> bool {
        false
    }

    fn kind(&self) -> crate::http::session::Kind {
        crate::http::session::Kind::EventStream
    }
}

/// Nothing under the queue's lock panics; a poisoned queue is still consistent.
fn lock(q: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    q.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::buf::ReadBuf;
    use crate::http::session::memory::{Pipe, Wakes, waker};

    /// An event stream started as an engine starts it after its head, chunked.
    fn started(
        config: SseConfig,
        wakes: &Arc<Wakes>,
        rate: Option<MinRate>,
    ) -> (Box<dyn Session>, SseSender) {
        started_in(config, wakes, rate, &crate::http::budget::Budget::default())
    }

    /// [`started`], its queue counted against `budget`.
    fn started_in(
        config: SseConfig,
        wakes: &Arc<Wakes>,
        rate: Option<MinRate>,
        budget: &crate::http::budget::Budget,
    ) -> (Box<dyn Session>, SseSender) {
        let (mut response, sender) = Response::event_stream_with(config);
        let BodyKind::Session(takeover) = response.take_body().kind else {
            panic!("an event stream is a session");
        };
        let session = takeover.start(Start {
            waker: waker(wakes),
            peer: None,
            now: Instant::now(),
            rate,
            encoder: Encoder::Chunked,
            budget: budget.clone(),
        });
        (session, sender)
    }

    fn drive(s: &mut dyn Session, pipe: &mut Pipe, now: Instant) -> Next {
        let mut buf = ReadBuf::new();
        pipe.io(&mut buf, |io| s.drive(io, now, Callbacks::Inline))
    }

    fn taken(pipe: &mut Pipe) -> String {
        String::from_utf8(std::mem::take(&mut pipe.output)).unwrap_or_default()
    }

    #[test]
    fn events_go_out_chunked_a_push_wakes_once_and_close_ends_the_body() {
        let wakes = Arc::new(Wakes::default());
        let (mut s, tx) = started(SseConfig::default().heartbeat(None), &wakes, None);
        let mut pipe = Pipe::new();
        let now = Instant::now();
        // Sent before the first turn: queued, no wake-up needed (the engine is about to run it).
        tx.send(Event::data("a")).expect("open");
        let idle = Next::Wait {
            write: false,
            deadline: None,
        };
        assert_eq!(drive(&mut *s, &mut pipe, now), idle);
        assert_eq!(taken(&mut pipe), "9\r\ndata: a\n\n\r\n");
        assert_eq!(wakes.count(), 0);
        // While it waits, the first push wakes the engine and the next needs no wake-up.
        tx.send(Event::data("b")).expect("the stream is open");
        tx.comment("c").expect("the stream is open");
        assert_eq!(wakes.count(), 1);
        assert_eq!(drive(&mut *s, &mut pipe, now), idle);
        // What was queued between two turns goes out as one chunk.
        assert_eq!(taken(&mut pipe), "E\r\ndata: b\n\n: c\n\n\r\n");
        tx.close();
        assert_eq!(tx.send(Event::data("late")), Err(SendError::Closed));
        assert_eq!(drive(&mut *s, &mut pipe, now), Next::Close);
        assert_eq!(taken(&mut pipe), "0\r\n\r\n");
        assert!(s.finish(Callbacks::Inline).is_none());
    }

    #[test]
    fn the_client_going_away_closes_the_stream_for_its_senders() {
        let wakes = Arc::new(Wakes::default());
        let (mut s, tx) = started(SseConfig::default(), &wakes, None);
        let mut pipe = Pipe::new();
        pipe.input_closed = true;
        assert_eq!(drive(&mut *s, &mut pipe, Instant::now()), Next::Close);
        assert_eq!(tx.send(Event::data("x")), Err(SendError::Closed));
        assert!(tx.is_closed());
    }

    #[test]
    fn a_quiet_stream_gets_a_heartbeat_when_its_deadline_passes() {
        let wakes = Arc::new(Wakes::default());
        let beat = Duration::from_secs(15);
        let (mut s, _tx) = started(SseConfig::default().heartbeat(Some(beat)), &wakes, None);
        let mut pipe = Pipe::new();
        let t0 = Instant::now();
        let Next::Wait {
            write: false,
            deadline: Some(due),
        } = drive(&mut *s, &mut pipe, t0)
        else {
            panic!("a quiet stream waits for its heartbeat");
        };
        assert!(due > t0 && due <= t0 + beat, "{due:?}");
        assert_eq!(taken(&mut pipe), "");
        let later = due + Duration::from_millis(1);
        let Next::Wait {
            deadline: Some(next),
            ..
        } = drive(&mut *s, &mut pipe, later)
        else {
            panic!("the stream goes on");
        };
        assert_eq!(taken(&mut pipe), "3\r\n:\n\n\r\n");
        assert_eq!(next, later + beat);
    }

    #[test]
    fn shutdown_ends_after_what_is_queued() {
        let wakes = Arc::new(Wakes::default());
        let (mut s, tx) = started(SseConfig::default().heartbeat(None), &wakes, None);
        let mut pipe = Pipe::new();
        tx.send(Event::data("last")).expect("the stream is open");
        let mut buf = ReadBuf::new();
        pipe.io(&mut buf, |io| s.shutdown(io, Instant::now()));
        assert_eq!(drive(&mut *s, &mut pipe, Instant::now()), Next::Close);
        assert_eq!(taken(&mut pipe), "C\r\ndata: last\n\n\r\n0\r\n\r\n");
    }

    #[test]
    fn a_client_that_takes_nothing_is_dropped_at_the_minimum_rate() {
        let wakes = Arc::new(Wakes::default());
        let rate = MinRate::new(240, Duration::from_secs(5));
        let (mut s, tx) = started(SseConfig::default().heartbeat(None), &wakes, Some(rate));
        let mut pipe = Pipe::new();
        pipe.room = 0;
        tx.send(Event::data("stuck")).expect("the stream is open");
        let t0 = Instant::now();
        let Next::Wait {
            write: true,
            deadline: Some(cut),
        } = drive(&mut *s, &mut pipe, t0)
        else {
            panic!("blocked output waits to write, with a deadline");
        };
        assert_eq!(cut, t0 + Duration::from_secs(5));
        assert_eq!(drive(&mut *s, &mut pipe, cut), Next::Close);
        assert_eq!(tx.send(Event::data("x")), Err(SendError::Closed));
    }

    #[test]
    fn event_wire_format() {
        let cases = [
            (Event::data("hi"), "data: hi\n\n"),
            (
                Event::data("a\nb\r\nc\rd").id("7").event("tick").retry(500),
                "id: 7\nevent: tick\nretry: 500\ndata: a\ndata: b\ndata: c\ndata: d\n\n",
            ),
            (Event::data("").id("x\ny"), "id: xy\ndata: \n\n"),
        ];
        for (event, want) in cases {
            let mut out = Vec::new();
            event.encode(&mut out);
            assert_eq!(String::from_utf8_lossy(&out), want);
        }
    }

    #[test]
    fn past_the_budget_the_stream_with_the_oldest_unsent_events_goes() {
        let wakes = Arc::new(Wakes::default());
        let budget = crate::http::budget::Budget::new(300);
        let (_old_session, old) = started_in(SseConfig::default(), &wakes, None, &budget);
        let (_young_session, young) = started_in(SseConfig::default(), &wakes, None, &budget);
        assert_eq!(old.comment(&"o".repeat(190)), Ok(()));
        assert_eq!(young.comment(&"y".repeat(40)), Ok(()));
        assert_eq!(young.comment(&"y".repeat(90)), Ok(()));
        assert!(old.is_closed(), "the oldest unsent events went");
        assert!(!young.is_closed());
        assert_eq!(budget.refusals(), (0, 1));
        assert_eq!(budget.held(), 40 + 4 + 90 + 4);
    }

    #[test]
    fn what_a_client_sends_is_dropped_a_share_per_turn() {
        let wakes = Arc::new(Wakes::default());
        let (mut s, _events) = started(SseConfig::default(), &wakes, None);
        let mut pipe = Pipe::new();
        pipe.input
            .extend(vec![b'x'; INPUT_READS_PER_TURN * 512 + 1]);
        let now = Instant::now();
        assert!(matches!(drive(&mut *s, &mut pipe, now), Next::Again));
        assert_eq!(pipe.input.len(), 1);
        assert!(matches!(
            drive(&mut *s, &mut pipe, now),
            Next::Wait { write: false, .. }
        ));
        assert!(pipe.input.is_empty());
    }
}
