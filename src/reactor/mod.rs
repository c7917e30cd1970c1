//! The reactor engine: event loops on the `polling` crate (epoll, kqueue).
//!
//! Each loop owns one poller, one `SO_REUSEPORT` listener (the kernel spreads new connections
//! across loops), non-blocking sockets in a slab, their deadlines, and a pool of buffers that
//! connections borrow only while bytes are flowing: an idle keep-alive connection holds no buffer
//! and no thread. Handlers run either on the loop ([`Dispatch::Inline`], event-driven; they must
//! not block) or on a worker pool ([`Dispatch::Pool`]; they may block), and the same handler value
//! also runs on the thread-pool server unchanged.
//!
//! Request bodies are read into memory (up to [`Limits::max_body_bytes`]) before the handler
//! runs, so a client sending `Expect: 100-continue` is told to continue as soon as its head is
//! parsed.
//!
//! [`Limits::max_body_bytes`]: crate::Limits::max_body_bytes
//!
//! ```no_run
//! use std::time::Duration;
//! use twinhttp::reactor::{Dispatch, Reactor};
//! use twinhttp::{Request, Response};
//!
//! let reactor = Reactor::builder()
//!     .dispatch(Dispatch::Inline)
//!     .serve("127.0.0.1:8080", |_: &mut Request<'_>| Response::text("Hello, World!"))?;
//! reactor.shutdown(Duration::from_secs(5))?;
//! # Ok::<(), twinhttp::Error>(())
//! ```

mod blocking;
mod connection;
mod event_loop;
mod inbox;
mod pool;
mod start;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::thread;
use std::time::Duration;

use crate::engine::Running;
use crate::net::Port;
use crate::net::transport::{Address, Listener, UNSPECIFIED};
use crate::settings::Settings;
use crate::stats::{HandleSlot, Stats, StatsHandle};
use crate::{Error, Handler, MinRate, ShutdownHandle};

/// Where handlers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dispatch {
    /// On the event loop thread: the event-driven shape, fastest for handlers that never block.
    Inline,
    /// On this many worker threads; answers return to the owning loop. For handlers that block.
    Pool(usize),
}

/// How new connections reach the loops.
///
/// Measured here (2 cores, `bench/results/2026-11-22-reactor-accept-modes.md`, medians of 3
/// interleaved runs): `ReusePort` 107k vs `Thread` 94k req/s at 256 keep-alive connections and 21.0k
/// vs 20.4k with `Connection: close`; `Thread` 111k vs 103k at 64 connections, within the spread.
/// `ReusePort` is the default where the kernel spreads connections over listeners that share a
/// port (Linux, Android; FreeBSD with `SO_REUSEPORT_LB`): as fast or faster, and one thread
/// fewer. Elsewhere (macOS, the other BSDs) one of the listeners would get every connection,
/// so the default there is `Thread`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Accept {
    /// Each loop has its own `SO_REUSEPORT` listener (`SO_REUSEPORT_LB` on FreeBSD) and the
    /// kernel spreads connections.
    ReusePort,
    /// One acceptor thread hands connections to the loops round-robin.
    Thread,
}

impl Accept {
    /// The default: `ReusePort` where the kernel balances it, `Thread` elsewhere.
    const DEFAULT: Accept = if cfg!(any(
        target_os = "linux",
        target_os = "android",
        target_os = "freebsd"
    )) {
        Accept::ReusePort
    } else {
        Accept::Thread
    };
}

/// Settings shared by a reactor's loops.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// What both engines set alike.
    pub(crate) settings: Settings,
    /// Inline handler calls that hold a loop longer than this are counted and warned of.
    pub(crate) blocking_warning: Option<Duration>,
}

impl Config {
    /// The rules the core's connection driver follows. (An event loop cannot wait on a socket
    /// for a handler: every body is read whole.)
    pub(crate) fn rules(&self) -> crate::http::driver::Rules {
        self.settings.rules()
    }
}

