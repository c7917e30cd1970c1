//! The input side of the connection driver: what was read becomes a request head (its origin
//! located, its body's way chosen: none, streamed to its handler, or read whole first), then
//! the body's bytes, until the request can run.

use std::net::IpAddr;

use super::body_in::BodyIn;
use super::busy::{Busy, Exchange, Fill};
use super::{Cx, Driver, Io, Phase, Request, Step};
use crate::http::budget::ALLOWANCE;
use crate::http::conn::Conn;
use crate::http::origin::{self, Hop};
use crate::http::refusal::Refusal;
use crate::http::spool::{Received, Spool};
use crate::rate::Meter;

impl Driver {
    /// Works through buffered input: a head, body bytes, or a whole request. A whole head's
    /// origin is worked out from the peer, the client a PROXY protocol header named
    /// (`proxied`) and the forwarded headers.
    pub(super) fn process(&mut self, proxied: Option<IpAddr>, cx: &mut Cx<'_>) -> Step {
        let Phase::Busy(busy) = &mut self.phase else {
            return Step::NeedInput;
        };
        if busy.read.is_empty() {
            return Step::NeedInput;
        }
        match &busy.at {
            Exchange::Head => head_step(&mut self.conn, busy, self.peer, proxied, cx),
            Exchange::Body { .. } => body_step(&mut self.conn, busy, cx),
            Exchange::Running
            | Exchange::Handed(_)
            | Exchange::Streaming(_)
            | Exchange::Producing { .. }
            | Exchange::Switching(_) => Step::NeedInput,
        }
    }

    /// Reads once from the stream; the first byte of a head starts its deadline.
    pub(super) fn fill<T: Io + ?Sized>(&mut self, io: &mut T, cx: &mut Cx<'_>) -> Fill {
        let Phase::Busy(busy) = &mut self.phase else {
            return Fill::Closed;
        };
        let head_begins = busy.read.is_empty() && matches!(busy.at, Exchange::Head);
        let filled = busy.fill(io, cx.rules.limits.max_head_bytes);
        if head_begins && matches!(filled, Fill::Got { .. }) {
            self.due = self.due.bytes_came(cx.now, cx.rules.header_read);
        }
        filled
    }
}

/// A head from the buffered input: refused, awaited further, or whole, then run at once (no
/// body, or one its handler streams), or its body read first.
#[inline(always)]
fn head_step(
    conn: &mut Conn,
    busy: &mut Busy,
    peer: Hop,
    proxied: Option<IpAddr>,
    cx: &mut Cx<'_>,
) -> Step {
    let mut head = busy.head.take().unwrap_or_else(|| cx.pools.head());
    let decoder = match conn.recv_head(&mut busy.read, &mut head, &cx.rules.limits) {
        Ok(Some(decoder)) => decoder,
        Ok(None) => {
            busy.keep_head(head, cx.pools);
            // A head longer than a working buffer waits charged to the memory budget: with no
            // room for it, it is turned away to try again soon.
            let over = busy.read.filled().len().saturating_sub(ALLOWANCE);
            if over > 0 && !cx.tally.budget().fits(over) {
                let _counted_below = conn.write_error(503, &mut busy.out, cx.date);
                cx.tally.refused(Refusal::HeadOverBudget);
                return Step::Progress;
            }
            return Step::NeedInput;
        }
        Err(e) => {
            busy.keep_head(head, cx.pools);
            cx.tally
                .refused(conn.write_error(e.status(), &mut busy.out, cx.date));
            return Step::Progress;
        }
    };
    head.origin = origin::locate(&head, peer, proxied, &cx.rules.relay);
    conn.located(&head.origin);
    cx.tally.request(&head);
    if decoder.is_done() {
        return Step::Run(Request {
            head,
            body: Received::Empty,
        });
    }
    // A handler that streams its body reads it as it arrives.
    if cx.rules.streams.as_ref().is_some_and(|s| (s.0)(&head)) {
        let continue_due = head.expect_continue && busy.read.is_empty();
        busy.at = Exchange::Handed(BodyIn::new(decoder, cx.rules.body_rate, continue_due));
        return Step::Run(Request {
            head,
            body: Received::Streamed,
        });
    }
    // Past the memory budget a request that needs a body buffer is turned away to try again
    // soon.
    if cx.tally.budget().is_spent() {
        busy.keep_head(head, cx.pools);
        let _counted_below = conn.write_error(503, &mut busy.out, cx.date);
        cx.tally.refused(Refusal::BodyOverBudget);
        return Step::Progress;
    }
    // The whole body is read before the handler runs, so a client holding it back for
    // `100 Continue` is told to send it now.
    conn.body_wanted(&head, &busy.read, &mut busy.out);
    busy.at = Exchange::Body {
        head,
        decoder,
        body: Spool::new(decoder.remaining()),
        meter: Meter::input(cx.rules.body_rate),
    };
    Step::Progress
}

/// Body bytes from the buffered input, kept in memory or a temporary file; once the body is
/// whole, its request runs.
fn body_step(conn: &mut Conn, busy: &mut Busy, cx: &mut Cx<'_>) -> Step {
    let Exchange::Body {
        decoder,
        body,
        meter,
        ..
    } = &mut busy.at
    else {
        return Step::NeedInput;
    };
    let input = busy.read.filled();
    let d = match decoder.decode(input, usize::MAX) {
        Ok(d) => d,
        Err(e) => {
            cx.tally
                .refused(conn.write_error(e.status(), &mut busy.out, cx.date));
            return Step::Progress;
        }
    };
    let kept = body.push(
        &input[d.data],
        cx.rules.limits.max_body_in_memory,
        cx.tally.budget(),
    );
    busy.read.consume(d.consumed);
    meter.moved(cx.now, d.consumed);
    if let Err(e) = kept {
        log::error!("a request body could not be kept in a temporary file: {e}");
        cx.tally
            .refused(conn.write_error(503, &mut busy.out, cx.date));
        return Step::Progress;
    }
    if !decoder.is_done() {
        return match d.consumed {
            0 => Step::NeedInput,
            _ => Step::Progress,
        };
    }
    let Exchange::Body { head, body, .. } = std::mem::replace(&mut busy.at, Exchange::Head) else {
        return Step::NeedInput;
    };
    match body.finish() {
        Ok(body) => Step::Run(Request { head, body }),
        Err(e) => {
            log::error!("a request body could not be read back from its temporary file: {e}");
            busy.keep_head(head, cx.pools);
            cx.tally
                .refused(conn.write_error(503, &mut busy.out, cx.date));
            Step::Progress
        }
    }
}
