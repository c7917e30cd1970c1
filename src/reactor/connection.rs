//! One connection on an event loop: a non-blocking driver of the shared `http::Conn`.
//!
//! A request's body is read into memory (bounded by `Limits::max_body_bytes`) before the handler
//! runs, because an inline handler must never wait on the socket. Output always goes first: while
//! it cannot drain, the connection reads nothing more (backpressure).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

use super::Config;
use super::inbox::Inbox;
use super::pool::{Job, PoolSender};
use super::pools::Pools;
use crate::Handler;
use crate::deadline;
use crate::engine::OpenGuard;
use crate::handler::{Answer, answer};
use crate::http::body::Decoder;
use crate::http::buf::ReadBuf;
use crate::http::conn::{After, CONTINUE, Close, Conn, State};
use crate::http::linger::Linger;
use crate::http::request::RequestHead;
use crate::http::response::BodyKind;
use crate::http::stream::{STREAM_PIECE, Streaming};
use crate::net::io;
use crate::net::sys::Registered;
use crate::rate::Meter;
use crate::sse::SseConn;
use crate::ws::{Calls, Upgrade, Wake, WsConn, WsIo, WsNext, WsSender};

/// A connection leaving the loop after a generic upgrade.
pub(crate) struct Detached {
    pub(crate) stream: TcpStream,
    pub(crate) leftover: Vec<u8>,
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) upgrade: Upgrade,
    pub(crate) open: OpenGuard,
}

/// Where a sender's wake-up goes: the loop's inbox, naming the connection.
pub(crate) type Wakes = Inbox<(usize, u64)>;

struct LoopWake {
    inbox: Arc<Wakes>,
    key: usize,
    id: u64,
}

impl Wake for LoopWake {
    fn wake(&self) {
        self.inbox.push((self.key, self.id));
    }
}

/// Requests answered per wake-up before other connections get their turn.
const REQUEST_BUDGET: u32 = 64;

/// What the loop needs to run a connection's step.
pub(crate) struct Cx<'a, H> {
    pub(crate) handler: &'a H,
    pub(crate) cfg: &'a Config,
    pub(crate) pools: &'a mut Pools,
    pub(crate) pool: Option<&'a PoolSender>,
    pub(crate) now: Instant,
    pub(crate) closing: bool,
    pub(crate) key: usize,
    pub(crate) wakes: &'a Arc<Wakes>,
}

/// What the loop should do with a connection after a step.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Wait for the socket (readable and/or writable) until the deadline.
    Wait {
        read: bool,
        write: bool,
        deadline: Option<Instant>,
    },
    /// Work is left after the budget: run again once other connections had their turn.
    Again,
    /// Close it.
    Close,
    /// The connection switched protocols: it leaves the loop for a thread of its own
    /// ([`Connection::into_detached`]).
    Detach,
}

/// Where the connection is in the current exchange.
enum Phase {
    /// Waiting for a request head (idle when nothing is buffered).
    Head,
    /// Reading a request body into memory before dispatch, at no less than the minimum rate.
    Body {
        decoder: Decoder,
        body: Vec<u8>,
        meter: Meter,
    },
    /// The request is with a pool worker; nothing is read until its response is back.
    Dispatched,
    /// The connection speaks WebSocket.
    Ws(Box<WsConn>),
    /// The response is an event stream, written as its senders send.
    Sse(Box<SseConn>),
    /// A generic upgrade: once the 101 is out, the connection leaves the loop. (Boxed: every
    /// connection's slab slot is as large as the largest phase.)
    Detach(Option<Box<Upgrade>>),
    /// The last response is out and the write side shut; what the client still sends is read
    /// and dropped until it closes (a lingering close, as the core decided).
    Linger(Linger),
}

enum Step {
    /// A request was answered.
    Answered,
    /// Something changed (bytes consumed, a response or error queued, a dispatch).
    Progress,
    /// Nothing more can be done without more input.
    NeedInput,
}