/// Settings for a [`Reactor`]; every setter documents its default.
///
/// Made by [`Reactor::builder`]; the setters take and return it by value, and
/// [`serve`](Builder::serve), [`serve_unix`](Builder::serve_unix) or
/// [`serve_listener`](Builder::serve_listener) starts the loops. The defaults: one loop per core,
/// handlers inline on the loops ([`Dispatch::Inline`]: they must not block), one `SO_REUSEPORT`
/// listener per loop, [`Limits::default`], a 10 s header-read deadline, a 60 s idle timeout,
/// minimum data rates and at most 16,384 open connections (`docs/configuration.md` has them all
/// in one table).
///
/// [`Limits::default`]: crate::Limits::default
///
/// # Examples
///
/// Handlers that may block (a database call, a file read) run on a pool instead of the loops:
///
/// ```no_run
/// use std::time::Duration;
/// use twinhttp::reactor::{Dispatch, Reactor};
/// use twinhttp::{Limits, Response, handler_fn};
///
/// let mut limits = Limits::default();
/// limits.max_headers = 50;
/// let reactor = Reactor::builder()
///     .loops(2)
///     .dispatch(Dispatch::Pool(16)) // 16 worker threads for handlers that wait
///     .idle_timeout(Duration::from_secs(30))
///     .limits(limits)
///     .serve("127.0.0.1:8080", handler_fn(|_| {
///         std::thread::sleep(Duration::from_millis(10)); // holds a pool thread, not a loop
///         Response::text("done")
///     }))?;
/// # reactor.shutdown(Duration::from_secs(1))?;
/// # Ok::<(), twinhttp::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    loops: usize,
    dispatch: Dispatch,
    accept: Accept,
    /// Shared with other processes, or not ([`Builder::reuse_port`]).
    port: Port,
    cfg: Config,
    /// Handed out by [`Builder::stats_handle`], filled in by `serve`.
    stats: HandleSlot,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            loops: thread::available_parallelism().map_or(1, |n| n.get()),
            dispatch: Dispatch::Inline,
            accept: Accept::DEFAULT,
            port: Port::Own,
            cfg: Config {
                settings: Settings::default(),
                blocking_warning: Some(Duration::from_millis(100)),
            },
            stats: HandleSlot::default(),
        }
    }
}

impl Builder {
    /// Event loops (threads, each with its own listener). Default: available cores.
    pub fn loops(mut self, n: usize) -> Self {
        self.loops = n.max(1);
        self
    }

    /// Where handlers run. Default: [`Dispatch::Inline`].
    pub fn dispatch(mut self, d: Dispatch) -> Self {
        self.dispatch = match d {
            Dispatch::Pool(n) => Dispatch::Pool(n.max(1)),
            inline => inline,
        };
        self
    }

    /// How new connections reach the loops. Default: [`Accept::ReusePort`] on Linux, Android
    /// and FreeBSD, [`Accept::Thread`] elsewhere (where the kernel does not balance
    /// connections over listeners sharing a port).
    pub fn accept(mut self, a: Accept) -> Self {
        self.accept = a;
        self
    }

    crate::settings::shared_setters!(cfg.settings);

    /// Shares the port with other processes (`SO_REUSEPORT`; `SO_REUSEPORT_LB` on FreeBSD):
    /// several servers, of the same user, each bound with this, take turns at its new
    /// connections (the kernel spreads them), so a new process can start serving before an old
    /// one stops (the loops of one reactor share their port among themselves whatever this
    /// says: [`accept`](Builder::accept)). Off by default: a port another socket listens on fails to bind with "address
    /// in use". Deploying with it: `docs/deploying.md`.
    pub fn reuse_port(mut self, on: bool) -> Self {
        self.port = if on { Port::Shared } else { Port::Own };
        self
    }

    /// The slowest a request body may arrive: slower, it is answered `408` and the connection
    /// closed. `None`: no minimum. Default: [`MinRate::default()`] (240 bytes/s after 5 s).
    pub fn min_request_body_rate(mut self, rate: Option<MinRate>) -> Self {
        self.cfg.settings.min_request_body_rate = rate;
        self
    }

    /// The slowest a client may take a response, a WebSocket's or an event stream's output while
    /// the server waits on it: slower, the connection is closed. `None`: no minimum. Default:
    /// [`MinRate::default()`] (240 bytes/s after 5 s).
    pub fn min_response_rate(mut self, rate: Option<MinRate>) -> Self {
        self.cfg.settings.min_response_rate = rate;
        self
    }

