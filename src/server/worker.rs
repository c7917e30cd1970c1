//! Worker threads: take a connection from the queue, serve its requests as plain blocking code,
//! then close it or park it when it goes idle.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use polling::{Event, Poller};

use super::Builder;
use super::park::{Parker, Parking, Ticket, WakeParked};
use super::session::{self, Session};
use crate::Handler;
use crate::engine::{Control, OpenGuard};
use crate::handler::{Answer, answer};
use crate::http::body::{BodyEnd, BodyReader, Source};
use crate::http::buf::ReadBuf;
use crate::http::conn::{After, CONTINUE, Conn, Encoder, State};
use crate::http::request::RequestHead;
use crate::http::response::BodyKind;
use crate::net::io::{self, flush, linger_close};
use crate::net::sys::Registered;
use crate::net::upgrade::{Waiter, detach, detach_events};
use crate::ws::{Upgrade, WS_READ_BUF};

/// What one server's workers share.
pub(crate) struct Shared<H> {
    pub(crate) handler: H,
    pub(crate) config: Builder,
    pub(crate) parker: Option<Arc<Parker>>,
    pub(crate) control: Arc<Control>,
}

impl<H> Shared<H> {
    /// WebSockets and event streams are parked (else each gets a thread).
    fn parks_sessions(&self) -> bool {
        self.parker.is_some() && self.config.park_sessions
    }
}

/// A connection between requests: its socket and when its next head began to be awaited, or
/// a WebSocket or an event stream between messages. It holds no buffer (but a WebSocket's rare
/// unread bytes): buffers belong to the worker serving it.
pub(crate) struct Connection {
    socket: Socket,
    peer: Option<SocketAddr>,
    since: Instant,
    /// Handed over by the parker: readable, or (rarely, with edge-triggered registrations) an
    /// event for bytes already read; then the first read finds nothing and it parks again.
    woken: bool,
    /// Set once the connection has become a WebSocket or an event stream (parking on).
    pub(super) session: Option<Box<Session>>,
    /// A WebSocket or an event stream, or becoming one: registered for writes too.
    long_lived: bool,
    _open: OpenGuard,
}

enum Socket {
    /// Never parked.
    Plain(TcpStream),
    /// Registered with the parker's poller under the ticket's key, for the connection's life.
    Parkable(Registered<TcpStream>, Ticket),
}

impl Connection {
    pub(super) fn stream(&self) -> &TcpStream {
        match &self.socket {
            Socket::Plain(s) => s,
            Socket::Parkable(r, _) => r.get(),
        }
    }

    /// The parker key of a connection parked before.
    pub(crate) fn ticket_key(&self) -> Option<usize> {
        match &self.socket {
            Socket::Plain(_) => None,
            Socket::Parkable(_, t) => Some(t.key()),
        }
    }

    /// Re-arms a oneshot registration.
    pub(crate) fn rearm(&self, interest: Event) -> std::io::Result<()> {
        match &self.socket {
            Socket::Plain(_) => Ok(()),
            Socket::Parkable(r, _) => r.rearm(interest),
        }
    }

    /// Changes an edge-triggered registration's interest.
    pub(crate) fn set_edge(&self, interest: Event) -> std::io::Result<()> {
        match &self.socket {
            Socket::Plain(_) => Ok(()),
            Socket::Parkable(r, _) => r.set_edge(interest),
        }
    }

    /// A WebSocket or an event stream (or a connection becoming one).
    pub(crate) fn is_long_lived(&self) -> bool {
        self.long_lived
    }

    /// Marks the connection as becoming a WebSocket or an event stream: its registration
    /// covers writes too.
    pub(crate) fn into_long_lived(self) -> Connection {
        Connection {
            long_lived: true,
            ..self
        }
    }

