//! HTTP connections driven without a worker, on the parker thread. When a parked connection
//! becomes readable (or writable, or its deadline passes) the parker runs its core driver: it
//! reads heads and bodies, writes what the socket takes, answers a deadline with `408` and
//! lingers. A connection goes to a worker only when its driver has handler work for it (a whole
//! request to run, a streamed body's next piece, a hand-over), so no client, however slow or
//! silent, holds a worker before its request has arrived whole, nor while it reads a response
//! slowly, nor while a file is sent to it.

use std::time::Instant;

use super::connection::{Connection, Held, Watch};
use crate::http::date::DateLine;
use crate::http::driver::{Action, Cx, Rules};
use crate::http::pools::Pools;
use crate::stats::Counters;

/// What the parker thread needs to drive connections.
pub(crate) struct Drives {
    pub(crate) rules: Rules,
    pub(crate) pools: Pools,
    /// The `Date` line of the responses the parker writes (refusals, `408`s).
    pub(crate) date: DateLine,
}

/// What driving a parked connection came to.
pub(crate) enum Outcome {
    /// Handler work is ready (or it is a session): a worker takes it.
    Ready(Connection),
    /// The socket has nothing more for now: park it again (its driver says for what).
    Park(Connection),
    /// Its turn is over with more to do (a file's next MiB, a lingering close's drain): driven
    /// again on this thread after the others, never by a worker (no handler code is due).
    Again(Connection),
    /// The client closed, the connection failed, or its lingering close is over: drop it.
    Close,
}

/// Drives a parked HTTP connection that had an event, until its driver waits (park it again),
/// has work for a worker, or closes. `closing`: the server is shutting down.
pub(crate) fn drive(
    mut conn: Connection,
    cx: &mut Drives,
    counters: &Counters,
    now: Instant,
    closing: bool,
) -> Outcome {
    let Some((stream, driver, held)) = conn.http() else {
        return Outcome::Ready(conn);
    };
    if !matches!(held, Held::Socket { .. } | Held::Turn) {
        return Outcome::Ready(conn);
    }
    let mut turn = Cx::new(
        &cx.rules,
        &mut cx.pools,
        counters,
        now,
        &mut cx.date,
        closing,
    )
    .edge_triggered()
    .without_producers();
    *held = match driver.drive(stream, &mut turn) {
        Action::Run(request) => Held::Request(request),
        Action::Wait { on, until } => {
            *held = Held::Socket {
                watch: Watch::of(on),
                until,
            };
            return Outcome::Park(conn);
        }
        Action::Yield => return Outcome::Again(conn),
        Action::Produce => Held::Work,
        Action::Switch(handover) => Held::Handover(handover),
        Action::Close => return Outcome::Close,
    };
    Outcome::Ready(conn)
}

/// A parked connection's deadline passed: its driver decides (a `408` to write, then a
/// lingering close; or close). Sessions keep their own time and never come here.
pub(crate) fn expire(
    mut conn: Connection,
    cx: &mut Drives,
    counters: &Counters,
    now: Instant,
) -> Outcome {
    let Some((stream, driver, _)) = conn.http() else {
        return Outcome::Ready(conn);
    };
    let mut turn = Cx::new(&cx.rules, &mut cx.pools, counters, now, &mut cx.date, false);
    match driver.expire(stream, &mut turn) {
        true => drive(conn, cx, counters, now, false),
        false => Outcome::Close,
    }
}