    /// With inline dispatch, a handler call that holds its loop longer than this is counted in
    /// [`Stats::blocking_handlers`] and logged at warn level with its method and path (at most
    /// once every 10 s per loop): nothing else on that loop runs while it does. `None`: no
    /// warning and no count (the calls are still timed, on the coarse clock: the loop's clock
    /// moves on by the time they held it). A threshold under 10 ms is taken as 10 ms (the coarse
    /// clock ticks every few milliseconds). HTTP handler calls are timed, each piece of a
    /// streamed response body produced on the loop (`Body::chunks`, `Body::reader`: warned of
    /// without a method and path), and each turn of a WebSocket or event stream, which runs
    /// its callbacks (warned of as theirs). Has no effect with [`Dispatch::Pool`]. Default:
    /// 100 ms.
    pub fn blocking_warning(mut self, threshold: Option<Duration>) -> Self {
        self.cfg.blocking_warning = threshold;
        self
    }

    /// A handle that reads this reactor's [`Stats`] once it serves: made before `serve`, so
    /// the reactor's own handler can hold it (a `/stats` route). Every call gives the same
    /// handle; a clone of the builder does not share it (take one from each builder you serve).
    ///
    /// ```no_run
    /// use twinhttp::{Response, handler_fn, reactor::Reactor};
    ///
    /// let mut builder = Reactor::builder();
    /// let stats = builder.stats_handle();
    /// let reactor = builder.serve("127.0.0.1:8080", handler_fn(move |_| {
    ///     Response::text(format!("{} open", stats.stats().active))
    /// }))?;
    /// # reactor.shutdown(std::time::Duration::from_secs(1))?;
    /// # Ok::<(), twinhttp::Error>(())
    /// ```
    pub fn stats_handle(&mut self) -> StatsHandle {
        self.stats.get()
    }

    /// Binds `addr` (one `SO_REUSEPORT` listener per loop, or one listener and an acceptor
    /// thread: [`accept`](Builder::accept)) and starts serving `handler`.
    ///
    /// # Errors
    ///
    /// When the address cannot be bound or a thread or poller cannot be created
    /// (what had started is stopped: nothing is left serving).
    pub fn serve<H: Handler>(self, addr: impl ToSocketAddrs, handler: H) -> Result<Reactor, Error> {
        let (listeners, shared_listener) = match self.accept {
            Accept::ReusePort => (
                crate::net::bind_reuse_port(addr, self.loops, self.port)?
                    .into_iter()
                    .map(|l| Some(Listener::Tcp(l)))
                    .collect(),
                None,
            ),
            Accept::Thread => (
                (0..self.loops).map(|_| None).collect::<Vec<_>>(),
                Some(Listener::Tcp(crate::net::bind(addr, self.port)?)),
            ),
        };
        self.start(listeners, shared_listener, handler)
    }

    /// Binds a Unix domain socket at `path` and starts serving `handler` on it (behind a proxy
    /// on the same machine: nginx's `proxy_pass http://unix:PATH`, `curl --unix-socket PATH`).
    /// A socket file left at `path` by a server that is gone is replaced; the file stays after
    /// shutdown. One acceptor thread hands connections to the loops.
    ///
    /// # Errors
    ///
    /// When the path cannot be bound (a live server listens there, a directory is missing) or
    /// a thread or poller cannot be created
    /// (what had started is stopped: nothing is left serving).
    pub fn serve_unix<H: Handler>(
        self,
        path: impl AsRef<Path>,
        handler: H,
    ) -> Result<Reactor, Error> {
        let path = path.as_ref();
        let listener = Listener::bind_unix(path).map_err(|e| Error::bind(path.display(), e))?;
        self.serve_listener(listener, handler)
    }

    /// Starts serving `handler` on a listener you bound, TCP or Unix (systemd socket
    /// activation, a port chosen by a test; it is made non-blocking). One acceptor thread hands
    /// its connections to the loops round-robin, whatever [`Builder::accept`] says: only
    /// listeners the reactor binds itself can be spread by the kernel with `SO_REUSEPORT`.
    ///
    /// # Errors
    ///
    /// When the listener is unusable or a thread or poller cannot be created
    /// (what had started is stopped: nothing is left serving).
    pub fn serve_listener<H: Handler>(
        self,
        listener: impl Into<Listener>,
        handler: H,
    ) -> Result<Reactor, Error> {
        let listener = listener.into();
        listener.set_nonblocking()?;
        let loops = (0..self.loops).map(|_| None).collect();
        self.start(loops, Some(listener), handler)
    }

