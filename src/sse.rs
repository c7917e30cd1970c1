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
        lock(&self.0.queue).flow = Flow::Closed;
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
            f(&mut q);
        }
        if self.shared.notified.should_wake() {
            if let Some(w) = self.shared.waker.get() {
                w.wake();
            }
        }
        Ok(())
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
}

impl SseConn {
    fn new(
        stream: Stream,
        encoder: Encoder,
        waker: Box<dyn Wake>,
        now: Instant,
        rate: Option<MinRate>,
    ) -> Self {
        let _ = stream.0.waker.set(waker);
        SseConn {
            shared: stream.0.clone(),
            _stream: stream,
            encoder,
            out: Vec::new(),
            written: 0,
            last_write: now,
            ending: false,
            rate,
            sent: Meter::new(rate),
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

    /// Marks the sender closed (the connection is going away).
    fn sender_closed(&mut self) {
        self.queue().flow = Flow::Closed;
    }

    /// Writes what is queued (and a heartbeat when due), watches for the client going away.
    fn run(&mut self, sock: &mut dyn Duplex, now: Instant) -> Next {
        self.shared.notified.running();
        // The client sends nothing on an event stream; end of input means it went away.
        let mut scratch = [0u8; 512];
        loop {
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
                if !q.bytes.is_empty() {
                    self.encoder.encode(&q.bytes, &mut self.out);
                    q.bytes.clear();
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
        let Start {
            waker,
            now,
            rate,
            encoder,
            ..
        } = start;
        Box::new(SseConn::new(*self, encoder, waker, now, rate))
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
}
