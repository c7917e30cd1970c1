//! One WebSocket connection's driver, shared by both engines: frames through tungstenite's
//! `WebSocketContext` over a non-blocking stream, the sender's queue, the closing handshake and
//! the idle timers. It is a [`Session`]: the engine supplies the stream, a read buffer and the
//! time, and acts on the returned [`Next`].

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

use tungstenite::error::{Error as WsError, ProtocolError};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, Role, WebSocketContext};
use tungstenite::{Bytes, Message};

use super::calls::{Call, Callee, Calls, HandlerIs, Left};
use super::fragments::Fragments;
use super::held::Held;
use super::io::WsIo;
use super::quiet::Quiet;
use super::sender::Out;
use super::{WsConfig, WsMessage, WsSender};
use crate::deadline;
use crate::http::session::{Callbacks, Io, Next, Session, Work, work_as};
use crate::rate::{Meter, MinRate};

/// Messages read per step before other connections get their turn.
const MESSAGE_BUDGET: u32 = 64;

/// How long input waits near the memory budget before room is made for it: the sessions whose
/// unsent data is oldest (peers reading slower than they are sent to) are dropped then, so a
/// slow reader holds the others back this long at most.
const PAUSE_GRACE: Duration = Duration::from_millis(100);

/// Whether the peer's input may be read now, near the memory budget.
enum Input {
    Read,
    /// It waits in the socket until then (or until the connection is woken for room).
    Wait(Instant),
    /// No room can be made and the connection holds an unfinished message: it is closed
    /// (1013, try again later).
    Refused,
}

/// Whether `on_close` is still to be queued, and with what.
#[derive(Debug)]
enum OnClose {
    /// Not queued yet: with the close frame we sent, reported if the peer's never comes.
    Due(Option<CloseFrame>),
    /// Queued (the peer's close frame came, the connection ended, or a callback panicked).
    Reported,
}

impl OnClose {
    /// We sent `frame`: it is what `on_close` reports unless the peer's comes.
    fn sent(&mut self, frame: &Option<CloseFrame>) {
        if let OnClose::Due(_) = self {
            *self = OnClose::Due(frame.clone());
        }
    }

