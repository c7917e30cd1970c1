//! Request heads read without a worker. The parker thread reads a parked connection when it
//! becomes readable and hands it to a worker only once a whole head is buffered; a partial head
//! waits parked with its bytes under the header-read deadline, and at the deadline is answered
//! `408` and closed, lingering. A worker that finds only part of the next head hands the
//! connection back the same way, so no client, however slow or silent, holds a worker before
//! it has sent a request. Lingering closes run here too, without a thread.

use std::io::Write;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::connection::{Connection, Wait};
use crate::Limits;
use crate::http::access::Logging;
use crate::http::buf::ReadBuf;
use crate::http::conn::{Conn, Late};
use crate::http::due::HeadDue;
use crate::http::linger::Linger;
use crate::http::parse::head_ready;
use crate::net::io;

/// Read buffers going round between the parker thread (which fills one per readable
/// connection) and the workers (which take it to serve the request and give back the one they
/// had), so that a busy keep-alive connection costs no allocation.
pub(crate) struct Buffers {
    give: Sender<Box<ReadBuf>>,
    take: Receiver<Box<ReadBuf>>,
}

impl Buffers {
    /// A pool that keeps at most `n` spare buffers.
    pub(crate) fn new(n: usize) -> Self {
        let (give, take) = crossbeam_channel::bounded(n.max(1));
        Buffers { give, take }
    }

    pub(crate) fn take(&self) -> Box<ReadBuf> {
        self.take
            .try_recv()
            .unwrap_or_else(|_| Box::new(ReadBuf::new()))
    }

    /// Takes back a buffer, emptied (dropped when the pool is full).
    pub(crate) fn give(&self, mut buf: Box<ReadBuf>) {
        buf.reset();
        let _ = self.give.try_send(buf);
    }
}

/// What the parker thread needs to read heads.
pub(crate) struct HeadReads {
    pub(crate) limits: Limits,
    pub(crate) header_read_timeout: Duration,
    pub(crate) buffers: Buffers,
    /// A `408` answered here goes to the access log too.
    pub(crate) access_log: Logging,
}

/// What reading a parked connection came to.
pub(crate) enum Outcome {
    /// A whole request head is buffered: a worker serves it.
    Ready(Connection),
    /// The socket has nothing more for now: park it again (its `wait` says for what).
    Park(Connection),
    /// The client closed, the connection failed, or its lingering close is over: drop it.
    Close,
}

/// Reads a readable parked HTTP connection until a whole head is buffered or the socket says
/// EAGAIN (edge-triggered parking needs that before it parks again). A lingering connection
/// has what came dropped instead.
pub(crate) fn read(mut conn: Connection, cx: &HeadReads, now: Instant) -> Outcome {
    let wait = std::mem::replace(&mut conn.wait, Wait::Idle { until: None });
    let (input, until, waited) = match wait {
        Wait::Linger(linger) => return drain(conn, linger),
        Wait::Head { input, until } | Wait::Ready { input, until } => (input, until, None),
        Wait::New { until } => (cx.buffers.take(), until, Some(Wait::New { until })),
        Wait::Idle { until } => (
            cx.buffers.take(),
            HeadDue::Idle(until)
                .bytes_came(now, cx.header_read_timeout)
                .until(),
            Some(Wait::Idle { until }),
        ),
        session @ Wait::Session(_) => {
            conn.wait = session;
            return Outcome::Ready(conn);
        }
    };
    fill(conn, input, until, waited, cx)
}

/// Reads into `input` until the head is ready or the socket is empty. `waited`: what the
/// connection waited for when it had nothing buffered (it goes back to it if nothing came).
fn fill(
    mut conn: Connection,
    mut input: Box<ReadBuf>,
    until: Option<Instant>,
    waited: Option<Wait>,
    cx: &HeadReads,
) -> Outcome {
    loop {
        if !input.is_empty() && head_ready(input.filled(), &cx.limits) {
            conn.wait = Wait::Ready { input, until };
            return Outcome::Ready(conn);
        }
        match io::read_now(conn.stream(), input.spare(cx.limits.max_head_bytes)) {
            Ok(Some(0)) | Err(_) => {
                cx.buffers.give(input);
                return Outcome::Close;
            }
            Ok(Some(n)) => input.filled_by(n),
            Ok(None) => {
                conn.wait = match (input.is_empty(), waited) {
                    // Nothing came (an event for bytes a worker already read).
                    (true, Some(waited)) => {
                        cx.buffers.give(input);
                        waited
                    }
                    _ => Wait::Head {
                        input: fitted(input, &cx.buffers),
                        until,
                    },
                };
                return Outcome::Park(conn);
            }
        }
    }
}

/// A partial head waits in a buffer its size (rounded up), not in a whole read buffer: a
/// thousand slow clients cost what they sent. The large buffer goes back to the pool.
pub(crate) fn fitted(input: Box<ReadBuf>, buffers: &Buffers) -> Box<ReadBuf> {
    match input.fitted() {
        Some(small) => {
            buffers.give(input);
            Box::new(small)
        }
        None => input,
    }
}

/// A parked connection's deadline passed: a partial head is answered `408` and its close
/// lingers; a connection that sent nothing of its next request closes. (Sessions keep their
/// own time and never come here.)
pub(crate) fn expire(mut conn: Connection, cx: &HeadReads, now: Instant) -> Outcome {
    let late = match std::mem::replace(&mut conn.wait, Wait::Idle { until: None }) {
        Wait::Head { input, .. } | Wait::Ready { input, .. } => {
            cx.buffers.give(input);
            Late::Head
        }
        Wait::New { .. } | Wait::Idle { .. } => Late::Idle,
        Wait::Linger(_) | Wait::Session(_) => return Outcome::Close,
    };
    let mut out = Vec::new();
    let mut http = Conn::new(cx.access_log, conn.peer.as_ref());
    match http.request_timed_out(late, &mut out) {
        None => Outcome::Close,
        Some(why) => {
            conn.counters().refused(why);
            // A fresh error response fits the socket's buffer; what does not fit is lost with
            // the connection either way.
            let _ = conn.stream().write(&out);
            let _ = conn.stream().flush();
            linger(conn, now)
        }
    }
}

/// Starts a lingering close after a response that ends the connection with its framing lost:
/// shuts the write side, drops what the client already sent, and parks it to drop the rest.
pub(crate) fn linger(mut conn: Connection, now: Instant) -> Outcome {
    let _ = conn.stream().shutdown_write();
    drain(conn, Linger::new(now))
}

/// Drops what a lingering connection's client sends until EAGAIN (park again), its end of
/// input or the byte budget (close).
fn drain(mut conn: Connection, mut linger: Linger) -> Outcome {
    if linger.drain(conn.stream()) {
        conn.wait = Wait::Linger(linger);
        Outcome::Park(conn)
    } else {
        Outcome::Close
    }
}