pub(crate) struct Connection {
    socket: Registered<TcpStream>,
    /// Tells this connection from a later one in the same slab slot (pool replies).
    pub(crate) id: u64,
    peer: Option<SocketAddr>,
    http: Conn,
    phase: Phase,
    read: Option<ReadBuf>,
    write: Option<Vec<u8>>,
    written: usize,
    /// The minimum rate of the response being written.
    sent: Meter,
    head: Option<Box<RequestHead>>,
    streaming: Option<Streaming>,
    /// Start of the current wait: accept, the last response, or the last body progress.
    since: Instant,
    /// When the first byte of the head being read arrived.
    head_start: Instant,
    served: u64,
    /// The deadline currently in the loop's timer set.
    pub(crate) deadline: Option<Instant>,
    /// What its level-triggered registration is armed for.
    pub(crate) armed: Armed,
    /// A readable event came while it did not read: at the next, reading is disarmed.
    pub(crate) stray: bool,
    _open: OpenGuard,
}

/// The directions a registration reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Armed {
    pub(crate) read: bool,
    pub(crate) write: bool,
}

impl Connection {
    pub(crate) fn new(
        socket: Registered<TcpStream>,
        id: u64,
        peer: SocketAddr,
        now: Instant,
        open: OpenGuard,
    ) -> Self {
        Connection {
            socket,
            id,
            peer: Some(peer),
            http: Conn::default(),
            phase: Phase::Head,
            read: None,
            write: None,
            written: 0,
            sent: Meter::new(None),
            head: None,
            streaming: None,
            since: now,
            head_start: now,
            served: 0,
            deadline: None,
            armed: Armed {
                read: true,
                write: false,
            },
            stray: false,
            _open: open,
        }
    }

    pub(crate) fn socket(&self) -> &Registered<TcpStream> {
        &self.socket
    }

