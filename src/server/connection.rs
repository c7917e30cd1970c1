//! A connection of the thread-pool engine between workers: its socket (registered with the
//! parker once it has parked), and what it waits for, with the bytes it holds while it waits.

use std::sync::Arc;
use std::time::Instant;

use polling::{Event, Poller};

use super::park::Ticket;
use super::session::Session;
use crate::engine::OpenGuard;
use crate::http::driver::{Driver, Handover, Request, WaitFor};
use crate::net::sys::Registered;
use crate::net::transport::{Address, Stream};
use crate::stats::{Activity, Counters};

/// What drives a connection.
pub(crate) enum Phase {
    /// HTTP exchanges, driven by the core's driver; `held`: what it waits for meanwhile.
    Http { driver: Driver, held: Held },
    /// A WebSocket or an event stream between turns: its session keeps its own time.
    Session(Box<Session>),
}

/// What an HTTP connection waits for between threads, as its driver said.
pub(crate) enum Held {
    /// The socket, for what `watch` says, until the deadline (then the driver is told it
    /// passed).
    Socket {
        watch: Watch,
        until: Option<Instant>,
    },
    /// A request is whole: a worker runs its handler.
    Request(Request),
    /// Work the parker does not do: a streamed body's next piece (handler code). A worker
    /// drives it on.
    Work,
    /// Its turn ran out of budget (a file's next MiB, more pipelined requests, a lingering
    /// close's drain): the parker drives it on, and hands it to a worker only for handler code.
    Turn,
    /// The response that hands the connection over is out: a worker gives it on.
    Handover(Handover),
}

impl Phase {
    /// When the parker acts on its own if nothing happens.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self {
            Phase::Http {
                held: Held::Socket { until, .. },
                ..
            } => *until,
            Phase::Http { .. } => None,
            Phase::Session(session) => session.deadline(),
        }
    }
}

/// What a connection waits for its socket to do, and so what its edge-triggered registration
/// reports. Reading is not watched while only output waits: input its client sends meanwhile
/// (pipelined requests to a client that does not read their answers) must not wake the parker,
/// which would find the output still blocked and park it again, at once, over and over; and
/// the wait's deadline (the response's minimum rate) could never pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Watch {
    /// Input (a request, a body, a lingering close's drain).
    Read,
    /// The socket taking output, and nothing else.
    Write,
    /// Both: output held back by its transport (a TLS flight) beside a read; a WebSocket or
    /// an event stream (always both, so its registration never changes).
    Both,
}

impl Watch {
    /// What the driver's wait asks for.
    pub(crate) fn of(on: WaitFor) -> Watch {
        match on {
            WaitFor::Output => Watch::Write,
            WaitFor::Both => Watch::Both,
            // (Waiting for neither: hang-ups are reported whatever the interest.)
            WaitFor::Input | WaitFor::Wake => Watch::Read,
        }
    }

    fn event(self, key: usize) -> Event {
        match self {
            Watch::Read => Event::readable(key),
            Watch::Write => Event::writable(key),
            Watch::Both => Event::all(key),
        }
    }
}

/// A connection between threads. Its driver holds a buffer only while bytes of an exchange are
/// pending (a partial head, a body, output): the engine's pools lend them while it runs.
///
/// Boxed: it moves by value from the parker to the queue, to a worker and back several times a
/// request, and its 280 bytes were a `memcpy` at each move (655 instructions of a keep-alive
/// request on this engine, counted by callgrind). Instead: an allocation when it is accepted
/// and one more when it first parks (its parts move into a box around the registered socket).
pub(crate) struct Connection(Box<Parts>);

/// What a [`Connection`] holds.
pub(crate) struct Parts {
    socket: Socket,
    pub(crate) peer: Option<Address>,
    pub(crate) phase: Phase,
    _open: OpenGuard,
}

impl std::ops::Deref for Connection {
    type Target = Parts;
    fn deref(&self) -> &Parts {
        &self.0
    }
}

impl std::ops::DerefMut for Connection {
    fn deref_mut(&mut self) -> &mut Parts {
        &mut self.0
    }
}

enum Socket {
    /// Never parked.
    Plain(Stream),
    /// Registered with the parker's poller under the ticket's key, for the connection's life,
    /// reporting what it watches for.
    Parkable(Registered<Stream>, Ticket, Watch),
}

impl Connection {
    /// A new connection, with its driver.
    pub(crate) fn new(stream: Stream, peer: Address, open: OpenGuard, driver: Driver) -> Self {
        let until = driver.first_deadline();
        Connection(Box::new(Parts {
            socket: Socket::Plain(stream),
            peer: Some(peer),
            phase: Phase::Http {
                driver,
                held: Held::Socket {
                    watch: Watch::Read,
                    until,
                },
            },
            _open: open,
        }))
    }

