//! A connection of the thread-pool engine between workers: its socket (registered with the
//! parker once it has parked), and what it waits for, with the bytes it holds while it waits.

use std::sync::Arc;
use std::time::Instant;

use polling::{Event, Poller};

use super::park::Ticket;
use super::session::Session;
use crate::engine::OpenGuard;
use crate::http::buf::ReadBuf;
use crate::http::linger::Linger;
use crate::net::sys::Registered;
use crate::net::transport::{Address, Stream};
use crate::stats::{Activity, Counters};

/// What a connection waits for between workers, with what it holds meanwhile.
pub(crate) enum Wait {
    /// A new connection: its first request head is due in full by `until` (the header-read
    /// deadline counts from the accept). It holds no buffer until bytes come.
    New { until: Option<Instant> },
    /// Between requests: it closes if nothing comes by `until` (the idle timeout); once the
    /// first byte of the next head comes, the header-read deadline counts from then.
    Idle { until: Option<Instant> },
    /// Part of a request head: its bytes, to arrive in full by `until` (else `408`).
    Head {
        input: Box<ReadBuf>,
        until: Option<Instant>,
    },
    /// A whole request head is buffered (perhaps more): a worker serves it. `until` still
    /// bounds the head in the rare case the parser wants more than the parker's scan saw.
    Ready {
        input: Box<ReadBuf>,
        until: Option<Instant>,
    },
    /// An error was answered and its write side shut: what the client still sends is read and
    /// dropped until it closes (a lingering close), on the parker thread.
    Linger(Linger),
    /// A WebSocket or an event stream between turns: its session keeps its own time.
    Session(Box<Session>),
}

impl Wait {
    /// When the parker acts on its own if nothing happens.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self {
            Wait::New { until }
            | Wait::Idle { until }
            | Wait::Head { until, .. }
            | Wait::Ready { until, .. } => *until,
            Wait::Linger(linger) => linger.deadline(),
            Wait::Session(session) => session.deadline(),
        }
    }
}

/// A connection between requests or messages. It holds a buffer only while part of a request
/// head waits for the rest (or a WebSocket's rare unread bytes): a worker's buffers serve it
/// while it runs.
pub(crate) struct Connection {
    socket: Socket,
    pub(crate) peer: Option<Address>,
    pub(crate) wait: Wait,
    /// A WebSocket or an event stream, or becoming one: registered for writes too.
    long_lived: bool,
    _open: OpenGuard,
}

enum Socket {
    /// Never parked.
    Plain(Stream),
    /// Registered with the parker's poller under the ticket's key, for the connection's life.
    Parkable(Registered<Stream>, Ticket),
}

impl Connection {
    /// A new connection, whose first request head is due by `until`.
    pub(crate) fn new(
        stream: Stream,
        peer: Address,
        open: OpenGuard,
        until: Option<Instant>,
    ) -> Self {
        Connection {
            socket: Socket::Plain(stream),
            peer: Some(peer),
            wait: Wait::New { until },
            long_lived: false,
            _open: open,
        }
    }

    pub(crate) fn stream(&mut self) -> &mut Stream {
        match &mut self.socket {
            Socket::Plain(s) => s,
            Socket::Parkable(r, _) => r.get_mut(),
        }
    }

    /// The stream and the peer's address, borrowed together (a request's handler gets both).
    pub(crate) fn stream_and_peer(&mut self) -> (&mut Stream, Option<&Address>) {
        let stream = match &mut self.socket {
            Socket::Plain(s) => s,
            Socket::Parkable(r, _) => r.get_mut(),
        };
        (stream, self.peer.as_ref())
    }

    /// The parker key of a connection parked before.
    pub(crate) fn ticket_key(&self) -> Option<usize> {
        match &self.socket {
            Socket::Plain(_) => None,
            Socket::Parkable(_, t) => Some(t.key()),
        }
    }

    /// Changes an edge-triggered registration's interest.
    pub(crate) fn set_edge(&self, interest: Event) -> std::io::Result<()> {
        match &self.socket {
            Socket::Plain(_) => Ok(()),
            Socket::Parkable(r, _) => r.set_edge(interest),
        }
    }

    /// Its transport holds output it must send before it can read on (a TLS handshake flight
    /// the socket did not take).
    pub(crate) fn wants_write(&self) -> bool {
        match &self.socket {
            Socket::Plain(s) => s.wants_write(),
            Socket::Parkable(r, _) => r.get().wants_write(),
        }
    }

    /// The engine's counters.
    pub(crate) fn counters(&self) -> &Counters {
        self._open.counters()
    }

    /// Counts the connection as doing `what`.
    #[inline]
    pub(crate) fn set_activity(&mut self, what: Activity) {
        self._open.set(what);
    }

    /// Counts the connection as doing what it waits for says: called where it parks.
    pub(crate) fn settle(&mut self) {
        let now = match &self.wait {
            Wait::New { .. } | Wait::Idle { .. } => Activity::Waiting,
            Wait::Head { .. } => Activity::Reading,
            Wait::Ready { .. } => Activity::Queued,
            Wait::Linger(_) => Activity::Closing,
            Wait::Session(s) => s.activity(),
        };
        self._open.set(now);
    }

    /// A WebSocket or an event stream (or a connection becoming one).
    pub(crate) fn is_long_lived(&self) -> bool {
        self.long_lived
    }

    /// The session of a WebSocket or an event stream.
    pub(crate) fn session(&self) -> Option<&Session> {
        match &self.wait {
            Wait::Session(s) => Some(s),
            _ => None,
        }
    }

    /// Marks the connection as becoming a WebSocket or an event stream: its registration
    /// covers writes too.
    pub(crate) fn into_long_lived(self) -> Connection {
        Connection {
            long_lived: true,
            ..self
        }
    }

    /// What the parker watches for under `key`: reads; for a long-lived one also writes (always,
    /// so that its edge-triggered registration never changes).
    pub(crate) fn interest(&self, key: usize) -> Event {
        if self.long_lived {
            Event::all(key)
        } else {
            Event::readable(key)
        }
    }

    /// Registers a never-parked connection with `poller` under `ticket`'s key, edge-triggered.
    /// On failure the ticket comes back with the connection, unless registering
    /// consumed (closed) its socket.
    // The error gives the connection back on a cold path; boxing it would cost every
    // registration an allocation.
    #[allow(clippy::result_large_err)]
    pub(crate) fn into_registered(
        self,
        poller: &Arc<Poller>,
        ticket: Ticket,
    ) -> Result<Connection, (Option<Connection>, Ticket)> {
        let interest = self.interest(ticket.key());
        match self.socket {
            Socket::Plain(s) => match Registered::edge(poller.clone(), s, interest) {
                Ok(r) => Ok(Connection {
                    socket: Socket::Parkable(r, ticket),
                    ..self
                }),
                Err(_) => Err((None, ticket)),
            },
            socket @ Socket::Parkable(..) => Err((Some(Connection { socket, ..self }), ticket)),
        }
    }

    /// The socket and the connection count, leaving the parker's poller.
    pub(crate) fn into_parts(self) -> (Stream, OpenGuard) {
        let stream = match self.socket {
            Socket::Plain(s) => s,
            Socket::Parkable(r, _) => r.into_inner(),
        };
        (stream, self._open)
    }
}

/// A unit of work for a worker: a connection with a request head buffered, or a session with
/// something to do. Made only through `From`, which counts an HTTP connection as queued (a
/// whole head buffered) or still waiting on its client.
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
            // Queued only with a whole head buffered: a connection handed over before its
            // client sent anything (parking off) still waits for it.
            conn.settle();
        }
        Job(conn)
    }
}
