//! Worker threads: handlers as plain blocking code. A worker takes a connection whose core
//! driver has handler work for it (a whole request, its body read, to run; a streamed body's
//! next piece; a hand-over) or a session with something to do, and drives it while the socket
//! neither blocks nor runs dry. With parking on it hands the connection back to the parker as
//! soon as the driver waits (for the next request, the rest of one, or a client that takes its
//! response slowly), so a worker is held only by handler code; thread per connection, it waits
//! on the socket itself.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::Builder;
use super::connection::{Connection, Held, Job, Phase, Watch};
use super::detached::{Waiter, detach_session};
use super::park::{Parker, Parking};
use super::session::{self, Session};
use super::streamed::Streamed;
use crate::Handler;
use crate::deadline;
use crate::engine::Control;
use crate::handler::answer;
use crate::http::buf::ReadBuf;
use crate::http::date::DateLine;
use crate::http::driver::{Action, Cx, Handover, Request, Rules, WaitFor};
use crate::http::framing::Encoder;
use crate::http::pools::{self, Pools};
use crate::http::session::{Start, Takeover, Wake};
use crate::http::spool::Received;
use crate::net::io::{self, Interrupt};
use crate::net::upgrade::detach;
use crate::stats::Activity;

/// What one server's workers share.
pub(crate) struct Shared<H> {
    pub(crate) handler: H,
    pub(crate) config: Builder,
    /// The rules the connections' drivers follow, from `config`.
    pub(crate) rules: Rules,
    /// Buffers go round between the parker's pools and the workers' through this.
    pub(crate) pools: Arc<pools::Shared>,
    pub(crate) parker: Option<Arc<Parker>>,
    pub(crate) control: Arc<Control>,
}

impl<H> Shared<H> {
    /// WebSockets and event streams are parked (else each gets a thread).
    fn parks_sessions(&self) -> bool {
        self.parker.is_some() && self.config.parking == super::Parking::All
    }
}

/// Working sets and heads a worker keeps (the rest go back to the parker through the overflow).
const WORKER_KEEPS: usize = 2;

/// How a worker waits when a connection's driver waits for its socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waits {
    /// It hands the connection to the parker.
    Park,
    /// It waits on the socket itself: thread per connection, or an exchange under way at
    /// shutdown, when parking has ended.
    Block,
}

pub(crate) fn run<H: Handler>(shared: &Shared<H>, queue: &Receiver<Job>) {
    let mut pools = Pools::sharing(WORKER_KEEPS, shared.pools.clone());
    let mut date = DateLine::new();
    let waits = match shared.parker {
        Some(_) => Waits::Park,
        None => Waits::Block,
    };
    while let Ok(job) = queue.recv() {
        if let Some(parker) = &shared.parker {
            parker.job_taken();
        }
        let mut next = Some((job.into_connection(), waits));
        while let Some((conn, waits)) = next.take() {
            let kept = match &conn.phase {
                Phase::Session(_) => session::drive(shared, conn, &mut pools),
                Phase::Http { .. } => serve(shared, conn, &mut pools, &mut date, waits),
            };
            let (Some(kept), Some(parker)) = (kept, &shared.parker) else {
                continue;
            };
            if kept.has_more() {
                // Work left after its budget (a busy WebSocket, a pipelining client) yields to
                // the connections queued before it, as on the reactor.
                if let Err(conn) = parker.requeue(kept) {
                    next = Some((conn, waits));
                }
                continue;
            }
            match parker.park(kept) {
                Parking::Parked => {}
                Parking::Ready(conn) => next = Some((conn, waits)),
                Parking::Refused(conn) if conn.session().is_some() => {
                    session::abandon(conn, &mut pools);
                }
                // Parking has ended (shutdown): driven on here, waiting on its socket, with the
                // shutdown's rules (an idle connection, its driver closes).
                Parking::Refused(conn) => next = Some((conn, Waits::Block)),
            }
        }
    }
}

/// Why a visit of a worker to a connection stopped.
enum Stop {
    /// The driver waits for the socket.
    Wait {
        on: WaitFor,
        until: Option<Instant>,
    },
    /// Its budget ran out, or a streamed body's next piece is due.
    Yield,
    Close,
    Switch(Handover),
}