    /// What the parker watches for under `key`: reads; for a long-lived one also writes (an
    /// edge-triggered registration always includes them, so it never changes; a oneshot one
    /// asks for them only while output is blocked).
    pub(crate) fn interest(&self, key: usize, edge: bool) -> Event {
        let write =
            self.long_lived && (edge || self.session.as_ref().is_some_and(|s| s.wants_write()));
        if write {
            Event::all(key)
        } else {
            Event::readable(key)
        }
    }

    /// When the parker acts on its own if nothing happens: an idle HTTP connection closes after
    /// `idle_timeout`; a WebSocket or an event stream has its own timers (or none).
    pub(crate) fn park_deadline(&self, now: Instant, idle_timeout: Duration) -> Option<Instant> {
        match &self.session {
            Some(session) => session.deadline(),
            None => Some(now + idle_timeout),
        }
    }

    /// Registers a never-parked connection with `poller` under `ticket`'s key, edge-triggered
    /// or oneshot. On failure the ticket comes back with the connection, unless registering
    /// consumed (closed) its socket.
    pub(crate) fn into_registered(
        self,
        poller: &Arc<Poller>,
        edge: bool,
        ticket: Ticket,
    ) -> Result<Connection, (Option<Connection>, Ticket)> {
        let interest = self.interest(ticket.key(), edge);
        match self.socket {
            Socket::Plain(s) => {
                let registered = if edge {
                    Registered::edge(poller.clone(), s, interest)
                } else {
                    Registered::new(poller.clone(), s, interest)
                };
                match registered {
                    Ok(r) => Ok(Connection {
                        socket: Socket::Parkable(r, ticket),
                        ..self
                    }),
                    Err(_) => Err((None, ticket)),
                }
            }
            socket @ Socket::Parkable(..) => Err((Some(Connection { socket, ..self }), ticket)),
        }
    }

    /// The socket and the connection count, leaving the parker's poller.
    fn into_parts(self) -> std::io::Result<(TcpStream, OpenGuard)> {
        let stream = match self.socket {
            Socket::Plain(s) => s,
            // The registration goes with `r`; the clone is the same socket.
            Socket::Parkable(r, _) => r.get().try_clone()?,
        };
        Ok((stream, self._open))
    }

    /// Called by the parker when the connection became readable.
    pub(crate) fn woken(&mut self, now: Instant) {
        self.since = now;
        self.woken = true;
    }
}

/// A unit of work for a worker.
pub(crate) struct Job(Connection);

impl Job {
    pub(crate) fn new(stream: TcpStream, peer: SocketAddr, open: OpenGuard, since: Instant) -> Job {
        Job(Connection {
            peer: Some(peer),
            socket: Socket::Plain(stream),
            since,
            woken: false,
            session: None,
            long_lived: false,
            _open: open,
        })
    }

    /// The connection, back from a queue that would not take it.
    pub(crate) fn into_connection(self) -> Connection {
        self.0
    }
}

impl From<Connection> for Job {
    fn from(conn: Connection) -> Job {
        Job(conn)
    }
}

/// A worker's own buffers, lent to each connection it serves.
struct Scratch {
    read: ReadBuf,
    write: Vec<u8>,
    head: RequestHead,
    /// WebSockets read into this (`WS_READ_BUF` bytes), made when the first one comes.
    ws: Option<ReadBuf>,
}

/// Bytes of response buffered before it is written out while more pipelined requests wait.
const WRITE_BUF: usize = 16 * 1024;

