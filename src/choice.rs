//! One way to choose the engine at run time: a [`Builder`] that takes the settings both engines
//! share once (limits, timeouts, rates, TLS, the access log, the connection limit), with the
//! engine as a value ([`Engine`]), and serves on whichever it names; the running server is one
//! type ([`Running`]) whatever the engine. Settings only one engine has are set through
//! [`Builder::server`] and [`Builder::reactor`], and apply only when that engine serves.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use crate::engine::ShutdownHandle;
use crate::error::Error;
use crate::handler::Handler;
use crate::http::address::Address;
use crate::limits::Limits;
use crate::net::transport::Listener;
use crate::rate::MinRate;
use crate::reactor::{self, Reactor};
#[cfg(feature = "server")]
use crate::server::{self, Server};
use crate::stats::{Stats, StatsHandle};

/// Which engine serves. Both run the same handlers over the same core; what differs is where a
/// handler runs and what a waiting connection costs (the README's "Choosing an engine").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Engine {
    /// The thread-pool engine (feature `server`): handlers are blocking code on worker threads.
    #[cfg(feature = "server")]
    #[cfg_attr(docsrs, doc(cfg(feature = "server")))]
    Server,
    /// Event loops, handlers inline on them: they must not block.
    Reactor,
    /// Event loops, handlers on a pool of worker threads: they may block.
    ReactorPool,
}

impl Engine {
    /// A builder for this engine, with every default.
    pub fn builder(self) -> Builder {
        Builder::new(self)
    }
}

/// Settings for whichever [`Engine`] serves, set once. Made by [`Builder::new`] or
/// [`Engine::builder`]; setters take and return it by value, as both engines' builders do, and
/// have their defaults (`docs/configuration.md`).
///
/// # Examples
///
/// The engine picked from a command-line argument, everything else set once:
///
/// ```no_run
/// use std::time::Duration;
/// use twinhttp::{Engine, Response, handler_fn};
///
/// let engine = match std::env::args().nth(1).as_deref() {
///     Some("pool") => Engine::ReactorPool,
///     _ => Engine::Reactor,
/// };
/// let running = engine
///     .builder()
///     .idle_timeout(Duration::from_secs(30))
///     .access_log(true)
///     .reactor(|r| r.loops(2))
///     .serve("127.0.0.1:8080", handler_fn(|_| Response::text("hi")))?;
/// println!("listening on {}", running.local_addr());
/// running.wait();
/// # Ok::<(), twinhttp::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    engine: Engine,
    #[cfg(feature = "server")]
    server: server::Builder,
    reactor: reactor::Builder,
}

/// Applies one shared setter to both engines' builders.
macro_rules! both {
    ($self:ident, $setter:ident($($arg:expr),*)) => {{
        #[cfg(feature = "server")]
        {
            $self.server = $self.server.$setter($($arg.clone()),*);
        }
        $self.reactor = $self.reactor.$setter($($arg),*);
        $self
    }};
}

