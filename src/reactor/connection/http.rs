//! A connection's HTTP exchanges: heads and bodies read into memory, handlers run (inline or on
//! the pool), responses queued and written in order, and the lingering close the core asks for.

use std::panic::{AssertUnwindSafe, catch_unwind};

use super::busy::{Exchange, Fill, Switch};
use super::session::loop_waker;
use super::{Connection, Cx, Next, Phase, Step};
use crate::Handler;
use crate::handler::answer;
use crate::http::conn::Answer;
use crate::http::conn::{After, Close, State};
use crate::http::due::HeadDue;
use crate::http::linger::Linger;
use crate::http::request::RequestHead;
use crate::http::session::Start;
use crate::http::stream::Streaming;
use crate::net::io;
use crate::net::transport::Stream;
use crate::rate::Meter;
use crate::reactor::pool::Job;
use crate::reactor::pools::Pools;
use crate::stats::Activity;

/// Requests answered per wake-up before other connections get their turn.
const REQUEST_BUDGET: u32 = 64;

impl Connection {
    pub(super) fn drive_http<H: Handler>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        self.lend(cx.pools, cx.cfg.min_response_rate);
        let mut budget = REQUEST_BUDGET;
        // Set when a read in this step came back shorter than the space offered: the socket's
        // receive queue is empty, so the next read would only say EAGAIN. Waiting instead is
        // safe with the loop's level-triggered registrations: bytes, or the end of input, left
        // in the socket (the end may come with the last bytes and only a further read returns
        // it) are reported at the next wait. An edge-triggered registration would not report
        // them again.
        let mut drained = false;
        loop {
            let Phase::Busy(busy) = &self.phase else {
                return Next::Close;
            };
            // A streamed body, a close or a pool request in flight: nothing more is parsed
            // until it is done, so responses stay in order.
            let parsing = match busy.at {
                // The caller switches it once the response is out.
                Exchange::Switching(_) => return Next::Again,
                Exchange::Streaming(_) | Exchange::Dispatched => false,
                Exchange::Head | Exchange::Body { .. } => !self.http.is_closing(),
            };
            if !parsing {
                match self.flush(cx.now) {
                    Ok(true) => {}
                    Ok(false) => return self.wait(false, true, cx.now),
                    Err(()) => return Next::Close,
                }
                if self.stream_step() {
                    continue;
                }
                return self.hold(cx);
            }
            if budget == 0 {
                return match self.flush(cx.now) {
                    Ok(true) => Next::Again,
                    Ok(false) => self.wait(false, true, cx.now),
                    Err(()) => Next::Close,
                };
            }
            match self.process(cx) {
                Step::Answered => {
                    budget -= 1;
                    if self.queued() >= cx.cfg.limits.max_pipeline_output {
                        match self.flush(cx.now) {
                            Ok(true) => {}
                            Ok(false) => return self.wait(false, true, cx.now),
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
                Ok(false) => return self.wait(false, true, cx.now),
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
                    self.rest(cx.pools);
                    // A transport with output held back (a TLS handshake flight) is woken when
                    // the socket takes more, too: its next read sends it.
                    let write = self.socket.get().wants_write();
                    return self.wait(true, write, cx.now);
                }
                Fill::Closed => return Next::Close,
            }
        }
    }

    /// Output queued and not yet written.
    fn queued(&self) -> usize {
        match &self.phase {
            Phase::Busy(busy) => busy.out.len(),
            _ => 0,
        }
    }

    /// With its output out and nothing to parse: the connection closes if the core said so
    /// (lingering if it said so), or waits for its pool request.
    fn hold<H>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        match self.http.state() {
            State::Closing(Close::Now) => Next::Close,
            State::Closing(Close::Linger) => self.linger(cx),
            State::Closing(Close::Abort) => {
                self.socket.get_mut().abort();
                Next::Close
            }
            _ => Next::Wait {
                read: false,
                write: false,
                deadline: None,
            },
        }
    }