    /// `on_close` is being queued: the frame we sent, if any.
    fn report(&mut self) -> Option<CloseFrame> {
        match std::mem::replace(self, OnClose::Reported) {
            OnClose::Due(frame) => frame,
            OnClose::Reported => None,
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
    handler: Option<Callee>,
    sender: WsSender,
    cfg: WsConfig,
    outbox: VecDeque<Out>,
    /// A large message going out a frame at a time: what is left of it.
    sending: Option<Fragments>,
    calls: Vec<Call>,
    /// Where the calls due go if the connection ends while its handler is away.
    left: Left,
    life: Life,
    /// Since when the peer has sent nothing.
    quiet: Quiet,
    on_close: OnClose,
    /// The minimum rate of output while the peer does not take it all.
    rate: Option<MinRate>,
    sent: Meter,
    /// Since when input has waited for room in the memory budget.
    paused_since: Option<Instant>,
    /// What tungstenite holds (the unfinished incoming message, its buffers), charged to the
    /// memory budget.
    held: Held,
}

/// However the connection goes (an unwind included), its queue stops taking messages and
/// what it held goes back to the server's budget.
impl Drop for WsConn {
    fn drop(&mut self) {
        self.sender.mark_closed();
        self.sender.unpause();
    }
}

impl WsConn {
    pub(crate) fn new(
        handler: Callee,
        cfg: WsConfig,
        sender: WsSender,
        now: Instant,
        rate: Option<MinRate>,
    ) -> Self {
        WsConn {
            held: Held::new(sender.budget(), cfg.tungstenite().read_buffer_size),
            ctx: WebSocketContext::new(Role::Server, Some(cfg.tungstenite())),
            handler: Some(handler),
            sender,
            cfg,
            outbox: VecDeque::new(),
            sending: None,
            calls: vec![Call::Open],
            left: Left::default(),
            life: Life::Open,
            quiet: Quiet::Since(now),
            on_close: OnClose::Due(None),
            rate,
            sent: Meter::output(rate),
            paused_since: None,
        }
    }

    /// Runs the connection as far as it goes without blocking. With `inline` the callbacks run
    /// here; otherwise [`Next::Dispatch`] asks for them to go to the pool.
    fn run(&mut self, io: &mut WsIo<'_>, now: Instant, inline: bool) -> Next {
        self.sender.running();
        let mut budget = MESSAGE_BUDGET;
        loop {
            if !self.calls.is_empty() {
                if !inline {
                    return match self.handler {
                        Some(_) => Next::Dispatch,
                        None => Next::Busy,
                    };
                }
                if let Some(mut calls) = self.take_calls() {
                    calls.run();
                    self.calls_ran(calls, io);
                }
            }
            if self.life == Life::Ended {
                return Next::Close;
            }
            // Output first: queued messages, then everything buffered goes out.
            if !self.sender.take(&mut self.outbox) {
                // Dropped for the server's memory budget.
                self.end();
                continue;
            }
            self.write_out(io, now);
            if self.life == Life::Ended {
                continue;
            }
            match self.ctx.flush(io) {
                // A frame of a large message is out: its next one (only now: while output
                // waits, tungstenite holds the frame before, and no more).
                // The backlog is not all out: its transfer goes on, with what went out
                // credited (each frame starting afresh let a fast reader of a large message
                // be cut at a grace period after its frame).
                Ok(()) if self.sending.is_some() || !self.outbox.is_empty() => {
                    self.sent.moved(now, io.take_written());
                    self.held.flushed();
                    self.next_frame(io);
                    continue;
                }
                // Everything is out: the next backlog is measured afresh, and what was sent no
                // longer counts against the send queue's limit.
                Ok(()) => {
                    self.sent = Meter::output(self.rate);
                    self.sender.flushed();
                    self.held.flushed();
                    self.renew_if_worth_it();
                }
                Err(e) if would_block(&e) => {
                    // A peer that takes our output slower than the minimum rate is dropped.
                    self.sent.moved(now, io.take_written());
                    let stalled = self.sent.deadline(now, || io.unacknowledged());
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
                return Next::Again;
            }
            match self.held_back(now) {
                Input::Read => {}
                // Near the memory budget: the peer's input waits in the socket.
                Input::Wait(until) => {
                    if self.calls.is_empty() && !self.sender.settle() {
                        return Next::Paused {
                            deadline: Some(until),
                        };
                    }
                    continue;
                }
                Input::Refused => {
                    self.sender.budget().session_dropped();
                    self.fail(io, CloseCode::Again, "the server's memory is spent");
                    continue;
                }
            }
            io.new_slice(self.held.frames());
            let read = self.ctx.read(io);
            let (taken, frames) = io.slice_taken();
            self.held.took(taken, frames, read.as_ref().ok());
            match read {
                // More input waits: the budget is looked at again first.
                Err(e) if would_block(&e) && io.sliced() => budget -= 1,
                Ok(msg) => {
                    budget -= 1;
                    self.quiet = Quiet::Since(now);
                    match msg {
                        Message::Text(t) => self.calls.push(Call::Message(WsMessage::Text(t))),
                        Message::Binary(b) => self.calls.push(Call::Message(WsMessage::Binary(b))),
                        Message::Ping(p) => self.calls.push(Call::Ping(p)),
                        Message::Pong(p) => self.calls.push(Call::Pong(p)),
                        Message::Close(frame) => {
                            // tungstenite queued the echo; the next flush sends it.
                            self.sender.mark_closed();
                            let sent = self.on_close.report();
                            self.calls.push(Call::Close(frame.or(sent)));
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

    /// Hands tungstenite the messages taken from the queue, up to a large one's first frame
    /// (its next ones go once each is out: [`WsConn::next_frame`]).
    fn write_out(&mut self, io: &mut WsIo<'_>, now: Instant) {
        if self.life != Life::Open {
            // Anything queued behind a close frame is not sent.
            self.sending = None;
            self.outbox.clear();
            return;
        }
        if self.sending.is_some() {
            return;
        }
        while let Some(out) = self.outbox.pop_front() {
            if self.life != Life::Open {
                self.outbox.clear();
                return;
            }
            match out {
                Out::Msg(m) => {
                    let (first, rest) = Fragments::split(m);
                    self.write(io, first);
                    if rest.is_some() {
                        self.sending = rest;
                        return;
                    }
                }
                Out::Close(frame) => self.start_close(io, frame, now),
            }
        }
    }

    /// Everything handed to tungstenite is out: a large message's next frame goes.
    fn next_frame(&mut self, io: &mut WsIo<'_>) {
        let Some(fragments) = &mut self.sending else {
            return;
        };
        let frame = fragments.next_frame();
        if fragments.done() {
            self.sending = None;
        }
        self.write(io, frame);
    }

    /// Hands tungstenite a message (or frame) to send.
    fn write(&mut self, io: &mut WsIo<'_>, m: Message) {
        self.held.wrote(m.len());
        if let Err(e) = self.ctx.write(io, m) {
            if !would_block(&e) {
                self.ended_by(e, io);
            }
        }
    }

    /// With everything sent out (tungstenite holds no output, no pong or close to send) and
    /// nothing in its input buffer, a buffer that grew for a large frame or message is given
    /// back by making the context anew: an open connection's context holds nothing else.
    fn renew_if_worth_it(&mut self) {
        if self.held.may_renew() && self.life == Life::Open && self.ctx.can_write() {
            self.ctx = WebSocketContext::new(Role::Server, Some(self.cfg.tungstenite()));
            self.held.renewed();
        }
    }

    /// The callbacks due, with the handler (for a pool worker). `None` while it is away.
    fn take_calls(&mut self) -> Option<Calls> {
        Some(Calls {
            handler: self.handler.take()?,
            sender: self.sender.clone(),
            calls: std::mem::take(&mut self.calls),
            handler_is: HandlerIs::Live,
            left: self.left.clone(),
        })
    }

    /// The callbacks ran (here or on a worker); a panic closes with 1011.
    fn calls_ran(&mut self, calls: Calls, io: &mut WsIo<'_>) {
        self.handler = Some(calls.handler);
        if calls.handler_is == HandlerIs::Panicked {
            self.on_close = OnClose::Reported;
            self.fail(io, CloseCode::Error, "internal error");
        }
    }

    /// A deadline passed: the closing handshake timed out, or the connection was idle.
    fn timer(&mut self, io: &mut WsIo<'_>, now: Instant) {
        match self.life {
            Life::Closing(Some(until)) if now >= until => self.end(),
            Life::Open => {
                let passed = |at: Option<Instant>| at.is_some_and(|at| now >= at);
                // Input held back near the budget is not the peer's idleness.
                let held_back = self.paused_since.is_some();
                if passed(self.quiet.idle_at(self.cfg.idle_timeout)) && !held_back {
                    let frame = close_frame(CloseCode::Away, "idle timeout");
                    self.start_close(io, Some(frame), now);
                } else if passed(self.quiet.ping_at(self.cfg.ping_interval)) {
                    self.quiet = self.quiet.pinged();
                    let _ = self.ctx.write(io, Message::Ping(Bytes::new()));
                }
            }
            _ => {}
        }
    }

    /// Server shutdown: close with 1001 (once).
    fn going_away(&mut self, io: &mut WsIo<'_>, now: Instant) {
        let frame = close_frame(CloseCode::Away, "server shutting down");
        self.start_close(io, Some(frame), now);
    }

    /// The connection is going away: sends fail from now on, and `on_close` is due unless it
    /// ran. Returns the last callbacks, to run on the pool (or here when `inline`).
    fn last_calls(&mut self, inline: bool) -> Option<Calls> {
        self.sender.mark_closed();
        if let OnClose::Due(_) = self.on_close {
            let sent = self.on_close.report();
            self.calls.push(Call::Close(sent));
        }
        if self.calls.is_empty() {
            return None;
        }
        // The handler is away: its batch runs these when it comes back to no connection.
        if self.handler.is_none() {
            if let Ok(mut left) = self.left.lock() {
                left.append(&mut self.calls);
            }
            return None;
        }
        let mut calls = self.take_calls()?;
        if inline {
            calls.run();
            return None;
        }
        Some(calls)
    }

    /// Whether input waits for room in the memory budget, and until when. Past
    /// [`PAUSE_GRACE`] room is made: the sessions whose unsent data is oldest are dropped (as
    /// for a message that does not fit, at most `DROPS_PER_MESSAGE`); with none to drop, a
    /// connection whose unfinished incoming message is charged is refused (it cannot finish
    /// it, and what it holds would never be given back), and any other waits another grace.
    fn held_back(&mut self, now: Instant) -> Input {
        // A closing connection reads its peer's close frame whatever is held; not the rest of
        // an unfinished message past the budget (tungstenite still gathers data frames while
        // its close waits for the peer's).
        if self.life != Life::Open {
            let refused = self.held.is_charged() && !self.sender.may_read();
            self.sender.unpause();
            self.paused_since = None;
            return match refused {
                true => Input::Refused,
                false => Input::Read,
            };
        }
        if self.sender.may_read() {
            self.paused_since = None;
            return Input::Read;
        }
        let since = *self.paused_since.get_or_insert(now);
        let until = deadline::after(since, PAUSE_GRACE).unwrap_or(since);
        if now < until {
            return Input::Wait(until);
        }
        if self.sender.make_room() {
            self.paused_since = None;
            return Input::Read;
        }
        if self.held.is_charged() {
            return Input::Refused;
        }
        self.paused_since = Some(now);
        Input::Wait(deadline::after(now, PAUSE_GRACE).unwrap_or(now))
    }

    /// Waits for the socket; `stalled`: output is blocked, and this is when its rate runs out.
    fn wait(&self, stalled: Option<Option<Instant>>) -> Next {
        let write = stalled.is_some();
        let deadline = match (&self.life, stalled) {
            (Life::Closing(until), _) => *until,
            (_, Some(stalled)) => stalled,
            _ => {
                let ping = self.quiet.ping_at(self.cfg.ping_interval);
                let idle = self.quiet.idle_at(self.cfg.idle_timeout);
                ping.into_iter().chain(idle).min()
            }
        };
        Next::Wait { write, deadline }
    }

    fn start_close(&mut self, io: &mut WsIo<'_>, frame: Option<CloseFrame>, now: Instant) {
        if self.life != Life::Open {
            return;
        }
        self.sender.mark_closed();
        self.on_close.sent(&frame);
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
            self.on_close.sent(&Some(frame.clone()));
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
            // tungstenite reads a length with its top bit set as one too large.
            WsError::Capacity(_) if self.held.frames().malformed() => CloseCode::Protocol,
            WsError::Capacity(_) => CloseCode::Size,
            WsError::Protocol(_) => CloseCode::Protocol,
            _ => CloseCode::Error,
        };
        log::debug!("websocket failed: {e}");
        self.fail(io, code, "");
    }
}

impl Session for WsConn {
    fn drive(&mut self, io: &mut Io<'_>, now: Instant, callbacks: Callbacks) -> Next {
        self.run(&mut WsIo::over(io), now, callbacks == Callbacks::Inline)
    }
    fn expire(&mut self, io: &mut Io<'_>, now: Instant) {
        self.timer(&mut WsIo::over(io), now)
    }
    fn shutdown(&mut self, io: &mut Io<'_>, now: Instant) {
        self.going_away(&mut WsIo::over(io), now)
    }
    fn finish(&mut self, callbacks: Callbacks) -> Option<Box<dyn Work>> {
        let last = self.last_calls(callbacks == Callbacks::Inline)?;
        Some(Box::new(last))
    }
    fn take_work(&mut self) -> Option<Box<dyn Work>> {
        Some(Box::new(self.take_calls()?))
    }
    fn put_back(&mut self, work: Box<dyn Work>, io: &mut Io<'_>) {
        match work_as::<Calls>(work) {
            Some(calls) => self.calls_ran(*calls, &mut WsIo::over(io)),
            // Not this session's work: nothing to run it with, so the connection ends.
            None => self.end(),
        }
    }
    fn keeps_input(&self) -> bool {
        true
    }

    fn kind(&self) -> crate::http::session::Kind {
        crate::http::session::Kind::WebSocket
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

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::http::budget::{ALLOWANCE, Budget};
    use crate::http::buf::ReadBuf;
    use crate::http::session::memory::{Pipe, Wakes, waker};
    use crate::stats::Panics;
    use crate::ws::{SendError, WsHandler};

    /// `handler`, its panics counted nowhere.
    fn callee(handler: impl WsHandler) -> Callee {
        Callee::new(Box::new(handler), Panics::default())
    }

    /// Records the callbacks; echoes messages; panics on the message "panic".
    struct Echo(Arc<Mutex<Vec<String>>>);

    impl WsHandler for Echo {
        fn on_open(&mut self, _: &WsSender) {
            self.log("open".into());
        }
        fn on_message(&mut self, ws: &WsSender, msg: WsMessage) {
            self.log(format!("message {}", msg.as_text().unwrap_or("")));
            assert_ne!(msg.as_text(), Some("panic"), "the handler panics");
            let _ = ws.send(msg);
        }
        fn on_close(&mut self, frame: Option<CloseFrame>) {
            self.log(format!("close {:?}", frame.map(|f| u16::from(f.code))));
        }
    }

    impl Echo {
        fn log(&self, line: String) {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    }

    /// The peer: one context frames what it sends, another reads what the server wrote (a
    /// read to the end of what is there ends the reading context).
    struct Client {
        ctx: WebSocketContext,
    }

    impl Client {
        fn new() -> Self {
            Client {
                ctx: WebSocketContext::new(Role::Client, None),
            }
        }

        /// Queues a (masked) client message into the pipe's input.
        fn send(&mut self, pipe: &mut Pipe, msg: Message) {
            let mut wire = Cursor::new(Vec::new());
            self.ctx.write(&mut wire, msg).expect("the stream is open");
            self.ctx.flush(&mut wire).expect("the stream is open");
            pipe.input.extend(wire.into_inner());
        }

        /// Reads every message the server wrote.
        fn received(&mut self, pipe: &mut Pipe) -> Vec<Message> {
            let mut rx = WebSocketContext::new(Role::Client, None);
            let mut wire = Cursor::new(std::mem::take(&mut pipe.output));
            let mut got = Vec::new();
            while let Ok(m) = rx.read(&mut wire) {
                got.push(m);
            }
            got
        }
    }

    fn started(log: &Arc<Mutex<Vec<String>>>) -> Box<dyn Session> {
        let wakes = Arc::new(Wakes::default());
        let sender = WsSender::new(waker(&wakes), 1 << 20, None, &Budget::default());
        let conn = WsConn::new(
            callee(Echo(log.clone())),
            WsConfig::default(),
            sender,
            Instant::now(),
            None,
        );
        Box::new(conn)
    }

    fn drive(s: &mut dyn Session, pipe: &mut Pipe, buf: &mut ReadBuf, cb: Callbacks) -> Next {
        pipe.io(buf, |io| s.drive(io, Instant::now(), cb))
    }

    fn log(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
        log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    #[test]
    fn inline_callbacks_echo_in_order_and_the_closing_handshake_reports_the_frame() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut s = started(&calls);
        let (mut pipe, mut buf, mut client) = (Pipe::new(), ReadBuf::new(), Client::new());
        client.send(&mut pipe, Message::text("one"));
        client.send(&mut pipe, Message::text("two"));
        let idle = Next::Wait {
            write: false,
            deadline: None,
        };
        assert_eq!(drive(&mut *s, &mut pipe, &mut buf, Callbacks::Inline), idle);
        let echoed = client.received(&mut pipe);
        assert_eq!(echoed, vec![Message::text("one"), Message::text("two")]);
        let close = CloseFrame {
            code: CloseCode::Normal,
            reason: "bye".into(),
        };
        client.send(&mut pipe, Message::Close(Some(close)));
        drive(&mut *s, &mut pipe, &mut buf, Callbacks::Inline);
        // The close frame is echoed with its code.
        let back = client.received(&mut pipe);
        assert!(
            matches!(&back[..], [Message::Close(Some(f))] if f.code == CloseCode::Normal),
            "{back:?}"
        );
        assert!(s.finish(Callbacks::Inline).is_none());
        assert_eq!(
            log(&calls),
            ["open", "message one", "message two", "close Some(1000)"]
        );
        // Finished again (the reactor finishes a session in the turn that ended it, then as
        // it closes the connection): nothing more runs.
        assert!(s.finish(Callbacks::Inline).is_none());
        assert_eq!(log(&calls).len(), 4);
    }

    #[test]
    fn pool_callbacks_go_out_as_work_and_come_back() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut s = started(&calls);
        let (mut pipe, mut buf, mut client) = (Pipe::new(), ReadBuf::new(), Client::new());
        // on_open is due first.
        assert_eq!(
            drive(&mut *s, &mut pipe, &mut buf, Callbacks::Pool),
            Next::Dispatch
        );
        let mut work = s.take_work().expect("callbacks are due");
        // While the callbacks are away a message that comes waits for them.
        assert!(s.take_work().is_none());
        client.send(&mut pipe, Message::text("hi"));
        assert_eq!(
            drive(&mut *s, &mut pipe, &mut buf, Callbacks::Pool),
            Next::Busy
        );
        work.run();
        pipe.io(&mut buf, |io| s.put_back(work, io));
        assert_eq!(
            drive(&mut *s, &mut pipe, &mut buf, Callbacks::Pool),
            Next::Dispatch
        );
        let mut work = s.take_work().expect("a message is due");
        work.run();
        pipe.io(&mut buf, |io| s.put_back(work, io));
        let idle = Next::Wait {
            write: false,
            deadline: None,
        };
        assert_eq!(drive(&mut *s, &mut pipe, &mut buf, Callbacks::Pool), idle);
        assert_eq!(client.received(&mut pipe), vec![Message::text("hi")]);
        // The connection ends: on_close goes to the pool as the last work.
        let mut last = s.finish(Callbacks::Pool).expect("on_close is due");
        last.run();
        assert_eq!(log(&calls), ["open", "message hi", "close None"]);
    }

    #[test]
    fn a_panicking_callback_closes_with_1011() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut s = started(&calls);
        let (mut pipe, mut buf, mut client) = (Pipe::new(), ReadBuf::new(), Client::new());
        client.send(&mut pipe, Message::text("panic"));
        assert_eq!(
            drive(&mut *s, &mut pipe, &mut buf, Callbacks::Inline),
            Next::Close
        );
        let back = client.received(&mut pipe);
        assert!(
            matches!(&back[..], [Message::Close(Some(f))] if f.code == CloseCode::Error),
            "{back:?}"
        );
    }

    #[test]
    fn shutdown_sends_1001_and_the_close_times_out() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut s = started(&calls);
        let (mut pipe, mut buf, mut client) = (Pipe::new(), ReadBuf::new(), Client::new());
        let t0 = Instant::now();
        pipe.io(&mut buf, |io| s.shutdown(io, t0));
        let Next::Wait {
            deadline: Some(until),
            ..
        } = pipe.io(&mut buf, |io| s.drive(io, t0, Callbacks::Inline))
        else {
            panic!("the server waits for the peer's close");
        };
        assert_eq!(until, t0 + WsConfig::default().close_timeout);
        let back = client.received(&mut pipe);
        assert!(
            matches!(&back[..], [Message::Close(Some(f))] if f.code == CloseCode::Away),
            "{back:?}"
        );
        let late = until + Duration::from_millis(1);
        pipe.io(&mut buf, |io| s.expire(io, late));
        assert_eq!(
            pipe.io(&mut buf, |io| s.drive(io, late, Callbacks::Inline)),
            Next::Close
        );
        s.finish(Callbacks::Inline);
        assert_eq!(log(&calls), ["open", "close Some(1001)"]);
    }

    #[test]
    fn a_peer_that_takes_nothing_is_dropped_at_the_minimum_rate() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let wakes = Arc::new(Wakes::default());
        let sender = WsSender::new(waker(&wakes), 1 << 20, None, &Budget::default());
        let rate = MinRate::new(240, Duration::from_secs(5));
        let t0 = Instant::now();
        let mut s = echoing(&sender, &calls, t0, Some(rate));
        let (mut pipe, mut buf) = (Pipe::new(), ReadBuf::new());
        pipe.room = 0;
        sender.send("stuck").expect("the stream is open");
        let Next::Wait {
            write: true,
            deadline: Some(cut),
        } = pipe.io(&mut buf, |io| s.drive(io, t0, Callbacks::Inline))
        else {
            panic!("blocked output waits to write, with a deadline");
        };
        assert_eq!(cut, t0 + Duration::from_secs(5));
        assert_eq!(
            pipe.io(&mut buf, |io| s.drive(io, cut, Callbacks::Inline)),
            Next::Close
        );
        assert_eq!(sender.send("x"), Err(SendError::Closed));
    }

    /// A large message's backlog is one transfer, frame after frame: a peer that takes its
    /// first 256 KiB frame and a little more in 4 s (64 times the 1,000 B/s minimum) keeps its
    /// credit while the next frame waits (each frame once started afresh: a grace period).
    #[test]
    fn a_large_message_keeps_its_credit_from_frame_to_frame() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let wakes = Arc::new(Wakes::default());
        let sender = WsSender::new(waker(&wakes), 4 << 20, None, &Budget::default());
        let rate = MinRate::new(1000, Duration::from_secs(5));
        let t0 = Instant::now();
        let mut s = echoing(&sender, &calls, t0, Some(rate));
        let (mut pipe, mut buf) = (Pipe::new(), ReadBuf::new());
        pipe.room = 0;
        let large = WsMessage::Binary(vec![7u8; 600 * 1024].into());
        sender.send(large).expect("the stream is open");
        let first = pipe.io(&mut buf, |io| s.drive(io, t0, Callbacks::Inline));
        assert_eq!(
            first,
            Next::Wait {
                write: true,
                deadline: Some(t0 + rate.grace)
            }
        );
        let t4 = t0 + Duration::from_secs(4);
        pipe.room = 256 * 1024 + 100;
        let next = pipe.io(&mut buf, |io| s.drive(io, t4, Callbacks::Inline));
        // 262,244 bytes taken in 4 s: 262 s at the rate, 13 s of waiting earned (the grace
        // period and twice the time waited); afresh, the deadline would be 9 s.
        assert_eq!(
            next,
            Next::Wait {
                write: true,
                deadline: Some(t0 + Duration::from_secs(13))
            }
        );
    }

    /// A WebSocket session that echoes and logs into `calls`, sending through `sender`,
    /// started at `t0` with the minimum `rate`.
    fn echoing(
        sender: &WsSender,
        calls: &Arc<Mutex<Vec<String>>>,
        t0: Instant,
        rate: Option<MinRate>,
    ) -> Box<dyn Session> {
        let config = WsConfig::default();
        let echo = callee(Echo(calls.clone()));
        Box::new(WsConn::new(echo, config, sender.clone(), t0, rate))
    }

    /// A WebSocket session on `budget` that echoes and logs into `calls`.
    fn on_budget(
        budget: &Budget,
        calls: &Arc<Mutex<Vec<String>>>,
        wakes: &Arc<Wakes>,
    ) -> Box<dyn Session> {
        handled_by(Echo(calls.clone()), WsConfig::default(), budget, wakes)
    }

    /// A WebSocket session on `budget` with `handler` and `cfg`.
    fn handled_by(
        handler: impl WsHandler,
        cfg: WsConfig,
        budget: &Budget,
        wakes: &Arc<Wakes>,
    ) -> Box<dyn Session> {
        let sender = WsSender::new(waker(wakes), 1 << 20, None, budget);
        Box::new(WsConn::new(
            callee(handler),
            cfg,
            sender,
            Instant::now(),
            None,
        ))
    }

    /// Near the memory budget (fifteen sixteenths held) the peer's input waits in the socket:
    /// nothing is read (no message can be sent on to others) until what is held falls to seven
    /// eighths of the budget; the connection is then woken, and reads.
    #[test]
    fn near_the_budget_input_waits_until_there_is_room() {
        let (wakes, budget) = (Arc::new(Wakes::default()), Budget::new(1 << 20));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut s = on_budget(&budget, &calls, &wakes);
        let (mut pipe, mut buf, mut client) = (Pipe::new(), ReadBuf::new(), Client::new());
        // Something else holds fifteen sixteenths of the budget.
        let mut hog = budget.charge();
        hog.hold(ALLOWANCE + (1 << 20) / 16 * 15);
        client.send(&mut pipe, Message::text("one"));
        let t0 = Instant::now();
        let paused = Next::Paused {
            deadline: Some(t0 + PAUSE_GRACE),
        };
        assert_eq!(
            pipe.io(&mut buf, |io| s.drive(io, t0, Callbacks::Inline)),
            paused
        );
        assert_eq!(log(&calls), ["open"], "the message is not read");
        assert!(!pipe.input.is_empty(), "it waits in the socket");
        assert_eq!(budget.reads_paused(), 1);
        // Still above seven eighths: still paused, and nobody is woken.
        let before = wakes.count();
        hog.hold(ALLOWANCE + (1 << 20) / 8 * 7 + 1);
        assert_eq!(wakes.count(), before);
        let later = t0 + Duration::from_millis(1);
        assert_eq!(
            pipe.io(&mut buf, |io| s.drive(io, later, Callbacks::Inline)),
            paused
        );
        // At seven eighths the paused connection is woken, and reads.
        hog.hold(ALLOWANCE + (1 << 20) / 8 * 7);
        assert_eq!(wakes.count(), before + 1, "woken once");
        let idle = Next::Wait {
            write: false,
            deadline: None,
        };
        assert_eq!(
            pipe.io(&mut buf, |io| s.drive(io, later, Callbacks::Inline)),
            idle
        );
        assert_eq!(log(&calls), ["open", "message one"]);
        assert_eq!(client.received(&mut pipe), vec![Message::text("one")]);
        assert_eq!(budget.reads_paused(), 1, "paused once");
    }

    /// Input held back for the grace makes room: the session whose peer has left its data
    /// unread the longest is dropped, and the input is read.
    #[test]
    fn past_the_grace_the_oldest_unsent_data_makes_room_for_input() {
        let (wakes, budget) = (Arc::new(Wakes::default()), Budget::new(1 << 20));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut s = on_budget(&budget, &calls, &wakes);
        // A slow peer's queue holds half the budget, something else the rest up to 15/16.
        let slow = WsSender::new(waker(&wakes), 1 << 20, None, &budget);
        slow.send(vec![b'x'; ALLOWANCE + (1 << 19)])
            .expect("room for it");
        let mut hog = budget.charge();
        hog.hold(ALLOWANCE + (1 << 20) / 16 * 15 - (1 << 19));
        let (mut pipe, mut buf, mut client) = (Pipe::new(), ReadBuf::new(), Client::new());
        client.send(&mut pipe, Message::text("one"));
        let t0 = Instant::now();
        let first = pipe.io(&mut buf, |io| s.drive(io, t0, Callbacks::Inline));
        assert!(matches!(first, Next::Paused { .. }), "{first:?}");
        assert!(!slow.is_closed(), "not within the grace");
        let due = t0 + PAUSE_GRACE;
        let idle = Next::Wait {
            write: false,
            deadline: None,
        };
        assert_eq!(
            pipe.io(&mut buf, |io| s.drive(io, due, Callbacks::Inline)),
            idle
        );
        assert!(slow.is_closed(), "the slow peer's session is dropped");
        assert_eq!(budget.refusals(), (0, 1));
        assert_eq!(log(&calls), ["open", "message one"]);
        // With no session to drop, input waits another grace.
        hog.hold(ALLOWANCE + (1 << 20));
        client.send(&mut pipe, Message::text("two"));
        let again = due + PAUSE_GRACE;
        let paused = pipe.io(&mut buf, |io| s.drive(io, due, Callbacks::Inline));
        assert_eq!(
            paused,
            Next::Paused {
                deadline: Some(again)
            }
        );
        assert_eq!(
            pipe.io(&mut buf, |io| s.drive(io, again, Callbacks::Inline)),
            Next::Paused {
                deadline: Some(again + PAUSE_GRACE)
            }
        );
        assert_eq!(log(&calls), ["open", "message one"], "two waits");
        assert_eq!(budget.paused_sessions(), 1);
        drop(s);
        assert_eq!(
            budget.paused_sessions(),
            0,
            "a connection gone is not paused"
        );
    }

    /// The send queue's limit counts what the peer has not taken, also once the connection has
    /// taken it from the queue: a peer that reads nothing costs the limit, not the limit per
    /// turn (before, each turn emptied the count and the rest piled up in the write buffer).
    #[test]
    fn the_send_queue_limit_counts_output_the_peer_has_not_taken() {
        let wakes = Arc::new(Wakes::default());
        let sender = WsSender::new(waker(&wakes), 1 << 20, None, &Budget::default());
        let t0 = Instant::now();
        let mut s = echoing(&sender, &Arc::new(Mutex::new(Vec::new())), t0, None);
        let (mut pipe, mut buf) = (Pipe::new(), ReadBuf::new());
        pipe.room = 0;
        let big = vec![b'x'; 600 << 10];
        sender.send(big.clone()).expect("room for it");
        pipe.io(&mut buf, |io| s.drive(io, t0, Callbacks::Inline));
        assert_eq!(
            sender.send(big.clone()),
            Err(SendError::Full),
            "the first is not out"
        );
        pipe.room = usize::MAX;
        pipe.io(&mut buf, |io| s.drive(io, t0, Callbacks::Inline));
        sender
            .send(big)
            .expect("once it is out, there is room again");
    }

    /// A masked client frame (a zero mask): `b0` (FIN and opcode) and `payload`.
    fn raw_frame(b0: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![b0];
        match payload.len() {
            len @ 0..=125 => f.push(0x80 | len as u8),
            len @ 126..=0xffff => {
                f.push(0x80 | 126);
                f.extend((len as u16).to_be_bytes());
            }
            len => {
                f.push(0x80 | 127);
                f.extend((len as u64).to_be_bytes());
            }
        }
        f.extend([0, 0, 0, 0]);
        f.extend_from_slice(payload);
        f
    }

    /// What the server wrote, in short: `data N` or `close CODE`.
    fn kinds(back: &[Message]) -> Vec<String> {
        back.iter()
            .map(|m| match m {
                Message::Close(f) => format!("close {:?}", f.as_ref().map(|f| f.code)),
                m => format!("data {}", m.len()),
            })
            .collect()
    }

    /// A frame tungstenite will refuse (a continuation with no message begun), read in the
    /// same read as the end of a message, fails the connection with 1002 whatever the
    /// message's size: after a large one, the context is not made anew with it unparsed.
    #[test]
    fn a_stray_frame_read_behind_a_large_message_still_fails_the_connection() {
        for size in [100, 100_000] {
            let calls = Arc::new(Mutex::new(Vec::new()));
            let mut s = started(&calls);
            let (mut pipe, mut buf, mut client) = (Pipe::new(), ReadBuf::new(), Client::new());
            let message = raw_frame(0x82, &vec![7; size]);
            pipe.input.extend(&message[..message.len() - 10]);
            drive(&mut *s, &mut pipe, &mut buf, Callbacks::Inline);
            pipe.input.extend(&message[message.len() - 10..]);
            pipe.input.extend(raw_frame(0x00, b""));
            let next = drive(&mut *s, &mut pipe, &mut buf, Callbacks::Inline);
            let back = client.received(&mut pipe);
            assert!(
                matches!(back.last(), Some(Message::Close(Some(f))) if f.code == CloseCode::Protocol),
                "size {size}: server wrote {:?}, next {next:?}",
                kinds(&back)
            );
        }
    }

    /// Closes (1000) on a message; logs `on_close`.
    struct CloseOnMessage(Arc<Mutex<Vec<String>>>);

    impl WsHandler for CloseOnMessage {
        fn on_message(&mut self, ws: &WsSender, _: WsMessage) {
            let _ = ws.close(CloseCode::Normal, "done");
        }
        fn on_close(&mut self, frame: Option<CloseFrame>) {
            if let Ok(mut log) = self.0.lock() {
                log.push(format!("close {:?}", frame.map(|f| u16::from(f.code))));
            }
        }
    }

    /// A closing connection reads its peer's close frame near the budget even when its input
    /// buffer, which held a large message, is still charged: that is not a message being
    /// gathered.
    #[test]
    fn a_closing_connection_reads_the_peers_close_after_a_large_message() {
        let (wakes, budget) = (Arc::new(Wakes::default()), Budget::new(1 << 24));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let handler = CloseOnMessage(calls.clone());
        let mut s = handled_by(handler, WsConfig::default(), &budget, &wakes);
        let (mut pipe, mut buf, mut client) = (Pipe::new(), ReadBuf::new(), Client::new());
        client.send(&mut pipe, Message::binary(vec![0; 1 << 20]));
        let t0 = Instant::now();
        let first = pipe.io(&mut buf, |io| s.drive(io, t0, Callbacks::Inline));
        assert!(matches!(first, Next::Wait { .. }), "{first:?}");
        assert!(budget.held() > 0, "the input buffer is charged");
        // Something else now holds fifteen sixteenths of the budget.
        let mut hog = budget.charge();
        hog.hold(ALLOWANCE + (1 << 24) / 16 * 15);
        let away = CloseFrame {
            code: CloseCode::Away,
            reason: "bye".into(),
        };
        client.send(&mut pipe, Message::Close(Some(away)));
        let next = pipe.io(&mut buf, |io| s.drive(io, t0, Callbacks::Inline));
        s.finish(Callbacks::Inline);
        assert_eq!(
            (budget.refusals(), log(&calls)),
            ((0, 0), vec!["close Some(1001)".to_string()]),
            "next {next:?}"
        );
    }

    /// A message no larger than the read buffer tungstenite was made with grew nothing: it
    /// leaves no charge, and near the budget the next message waits (not refused).
    #[test]
    fn a_frame_within_the_working_buffer_leaves_no_charge() {
        let (wakes, budget) = (Arc::new(Wakes::default()), Budget::new(1 << 22));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let cfg = WsConfig::default().read_buffer_size(64 << 10);
        let mut s = handled_by(Echo(calls.clone()), cfg, &budget, &wakes);
        let (mut pipe, mut buf, mut client) = (Pipe::new(), ReadBuf::new(), Client::new());
        client.send(&mut pipe, Message::binary(vec![0; 40 << 10]));
        let t0 = Instant::now();
        pipe.io(&mut buf, |io| s.drive(io, t0, Callbacks::Inline));
        let idle_held = budget.held();
        let mut hog = budget.charge();
        hog.hold(ALLOWANCE + (1 << 22));
        client.send(&mut pipe, Message::text("two"));
        let first = pipe.io(&mut buf, |io| s.drive(io, t0, Callbacks::Inline));
        let due = t0 + PAUSE_GRACE;
        let second = pipe.io(&mut buf, |io| s.drive(io, due, Callbacks::Inline));
        assert_eq!(
            (idle_held, budget.refusals()),
            (0, (0, 0)),
            "first {first:?}, second {second:?}, server wrote {:?}",
            kinds(&client.received(&mut pipe))
        );
    }

    /// Two large messages back to back, echoed: while the second arrives into the input buffer
    /// the first one grew, the two are counted once (the buffer as large as the first, the
    /// second's bytes in it), not the one on top of the other; beside it, the output buffer
    /// the first echo grew to a frame (out, but not given back while input comes).
    #[test]
    fn back_to_back_large_messages_are_not_charged_twice() {
        const MIB: usize = 1 << 20;
        let (wakes, budget) = (Arc::new(Wakes::default()), Budget::new(1 << 26));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut s = on_budget(&budget, &calls, &wakes);
        let (mut pipe, mut buf) = (Pipe::new(), ReadBuf::new());
        let a = raw_frame(0x82, &vec![1; MIB]);
        let b = raw_frame(0x82, &vec![2; MIB]);
        pipe.input.extend(&a);
        pipe.input.extend(&b[..b.len() / 2]);
        drive(&mut *s, &mut pipe, &mut buf, Callbacks::Inline);
        let held = budget.held();
        // The echo went out a frame at a time: the output buffer holds a frame.
        let frame = super::super::fragments::OUT_FRAME;
        assert!(
            (a.len() + frame - 3 * ALLOWANCE - 4096..=a.len() + frame).contains(&held),
            "{held} bytes held with the first message in and echoed, and half the second in"
        );
        pipe.input.extend(&b[b.len() / 2..]);
        drive(&mut *s, &mut pipe, &mut buf, Callbacks::Inline);
        assert_eq!(budget.held(), 0, "both out, and the buffer given back");
    }

    /// To a peer that takes less than a frame per turn, a large message goes a frame at a
    /// time: tungstenite is handed the next frame only once the one before is out, so what it
    /// holds stays at a frame however many turns the message takes.
    #[test]
    fn a_slow_peer_is_handed_a_large_message_a_frame_at_a_time() {
        use super::super::fragments::OUT_FRAME;
        let (wakes, budget) = (Arc::new(Wakes::default()), Budget::new(1 << 26));
        let sender = WsSender::new(waker(&wakes), 1 << 24, None, &budget);
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut conn = WsConn::new(
            callee(Echo(calls)),
            WsConfig::default(),
            sender.clone(),
            Instant::now(),
            None,
        );
        let (mut pipe, mut buf) = (Pipe::new(), ReadBuf::new());
        sender.send(vec![7u8; 4 * OUT_FRAME]).expect("queued");
        let mut turns = 0;
        while pipe.output.len() < 4 * OUT_FRAME {
            pipe.room = OUT_FRAME / 3;
            pipe.io(&mut buf, |io| {
                conn.drive(io, Instant::now(), Callbacks::Inline)
            });
            assert!(
                conn.held.out_pending() <= OUT_FRAME + 16,
                "turn {turns}: {} bytes handed to tungstenite and not out",
                conn.held.out_pending()
            );
            turns += 1;
            assert!(turns < 100, "the message goes out");
        }
        assert!(turns >= 12, "{turns} turns");
    }
}
