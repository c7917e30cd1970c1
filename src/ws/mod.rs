//! WebSocket (RFC 6455) on both engines, and generic connection upgrades.
//!
//! A handler accepts an upgrade by returning [`WsUpgrade::accept`]'s response; the engine sends
//! `101 Switching Protocols` and from then on drives the connection's frames with tungstenite's
//! `WebSocketContext`, calling one [`WsHandler`] per connection:
//!
//! - on the thread-pool [`server`](crate::server) the callbacks run as blocking code on the
//!   pool's workers: between messages the WebSocket is parked in the engine's poller like an idle
//!   keep-alive connection, so an open WebSocket holds no thread (a callback that blocks holds
//!   its worker while it does). With [`Parking::Off`](crate::server::Parking::Off) or
//!   [`Parking::Http`](crate::server::Parking::Http) each WebSocket has a thread of its own
//!   instead;
//! - on the [`reactor`](crate::reactor) they run on the event loop (inline dispatch) or on the
//!   worker pool (pool dispatch), and an open WebSocket costs no thread.
//!
//! A [`WsSender`] pushes messages to its connection from any thread (broadcast, chat): a push
//! wakes the engine at once, even while it waits for the peer.
//!
//! Pings are answered, close frames echoed, text checked to be UTF-8, and message and frame
//! sizes bounded ([`WsConfig`]); a protocol error closes with 1002, invalid UTF-8 with 1007, an
//! oversized message with 1009 and a panicking callback with 1011. Server shutdown closes every
//! WebSocket with 1001.
//!
//! ```
//! use twinhttp::{Request, Response};
//! use twinhttp::ws::{RequestExt, WsSender, WsMessage};
//!
//! fn app(req: &mut Request<'_>) -> Response {
//!     match req.path() {
//!         "/echo" => match req.upgrade_websocket() {
//!             Ok(upgrade) => upgrade.accept(|ws: &WsSender, msg: WsMessage| {
//!                 let _ = ws.send(msg);
//!             }),
//!             Err(refusal) => refusal,
//!         },
//!         _ => Response::new(404),
//!     }
//! }
//! # let _ = app;
//! ```

mod calls;
mod conn;
mod fragments;
mod frames;
pub(crate) mod handshake;
mod held;
mod io;
mod quiet;
mod sender;
mod upgrade;

use std::time::Duration;

pub use tungstenite;
pub use tungstenite::protocol::CloseFrame;
pub use tungstenite::protocol::frame::coding::CloseCode;
pub use tungstenite::{Bytes, Utf8Bytes};

pub(crate) use conn::WsConn;
pub(crate) use io::WS_READ_BUF;
pub use sender::{SendError, WsSender};
pub use upgrade::{RequestExt, WsUpgrade};

/// A data message: text (valid UTF-8) or binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WsMessage {
    /// A text message.
    Text(Utf8Bytes),
    /// A binary message.
    Binary(Bytes),
}

impl WsMessage {
    /// The payload's length in bytes.
    pub fn len(&self) -> usize {
        match self {
            WsMessage::Text(t) => t.len(),
            WsMessage::Binary(b) => b.len(),
        }
    }

    /// True for an empty payload.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text, for a text message.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            WsMessage::Text(t) => Some(t.as_str()),
            WsMessage::Binary(_) => None,
        }
    }

    /// The payload bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            WsMessage::Text(t) => t.as_bytes(),
            WsMessage::Binary(b) => b,
        }
    }
}

impl From<&str> for WsMessage {
    fn from(s: &str) -> Self {
        WsMessage::Text(s.into())
    }
}
impl From<String> for WsMessage {
    fn from(s: String) -> Self {
        WsMessage::Text(s.into())
    }
}
impl From<Vec<u8>> for WsMessage {
    fn from(b: Vec<u8>) -> Self {
        WsMessage::Binary(b.into())
    }
}
impl From<&[u8]> for WsMessage {
    fn from(b: &[u8]) -> Self {
        WsMessage::Binary(Bytes::copy_from_slice(b))
    }
}
impl From<WsMessage> for tungstenite::Message {
    fn from(m: WsMessage) -> Self {
        match m {
            WsMessage::Text(t) => tungstenite::Message::Text(t),
            WsMessage::Binary(b) => tungstenite::Message::Binary(b),
        }
    }
}

/// One WebSocket connection's callbacks. Runs unchanged on both engines.
///
/// Callbacks get the connection's [`WsSender`]; messages sent from inside a callback are
/// written in order, batched with the other replies of the same wake-up. A callback that
/// panics closes its connection with 1011 (internal error); the engine lives on.
///
/// Callbacks may block where an HTTP [`Handler`](crate::Handler) may: on the thread-pool server
/// and under the reactor's pool dispatch they run on a worker, which a blocking callback holds
/// while it blocks (as a blocking HTTP handler does); under inline dispatch they run on the
/// event loop and must not block.
///
/// Any `FnMut(&WsSender, WsMessage)` closure is a handler that only cares about messages.
pub trait WsHandler: Send + 'static {
    /// The handshake completed. Keep a clone of `ws` to push from other threads.
    fn on_open(&mut self, ws: &WsSender) {
        let _ = ws;
    }

    /// A complete text or binary message arrived.
    fn on_message(&mut self, ws: &WsSender, msg: WsMessage);

    /// A ping arrived; the pong has already been queued.
    fn on_ping(&mut self, ws: &WsSender, payload: &[u8]) {
        let _ = (ws, payload);
    }

    /// A pong arrived (an answer to [`WsSender::ping`] or a server idle ping, or unsolicited).
    fn on_pong(&mut self, ws: &WsSender, payload: &[u8]) {
        let _ = (ws, payload);
    }

    /// The connection closed: `Some(frame)` with the peer's close frame (already echoed), or
    /// the frame the server closed with (protocol error, shutdown, idle timeout); `None` when
    /// the connection dropped without a closing handshake. Called once, last.
    fn on_close(&mut self, frame: Option<CloseFrame>) {
        let _ = frame;
    }
}