    /// Starts a lingering close once the last response is out: the write side is shut, the
    /// buffers go back, and what the client still sends is dropped.
    pub(super) fn linger<H>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let _ = self.socket.get_mut().shutdown_write();
        self.release_all(cx.pools);
        let mut linger = Linger::new(cx.now);
        let next = Self::drain(self.socket.get_mut(), &mut linger);
        self.phase = Phase::Linger(linger);
        next
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
        let Phase::Busy(busy) = &mut self.phase else {
            return false;
        };
        let Exchange::Streaming(st) = &mut busy.at else {
            return false;
        };
        let produced = catch_unwind(AssertUnwindSafe(|| st.produce(&mut busy.out)));
        match produced {
            Ok(None) => {}
            Ok(Some(complete)) => {
                self.http.streamed(st.sent());
                busy.at = Exchange::Head;
                if !complete {
                    self.http.abort();
                }
            }
            Err(_) => {
                log::error!("response body panicked; closing the connection");
                self.http.streamed(st.sent());
                busy.at = Exchange::Head;
                self.http.abort();
            }
        }
        true
    }

    /// Works through buffered input: a head, body bytes, or a dispatch.
    fn process<H: Handler>(&mut self, cx: &mut Cx<'_, H>) -> Step {
        let Phase::Busy(busy) = &mut self.phase else {
            return Step::NeedInput;
        };
        if busy.read.is_empty() {
            return Step::NeedInput;
        }
        match &mut busy.at {
            Exchange::Head => {
                let mut head = cx.pools.head();
                match self
                    .http
                    .recv_head(&mut busy.read, &mut head, &cx.cfg.limits)
                {
                    Ok(None) => {
                        cx.pools.give_head(head);
                        Step::NeedInput
                    }
                    Err(e) => {
                        cx.pools.give_head(head);
                        cx.counters
                            .refused(self.http.write_error(e.status(), &mut busy.out));
                        Step::Progress
                    }
                    Ok(Some(decoder)) if decoder.is_done() => {
                        cx.counters.request();
                        // Counted as served while its handler runs (a `/stats` handler sees
                        // itself); back to waiting when the step settles.
                        self._open.set(Activity::Writing);
                        self.dispatch(head, Vec::new(), cx)
                    }
                    Ok(Some(decoder)) => {
                        cx.counters.request();
                        self._open.set(Activity::Writing);
                        // The whole body is read before the handler runs, so a client holding
                        // it back for `100 Continue` is told to send it now.
                        self.http.body_wanted(&head, &busy.read, &mut busy.out);
                        busy.at = Exchange::Body {
                            head,
                            decoder,
                            body: Vec::new(),
                            meter: Meter::new(cx.cfg.min_request_body_rate),
                        };
                        Step::Progress
                    }
                }
            }
            Exchange::Body {
                decoder,
                body,
                meter,
                ..
            } => {
                let input = busy.read.filled();
                match decoder.decode(input, usize::MAX) {
                    Err(e) => {
                        cx.counters
                            .refused(self.http.write_error(e.status(), &mut busy.out));
                        Step::Progress
                    }
                    Ok(d) => {
                        body.extend_from_slice(&input[d.data]);
                        busy.read.consume(d.consumed);
                        meter.moved(cx.now, d.consumed);
                        if decoder.is_done() {
                            match std::mem::replace(&mut busy.at, Exchange::Head) {
                                Exchange::Body { head, body, .. } => self.dispatch(head, body, cx),
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
            Exchange::Dispatched | Exchange::Streaming(_) | Exchange::Switching(_) => {
                Step::NeedInput
            }
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
            if let Phase::Busy(busy) = &mut self.phase {
                busy.at = Exchange::Dispatched;
            }
            pool.send(Job::Http {
                key: cx.key,
                id: self.id,
                head,
                body,
                peer: Some(self.peer.clone()),
            });
            return Step::Progress;
        }
        let started = cx.blocking.start();
        let answered = answer(
            cx.handler,
            &head,
            &mut &body[..],
            Some(&self.peer),
            cx.counters,
        );
        cx.blocking.returned(started, &head, cx.counters);
        self.respond(head, answered, cx);
        Step::Answered
    }

    /// Queues the response to the request of `head` (which goes back to the pool).
    fn respond<H>(&mut self, head: Box<RequestHead>, answered: Answer, cx: &mut Cx<'_, H>) {
        let Phase::Busy(busy) = &mut self.phase else {
            cx.pools.give_head(head);
            return;
        };
        busy.sent = Meter::new(cx.cfg.min_response_rate);
        busy.at = Exchange::Head;
        self.due = HeadDue::after_response(
            cx.now,
            !busy.read.is_empty(),
            cx.cfg.header_read_timeout,
            cx.cfg.idle_timeout,
        );
        let after = self
            .http
            .write_response(&head, answered, true, cx.closing, &mut busy.out);
        cx.pools.give_head(head);
        match after {
            After::Done => {}
            After::Refused(why) => cx.counters.refused(why),
            // A file is read in pieces on the loop, like any sized reader.
            After::Stream(encoder, body) => {
                busy.at = Exchange::Streaming(Streaming::new(encoder, body));
            }
            After::Session(encoder, takeover) => {
                let session = takeover.start(Start {
                    waker: loop_waker(cx, self.id),
                    peer: Some(self.peer.clone()),
                    now: cx.now,
                    rate: cx.cfg.min_response_rate,
                    encoder,
                });
                busy.at = Exchange::Switching(Switch::Session(session));
            }
            After::Detach(then) => busy.at = Exchange::Switching(Switch::Detach(then)),
        }
    }

    /// Reads once from the socket.
    fn fill<H>(&mut self, cx: &mut Cx<'_, H>) -> Fill {
        let Phase::Busy(busy) = &mut self.phase else {
            return Fill::Closed;
        };
        let head_begins = busy.read.is_empty() && matches!(busy.at, Exchange::Head);
        let filled = busy.fill(self.socket.get_mut(), cx.cfg.limits.max_head_bytes);
        if head_begins && matches!(filled, Fill::Got { .. }) {
            self.due = self.due.bytes_came(cx.now, cx.cfg.header_read_timeout);
        }
        filled
    }

    /// Between requests with no output pending, the buffers go back to the loop's pool: an idle
    /// connection holds none, and a partial head that waits keeps its bytes in a buffer their
    /// size, not in a whole read buffer.
    pub(super) fn rest(&mut self, pools: &mut Pools) {
        self.phase = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Busy(busy) => match busy.rest(pools) {
                Ok(None) => Phase::Idle,
                Ok(Some(bytes)) => Phase::Partial(bytes),
                Err(busy) => Phase::Busy(busy),
            },
            other => other,
        };
    }
}
