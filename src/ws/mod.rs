//! WebSocket (RFC 6455) on both engines, and generic connection upgrades.
//!
//! A handler accepts an upgrade by returning [`WsUpgrade::accept`]'s response; the engine sends
//! `101 Switching Protocols` and from then on drives the connection's frames with tungstenite's
//! `WebSocketContext`, calling one [`WsHandler`] per connection:
//!
//! - on the thread-pool [`server`](crate::server) the callbacks run as blocking code on the
//!   pool's workers: between messages the WebSocket is parked in the engine's poller like an idle
//!   keep-alive connection, so an open WebSocket holds no thread (a callback that blocks holds
//!   its worker while it does). With [`park_idle(false)`](crate::server::Builder::park_idle)
//!   each WebSocket has a thread of its own instead;
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
//! use twinhttp::ws::{WsSender, WsMessage};
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

mod conn;
pub(crate) mod handshake;

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use tungstenite;
pub use tungstenite::protocol::CloseFrame;
pub use tungstenite::protocol::frame::coding::CloseCode;
pub use tungstenite::{Bytes, Utf8Bytes};

pub(crate) use conn::{Calls, WS_READ_BUF, WsConn, WsIo, WsNext};

use crate::Response;
use crate::http::response::{Body, BodyKind};

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
/// use twinhttp::{Request, Response, ws::on_message};
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
    /// tungstenite's read buffer: allocated per connection for as long as it lives.
    pub read_buffer_size: usize,
    /// Bytes queued by [`WsSender`]s and not yet taken by the engine beyond which
    /// [`WsSender::send`] fails with [`SendError::Full`] (a slow reader must not exhaust memory).
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
            .read_buffer_size(self.read_buffer_size)
            // Frames are written when the engine flushes, once per batch of replies.
            .write_buffer_size(usize::MAX - 1)
            .max_write_buffer_size(usize::MAX)
            .max_message_size(Some(self.max_message_size))
            .max_frame_size(Some(self.max_frame_size))
    }
}

/// Why a [`WsSender`] could not queue a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The connection is closed or closing: nothing more can be sent.
    Closed,
    /// The send queue holds [`WsConfig::max_send_queue`] bytes the peer has not taken yet.
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

pub(crate) use crate::engine::Wake;
use crate::engine::WakeFlag;

/// An item queued by a sender.
pub(crate) enum Out {
    Msg(tungstenite::Message),
    Close(Option<CloseFrame>),
}

#[derive(Default)]
pub(crate) struct Queue {
    pub(crate) items: VecDeque<Out>,
    bytes: usize,
    closed: bool,
}

struct SenderShared {
    queue: Mutex<Queue>,
    /// Set while the engine is running this connection or a wake-up is pending: a push then
    /// needs no wake-up of its own.
    notified: WakeFlag,
    waker: Box<dyn Wake>,
    limit: usize,
    peer: Option<SocketAddr>,
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
    pub(crate) fn new(waker: Box<dyn Wake>, limit: usize, peer: Option<SocketAddr>) -> Self {
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

    /// The peer's address.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.shared.peer
    }

    /// Takes everything queued (the engine calls this while it runs the connection).
    pub(crate) fn take(&self, into: &mut VecDeque<Out>) {
        let mut q = self.queue();
        q.bytes = 0;
        into.append(&mut q.items);
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
    }
}

/// What an accepted upgrade becomes once the 101 is out.
pub(crate) enum Upgrade {
    /// The configuration is boxed so that every `Response` stays small (it is moved by value
    /// from handler to writer on every request).
    WebSocket(Box<dyn WsHandler>, Box<WsConfig>),
    Raw(Box<dyn FnOnce(Upgraded) + Send>),
}

impl Response {
    /// A generic protocol switch: `101 Switching Protocols` with `Upgrade: protocol`, after which
    /// `then` gets the connection ([`Upgraded`]) on a thread of its own, on either engine. The
    /// request must carry `Connection: upgrade` (else 426 is sent instead). Its status is the
    /// `101` it sends:
    ///
    /// ```
    /// let r = twinhttp::Response::upgrade("echo", |_conn| {});
    /// assert_eq!(r.status(), 101);
    /// ```
    pub fn upgrade(protocol: &str, then: impl FnOnce(Upgraded) + Send + 'static) -> Response {
        Response::new(101)
            .with_header("Upgrade", protocol.to_owned())
            .with_body(Body {
                kind: BodyKind::Upgrade(Upgrade::Raw(Box::new(then))),
            })
    }
}