impl Builder {
    /// Settings for `engine`, with every default.
    pub fn new(engine: Engine) -> Builder {
        let reactor = match engine {
            Engine::ReactorPool => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                Reactor::builder().dispatch(reactor::Dispatch::Pool(cores.saturating_mul(4)))
            }
            _ => Reactor::builder(),
        };
        Builder {
            engine,
            #[cfg(feature = "server")]
            server: Server::builder(),
            reactor,
        }
    }

    /// The engine that will serve.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Size limits of every request. Default: [`Limits::default`].
    pub fn limits(mut self, limits: Limits) -> Self {
        both!(self, limits(limits))
    }

    /// The memory budget of the whole server (bodies in memory, response tails, send queues).
    /// Default: 256 MiB; see [`server::Builder::memory_budget`](crate::reactor::Builder::memory_budget).
    pub fn memory_budget(mut self, bytes: usize) -> Self {
        both!(self, memory_budget(bytes))
    }

    /// Requires a PROXY protocol header at the start of every connection; off by default. See
    /// [`server::Builder::proxy_protocol`](crate::reactor::Builder::proxy_protocol).
    pub fn proxy_protocol(mut self, on: bool) -> Self {
        both!(self, proxy_protocol(on))
    }

    /// The proxies whose forwarded headers are believed; nobody by default. See
    /// [`server::Builder::trusted_proxies`](crate::reactor::Builder::trusted_proxies).
    pub fn trusted_proxies(mut self, trusted: crate::TrustedProxies) -> Self {
        both!(self, trusted_proxies(trusted))
    }

    /// Shares the port with other processes (`SO_REUSEPORT`); off by default. See
    /// [`server::Builder::reuse_port`](crate::reactor::Builder::reuse_port).
    pub fn reuse_port(mut self, on: bool) -> Self {
        both!(self, reuse_port(on))
    }

    /// Most connections open at once; past it a new one is answered `503`. Default: 16,384.
    pub fn max_connections(mut self, n: usize) -> Self {
        both!(self, max_connections(n))
    }

    /// How long a request head may take to arrive in full. Default: 10 s.
    pub fn header_read_timeout(mut self, t: Duration) -> Self {
        both!(self, header_read_timeout(t))
    }

    /// How long a keep-alive connection may wait for its next request. Default: 60 s.
    pub fn idle_timeout(mut self, t: Duration) -> Self {
        both!(self, idle_timeout(t))
    }

    /// The slowest request body accepted (`408` below it). Default: [`MinRate::default`].
    pub fn min_request_body_rate(mut self, rate: Option<MinRate>) -> Self {
        both!(self, min_request_body_rate(rate))
    }

    /// The slowest a client may take its output (closed below it). Default:
    /// [`MinRate::default`].
    pub fn min_response_rate(mut self, rate: Option<MinRate>) -> Self {
        both!(self, min_response_rate(rate))
    }

    /// One access-log line per exchange (target `twinhttp::access`). Default: off.
    pub fn access_log(mut self, on: bool) -> Self {
        both!(self, access_log(on))
    }

    /// Serves over TLS with this rustls configuration (feature `tls`).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, config: std::sync::Arc<rustls::ServerConfig>) -> Self {
        both!(self, tls(config))
    }

    /// Settings only the server engine has (workers, queue, parking); they apply when it serves.
    #[cfg(feature = "server")]
    #[cfg_attr(docsrs, doc(cfg(feature = "server")))]
    pub fn server(mut self, f: impl FnOnce(server::Builder) -> server::Builder) -> Self {
        self.server = f(self.server);
        self
    }

    /// Settings only the reactor has (loops, dispatch, accept, the blocking warning); they apply
    /// when it serves.
    pub fn reactor(mut self, f: impl FnOnce(reactor::Builder) -> reactor::Builder) -> Self {
        self.reactor = f(self.reactor);
        self
    }

    /// A handle that reads the serving engine's [`Stats`] once it serves (see the engines'
    /// `stats_handle`). It belongs to the chosen engine's own builder: a later
    /// [`Builder::server`] or [`Builder::reactor`] that replaces that builder with a new one
    /// leaves it reading nothing; adjust the builder it is given instead.
    pub fn stats_handle(&mut self) -> StatsHandle {
        match self.engine {
            #[cfg(feature = "server")]
            Engine::Server => self.server.stats_handle(),
            Engine::Reactor | Engine::ReactorPool => self.reactor.stats_handle(),
        }
    }

    /// Binds `addr` and serves `handler` on the chosen engine.
    ///
    /// # Errors
    ///
    /// As the engine's own `serve`: the address cannot be bound (the error names it), or the
    /// engine's threads cannot start.
    pub fn serve<H: Handler>(self, addr: impl ToSocketAddrs, handler: H) -> Result<Running, Error> {
        match self.engine {
            #[cfg(feature = "server")]
            Engine::Server => self.server.serve(addr, handler).map(Running::Server),
            Engine::Reactor | Engine::ReactorPool => {
                self.reactor.serve(addr, handler).map(Running::Reactor)
            }
        }
    }

    /// Binds a Unix domain socket at `path` and serves `handler` on the chosen engine.
    ///
    /// # Errors
    ///
    /// As the engine's own `serve_unix`.
    pub fn serve_unix<H: Handler>(
        self,
        path: impl AsRef<Path>,
        handler: H,
    ) -> Result<Running, Error> {
        match self.engine {
            #[cfg(feature = "server")]
            Engine::Server => self.server.serve_unix(path, handler).map(Running::Server),
            Engine::Reactor | Engine::ReactorPool => {
                self.reactor.serve_unix(path, handler).map(Running::Reactor)
            }
        }
    }

    /// Serves `handler` on a listener the caller bound, on the chosen engine.
    ///
    /// # Errors
    ///
    /// As the engine's own `serve_listener`.
    pub fn serve_listener<H: Handler>(
        self,
        listener: impl Into<Listener>,
        handler: H,
    ) -> Result<Running, Error> {
        match self.engine {
            #[cfg(feature = "server")]
            Engine::Server => self
                .server
                .serve_listener(listener, handler)
                .map(Running::Server),
            Engine::Reactor | Engine::ReactorPool => self
                .reactor
                .serve_listener(listener, handler)
                .map(Running::Reactor),
        }
    }
}

