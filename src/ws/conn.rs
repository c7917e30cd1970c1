//! One WebSocket connection's driver, shared by both engines: frames through tungstenite's
//! `WebSocketContext` over a non-blocking socket, the sender's queue, the closing handshake and
//! the idle timers. The engine supplies the socket, a read buffer and the time, and acts on the
//! returned [`WsNext`].

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use tungstenite::error::{Error as WsError, ProtocolError};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, Role, WebSocketContext};
use tungstenite::{Bytes, Message};

use super::{Out, WsConfig, WsHandler, WsMessage, WsSender};
use crate::deadline;
use crate::http::buf::ReadBuf;
use crate::rate::{Meter, MinRate};

/// Size of the read buffer a WebSocket is driven with: a 16 KiB message arrives in one read
/// instead of three through the 8 KiB HTTP buffer (`bench/syscalls.sh ws`: 3.15 reads per 16 KiB
/// message). Only the pages a read writes become resident.
pub(crate) const WS_READ_BUF: usize = 64 * 1024;

/// Messages read per step before other connections get their turn.
const MESSAGE_BUDGET: u32 = 64;

/// The socket as tungstenite sees it: reads come through the engine's buffer (one `read(2)` of
/// up to its size, however little tungstenite asks for per call), writes go straight out.
pub(crate) struct WsIo<'a> {
    sock: &'a TcpStream,
    buf: &'a mut ReadBuf,
    /// Once a read returned less than the space offered, the socket is drained: later reads
    /// in this step answer `WouldBlock` without a system call, and the caller's level-triggered
    /// wait (the thread engine's `ppoll`) reports any byte that arrived since. Off on the
    /// reactor, where it was measured slower (bench/results/2026-11-22-reactor-edge-short-read.md).
    short_read_drains: bool,
    drained: bool,
    /// A read that fills the buffer doubles it, up to this many bytes (0: never grows).
    grow_to: usize,
    /// Bytes written since the last [`WsIo::take_written`], for the output's minimum rate.
    written: usize,
}

impl<'a> WsIo<'a> {
    /// Reads until the socket reports `WouldBlock`.
    pub(crate) fn new(sock: &'a TcpStream, buf: &'a mut ReadBuf) -> Self {
        WsIo {
            sock,
            buf,
            short_read_drains: false,
            drained: false,
            grow_to: 0,
            written: 0,
        }
    }

    /// Bytes written since the last call.
    fn take_written(&mut self) -> usize {
        std::mem::take(&mut self.written)
    }

    /// For a connection's own buffer on the thread engine: stops reading after a short read
    /// (the caller then waits level-triggered), and grows the buffer up to 64 KiB when reads
    /// fill it, so large messages take one read each. The buffer stays 8 KiB for a connection
    /// that never receives more at once.
    pub(crate) fn until_short_read(sock: &'a TcpStream, buf: &'a mut ReadBuf) -> Self {
        WsIo {
            short_read_drains: true,
            grow_to: WS_READ_BUF,
            ..WsIo::new(sock, buf)
        }
    }
}

impl Read for WsIo<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.buf.is_empty() {
            if self.drained {
                return Err(ErrorKind::WouldBlock.into());
            }
            let spare = self.buf.spare(0);
            let offered = spare.len();
            let n = loop {
                match (&mut &*self.sock).read(&mut *spare) {
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    other => break other?,
                }
            };
            self.drained = self.short_read_drains && n > 0 && n < offered;
            self.buf.filled_by(n);
            if n == offered && self.buf.len() < self.grow_to {
                self.buf.grow((self.buf.len() * 2).min(self.grow_to));
            }
            if n == 0 {
                return Ok(0);
            }
        }
        let have = self.buf.filled();
        let n = have.len().min(out.len());
        out[..n].copy_from_slice(&have[..n]);
        self.buf.consume(n);
        Ok(n)
    }
}

