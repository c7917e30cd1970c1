//! A connection's HTTP exchanges: heads and bodies read into memory, handlers run (inline or on
//! the pool), responses queued and written in order, and the lingering close the core asks for.

use std::io::{ErrorKind, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::{Connection, Cx, Next, Phase, Step};
use crate::Handler;
use crate::handler::{Answer, answer};
use crate::http::buf::ReadBuf;
use crate::http::conn::{After, CONTINUE, Close, State};
use crate::http::linger::Linger;
use crate::http::request::RequestHead;
use crate::http::session::Start;
use crate::http::stream::{STREAM_PIECE, Streaming};
use crate::net::io;
use crate::net::transport::Stream;
use crate::rate::Meter;
use crate::reactor::pool::Job;
use crate::reactor::pools::Pools;

/// Requests answered per wake-up before other connections get their turn.
const REQUEST_BUDGET: u32 = 64;

impl Connection {
    pub(super) fn drive_http<H: Handler>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let mut budget = REQUEST_BUDGET;
        // Set when a read in this step came back shorter than the space offered: the socket's
        // receive queue is empty, so the next read would only say EAGAIN. Waiting instead is
        // safe with the loop's level-triggered registrations: bytes, or the end of input, left
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
            if self.http.is_closing()
                || matches!(self.phase, Phase::Streaming(_) | Phase::Dispatched)
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

    /// Starts a lingering close once the last response is out: the write side is shut, the
    /// buffers go back, and what the client still sends is dropped.
    pub(super) fn linger<H>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let _ = self.socket.get_mut().shutdown_write();
        self.release_all(cx.pools);
        self.phase = Phase::Linger(Linger::new(cx.now));
        match &mut self.phase {
            Phase::Linger(linger) => Self::drain(self.socket.get_mut(), linger),
            _ => Next::Close,
        }
    }

    /// One step of a lingering close: drop what came, wait for more until its deadline.
    pub(super) fn drain(stream: &mut Stream, linger: &mut Linger) -> Next {
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

    /// A pool worker's answer arrived.
    pub(crate) fn complete<H: Handler>(
        &mut self,
        head: Box<RequestHead>,
        answered: Answer,
        cx: &mut Cx<'_, H>,
    ) {
        self.respond(head, answered, cx);
    }

    /// Produces the next piece of a streamed body into the (empty) output; true when it did
    /// something, so the caller flushes and comes back.
    fn stream_step(&mut self) -> bool {
        let Phase::Streaming(st) = &mut self.phase else {
            return false;
        };
        let out = self
            .write
            .get_or_insert_with(|| Vec::with_capacity(STREAM_PIECE + 64));
        let produced = catch_unwind(AssertUnwindSafe(|| st.produce(out)));
        match produced {
            Ok(None) => {}
            Ok(Some(complete)) => {
                self.phase = Phase::Head;
                if !complete {
                    self.http.abort();
                }
            }
            Err(_) => {
                log::error!("response body panicked; closing the connection");
                self.phase = Phase::Head;
                self.http.abort();
            }
        }
        true
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
                let mut head = cx.pools.head();
                match self.http.recv_head(buf, &mut head, &cx.cfg.limits) {
                    Ok(None) => {
                        cx.pools.give_head(head);
                        Step::NeedInput
                    }
                    Err(e) => {
                        cx.pools.give_head(head);
                        self.http
                            .write_error(e.status(), Self::out(&mut self.write, cx.pools));
                        Step::Progress
                    }
                    Ok(Some(decoder)) if decoder.is_done() => self.dispatch(head, Vec::new(), cx),
                    Ok(Some(decoder)) => {
                        // The whole body is read before the handler runs, so a client holding
                        // it back for `100 Continue` is told to send it now.
                        if head.expect_continue && buf.is_empty() {
                            Self::out(&mut self.write, cx.pools).extend_from_slice(CONTINUE);
                        }
                        self.since = cx.now;
                        self.phase = Phase::Body {
                            head,
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
                ..
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
                            match std::mem::replace(&mut self.phase, Phase::Head) {
                                Phase::Body { head, body, .. } => self.dispatch(head, body, cx),
                                _ => Step::NeedInput,
                            }
                        } else if d.consumed == 0 {
                            Step::NeedInput
                        } else {
                            Step::Progress
                        }
                    }
                }
            }
            Phase::Dispatched
            | Phase::Streaming(_)
            | Phase::Session(_)
            | Phase::Detach(_)
            | Phase::Linger(_) => Step::NeedInput,
        }
    }

    /// Runs the handler inline, or hands the request to the pool.
    fn dispatch<H: Handler>(
        &mut self,
        head: Box<RequestHead>,
        body: Vec<u8>,
        cx: &mut Cx<'_, H>,
    ) -> Step {
        if let Some(pool) = cx.pool {
            self.phase = Phase::Dispatched;
            pool.send(Job::Http {
                key: cx.key,
                id: self.id,
                head,
                body,
                peer: self.peer.clone(),
            });
            return Step::Progress;
        }
        let answered = answer(cx.handler, &head, &mut &body[..], self.peer.as_ref());
        self.respond(head, answered, cx);
        Step::Answered
    }

    /// Queues the response to the request of `head` (which goes back to the pool).
    fn respond<H>(&mut self, head: Box<RequestHead>, answered: Answer, cx: &mut Cx<'_, H>) {
        let out = Self::out(&mut self.write, cx.pools);
        let closing = cx.closing || answered.panicked;
        self.sent = Meter::new(cx.cfg.min_response_rate);
        self.phase = Phase::Head;
        self.served += 1;
        self.since = cx.now;
        let after = self
            .http
            .write_response(&head, answered.response, true, closing, out);
        cx.pools.give_head(head);
        match after {
            After::Done => {}
            // A file is read in pieces on the loop, like any sized reader.
            After::Stream(encoder, body) => {
                self.phase = Phase::Streaming(Streaming::new(encoder, body));
            }
            After::Session(encoder, takeover) => {
                let session = takeover.start(Start {
                    waker: self.waker(cx),
                    peer: self.peer.clone(),
                    now: cx.now,
                    rate: cx.cfg.min_response_rate,
                    encoder,
                });
                self.phase = Phase::Session(session);
            }
            After::Detach(then) => self.phase = Phase::Detach(Some(then)),
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
        let stream = self.socket.get_mut();
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
    pub(super) fn release_idle(&mut self, pools: &mut Pools) {
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
        }
        if self.write.as_ref().is_some_and(Vec::is_empty) {
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