    pub(crate) fn stream(&mut self) -> &mut Stream {
        match &mut self.socket {
            Socket::Plain(s) => s,
            Socket::Parkable(r, ..) => r.get_mut(),
        }
    }

    /// The parker key of a connection parked before.
    pub(crate) fn ticket_key(&self) -> Option<usize> {
        match &self.socket {
            Socket::Plain(_) => None,
            Socket::Parkable(_, t, _) => Some(t.key()),
        }
    }

    /// Sets its registration to report what it waits for, if that changed. Changing it
    /// re-arms the edge: what is pending (bytes already in the socket) is reported at once.
    pub(crate) fn watch(&mut self) -> std::io::Result<()> {
        self.watch_for(self.wants())
    }

    /// Sets its registration to report `wanted`, if that changed.
    pub(crate) fn watch_for(&mut self, wanted: Watch) -> std::io::Result<()> {
        match &mut self.0.socket {
            Socket::Parkable(r, ticket, watching) if *watching != wanted => {
                r.set_edge(wanted.event(ticket.key()))?;
                *watching = wanted;
                Ok(())
            }
            Socket::Plain(_) | Socket::Parkable(..) => Ok(()),
        }
    }

    /// What its registration should report now.
    pub(crate) fn wants(&self) -> Watch {
        match &self.phase {
            Phase::Http {
                held: Held::Socket { watch, .. },
                ..
            } => *watch,
            Phase::Http { .. } => Watch::Read,
            // Its registration never changes.
            Phase::Session(_) => Watch::Both,
        }
    }

    /// The engine's counters.
    pub(crate) fn counters(&self) -> &Counters {
        self._open.counters()
    }

    /// Counts the connection as doing what it waits for says: called where it parks.
    pub(crate) fn settle(&mut self) {
        let now = match &self.phase {
            Phase::Http {
                held: Held::Request(_),
                ..
            } => Activity::Queued,
            Phase::Http { driver, .. } => driver.stage().into(),
            Phase::Session(s) => s.activity(),
        };
        self._open.set(now);
    }

