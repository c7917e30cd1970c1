//! Server-sent events (`text/event-stream`) on both engines.
//!
//! [`Response::event_stream`] returns the response and an [`SseSender`]; the handler hands the
//! sender to whatever produces events (a thread, a broadcaster) and returns the response. The
//! engine then writes each event as it is sent, a heartbeat comment when the stream has been
//! quiet for [`SseConfig::heartbeat`], and ends the stream when the client goes away (the sender
//! reports [`SendError::Closed`]), when [`SseSender::close`] is called or the last clone of the
//! sender is dropped (after what is queued), or at server shutdown (after what is queued, or
//! closed as it stands at [`SseConfig::shutdown_timeout`]).
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

mod conn;
mod sender;

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::Response;
use crate::http::response::{Body, BodyKind, KnownType};
use crate::http::session::WakeFlag;
pub use sender::SseSender;
use sender::{Queue, Senders, Shared, Stream};

/// Why an [`SseSender`] could not queue an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The stream ended: the client went away, [`SseSender::close`] was called, or the server
    /// shut down. Nothing more can be sent.
    Closed,
    /// The client has not taken [`SseConfig::max_queue`] bytes or more yet.
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
    /// Bytes of events the client has not taken (queued, or being written) at which
    /// [`SseSender::send`] fails with [`SendError::Full`]. An event is never cut: the one that
    /// reaches the bound is queued whole. Default 1 MiB.
    pub max_queue: usize,
    /// At server shutdown the stream sends what is queued and ends; one whose client has not
    /// taken it all this long after the shutdown began is closed as it stands, so a client
    /// reading slowly (above the minimum rate) does not hold the shutdown past its grace.
    /// Default 5 s (as [`WsConfig::close_timeout`](crate::ws::WsConfig::close_timeout)).
    pub shutdown_timeout: Duration,
}

impl Default for SseConfig {
    fn default() -> Self {
        SseConfig {
            heartbeat: Some(Duration::from_secs(15)),
            max_queue: 1 << 20,
            shutdown_timeout: Duration::from_secs(5),
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
    /// Sets [`SseConfig::shutdown_timeout`].
    pub fn shutdown_timeout(mut self, t: Duration) -> Self {
        self.shutdown_timeout = t;
        self
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
            .with_known_content_type(KnownType::EVENT_STREAM)
            .with_header("Cache-Control", "no-cache")
            .with_body(Body {
                kind: BodyKind::Session(Box::new(Stream(shared.clone()))),
            });
        (
            response,
            SseSender {
                senders: Arc::new(Senders(shared)),
            },
        )
    }
}

#[cfg(test)]
mod tests;