impl Builder {
    /// Serves `handler` on listeners the caller was given (a predecessor's
    /// [`Running::listener_fds`], passed on by
    /// [`systemd::hand_over`](crate::systemd::hand_over)): the reactor runs a loop on each; the
    /// server engine serves one.
    ///
    /// # Errors
    ///
    /// As the engine's own `serve_listener`; on the server engine, more than one listener is
    /// `InvalidInput`.
    #[cfg_attr(not(feature = "server"), allow(unused_mut))]
    pub fn serve_listeners<H: Handler>(
        self,
        mut listeners: Vec<Listener>,
        handler: H,
    ) -> Result<Running, Error> {
        match self.engine {
            #[cfg(feature = "server")]
            Engine::Server => match (listeners.pop(), listeners.is_empty()) {
                (Some(listener), true) => self
                    .server
                    .serve_listener(listener, handler)
                    .map(Running::Server),
                _ => Err(Error::from(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the server engine serves one listener",
                ))),
            },
            Engine::Reactor | Engine::ReactorPool => self
                .reactor
                .serve_listeners(listeners, handler)
                .map(Running::Reactor),
        }
    }
}

/// A running server on either engine.
#[derive(Debug)]
#[non_exhaustive]
pub enum Running {
    /// The thread-pool engine.
    #[cfg(feature = "server")]
    #[cfg_attr(docsrs, doc(cfg(feature = "server")))]
    Server(Server),
    /// The reactor.
    Reactor(Reactor),
}

/// Calls the same method on whichever engine runs.
macro_rules! either {
    ($self:expr, $e:ident => $call:expr) => {
        match $self {
            #[cfg(feature = "server")]
            Running::Server($e) => $call,
            Running::Reactor($e) => $call,
        }
    };
}

impl Running {
    /// The bound TCP address (`0.0.0.0:0` for a Unix domain socket).
    pub fn local_addr(&self) -> SocketAddr {
        either!(self, e => e.local_addr())
    }

    /// Where it listens: TCP or a Unix domain socket.
    pub fn address(&self) -> &Address {
        either!(self, e => e.address())
    }

    /// Duplicates of its listening sockets (one, or one per event loop), to hand to a
    /// successor process that takes the port over with no connection refused
    /// ([`systemd::hand_over`](crate::systemd::hand_over)); none once the shutdown began.
    ///
    /// # Errors
    ///
    /// When a descriptor cannot be duplicated (the process is out of them).
    pub fn listener_fds(&self) -> Result<Vec<std::os::fd::OwnedFd>, Error> {
        either!(self, e => e.listener_fds())
    }

    /// A handle that starts a graceful shutdown from any thread.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        either!(self, e => e.shutdown_handle())
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        either!(self, e => e.open_connections())
    }

    /// The live counters.
    pub fn stats(&self) -> Stats {
        either!(self, e => e.stats())
    }

    /// Blocks until the server stops (a [`ShutdownHandle`] from another thread).
    pub fn wait(self) {
        either!(self, e => e.wait())
    }

    /// Graceful shutdown: stops accepting, answers requests in flight, closes WebSockets with
    /// 1001, and joins every thread within `grace`.
    ///
    /// # Errors
    ///
    /// As the engine's own `shutdown`: threads still running after `grace`.
    pub fn shutdown(self, grace: Duration) -> Result<(), Error> {
        either!(self, e => e.shutdown(grace))
    }
}