    /// An HTTP connection with nothing under way: no buffered input, no output, no request.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(&self.phase, Phase::Http { driver, held: Held::Socket { .. } } if driver.is_idle())
    }

    /// An HTTP connection nothing of whose first request has come.
    pub(crate) fn awaits_first_request(&self) -> bool {
        matches!(&self.phase, Phase::Http { driver, held: Held::Socket { .. } } if driver.awaits_first_request())
    }

    /// Shutdown began (noticed at `now`): when its driver's wait for a head ends.
    pub(crate) fn deadline_at_shutdown(&mut self, now: Instant) -> Option<Instant> {
        match &mut self.phase {
            Phase::Http { driver, .. } => driver.deadline_at_shutdown(now),
            Phase::Session(session) => session.deadline(),
        }
    }

    /// An HTTP connection a shutdown closes now: idle after an exchange (one whose first
    /// request has not come waits a moment for it).
    pub(crate) fn closes_at_shutdown(&self) -> bool {
        matches!(&self.phase, Phase::Http { driver, held: Held::Socket { .. } } if driver.closes_at_shutdown())
    }

    /// Its turn ran out of budget with the core's work next ([`Held::Turn`]).
    pub(crate) fn yielded(&self) -> bool {
        matches!(
            self.phase,
            Phase::Http {
                held: Held::Turn,
                ..
            }
        )
    }

    /// A WebSocket or an event stream.
    pub(crate) fn is_long_lived(&self) -> bool {
        matches!(self.phase, Phase::Session(_))
    }

    /// The session of a WebSocket or an event stream.
    pub(crate) fn session(&self) -> Option<&Session> {
        match &self.phase {
            Phase::Session(s) => Some(s),
            Phase::Http { .. } => None,
        }
    }

    /// Registers a never-parked connection with `poller` under `ticket`'s key, edge-triggered,
    /// reporting `watch`.
    /// On failure the ticket comes back with the connection, for both to be dropped once the
    /// parker's lock is let go.
    // The error gives the connection back on a cold path; boxing it would cost every
    // registration an allocation.
    #[allow(clippy::result_large_err)]
    pub(crate) fn into_registered(
        self,
        poller: &Arc<Poller>,
        ticket: Ticket,
        watch: Watch,
    ) -> Result<Connection, (Connection, Ticket)> {
        if let Socket::Parkable(..) = self.0.socket {
            return Err((self, ticket));
        }
        // Once per connection, at its first park: its parts move into a new box around the
        // registered socket (a second allocation in its life, made under the parker's lock).
        let Parts {
            socket,
            peer,
            phase,
            _open,
        } = *self.0;
        let registered = match socket {
            Socket::Plain(stream) => {
                Registered::edge(poller.clone(), stream, watch.event(ticket.key()))
            }
            // (Returned above.) Given back whole: its own ticket must not be dropped here,
            // under the parker's lock.
            parkable @ Socket::Parkable(..) => {
                let parts = Parts {
                    socket: parkable,
                    peer,
                    phase,
                    _open,
                };
                return Err((Connection(Box::new(parts)), ticket));
            }
        };
        // Not registered (out of memory, or the system's limit of watched descriptors): the
        // connection comes back whole, to be closed once the parker's lock is let go (its
        // phase may hold handler code, whose drop may wake the parker).
        let socket = match registered {
            Ok(r) => Socket::Parkable(r, ticket, watch),
            Err((_, stream)) => {
                let parts = Parts {
                    socket: Socket::Plain(stream),
                    peer,
                    phase,
                    _open,
                };
                return Err((Connection(Box::new(parts)), ticket));
            }
        };
        Ok(Connection(Box::new(Parts {
            socket,
            peer,
            phase,
            _open,
        })))
    }

    /// What a worker serves an HTTP connection with, borrowed together (`None`: a session).
    pub(crate) fn serving(&mut self) -> Option<Serving<'_>> {
        let this = &mut *self.0;
        let stream = match &mut this.socket {
            Socket::Plain(s) => s,
            Socket::Parkable(r, ..) => r.get_mut(),
        };
        match &mut this.phase {
            Phase::Http { driver, held } => Some(Serving {
                stream,
                driver,
                held,
                peer: this.peer.as_ref(),
                open: &mut this._open,
            }),
            Phase::Session(_) => None,
        }
    }

    /// The stream and the HTTP driver, borrowed together (`None`: a session).
    pub(crate) fn http(&mut self) -> Option<(&mut Stream, &mut Driver, &mut Held)> {
        let this = &mut *self.0;
        let stream = match &mut this.socket {
            Socket::Plain(s) => s,
            Socket::Parkable(r, ..) => r.get_mut(),
        };
        match &mut this.phase {
            Phase::Http { driver, held } => Some((stream, driver, held)),
            Phase::Session(_) => None,
        }
    }

    /// The stream and the session, borrowed together (`None`: HTTP).
    pub(crate) fn session_io(&mut self) -> Option<(&mut Stream, &mut Session)> {
        let this = &mut *self.0;
        let stream = match &mut this.socket {
            Socket::Plain(s) => s,
            Socket::Parkable(r, ..) => r.get_mut(),
        };
        match &mut this.phase {
            Phase::Session(session) => Some((stream, session)),
            Phase::Http { .. } => None,
        }
    }

    /// Work is left after its budget: a session's messages, or a connection whose driver
    /// yielded or has a streamed body's next piece for a worker.
    pub(crate) fn has_more(&self) -> bool {
        match &self.phase {
            Phase::Session(session) => session.has_more(),
            Phase::Http { held, .. } => matches!(held, Held::Work),
        }
    }

    /// The socket and the connection count, leaving the parker's poller.
    pub(crate) fn into_parts(self) -> (Stream, OpenGuard) {
        let Parts { socket, _open, .. } = *self.0;
        let stream = match socket {
            Socket::Plain(s) => s,
            Socket::Parkable(r, ..) => r.into_inner(),
        };
        (stream, _open)
    }
}

/// An HTTP connection's parts, borrowed together for a worker's turn on it.
pub(crate) struct Serving<'a> {
    pub(crate) stream: &'a mut Stream,
    pub(crate) driver: &'a mut Driver,
    pub(crate) held: &'a mut Held,
    pub(crate) peer: Option<&'a Address>,
    pub(crate) open: &'a mut OpenGuard,
}

/// A unit of work for a worker: a connection with a request ready (or other work its driver
/// left for a worker), or a session with something to do. Made only through `From`, which
/// counts an HTTP connection as queued (a request ready) or as its driver says.
pub(crate) struct Job(Connection);

impl Job {
    pub(crate) fn into_connection(self) -> Connection {
        self.0
    }
}

impl From<Connection> for Job {
    #[inline]
    fn from(mut conn: Connection) -> Job {
        if conn.session().is_none() {
            conn.settle();
        }
        Job(conn)
    }
}
