//! What the connection driver is given: the stream ([`Io`]), the engine's settings ([`Rules`]),
//! where its counts go ([`Tally`]), and one turn's context ([`Cx`]).

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::MinRate;
use crate::http::budget::Budget;
use crate::http::date::DateLine;
use crate::http::origin::Relay;
use crate::http::panics::Panics;
use crate::http::pools::Pools;
use crate::http::refusal::Refusal;
use crate::http::request_head::RequestHead;
use crate::http::stream::Streaming;
use crate::limits::Limits;
use crate::transport::Transport;

/// Requests answered per turn before other connections get theirs.
pub(super) const REQUEST_BUDGET: u32 = 64;

/// The stream as the driver uses it: non-blocking reads and writes (`WouldBlock` when nothing
/// moves now), and the few things a transport must do on the driver's word.
pub(crate) trait Io: Read + Write {
    /// Shuts the write side (a lingering close begins).
    fn shutdown_write(&mut self);
    /// The exchange was cut short: do not end it cleanly where the transport can tell.
    fn abort(&mut self);
    /// The transport holds output it must send before it can read on (a TLS handshake flight).
    fn wants_write(&self) -> bool;
    /// The transport holds input the socket no longer signals (decrypted TLS records).
    fn buffered_input(&self) -> bool;
    /// What the socket holds that the peer has not acknowledged, where the transport knows
    /// ([`Transport::unacknowledged`]).
    fn unacknowledged(&self) -> Option<usize>;
    /// What the transport wrote to its socket since last asked, where that is not what its
    /// writes returned ([`Transport::take_sent`]).
    fn take_sent(&mut self) -> Option<usize>;
    /// Sends up to `len` bytes of `file` (from its position) without copying them through the
    /// driver, where the transport can (`sendfile(2)`); `None` where it cannot.
    fn send_file(&mut self, file: &std::fs::File, len: usize) -> Option<std::io::Result<usize>>;
    /// The client a PROXY protocol header at the start of the stream named, once read.
    fn proxied_source(&self) -> Option<std::net::SocketAddr>;
    /// Reads once: `Read::read`, as a direct `recv(2)` where the transport is a plain socket.
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.read(buf)
    }
    /// Writes once: `Write::write`, as a direct `send(2)` where the transport is a plain socket.
    fn send(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write(buf)
    }
}

impl<T: Transport + ?Sized> Io for T {
    fn shutdown_write(&mut self) {
        let _ = Transport::shutdown_write(self);
    }
    fn abort(&mut self) {
        Transport::abort(self)
    }
    fn wants_write(&self) -> bool {
        Transport::wants_write(self)
    }
    fn buffered_input(&self) -> bool {
        Transport::buffered_input(self)
    }
    fn unacknowledged(&self) -> Option<usize> {
        Transport::unacknowledged(self)
    }
    fn take_sent(&mut self) -> Option<usize> {
        Transport::take_sent(self)
    }
    fn send_file(&mut self, file: &std::fs::File, len: usize) -> Option<std::io::Result<usize>> {
        crate::transport::send_file(self, file, len)
    }
    fn proxied_source(&self) -> Option<std::net::SocketAddr> {
        Transport::proxied_source(self)
    }
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(fd) = Transport::direct_fd(self) {
            return crate::transport::recv(fd, buf);
        }
        self.read(buf)
    }
    fn send(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Only where `MSG_NOSIGNAL` guards the write (see `Transport::direct_fd`).
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(fd) = Transport::direct_fd(self) {
            return crate::transport::send(fd, buf);
        }
        self.write(buf)
    }
}

/// Which requests stream their bodies to their handlers: the handler's answer
/// ([`Handler::streams_body`](crate::Handler::streams_body)) to a head, asked by engines that
/// can wait on a socket for a handler (the thread-pool server).
#[derive(Clone)]
pub(crate) struct Streams(pub(crate) std::sync::Arc<dyn Fn(&RequestHead) -> bool + Send + Sync>);

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Streams")
    }
}

/// The engine's settings the driver follows.
#[derive(Clone, Debug)]
pub(crate) struct Rules {
    pub(crate) limits: Limits,
    /// A request head is due in full this long after its first byte (or the accept).
    pub(crate) header_read: Duration,
    /// A connection with nothing of a next request may stay this long.
    pub(crate) idle: Duration,
    pub(crate) body_rate: Option<MinRate>,
    pub(crate) response_rate: Option<MinRate>,
    /// Requests whose bodies stream to their handlers; `None`: every body is read whole first.
    pub(crate) streams: Option<Streams>,
    /// How a request's client and scheme are found behind proxies.
    pub(crate) relay: Relay,
}

/// Where the driver's counts go: the engine's live counters.
pub(crate) trait Tally {
    /// The engine's memory budget.
    fn budget(&self) -> &Budget;
    /// A request head was read in full.
    fn request(&self, head: &RequestHead);
    /// A request or connection was refused, for this reason.
    fn refused(&self, why: Refusal);
    /// Where handler code the driver runs or drops (a streamed body) counts its panics.
    fn panics(&self) -> &Panics;
}

/// What one step of the driver is given: the rules, the engine's buffers and counters, the
/// time, whether the server is shutting down, and the turn's budget.
pub(crate) struct Cx<'a> {
    pub(crate) rules: &'a Rules,
    pub(crate) pools: &'a mut Pools,
    pub(crate) tally: &'a dyn Tally,
    pub(crate) now: Instant,
    /// The engine thread's `Date` line.
    pub(crate) date: &'a mut DateLine,
    /// Shutdown: the response under way is the last.
    pub(crate) closing: bool,
    /// How the engine waits for the stream.
    pub(super) readiness: Readiness,
    /// Whether the engine reported the stream readable for this turn.
    pub(super) began: Began,
    /// Which streamed bodies' pieces are produced here; the others get [`Action::Produce`].
    pub(super) produce: Producers,
    pub(super) turn: Turn,
}