/// Drives an HTTP connection: runs the handlers of the requests its driver has ready, until
/// the driver waits (`Some(conn)`: to park, or to requeue after its budget) or the connection
/// closes or leaves (`None`).
fn serve<H: Handler>(
    shared: &Shared<H>,
    mut conn: Connection,
    pools: &mut Pools,
    date: &mut DateLine,
    waits: Waits,
) -> Option<Connection> {
    loop {
        match visit(shared, &mut conn, pools, date, waits)? {
            Stop::Wait { on, until } => {
                if let Some(s) = conn.serving() {
                    *s.held = Held::Socket {
                        watch: Watch::of(on),
                        until,
                    };
                }
                match waits {
                    Waits::Park if stays(shared, &mut conn, on, until) => {}
                    Waits::Park => return Some(conn),
                    Waits::Block => {
                        if !wait_on_socket(shared, &mut conn, pools, date, on.writes(), until) {
                            return None;
                        }
                    }
                }
            }
            // (Its driver's state says `Held::Work`: it is requeued.)
            Stop::Yield if waits == Waits::Park => return Some(conn),
            Stop::Yield => {}
            Stop::Close => return None,
            Stop::Switch(handover) => return switch(shared, conn, handover, pools),
        }
    }
}

/// One turn of a worker on a connection: its driver drives it and the worker runs the handler
/// of each request it has ready, until the driver stops for something else. `None`: not an
/// HTTP connection.
fn visit<H: Handler>(
    shared: &Shared<H>,
    conn: &mut Connection,
    pools: &mut Pools,
    date: &mut DateLine,
    waits: Waits,
) -> Option<Stop> {
    let counters = &shared.control.counters;
    let s = conn.serving()?;
    let closing = shared.control.is_shutting_down();
    let cx = Cx::new(
        &shared.rules,
        pools,
        counters,
        Instant::now(),
        date,
        closing,
    );
    let mut cx = match waits {
        // The parker's registration is edge-triggered.
        Waits::Park => cx.edge_triggered(),
        Waits::Block => cx,
    };
    let mut ready = match std::mem::replace(s.held, Held::Work) {
        Held::Request(request) => Some(Action::Run(request)),
        Held::Handover(handover) => Some(Action::Switch(handover)),
        Held::Socket { .. } | Held::Work | Held::Turn => None,
    };
    loop {
        let action = match ready.take() {
            Some(action) => action,
            None => s.driver.drive(s.stream, &mut cx),
        };
        let Request { head, mut body } = match action {
            Action::Run(request) => request,
            Action::Wait { on, until } => return Some(Stop::Wait { on, until }),
            // The parker drives a yielded turn on (a worker only runs handler code); a worker
            // that waits on its socket itself drives on here.
            Action::Yield => {
                *s.held = Held::Turn;
                return Some(Stop::Yield);
            }
            Action::Produce => return Some(Stop::Yield),
            Action::Close => return Some(Stop::Close),
            Action::Switch(handover) => return Some(Stop::Switch(handover)),
        };
        s.open.set(Activity::Writing);
        let answered = match body {
            // Read from the socket as the handler asks, on this worker.
            Received::Streamed => {
                let mut streamed = Streamed {
                    driver: &mut *s.driver,
                    stream: &mut *s.stream,
                };
                answer(&shared.handler, &head, &mut streamed, s.peer, counters)
            }
            _ => answer(&shared.handler, &head, &mut body, s.peer, counters),
        };
        body.release();
        // Shutdown may have begun while the handler ran: its response is then the last.
        cx.closing = shared.control.is_shutting_down();
        s.driver.answer(head, answered, Instant::now(), &mut cx);
    }
}

/// With parking on, a connection waiting for its next request may wait on this worker a
/// moment ([`Builder::park_linger`]), never past the driver's deadline `until` (its idle
/// timeout is the parker's to carry out): a busy keep-alive client's next request is then
/// served without a hand-off. True when it became readable in that time.
fn stays<H>(
    shared: &Shared<H>,
    conn: &mut Connection,
    on: WaitFor,
    until: Option<Instant>,
) -> bool {
    let linger = shared.config.park_linger;
    if linger == Duration::ZERO || on != WaitFor::Input || !conn.is_idle() {
        return false;
    }
    let lingered = deadline::after(Instant::now(), linger);
    let until = match (until, lingered) {
        (Some(due), Some(lingered)) => Some(due.min(lingered)),
        (due, lingered) => due.or(lingered),
    };
    let cancel = Some(&shared.control.shutting_down);
    io::wait(&*conn.stream(), false, until, cancel).is_ok()
}