/// A WebSocket handler of a closure that only cares about messages, naming the closure's
/// argument types so that it needs no annotation:
///
/// ```
/// use twinhttp::{Request, Response, ws::{RequestExt, on_message}};
///
/// fn echo(req: &mut Request<'_>) -> Response {
///     match req.upgrade_websocket() {
///         Ok(upgrade) => upgrade.accept(on_message(|ws, msg| {
///             let _ = ws.send(msg);
///         })),
///         Err(refusal) => refusal,
///     }
/// }
/// ```
pub fn on_message<F>(f: F) -> F
where
    F: FnMut(&WsSender, WsMessage) + Send + 'static,
{
    f
}

impl<F> WsHandler for F
where
    F: FnMut(&WsSender, WsMessage) + Send + 'static,
{
    fn on_message(&mut self, ws: &WsSender, msg: WsMessage) {
        self(ws, msg)
    }
}

/// Settings of an accepted WebSocket.
///
/// The defaults suit many mostly idle connections: a 1 KiB frame-reading buffer (the engine
/// reads from the socket through its own pooled buffer, so this only bounds the copy per call),
/// tungstenite's 64 MiB message and 16 MiB frame limits, a 16 MiB send queue per connection,
/// no idle timeout, a 5 s closing handshake.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct WsConfig {
    /// Largest message accepted (all frames of it); larger closes with 1009.
    pub max_message_size: usize,
    /// Largest frame payload accepted; larger closes with 1009.
    pub max_frame_size: usize,
    /// tungstenite's read buffer: allocated per connection for as long as it lives. At most
    /// [`WsConfig::MAX_READ_BUFFER`]: a larger value is taken as that (the engine reads the
    /// socket through its own buffer, so a larger one would only cost memory).
    pub read_buffer_size: usize,
    /// Bytes sent by [`WsSender`]s that the peer has not taken yet (queued, or buffered for the
    /// socket) beyond which [`WsSender::send`] fails with [`SendError::Full`]: a slow reader costs
    /// at most this.
    pub max_send_queue: usize,
    /// Send a ping when nothing was received for this long (`None`: never).
    pub ping_interval: Option<Duration>,
    /// Close with 1001 when nothing was received for this long (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// How long to wait for the peer's answer to a close frame the server sent.
    pub close_timeout: Duration,
}

impl Default for WsConfig {
    fn default() -> Self {
        WsConfig {
            max_message_size: 64 << 20,
            max_frame_size: 16 << 20,
            read_buffer_size: 1024,
            max_send_queue: 16 << 20,
            ping_interval: None,
            idle_timeout: None,
            close_timeout: Duration::from_secs(5),
        }
    }
}

impl WsConfig {
    /// The largest [`WsConfig::read_buffer_size`] used: 1 MiB.
    pub const MAX_READ_BUFFER: usize = 1 << 20;

    /// Sets [`WsConfig::max_message_size`].
    pub fn max_message_size(mut self, n: usize) -> Self {
        self.max_message_size = n;
        self
    }
    /// Sets [`WsConfig::max_frame_size`].
    pub fn max_frame_size(mut self, n: usize) -> Self {
        self.max_frame_size = n;
        self
    }
    /// Sets [`WsConfig::read_buffer_size`].
    pub fn read_buffer_size(mut self, n: usize) -> Self {
        self.read_buffer_size = n;
        self
    }
    /// Sets [`WsConfig::max_send_queue`].
    pub fn max_send_queue(mut self, n: usize) -> Self {
        self.max_send_queue = n;
        self
    }
    /// Sets [`WsConfig::ping_interval`].
    pub fn ping_interval(mut self, every: Option<Duration>) -> Self {
        self.ping_interval = every;
        self
    }
    /// Sets [`WsConfig::idle_timeout`].
    pub fn idle_timeout(mut self, after: Option<Duration>) -> Self {
        self.idle_timeout = after;
        self
    }
    /// Sets [`WsConfig::close_timeout`].
    pub fn close_timeout(mut self, t: Duration) -> Self {
        self.close_timeout = t;
        self
    }

    pub(crate) fn tungstenite(&self) -> tungstenite::protocol::WebSocketConfig {
        tungstenite::protocol::WebSocketConfig::default()
            .read_buffer_size(self.read_buffer_size.min(Self::MAX_READ_BUFFER))
            // Frames are written when the engine flushes, once per batch of replies.
            .write_buffer_size(usize::MAX - 1)
            .max_write_buffer_size(usize::MAX)
            .max_message_size(Some(self.max_message_size))
            .max_frame_size(Some(self.max_frame_size))
    }
}