impl Write for WsIo<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        loop {
            match (&mut &*self.sock).write(data) {
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Ok(n) => {
                    self.written += n;
                    return Ok(n);
                }
                other => return other,
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What the engine does next with the connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WsNext {
    /// Wait for the socket to be readable (and writable when `write`), a sender's wake-up, or
    /// the deadline (then call [`WsConn::expire`]).
    Wait {
        write: bool,
        deadline: Option<Instant>,
    },
    /// Work is left after the budget: run again after the others.
    Again,
    /// Pool dispatch: callbacks are due; hand [`WsConn::take_calls`] to a worker.
    Dispatch,
    /// The callbacks are on a worker: arm nothing; their return drives the connection again.
    Busy,
    /// Close the socket (call [`WsConn::finish`] first).
    Close,
}

/// A callback due.
pub(crate) enum Call {
    Open,
    Message(WsMessage),
    Ping(Bytes),
    Pong(Bytes),
    Close(Option<CloseFrame>),
}

/// Callbacks on their way to a pool worker and back.
pub(crate) struct Calls {
    pub(crate) handler: Box<dyn WsHandler>,
    pub(crate) sender: WsSender,
    pub(crate) calls: Vec<Call>,
    pub(crate) panicked: bool,
    /// `on_close` ran.
    closed: bool,
}

impl Calls {
    /// True when `on_close` has not run yet: the connection went while the callbacks were on a
    /// worker. Queues it (with no frame) for [`Calls::run`].
    pub(crate) fn close_due(&mut self) -> bool {
        if self.closed || self.panicked {
            return false;
        }
        self.calls.push(Call::Close(None));
        true
    }

    /// Runs the callbacks in order. A panic is logged and stops the rest.
    pub(crate) fn run(&mut self) {
        for call in self.calls.drain(..) {
            if self.panicked {
                break;
            }
            self.closed |= matches!(call, Call::Close(_));
            let h = &mut self.handler;
            let ws = &self.sender;
            let ran = catch_unwind(AssertUnwindSafe(|| match call {
                Call::Open => h.on_open(ws),
                Call::Message(m) => h.on_message(ws, m),
                Call::Ping(p) => h.on_ping(ws, &p),
                Call::Pong(p) => h.on_pong(ws, &p),
                Call::Close(f) => h.on_close(f),
            }));
            if ran.is_err() {
                log::error!("websocket handler panicked; closing with 1011");
                self.panicked = true;
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Life {
    Open,
    /// We sent a close frame and wait for the answer until the deadline (`None`: no limit).
    Closing(Option<Instant>),
    Ended,
}

pub(crate) struct WsConn {
    ctx: WebSocketContext,
    /// `None` while the callbacks are on a pool worker.
    handler: Option<Box<dyn WsHandler>>,
    sender: WsSender,
    cfg: WsConfig,
    outbox: VecDeque<Out>,
    calls: Vec<Call>,
    life: Life,
    /// Last time a message (or control frame) arrived.
    last_rx: Instant,
    pinged: bool,
    /// The close frame we sent, reported to `on_close` if the peer's never comes.
    sent_close: Option<CloseFrame>,
    close_reported: bool,
    /// The minimum rate of output while the peer does not take it all.
    rate: Option<MinRate>,
    sent: Meter,
}

impl WsConn {
    pub(crate) fn new(
        handler: Box<dyn WsHandler>,
        cfg: WsConfig,
        sender: WsSender,
        now: Instant,
        rate: Option<MinRate>,
    ) -> Self {
        WsConn {
            ctx: WebSocketContext::new(Role::Server, Some(cfg.tungstenite())),
            handler: Some(handler),
            sender,
            cfg,
            outbox: VecDeque::new(),
            calls: vec![Call::Open],
            life: Life::Open,
            last_rx: now,
            pinged: false,
            sent_close: None,
            close_reported: false,
            rate,
            sent: Meter::new(rate),
        }
    }

    /// Runs the connection as far as it goes without blocking. With `inline` the callbacks run
    /// here; otherwise [`WsNext::Dispatch`] asks for them to go to the pool.
    pub(crate) fn drive(&mut self, io: &mut WsIo<'_>, now: Instant, inline: bool) -> WsNext {
        self.sender.running();
        let mut budget = MESSAGE_BUDGET;
        loop {
            if !self.calls.is_empty() {
                if !inline {
                    return match self.handler {
                        Some(_) => WsNext::Dispatch,
                        None => WsNext::Busy,
                    };
                }
                if let Some(mut calls) = self.take_calls() {
                    calls.run();
                    self.put_back(calls, io);
                }
            }
            if self.life == Life::Ended {
                return WsNext::Close;
            }
            // Output first: queued messages, then everything buffered goes out.
            self.sender.take(&mut self.outbox);
            while let Some(out) = self.outbox.pop_front() {
                if self.life != Life::Open {
                    // Anything queued behind a close frame is not sent.
                    self.outbox.clear();
                    break;
                }
                let sent = match out {
                    Out::Msg(m) => self.ctx.write(io, m),
                    Out::Close(frame) => {
                        self.start_close(io, frame, now);
                        Ok(())
                    }
                };
                if let Err(e) = sent {
                    if !would_block(&e) {
                        self.ended_by(e, io);
                    }
                }
            }
            if self.life == Life::Ended {
                continue;
            }
            match self.ctx.flush(io) {
                // Everything is out: the next backlog is measured afresh.
                Ok(()) => self.sent = Meter::new(self.rate),
                Err(e) if would_block(&e) => {
                    // A peer that takes our output slower than the minimum rate is dropped.
                    self.sent.moved(now, io.take_written());
                    let stalled = self.sent.deadline(now);
                    if stalled.is_some_and(|d| now >= d) {
                        self.end();
                        continue;
                    }
                    return self.wait(Some(stalled));
                }
                Err(e) => {
                    self.ended_by(e, io);
                    continue;
                }
            }
            if budget == 0 {
                return WsNext::Again;
            }
            match self.ctx.read(io) {
                Ok(msg) => {
                    budget -= 1;
                    self.last_rx = now;
                    self.pinged = false;
                    match msg {
                        Message::Text(t) => self.calls.push(Call::Message(WsMessage::Text(t))),
                        Message::Binary(b) => self.calls.push(Call::Message(WsMessage::Binary(b))),
                        Message::Ping(p) => self.calls.push(Call::Ping(p)),
                        Message::Pong(p) => self.calls.push(Call::Pong(p)),
                        Message::Close(frame) => {
                            // tungstenite queued the echo; the next flush sends it.
                            self.sender.mark_closed();
                            let frame = frame.or_else(|| self.sent_close.take());
                            self.calls.push(Call::Close(frame));
                            self.close_reported = true;
                        }
                        Message::Frame(_) => {}
                    }
                }
                Err(e) if would_block(&e) => {
                    if self.calls.is_empty() && !self.sender.settle() {
                        return self.wait(None);
                    }
                }
                Err(e) => self.ended_by(e, io),
            }
        }
    }

    /// The callbacks due, with the handler (for a pool worker). `None` while it is away.
    pub(crate) fn take_calls(&mut self) -> Option<Calls> {
        Some(Calls {
            handler: self.handler.take()?,
            sender: self.sender.clone(),
            calls: std::mem::take(&mut self.calls),
            panicked: false,
            closed: false,
        })
    }

    /// The callbacks ran (here or on a worker); a panic closes with 1011.
    pub(crate) fn put_back(&mut self, calls: Calls, io: &mut WsIo<'_>) {
        self.handler = Some(calls.handler);
        if calls.panicked {
            self.close_reported = true;
            self.fail(io, CloseCode::Error, "internal error");
        }
    }

    /// A deadline passed: the closing handshake timed out, or the connection was idle.
    pub(crate) fn expire(&mut self, io: &mut WsIo<'_>, now: Instant) {
        match self.life {
            Life::Closing(Some(until)) if now >= until => self.end(),
            Life::Open => {
                let idle = now.duration_since(self.last_rx);
                if self.cfg.idle_timeout.is_some_and(|t| idle >= t) {
                    let frame = close_frame(CloseCode::Away, "idle timeout");
                    self.start_close(io, Some(frame), now);
                } else if self.cfg.ping_interval.is_some_and(|t| idle >= t) && !self.pinged {
                    self.pinged = true;
                    let _ = self.ctx.write(io, Message::Ping(Bytes::new()));
                }
            }
            _ => {}
        }
    }

    /// Server shutdown: close with 1001.
    pub(crate) fn shutdown(&mut self, io: &mut WsIo<'_>, now: Instant) {
        let frame = close_frame(CloseCode::Away, "server shutting down");
        self.start_close(io, Some(frame), now);
    }

    /// The connection is going away: sends fail from now on, and `on_close` is due unless it
    /// ran. Returns the last callbacks, to run on the pool (or here when `inline`).
    pub(crate) fn finish(&mut self, inline: bool) -> Option<Calls> {
        self.sender.mark_closed();
        if !self.close_reported {
            self.close_reported = true;
            self.calls.push(Call::Close(self.sent_close.take()));
        }
        if self.calls.is_empty() {
            return None;
        }
        let mut calls = self.take_calls()?;
        if inline {
            calls.run();
            return None;
        }
        Some(calls)
    }

    /// True until a close frame was sent or received.
    pub(crate) fn is_open(&self) -> bool {
        self.life == Life::Open
    }

    /// Waits for the socket; `stalled`: output is blocked, and this is when its rate runs out.
    fn wait(&self, stalled: Option<Option<Instant>>) -> WsNext {
        let write = stalled.is_some();
        let deadline = match (&self.life, stalled) {
            (Life::Closing(until), _) => *until,
            (_, Some(stalled)) => stalled,
            _ => {
                let ping = self
                    .cfg
                    .ping_interval
                    .filter(|_| !self.pinged)
                    .and_then(|t| deadline::after(self.last_rx, t));
                let idle = self
                    .cfg
                    .idle_timeout
                    .and_then(|t| deadline::after(self.last_rx, t));
                ping.into_iter().chain(idle).min()
            }
        };
        WsNext::Wait { write, deadline }
    }

    fn start_close(&mut self, io: &mut WsIo<'_>, frame: Option<CloseFrame>, now: Instant) {
        if self.life != Life::Open {
            return;
        }
        self.sender.mark_closed();
        self.sent_close = frame.clone();
        self.life = Life::Closing(deadline::after(now, self.cfg.close_timeout));
        if let Err(e) = self.ctx.close(io, frame) {
            if !would_block(&e) {
                self.ended_by(e, io);
            }
        }
    }

    /// Fails the connection: a close frame with `code`, then the socket closes.
    fn fail(&mut self, io: &mut WsIo<'_>, code: CloseCode, why: &str) {
        let frame = close_frame(code, why);
        if self.life == Life::Open {
            self.sent_close = Some(frame.clone());
            let _ = self.ctx.close(io, Some(frame));
            let _ = self.ctx.flush(io);
        }
        self.end();
    }

    fn end(&mut self) {
        self.life = Life::Ended;
        self.sender.mark_closed();
    }

    /// tungstenite reported the end of the connection, cleanly or not.
    fn ended_by(&mut self, e: WsError, io: &mut WsIo<'_>) {
        let code = match &e {
            WsError::ConnectionClosed
            | WsError::AlreadyClosed
            | WsError::Io(_)
            | WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => return self.end(),
            WsError::Utf8(_) => CloseCode::Invalid,
            WsError::Capacity(_) => CloseCode::Size,
            WsError::Protocol(_) => CloseCode::Protocol,
            _ => CloseCode::Error,
        };
        log::debug!("websocket failed: {e}");
        self.fail(io, code, "");
    }
}

fn close_frame(code: CloseCode, reason: &str) -> CloseFrame {
    CloseFrame {
        code,
        reason: reason.to_owned().into(),
    }
}

fn would_block(e: &WsError) -> bool {
    matches!(e, WsError::Io(io) if io.kind() == ErrorKind::WouldBlock)
}