pub(crate) fn run<H: Handler>(shared: &Shared<H>, queue: &Receiver<Job>) {
    let mut scratch = Scratch {
        read: ReadBuf::new(),
        write: Vec::with_capacity(WRITE_BUF),
        head: RequestHead::default(),
        ws: None,
    };
    while let Ok(Job(conn)) = queue.recv() {
        let mut next = Some(conn);
        while let Some(conn) = next.take() {
            let idle = if conn.session.is_some() {
                let buf = scratch
                    .ws
                    .get_or_insert_with(|| ReadBuf::with_len(WS_READ_BUF));
                session::drive(shared, conn, buf)
            } else {
                serve(shared, conn, &mut scratch)
            };
            if let (Some(idle), Some(parker)) = (idle, &shared.parker) {
                if idle.session.as_ref().is_some_and(|s| s.has_more()) {
                    // A busy WebSocket yields after its budget, as on the reactor.
                    if let Err(conn) = parker.requeue(idle) {
                        next = Some(conn);
                    }
                } else {
                    match parker.park(idle) {
                        Parking::Parked => {}
                        Parking::Ready(conn) => next = Some(conn),
                        // Parking has ended for shutdown: dropping closes the connection.
                        Parking::Refused(conn) => session::abandon(conn),
                    }
                }
            }
            scratch.read.reset();
            scratch.write.clear();
        }
    }
}