    /// True when nothing is under way: no buffered input, no output, no request in flight.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Head)
            && self.read.as_ref().is_none_or(ReadBuf::is_empty)
            && self.write.as_ref().is_none_or(Vec::is_empty)
            && self.streaming.is_none()
    }

    /// Runs the connection as far as it can go without blocking. Pipelined responses are
    /// batched: output is written before waiting for input, when it passes
    /// `max_pipeline_output`, and when the budget runs out.
    pub(crate) fn drive<H: Handler>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        if let Phase::Linger(linger) = &mut self.phase {
            return Self::drain(self.socket.get(), linger);
        }
        if !self.switched() {
            let next = self.drive_http(cx);
            if !self.switched() {
                return next;
            }
        }
        // The 101 (and any responses before it) go out before anything else.
        match self.flush(cx.now) {
            Ok(true) => {}
            Ok(false) => return self.wait(false, true, cx.now, cx.cfg),
            Err(()) => return Next::Close,
        }
        if let Some(b) = self.write.take() {
            cx.pools.give_write(b);
        }
        if let Some(h) = self.head.take() {
            cx.pools.give_head(h);
        }
        match &mut self.phase {
            Phase::Ws(_) => self.drive_ws(cx),
            Phase::Sse(_) => self.drive_sse(cx),
            _ => Next::Detach,
        }
    }

    fn switched(&self) -> bool {
        matches!(self.phase, Phase::Ws(_) | Phase::Sse(_) | Phase::Detach(_))
    }

    fn drive_sse<H>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let Phase::Sse(sse) = &mut self.phase else {
            return Next::Close;
        };
        if cx.closing {
            sse.shutdown();
        }
        match sse.drive(self.socket.get(), cx.now) {
            WsNext::Wait { write, deadline } => Next::Wait {
                read: !write,
                write,
                deadline,
            },
            _ => Next::Close,
        }
    }

    fn drive_ws<H>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let Phase::Ws(ws) = &mut self.phase else {
            return Next::Close;
        };
        let buf = self.read.get_or_insert_with(|| cx.pools.ws_read());
        let mut io = WsIo::new(self.socket.get(), buf);
        if cx.closing && ws.is_open() {
            ws.shutdown(&mut io, cx.now);
        }
        let next = ws.drive(&mut io, cx.now, cx.pool.is_none());
        // An idle WebSocket holds no read buffer.
        if self.read.as_ref().is_some_and(ReadBuf::is_empty) {
            if let Some(b) = self.read.take() {
                cx.pools.give_read(b);
            }
        }
        match next {
            WsNext::Wait { write, deadline } => Next::Wait {
                read: !write,
                write,
                deadline,
            },
            WsNext::Again => Next::Again,
            WsNext::Close => Next::Close,
            WsNext::Dispatch => {
                if let (Some(pool), Some(calls)) = (cx.pool, ws.take_calls()) {
                    pool.send(Job::Ws {
                        key: cx.key,
                        id: self.id,
                        calls,
                    });
                }
                Next::Wait {
                    read: false,
                    write: false,
                    deadline: None,
                }
            }
            WsNext::Busy => Next::Wait {
                read: false,
                write: false,
                deadline: None,
            },
        }
    }

    /// Wakes this connection on its loop from any thread (WebSocket and event-stream senders).
    fn waker<H>(&self, cx: &Cx<'_, H>) -> Box<dyn Wake> {
        Box::new(LoopWake {
            inbox: cx.wakes.clone(),
            key: cx.key,
            id: self.id,
        })
    }

    /// A pool worker ran this WebSocket's callbacks.
    pub(crate) fn ws_complete<H: Handler>(&mut self, calls: Calls, cx: &mut Cx<'_, H>) -> Next {
        let Phase::Ws(ws) = &mut self.phase else {
            return Next::Close;
        };
        let buf = self.read.get_or_insert_with(|| cx.pools.ws_read());
        ws.put_back(calls, &mut WsIo::new(self.socket.get(), buf));
        self.drive(cx)
    }

    /// The connection is closing: a WebSocket's `on_close` is due (run here, or sent to the
    /// pool).
    pub(crate) fn finish(&mut self, pool: Option<&PoolSender>) {
        match &mut self.phase {
            Phase::Ws(ws) => {
                if let (Some(calls), Some(pool)) = (ws.finish(pool.is_none()), pool) {
                    pool.send(Job::WsLast(calls));
                }
            }
            Phase::Sse(sse) => sse.finish(),
            _ => {}
        }
    }

    /// A detached connection's parts: the socket (out of the poller), the bytes read past the
    /// upgrade request, the upgrade and the connection count.
    pub(crate) fn into_detached(mut self, pools: &mut Pools) -> Option<Detached> {
        let Phase::Detach(upgrade) = &mut self.phase else {
            return None;
        };
        let upgrade = *upgrade.take()?;
        let leftover = self
            .read
            .as_ref()
            .map(|b| b.filled().to_vec())
            .unwrap_or_default();
        self.release_all(pools);
        // The clone is the same socket; the registration leaves with `self.socket`.
        let stream = self.socket.get().try_clone().ok()?;
        Some(Detached {
            stream,
            leftover,
            peer: self.peer,
            upgrade,
            open: self._open,
        })
    }

    fn drive_http<H: Handler>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let mut budget = REQUEST_BUDGET;
        // Set when a read in this step came back shorter than the space offered: the socket's
        // receive queue is empty, so the next read would only say EAGAIN. Waiting instead is
        // safe with level-triggered and oneshot registrations: bytes, or the end of input, left
        // in the socket (the end may come with the last bytes and only a further read returns
        // it) are reported at the next wait. An edge-triggered registration would not report
        // them again.
        let mut drained = false;
        loop {
            if self.switched() {
                return Next::Again;
            }
            // A streamed body, a close or a pool request in flight: nothing more is parsed until
            // it is done, so responses stay in order.
            if self.streaming.is_some()
                || self.http.is_closing()
                || matches!(self.phase, Phase::Dispatched)
            {
                match self.flush(cx.now) {
                    Ok(true) => {}
                    Ok(false) => return self.wait(false, true, cx.now, cx.cfg),
                    Err(()) => return Next::Close,
                }
                if self.stream_step() {
                    continue;
                }
                match self.http.state() {
                    State::Closing(Close::Now) => return Next::Close,
                    State::Closing(Close::Linger) => return self.linger(cx),
                    _ => {}
                }
                return Next::Wait {
                    read: false,
                    write: false,
                    deadline: None,
                };
            }
            if budget == 0 {
                return match self.flush(cx.now) {
                    Ok(true) => Next::Again,
                    Ok(false) => self.wait(false, true, cx.now, cx.cfg),
                    Err(()) => Next::Close,
                };
            }
            match self.process(cx) {
                Step::Answered => {
                    budget -= 1;
                    if self
                        .write
                        .as_ref()
                        .is_some_and(|w| w.len() >= cx.cfg.limits.max_pipeline_output)
                    {
                        match self.flush(cx.now) {
                            Ok(true) => {}
                            Ok(false) => return self.wait(false, true, cx.now, cx.cfg),
                            Err(()) => return Next::Close,
                        }
                    }
                    continue;
                }
                Step::Progress => continue,
                Step::NeedInput => {}
            }
            // Everything answered so far goes out before waiting for more input.
            match self.flush(cx.now) {
                Ok(true) => {}
                Ok(false) => return self.wait(false, true, cx.now, cx.cfg),
                Err(()) => return Next::Close,
            }
            let filled = if drained {
                Fill::WouldBlock
            } else {
                self.fill(cx)
            };
            match filled {
                Fill::Got { short } => drained = short,
                Fill::WouldBlock => {
                    self.release_idle(cx.pools);
                    return self.wait(true, false, cx.now, cx.cfg);
                }
                Fill::Closed => return Next::Close,
            }
        }
    }

    /// A deadline passed. A WebSocket handles its own timers and an event stream's heartbeat is
    /// due (true: drive it again). For HTTP the core decides: a request under way gets `408` and
    /// a lingering close (true: drive it to write that and linger); otherwise it closes (false).
    pub(crate) fn expire(&mut self, pools: &mut Pools, now: Instant) -> bool {
        match &mut self.phase {
            Phase::Ws(ws) => {
                let buf = self.read.get_or_insert_with(|| pools.ws_read());
                ws.expire(&mut WsIo::new(self.socket.get(), buf), now);
                return true;
            }
            Phase::Sse(_) => return true,
            Phase::Head | Phase::Body { .. } => {}
            Phase::Dispatched | Phase::Detach(_) | Phase::Linger(_) => {
                self.release_all(pools);
                return false;
            }
        }
        let receiving = self.streaming.is_none()
            && !self.http.is_closing()
            && self.write.as_ref().is_none_or(Vec::is_empty);
        if receiving {
            let started = matches!(self.phase, Phase::Body { .. })
                || self.read.as_ref().is_some_and(|b| !b.is_empty());
            let mut out = self.write.take().unwrap_or_else(|| pools.write());
            let close = self.http.request_timed_out(started, &mut out);
            self.write = Some(out);
            if close == Close::Linger {
                return true;
            }
        }
        self.release_all(pools);
        false
    }

    /// Starts a lingering close once the last response is out: the write side is shut, the
    /// buffers go back, and what the client still sends is dropped.
    fn linger<H>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let _ = self.socket.get().shutdown(std::net::Shutdown::Write);
        self.release_all(cx.pools);
        self.phase = Phase::Linger(Linger::new(cx.now));
        match &mut self.phase {
            Phase::Linger(linger) => Self::drain(self.socket.get(), linger),
            _ => Next::Close,
        }
    }

    /// One step of a lingering close: drop what came, wait for more until its deadline.
    fn drain(stream: &TcpStream, linger: &mut Linger) -> Next {
        if io::drain(stream, linger) {
            Next::Wait {
                read: true,
                write: false,
                deadline: linger.deadline(),
            }
        } else {
            Next::Close
        }
    }

    /// Gives every pooled item back (the connection is closing).
    pub(crate) fn release_all(&mut self, pools: &mut Pools) {
        if let Some(b) = self.read.take() {
            pools.give_read(b);
        }
        if let Some(b) = self.write.take() {
            pools.give_write(b);
        }
        if let Some(h) = self.head.take() {
            pools.give_head(h);
        }
    }

    /// A pool worker's answer arrived.
    pub(crate) fn complete<H: Handler>(
        &mut self,
        head: Box<RequestHead>,
        answered: Answer,
        cx: &mut Cx<'_, H>,
    ) {
        self.head = Some(head);
        self.respond(answered, cx);
    }

    fn wait(&mut self, read: bool, write: bool, now: Instant, cfg: &Config) -> Next {
        let deadline = if write {
            self.sent.deadline(now)
        } else {
            match &mut self.phase {
                Phase::Body { meter, .. } => meter.deadline(now),
                Phase::Linger(linger) => {
                    return Next::Wait {
                        read,
                        write,
                        deadline: linger.deadline(),
                    };
                }
                Phase::Dispatched | Phase::Ws(_) | Phase::Sse(_) | Phase::Detach(_) => {
                    return Next::Wait {
                        read,
                        write,
                        deadline: None,
                    };
                }
                Phase::Head if self.read.as_ref().is_some_and(|b| !b.is_empty()) => {
                    deadline::after(self.head_start, cfg.header_read_timeout)
                }
                Phase::Head if self.served == 0 => {
                    deadline::after(self.since, cfg.header_read_timeout)
                }
                Phase::Head => deadline::after(self.since, cfg.idle_timeout),
            }
        };
        Next::Wait {
            read,
            write,
            deadline,
        }
    }

    /// Writes pending output; `Ok(true)` when all of it is out, `Ok(false)` when the socket is full.
    fn flush(&mut self, now: Instant) -> Result<bool, ()> {
        let Some(out) = self.write.as_mut() else {
            return Ok(true);
        };
        let mut stream = self.socket.get();
        while self.written < out.len() {
            match stream.write(&out[self.written..]) {
                Ok(0) => return Err(()),
                Ok(n) => {
                    self.written += n;
                    self.sent.moved(now, n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        out.clear();
        self.written = 0;
        Ok(true)
    }

    /// Produces the next piece of a streamed body into the (empty) output; true when it did
    /// something, so the caller flushes and comes back.
    fn stream_step(&mut self) -> bool {
        let Some(st) = self.streaming.as_mut() else {
            return false;
        };
        let out = self
            .write
            .get_or_insert_with(|| Vec::with_capacity(STREAM_PIECE + 64));
        let produced = catch_unwind(AssertUnwindSafe(|| st.produce(out)));
        match produced {
            Ok(None) => {}
            Ok(Some(complete)) => {
                self.streaming = None;
                if !complete {
                    self.http.abort();
                }
            }
            Err(_) => {
                log::error!("response body panicked; closing the connection");
                self.streaming = None;
                self.http.abort();
            }
        }
        true
    }

    fn out<'a>(write: &'a mut Option<Vec<u8>>, pools: &mut Pools) -> &'a mut Vec<u8> {
        write.get_or_insert_with(|| pools.write())
    }

    /// Works through buffered input: a head, body bytes, or a dispatch.
    fn process<H: Handler>(&mut self, cx: &mut Cx<'_, H>) -> Step {
        let Some(buf) = self.read.as_mut() else {
            return Step::NeedInput;
        };
        if buf.is_empty() {
            return Step::NeedInput;
        }
        match &mut self.phase {
            Phase::Head => {
                let head = self.head.get_or_insert_with(|| cx.pools.head());
                match self.http.recv_head(buf, head, &cx.cfg.limits) {
                    Ok(None) => Step::NeedInput,
                    Err(e) => {
                        self.http
                            .write_error(e.status(), Self::out(&mut self.write, cx.pools));
                        Step::Progress
                    }
                    Ok(Some(decoder)) if decoder.is_done() => self.dispatch(Vec::new(), cx),
                    Ok(Some(decoder)) => {
                        // The whole body is read before the handler runs, so a client holding
                        // it back for `100 Continue` is told to send it now.
                        if head.expect_continue && buf.is_empty() {
                            Self::out(&mut self.write, cx.pools).extend_from_slice(CONTINUE);
                        }
                        self.since = cx.now;
                        self.phase = Phase::Body {
                            decoder,
                            body: Vec::new(),
                            meter: Meter::new(cx.cfg.min_request_body_rate),
                        };
                        Step::Progress
                    }
                }
            }
            Phase::Body {
                decoder,
                body,
                meter,
            } => {
                let input = buf.filled();
                match decoder.decode(input, usize::MAX) {
                    Err(e) => {
                        self.http
                            .write_error(e.status(), Self::out(&mut self.write, cx.pools));
                        Step::Progress
                    }
                    Ok(d) => {
                        body.extend_from_slice(&input[d.data]);
                        buf.consume(d.consumed);
                        meter.moved(cx.now, d.consumed);
                        self.since = cx.now;
                        if decoder.is_done() {
                            let body = std::mem::take(body);
                            self.dispatch(body, cx)
                        } else if d.consumed == 0 {
                            Step::NeedInput
                        } else {
                            Step::Progress
                        }
                    }
                }
            }
            Phase::Dispatched
            | Phase::Ws(_)
            | Phase::Sse(_)
            | Phase::Detach(_)
            | Phase::Linger(_) => Step::NeedInput,
        }
    }

    /// Runs the handler inline, or hands the request to the pool.
    fn dispatch<H: Handler>(&mut self, body: Vec<u8>, cx: &mut Cx<'_, H>) -> Step {
        if let Some(pool) = cx.pool {
            let Some(head) = self.head.take() else {
                return Step::NeedInput;
            };
            self.phase = Phase::Dispatched;
            pool.send(Job::Http {
                key: cx.key,
                id: self.id,
                head,
                body,
                peer: self.peer,
            });
            return Step::Progress;
        }
        let Some(head) = self.head.as_deref() else {
            return Step::NeedInput;
        };
        let answered = answer(cx.handler, head, &mut &body[..], self.peer);
        self.respond(answered, cx);
        Step::Answered
    }

    /// Queues the response to the current request.
    fn respond<H>(&mut self, answered: Answer, cx: &mut Cx<'_, H>) {
        let out = Self::out(&mut self.write, cx.pools);
        let Some(head) = self.head.as_deref() else {
            return;
        };
        let closing = cx.closing || answered.panicked;
        self.sent = Meter::new(cx.cfg.min_response_rate);
        self.phase = Phase::Head;
        self.served += 1;
        self.since = cx.now;
        match self
            .http
            .write_response(head, answered.response, true, closing, out)
        {
            After::Done => {}
            After::Stream(encoder, BodyKind::Events(events)) => {
                let sse = SseConn::new(
                    events,
                    encoder,
                    self.waker(cx),
                    cx.now,
                    cx.cfg.min_response_rate,
                );
                self.phase = Phase::Sse(Box::new(sse));
            }
            // A file is read in pieces on the loop, like any sized reader.
            After::Stream(encoder, body) => self.streaming = Some(Streaming::new(encoder, body)),
            After::Switch(Upgrade::WebSocket(handler, cfg)) => {
                let sender = WsSender::new(self.waker(cx), cfg.max_send_queue, self.peer);
                let ws = WsConn::new(handler, *cfg, sender, cx.now, cx.cfg.min_response_rate);
                self.phase = Phase::Ws(Box::new(ws));
            }
            After::Switch(raw) => self.phase = Phase::Detach(Some(Box::new(raw))),
        }
    }

    /// Reads once from the socket.
    fn fill<H>(&mut self, cx: &mut Cx<'_, H>) -> Fill {
        let was_empty = self.read.as_ref().is_none_or(ReadBuf::is_empty);
        let buf = self.read.get_or_insert_with(|| cx.pools.read());
        let cap = match self.phase {
            Phase::Head => cx.cfg.limits.max_head_bytes,
            _ => 0,
        };
        let spare = buf.spare(cap);
        if spare.is_empty() {
            return Fill::Closed;
        }
        let mut stream = self.socket.get();
        loop {
            return match stream.read(spare) {
                Ok(0) => Fill::Closed,
                Ok(n) => {
                    let short = n < spare.len();
                    buf.filled_by(n);
                    if was_empty && matches!(self.phase, Phase::Head) {
                        self.head_start = cx.now;
                    }
                    Fill::Got { short }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => Fill::WouldBlock,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => Fill::Closed,
            };
        }
    }

    /// An idle connection holds no buffers: they go back to the loop's pool. A partial head
    /// that waits keeps its bytes in a buffer their size, not in a whole read buffer.
    fn release_idle(&mut self, pools: &mut Pools) {
        if !matches!(self.phase, Phase::Head) {
            return;
        }
        let partial = self.read.as_ref().filter(|b| !b.is_empty());
        if let Some(small) = partial.and_then(ReadBuf::fitted) {
            if let Some(b) = self.read.replace(small) {
                pools.give_read(b);
            }
        }
        if self.read.as_ref().is_some_and(ReadBuf::is_empty) {
            if let Some(b) = self.read.take() {
                pools.give_read(b);
            }
            if let Some(h) = self.head.take() {
                pools.give_head(h);
            }
        }
        if self.write.as_ref().is_some_and(Vec::is_empty) && self.streaming.is_none() {
            if let Some(b) = self.write.take() {
                pools.give_write(b);
            }
        }
    }
}

enum Fill {
    /// Bytes arrived; `short` when fewer than the space offered (the socket is drained).
    Got {
        short: bool,
    },
    WouldBlock,
    Closed,
}