    /// Starts serving `handler` on listeners you were given, one event loop on each: what
    /// [`Reactor::listener_fds`] of a reactor that bound its own (a listener per loop, sharing
    /// the port) hands to a successor process. One listener is served as by
    /// [`Builder::serve_listener`].
    ///
    /// # Errors
    ///
    /// When there is no listener, one is unusable, or a thread or poller cannot be created
    /// (what had started is stopped: nothing is left serving).
    pub fn serve_listeners<H: Handler>(
        self,
        mut listeners: Vec<Listener>,
        handler: H,
    ) -> Result<Reactor, Error> {
        if listeners.len() == 1 {
            if let Some(listener) = listeners.pop() {
                return self.serve_listener(listener, handler);
            }
        }
        for listener in &listeners {
            listener.set_nonblocking()?;
        }
        let loops = listeners.into_iter().map(Some).collect();
        self.start(loops, None, handler)
    }
}

/// A running reactor: event loops that own the connections, with handlers run on the loops or
/// on a pool ([`Dispatch`]).
///
/// Started by [`Builder::serve`] (from [`Reactor::builder`]); it serves until
/// [`shutdown`](Reactor::shutdown) is called, or a [`ShutdownHandle`] from
/// [`shutdown_handle`](Reactor::shutdown_handle) is used from another thread. Dropping it without
/// either leaves its threads serving. Its [`stats`](Reactor::stats) are the same [`Stats`] as the
/// server engine's, with the connections of each loop in `per_loop`.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use twinhttp::{Response, handler_fn, reactor::Reactor};
///
/// // Inline dispatch (the default): the handler runs on the loop and must not block.
/// let reactor = Reactor::builder()
///     .serve("127.0.0.1:0", handler_fn(|req| Response::text(format!("hello, {}", req.path()))))?;
/// println!("listening on http://{}", reactor.local_addr());
/// let stats = reactor.stats();
/// println!("{} loops, {} open connections", stats.per_loop.len(), stats.active);
/// reactor.shutdown(Duration::from_secs(5))?; // answers what is in flight, joins every thread
/// # Ok::<(), twinhttp::Error>(())
/// ```
#[derive(Debug)]
pub struct Reactor(Running);

impl Reactor {
    /// The reactor's settings, to change before [`Builder::serve`].
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The address the reactor listens on (useful after binding port 0).
    ///
    /// For a reactor on a Unix domain socket this is the unspecified `0.0.0.0:0`; see
    /// [`Reactor::address`].
    pub fn local_addr(&self) -> SocketAddr {
        self.0.address.tcp().unwrap_or(UNSPECIFIED)
    }

    /// The address the reactor listens on: TCP or a Unix domain socket's path.
    pub fn address(&self) -> &Address {
        &self.0.address
    }

    /// Duplicates of its listening sockets (one, or one per event loop), to hand to a
    /// successor process that takes the port over with no connection refused
    /// ([`systemd::hand_over`](crate::systemd::hand_over)); none once the shutdown began.
    ///
    /// # Errors
    ///
    /// When a descriptor cannot be duplicated (the process is out of them).
    pub fn listener_fds(&self) -> Result<Vec<std::os::fd::OwnedFd>, Error> {
        self.0.listener_fds()
    }

    /// A handle that can start a shutdown from any thread.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.0.handle.clone()
    }

    /// Open connections right now.
    pub fn open_connections(&self) -> usize {
        self.0.open_connections()
    }

    /// The live counters now: connections by what they are doing (and per loop), requests,
    /// refusals by reason, panics, threads ([`crate::stats`]).
    pub fn stats(&self) -> Stats {
        self.0.stats()
    }

    /// Blocks until the reactor is shut down through a [`ShutdownHandle`], then joins its
    /// threads. It does not wait for upgraded connections' callbacks
    /// ([`Response::upgrade`](crate::Response::upgrade)): the shutdown does not interrupt them
    /// (as Go's `net/http` leaves hijacked connections); [`shutdown`](Self::shutdown) waits for
    /// them up to its grace.
    pub fn wait(self) {
        self.0.wait()
    }

    /// Graceful shutdown: stops accepting, closes idle connections, finishes in-flight requests
    /// (answered with `Connection: close`), and joins every thread.
    ///
    /// # Errors
    ///
    /// [`crate::ErrorKind::ShutdownTimedOut`] when threads are still busy after `grace`.
    pub fn shutdown(self, grace: Duration) -> Result<(), Error> {
        self.0.shutdown(grace)
    }
}