/// How the engine learns that the stream is readable again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Readiness {
    /// Level-triggered: whatever is left in the socket is reported at the next wait, so a short
    /// read may end reading.
    Level,
    /// Edge-triggered: only what arrives later is reported, so reading goes on until
    /// `WouldBlock`. (The thread-pool engine's.)
    #[cfg_attr(
        not(any(feature = "server", feature = "bench-internals")),
        allow(dead_code)
    )]
    Edge,
}

/// What began a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Began {
    /// The engine reported the stream readable, or cannot tell: read before waiting.
    Readable,
    /// Something else (a pool's answer, a turn after a yield, a writable event, a deadline):
    /// with level-triggered waits, a stream the last wait for input found drained is waited on,
    /// not read again (except at shutdown).
    Otherwise,
}

/// What the driver knows of its stream's unread input, from one turn to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Input {
    /// Bytes may be waiting: read before waiting for more.
    Unknown,
    /// The turn that last waited for input found the stream drained (a short read, or
    /// `WouldBlock`), under level-triggered waits. A turn the engine began for something else
    /// than readability (a pool's answer) waits instead of reading again: any byte that came
    /// since is reported by the wait. (The reactor's pool dispatch read once more per request
    /// without this.)
    Drained,
}

/// Which streamed bodies' pieces a turn produces itself, by the thread it runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Producers {
    /// Every one: handler code may run here (a worker).
    All,
    /// A file's, which the core reads itself (over TLS, where it cannot go straight from the
    /// file), not a handler's (a reader's, an iterator's): the reactor's loop, which lends
    /// those to its pool or produces them timed.
    Files,
    /// None: the thread-pool engine's parker, one thread for every parked connection, hands
    /// them all to a worker.
    None,
}

impl Producers {
    /// Whether this turn produces `st`'s next piece itself.
    pub(super) fn here(self, st: &Streaming) -> bool {
        match self {
            Producers::All => true,
            Producers::Files => !st.runs_handler_code(),
            Producers::None => false,
        }
    }
}

/// What is left of a connection's turn (one wake-up of the engine for it).
pub(super) struct Turn {
    /// Requests it may still answer.
    pub(super) budget: u32,
    /// A read came back shorter than the space offered: the stream is drained, and the next
    /// read would only say `WouldBlock`. (Waiting instead is safe where the engine's wait is
    /// level-triggered: what is left in the socket, the end of input too, is reported again.)
    pub(super) drained: bool,
    /// Body bytes sent in this turn: a file's straight from its file, a streamed body's
    /// pieces.
    pub(super) body_bytes: usize,
}

impl Turn {
    /// `n` more body bytes went out in this turn: true when the turn has sent its share.
    pub(super) fn sent_body(&mut self, n: usize) -> bool {
        self.body_bytes = self.body_bytes.saturating_add(n);
        self.body_bytes >= BODY_BYTES_PER_TURN
    }
}

/// Body bytes (a file's, or a streamed body's pieces) after which a turn ends, once the piece
/// that passed them is out, and the connection yields to the others: a fast reader of a large or endless body does not keep them waiting.
pub(super) const BODY_BYTES_PER_TURN: usize = 1 << 20;

impl<'a> Cx<'a> {
    /// One turn of a connection.
    #[inline]
    pub(crate) fn new(
        rules: &'a Rules,
        pools: &'a mut Pools,
        tally: &'a dyn Tally,
        now: Instant,
        date: &'a mut DateLine,
        closing: bool,
    ) -> Self {
        Cx {
            rules,
            pools,
            tally,
            now,
            date,
            closing,
            readiness: Readiness::Level,
            began: Began::Readable,
            produce: Producers::All,
            turn: Turn {
                budget: REQUEST_BUDGET,
                drained: false,
                body_bytes: 0,
            },
        }
    }

    /// The same connection's next turn, after a yield.
    #[cfg(feature = "bench-internals")]
    pub(crate) fn next_turn(mut self) -> Self {
        self.turn = Turn {
            budget: REQUEST_BUDGET,
            drained: false,
            body_bytes: 0,
        };
        self
    }

    /// The turn was not begun by the stream being reported readable (a pool's answer, a turn
    /// after a yield): a level-triggered engine's stream that an earlier read left drained is
    /// not read again before waiting (its wait reports any byte that came since).
    pub(crate) fn not_readable(&mut self) {
        self.began = Began::Otherwise;
    }

    /// The engine waits edge-triggered: reads go on until the stream says `WouldBlock`.
    #[cfg_attr(
        not(any(feature = "server", feature = "bench-internals")),
        allow(dead_code)
    )]
    pub(crate) fn edge_triggered(mut self) -> Self {
        self.readiness = Readiness::Edge;
        self
    }

    /// No handler code runs here (the reactor's loop): a streamed body's next piece is left
    /// for [`Action::Produce`], unless it is a file's, which the core reads itself.
    pub(crate) fn files_only(mut self) -> Self {
        self.produce = Producers::Files;
        self
    }

    /// No streamed body's piece is produced here (the thread-pool engine's parker): each is
    /// left for [`Action::Produce`].
    #[cfg_attr(
        not(any(feature = "server", feature = "bench-internals")),
        allow(dead_code)
    )]
    pub(crate) fn without_producers(mut self) -> Self {
        self.produce = Producers::None;
        self
    }
}