/// A connection handed over after `101 Switching Protocols` (see [`Response::upgrade`]): a
/// blocking socket, with any bytes the client sent after the upgrade request read first.
#[derive(Debug)]
pub struct Upgraded {
    stream: TcpStream,
    leftover: Vec<u8>,
    pos: usize,
}

impl Upgraded {
    pub(crate) fn new(stream: TcpStream, leftover: Vec<u8>) -> io::Result<Upgraded> {
        stream.set_nonblocking(false)?;
        Ok(Upgraded {
            stream,
            leftover,
            pos: 0,
        })
    }

    /// The socket and the bytes already read from it but not yet consumed.
    pub fn into_parts(self) -> (TcpStream, Vec<u8>) {
        let mut rest = self.leftover;
        rest.drain(..self.pos);
        (self.stream, rest)
    }

    /// The socket (reading from it directly skips any buffered bytes).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }
}

impl Read for Upgraded {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos < self.leftover.len() {
            let n = buf.len().min(self.leftover.len() - self.pos);
            buf[..n].copy_from_slice(&self.leftover[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        self.stream.read(buf)
    }
}

impl Write for Upgraded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// A valid WebSocket upgrade request, to accept (or refuse) — from
/// [`Request::upgrade_websocket`](crate::Request::upgrade_websocket).
#[derive(Debug)]
pub struct WsUpgrade {
    offer: handshake::Offer,
    protocol: Option<String>,
    config: WsConfig,
}

impl WsUpgrade {
    pub(crate) fn new(offer: handshake::Offer) -> Self {
        WsUpgrade {
            offer,
            protocol: None,
            config: WsConfig::default(),
        }
    }

    /// The subprotocols the client offers (`Sec-WebSocket-Protocol`), in its order.
    pub fn protocols(&self) -> impl Iterator<Item = &str> {
        self.offer.protocols.iter().map(String::as_str)
    }

    /// The `Origin` field, if sent (browsers always send it).
    pub fn origin(&self) -> Option<&str> {
        self.offer.origin.as_deref()
    }

    /// The origin check hook: `allow` sees the `Origin` field; a refusal answers 403.
    // The refusal is the response to send as is; it is the rare path.
    #[allow(clippy::result_large_err)]
    pub fn check_origin(self, allow: impl FnOnce(Option<&str>) -> bool) -> Result<Self, Response> {
        if allow(self.origin()) {
            Ok(self)
        } else {
            Err(Response::new(403).with_body("origin not allowed"))
        }
    }

    /// Selects the first of `supported` (the server's order of preference) that the client
    /// offers, if any (sent back as `Sec-WebSocket-Protocol`). Without a match no subprotocol is
    /// selected, as RFC 6455 allows.
    pub fn select_protocol(mut self, supported: &[&str]) -> Self {
        self.protocol = supported
            .iter()
            .find(|s| self.offer.protocols.iter().any(|p| p == *s))
            .map(|s| (*s).to_owned());
        self
    }

    /// The selected subprotocol.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// Sets the connection's [`WsConfig`].
    pub fn with_config(mut self, config: WsConfig) -> Self {
        self.config = config;
        self
    }

    fn switching(&self, body: Body) -> Response {
        let mut r = Response::new(101)
            .with_header("Upgrade", "websocket")
            .with_header("Sec-WebSocket-Accept", self.offer.accept.clone());
        if let Some(p) = &self.protocol {
            r = r.with_header("Sec-WebSocket-Protocol", p.clone());
        }
        r.with_body(body)
    }

    /// Accepts: the response (`101`) that switches the connection to WebSocket with `handler`.
    pub fn accept(self, handler: impl WsHandler) -> Response {
        self.switching(Body {
            kind: BodyKind::Upgrade(Upgrade::WebSocket(Box::new(handler), Box::new(self.config))),
        })
    }

    /// Accepts, handing a plain blocking [`tungstenite::WebSocket`] to `then` on a thread of its
    /// own, for users who want their own read loop.
    pub fn accept_blocking(
        self,
        then: impl FnOnce(tungstenite::WebSocket<TcpStream>) + Send + 'static,
    ) -> Response {
        let config = self.config.tungstenite().write_buffer_size(0);
        let raw = move |up: Upgraded| {
            let (stream, rest) = up.into_parts();
            let ws = tungstenite::WebSocket::from_partially_read(
                stream,
                rest,
                tungstenite::protocol::Role::Server,
                Some(config),
            );
            then(ws)
        };
        self.switching(Body {
            kind: BodyKind::Upgrade(Upgrade::Raw(Box::new(raw))),
        })
    }
}