/// Serves requests on `conn` until it closes (`None`) or goes idle with parking on
/// (`Some(conn)`, to park).
fn serve<H: Handler>(shared: &Shared<H>, conn: Connection, s: &mut Scratch) -> Option<Connection> {
    let cfg = &shared.config;
    let shutting_down = &shared.control.shutting_down;
    let mut http = Conn::default();
    let mut head_deadline = conn.since + cfg.header_read_timeout;
    // The parker's hand-over may be an event for bytes already read: the first read then finds
    // nothing, and the connection parks again rather than holding this worker.
    let mut woken = conn.woken;
    loop {
        let stream = conn.stream();
        // 1. The request head.
        let decoder = loop {
            match http.recv_head(&mut s.read, &mut s.head, &cfg.limits) {
                Ok(Some(decoder)) => break decoder,
                Ok(None) => {}
                Err(e) => {
                    fail(stream, &mut http, &mut s.write, e.status(), cfg);
                    return None;
                }
            }
            flush(stream, &mut s.write, cfg.write_timeout).ok()?;
            let started = !s.read.is_empty();
            // Shutdown interrupts a wait for a new request, never a request under way.
            let cancel = (!started).then_some(shutting_down);
            let spare = s.read.spare(cfg.limits.max_head_bytes);
            let got = if std::mem::take(&mut woken) && !started {
                match io::read_now(stream, spare) {
                    Ok(Some(n)) => Ok(n),
                    Ok(None) => return Some(conn),
                    Err(e) => Err(e),
                }
            } else {
                io::read(stream, spare, head_deadline, cancel)
            };
            match got {
                Ok(0) => return None,
                Ok(n) => s.read.filled_by(n),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut && started => {
                    fail(stream, &mut http, &mut s.write, 408, cfg);
                    return None;
                }
                Err(_) => return None,
            }
        };

        // 2. The handler, with the body streamed from the socket.
        let source = SocketSource {
            stream,
            out: &mut s.write,
            read_timeout: cfg.read_timeout,
            write_timeout: cfg.write_timeout,
        };
        let mut reader = BodyReader::new(decoder, &mut s.read, source, s.head.expect_continue);
        let Answer { response, panicked } =
            answer(&shared.handler, &s.head, &mut reader, conn.peer);
        let in_sync = match reader.end {
            BodyEnd::Complete => true,
            BodyEnd::Unread => !panicked && reader.drain(cfg.limits.max_drain_bytes),
            BodyEnd::Failed(e) => {
                fail(stream, &mut http, &mut s.write, e.status(), cfg);
                return None;
            }
            BodyEnd::Broken => return None,
        };

        // 3. The response.
        let closing = panicked || shutting_down.load(Ordering::Acquire);
        let mark = s.write.len();
        match http.write_response(&s.head, response, in_sync, closing, &mut s.write) {
            After::Done => {}
            After::Stream(encoder, BodyKind::Events(events)) if shared.parks_sessions() => {
                return into_session(shared, conn, &mut http, s, mark, |wake, _| {
                    Session::events(events, encoder, wake)
                });
            }
            After::Stream(encoder, BodyKind::Events(events)) => {
                // An event stream lasts as long as its client: a thread of its own, whose
                // waiter is made before the head goes out (out of descriptors: 503 instead).
                let Ok(waiter) = Waiter::new() else {
                    s.write.truncate(mark);
                    fail(stream, &mut http, &mut s.write, 503, cfg);
                    return None;
                };
                flush(stream, &mut s.write, cfg.write_timeout).ok()?;
                let (stream, open) = conn.into_parts().ok()?;
                detach_events(
                    &shared.control,
                    stream,
                    events,
                    encoder,
                    open,
                    Arc::new(waiter),
                );
                return None;
            }
            After::Stream(mut encoder, kind) => {
                let pumped = catch_unwind(AssertUnwindSafe(|| {
                    pump(stream, &mut s.write, &mut encoder, kind, cfg.write_timeout)
                }));
                if !pumped.unwrap_or(false) {
                    http.abort();
                }
            }
            After::Switch(Upgrade::WebSocket(handler, ws_cfg)) if shared.parks_sessions() => {
                return into_session(shared, conn, &mut http, s, mark, |wake, peer| {
                    Session::websocket(handler, *ws_cfg, wake, peer)
                });
            }
            After::Switch(upgrade) => {
                let waiter = match &upgrade {
                    Upgrade::WebSocket(..) => match Waiter::new() {
                        Ok(w) => Some(Arc::new(w)),
                        Err(_) => {
                            s.write.truncate(mark);
                            fail(stream, &mut http, &mut s.write, 503, cfg);
                            return None;
                        }
                    },
                    Upgrade::Raw(_) => None,
                };
                flush(stream, &mut s.write, cfg.write_timeout).ok()?;
                let leftover = s.read.filled().to_vec();
                let peer = conn.peer;
                let (stream, open) = conn.into_parts().ok()?;
                detach(
                    &shared.control,
                    stream,
                    leftover,
                    peer,
                    upgrade,
                    open,
                    waiter,
                );
                return None;
            }
        }
        if http.state() == State::Closing {
            let _ = flush(stream, &mut s.write, cfg.write_timeout);
            if !in_sync {
                linger_close(stream, LINGER);
            }
            return None;
        }
        if s.write.len() >= cfg.limits.max_pipeline_output {
            flush(stream, &mut s.write, cfg.write_timeout).ok()?;
        }

        // 4. The next request: already buffered (pipelined), or wait for it. Waiting on the
        // socket or re-arming a oneshot registration reports bytes already there at once, so
        // those need no read first; only edge-triggered parking reads until EAGAIN (below).
        if s.read.is_empty() {
            flush(stream, &mut s.write, cfg.write_timeout).ok()?;
            if shutting_down.load(Ordering::Acquire) {
                return None;
            }
            let now = Instant::now();
            let waited = match (&shared.parker, cfg.park_linger) {
                (None, _) => io::wait(stream, false, now + cfg.idle_timeout, Some(shutting_down)),
                (Some(_), linger) if linger > Duration::ZERO => {
                    io::wait(stream, false, now + linger, Some(shutting_down))
                }
                (Some(parker), _) if !parker.edge() => return Some(conn),
                (Some(_), _) => {
                    // Edge-triggered parking needs a socket a read found empty (EAGAIN): bytes
                    // that arrived before the last event was taken raise no new one, and a read
                    // that came back short does not prove it, since the end of input may have
                    // come with the last bytes (only a further read returns it, and `polling`
                    // does not report EPOLLRDHUP).
                    match io::read_now(stream, s.read.spare(cfg.limits.max_head_bytes)) {
                        Ok(None) => return Some(conn),
                        Ok(Some(0)) | Err(_) => return None,
                        Ok(Some(n)) => {
                            s.read.filled_by(n);
                            Ok(())
                        }
                    }
                }
            };
            match waited {
                Ok(()) => {}
                Err(io::Interrupt::TimedOut) if shared.parker.is_some() => return Some(conn),
                Err(_) => return None,
            }
        }
        head_deadline = Instant::now() + cfg.header_read_timeout;
    }
}