/// Thread per connection (or an exchange finished at shutdown): waits on the socket for what
/// the driver waits for. A wait for a new request ends at shutdown; a passed deadline goes to
/// the driver. False when the connection closes.
fn wait_on_socket<H>(
    shared: &Shared<H>,
    conn: &mut Connection,
    pools: &mut Pools,
    date: &mut DateLine,
    write: bool,
    until: Option<Instant>,
) -> bool {
    // Shutdown interrupts a wait for a next request, never a request under way; a connection
    // whose first request has not come waits a moment more for it (the driver says how long).
    let shutting_down = &shared.control.shutting_down;
    let stopping = shutting_down.load(Ordering::Acquire);
    let fresh = conn.awaits_first_request();
    if stopping && conn.closes_at_shutdown() {
        return false;
    }
    let (until, cancel) = match (fresh, stopping) {
        (true, true) => (conn.deadline_at_shutdown(Instant::now()), None),
        (true, false) => (until, Some(shutting_down)),
        (false, _) if conn.closes_at_shutdown() => (until, Some(shutting_down)),
        (false, _) => (until, None),
    };
    conn.settle();
    if !write && conn.stream().buffered_input() {
        return true;
    }
    match io::wait(&*conn.stream(), write, until, cancel) {
        Ok(()) => true,
        Err(Interrupt::TimedOut) => {
            let counters = &shared.control.counters;
            let Some((stream, driver, _)) = conn.http() else {
                return false;
            };
            let mut cx = Cx::new(&shared.rules, pools, counters, Instant::now(), date, false);
            driver.expire(stream, &mut cx)
        }
        // A fresh connection is driven again, its wait now shortened for the shutdown.
        Err(Interrupt::Cancelled) => fresh,
    }
}

/// A session lasts as long as its client: it runs on a thread of its own (out of descriptors
/// for its waiter: it closes). Nothing is left for the worker.
fn on_a_thread<H: Handler>(
    shared: &Shared<H>,
    conn: Connection,
    takeover: Box<dyn Takeover>,
    encoder: Encoder,
    input: Option<ReadBuf>,
    pools: &mut Pools,
) -> Option<Connection> {
    let waiter = match Waiter::new() {
        Ok(waiter) => Arc::new(waiter),
        Err(e) => {
            log::error!("cannot make a session thread's waker: {e}; closing its connection");
            // Its handler is handler code, dropped caught.
            shared.control.counters.panics().drop_caught(takeover);
            return None;
        }
    };
    let session = takeover.start(starting(shared, &conn, Box::new(waiter.clone()), encoder));
    let leftover = input.as_ref().map_or(Vec::new(), |b| b.filled().to_vec());
    if let Some(buf) = input {
        pools.give_read(buf);
    }
    let (stream, open) = conn.into_parts();
    detach_session(&shared.control, stream, leftover, session, open, waiter);
    None
}

/// What a session on this engine starts with: `waker` wakes its parker or its thread.
fn starting<H: Handler>(
    shared: &Shared<H>,
    conn: &Connection,
    waker: Box<dyn Wake>,
    encoder: Encoder,
) -> Start {
    Start {
        waker,
        peer: conn.peer.clone(),
        now: Instant::now(),
        rate: shared.config.settings.min_response_rate,
        encoder,
        budget: shared.control.counters.budget().clone(),
        panics: shared.control.counters.panics().clone(),
    }
}

/// The response that hands the connection over is out: a session parks (or gets a thread of
/// its own), a generic upgrade leaves for a thread.
fn switch<H: Handler>(
    shared: &Shared<H>,
    conn: Connection,
    handover: Handover,
    pools: &mut Pools,
) -> Option<Connection> {
    match handover {
        Handover::Session {
            takeover,
            encoder,
            input,
        } if shared.parks_sessions() => {
            let (mut conn, wake) = match shared.parker.as_ref()?.enroll(conn) {
                Ok(enrolled) => enrolled,
                // The parker takes no more (shutdown began after its 101 went out) or could
                // not register it: the session runs on a thread of its own, which shuts it
                // down as any other at shutdown (a WebSocket's 1001 and closing handshake).
                Err(conn) => return on_a_thread(shared, conn, takeover, encoder, input, pools),
            };
            let start = starting(shared, &conn, Box::new(wake), encoder);
            let session = Session::start(takeover, start, input, pools);
            conn.phase = Phase::Session(Box::new(session));
            conn.settle();
            session::drive(shared, conn, pools)
        }
        Handover::Session {
            takeover,
            encoder,
            input,
        } => on_a_thread(shared, conn, takeover, encoder, input, pools),
        Handover::Detach { then, leftover } => {
            let (stream, open) = conn.into_parts();
            detach(&shared.control, stream, leftover, then, open);
            None
        }
    }
}