/// Makes `conn` a parked session: a WebSocket after its 101, an event stream after its head.
/// It is enrolled with the parker before the head (in `s.write` from `mark`) goes out, so a
/// refusal is still a 503; then its first turn runs at once (`on_open`, frames sent with the
/// upgrade, reading on after what the request left in the buffer).
fn into_session<H: Handler>(
    shared: &Shared<H>,
    conn: Connection,
    http: &mut Conn,
    s: &mut Scratch,
    mark: usize,
    make: impl FnOnce(WakeParked, Option<SocketAddr>) -> Session,
) -> Option<Connection> {
    let cfg = &shared.config;
    let (mut conn, wake) = match shared.parker.as_ref()?.enroll(conn) {
        Ok(enrolled) => enrolled,
        Err(Some(conn)) => {
            s.write.truncate(mark);
            fail(conn.stream(), http, &mut s.write, 503, cfg);
            return None;
        }
        Err(None) => return None,
    };
    flush(conn.stream(), &mut s.write, cfg.write_timeout).ok()?;
    let peer = conn.peer;
    conn.session = Some(Box::new(make(wake, peer)));
    session::drive(shared, conn, &mut s.read)
}

/// Budget for reading what a peer still sends after a response that closes the connection.
const LINGER: Duration = Duration::from_millis(500);

/// Answers with an error status and closes, lingering so the answer is not lost to a reset.
fn fail(stream: &TcpStream, http: &mut Conn, out: &mut Vec<u8>, status: u16, cfg: &Builder) {
    http.write_error(status, out);
    if flush(stream, out, cfg.write_timeout).is_ok() {
        linger_close(stream, LINGER);
    }
}

/// Writes a streamed body: every piece the reader or iterator produces goes out at once.
fn pump(
    stream: &TcpStream,
    out: &mut Vec<u8>,
    encoder: &mut Encoder,
    kind: BodyKind,
    timeout: Duration,
) -> bool {
    match kind {
        BodyKind::File(file, len) => {
            // The head goes first; the bytes bypass the encoder (a file body has a length).
            return flush(stream, out, timeout).is_ok()
                && io::send_file(stream, &file, len, timeout);
        }
        BodyKind::Reader(mut reader, _) => {
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                if matches!(encoder, Encoder::Length { remaining: 0 }) {
                    break;
                }
                match reader.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        encoder.encode(&chunk[..n], out);
                        if flush(stream, out, timeout).is_err() {
                            return false;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return false,
                }
            }
        }
        BodyKind::Chunks(chunks) => {
            for chunk in chunks {
                encoder.encode(&chunk, out);
                if flush(stream, out, timeout).is_err() {
                    return false;
                }
            }
        }
        BodyKind::Static(_) | BodyKind::Bytes(_) | BodyKind::Upgrade(_) | BodyKind::Events(_) => {}
    }
    encoder.finish(out) && flush(stream, out, timeout).is_ok()
}

/// The body reader's view of the socket.
struct SocketSource<'a> {
    stream: &'a TcpStream,
    out: &'a mut Vec<u8>,
    read_timeout: Duration,
    write_timeout: Duration,
}

impl Source for SocketSource<'_> {
    fn fill(&mut self, buf: &mut ReadBuf) -> std::io::Result<usize> {
        // Responses to earlier pipelined requests go out before we wait on the peer.
        flush(self.stream, self.out, self.write_timeout)?;
        let n = io::read(
            self.stream,
            buf.spare(0),
            Instant::now() + self.read_timeout,
            None,
        )?;
        buf.filled_by(n);
        Ok(n)
    }

    fn send_continue(&mut self) -> std::io::Result<()> {
        self.out.extend_from_slice(CONTINUE);
        flush(self.stream, self.out, self.write_timeout)
    }
}
