//! The OS-thread-pool engine (feature `server`).
//!
//! Worker threads run the [`Handler`] as ordinary blocking code, fed through a bounded
//! `crossbeam-channel` queue. **A worker gets a request, not a socket**: the acceptor hands each new
//! connection to the *parker*, one thread with a `polling::Poller`, which reads heads without
//! blocking and queues a connection for a worker only once a whole request head is buffered. A
//! partial head waits there with its bytes until the header-read deadline (then `408`); an idle
//! keep-alive connection waits there for its next request; a WebSocket or an event stream waits
//! there between messages, its callbacks run on whichever worker takes it. So thousands of idle,
//! slow or silent connections cost memory, not threads. Turn parking off with
//! [`Builder::parking`]`(`[`Parking::Off`]`)` to get the classic thread-per-connection shape for comparison (a worker
//! waits on each connection's socket, and as many silent connections as workers stop it).
//!
//! ```no_run
//! use std::time::Duration;
//! use twinhttp::{Request, Response, server::Server};
//!
//! let server = Server::builder()
//!     .workers(8)
//!     .idle_timeout(Duration::from_secs(30))
//!     .serve("127.0.0.1:0", |_: &mut Request<'_>| Response::text("Hello, World!"))?;
//! println!("listening on {}", server.local_addr());
//! server.shutdown(Duration::from_secs(5))?;
//! # Ok::<(), twinhttp::Error>(())
//! ```

mod backlog;
mod connection;
mod detached;
mod head;
mod park;
mod session;
mod streamed;
mod worker;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::engine::{Control, Running, Starting};
use crate::http::driver::{Driver, Streams};
use crate::net::Port;
use crate::net::acceptor::Acceptor;
use crate::net::transport::{Address, Listener, UNSPECIFIED};
use crate::settings::Settings;
use crate::stats::{HandleSlot, Stats, StatsHandle};
use crate::{Error, Handler, MinRate, ShutdownHandle};

/// What the thread-pool engine parks: connections that wait in its poller, watched by one thread,
/// instead of each holding a worker or a thread of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Parking {
    /// New, idle and slow HTTP connections until a whole request head is buffered, and
    /// WebSockets and event streams between messages (the default): no open connection holds a
    /// thread while it waits.
    #[default]
    All,
    /// HTTP connections as with `All`, but each WebSocket and event stream gets a thread of its
    /// own. That answers a lone connection's message sooner (one hand-off less: about 60 instead
    /// of 75 µs per small WebSocket round trip here) and costs a thread and about 23 KiB per open
    /// session instead of about 2 KiB (`docs/performance.md`, `docs/websocket.md`).
    Http,
    /// Nothing: a worker serves each connection for its life and waits on its socket, and each
    /// WebSocket or event stream has a thread (the thread-per-connection shape, for comparison).
    Off,
}

/// The largest queue between the acceptor (and parker) and the workers ([`Builder::queue`]).
pub const MAX_QUEUE: usize = 1 << 16;

/// Settings for a [`Server`]; every setter documents its default.
///
/// Made by [`Server::builder`]; the setters take and return it by value, and
/// [`serve`](Builder::serve), [`serve_unix`](Builder::serve_unix) or
/// [`serve_listener`](Builder::serve_listener) starts the server. The defaults serve a public
/// port safely: `4 × cores` workers, [`Limits::default`], a 10 s header-read deadline, a 60 s idle
/// timeout, minimum data rates, at most 16,384 open connections and parking on
/// (`docs/configuration.md` has them all in one table).
///
/// [`Limits::default`]: crate::Limits::default
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use twinhttp::{Limits, Response, handler_fn, server::Server};
///
/// let mut limits = Limits::default();
/// limits.max_body_bytes = 1 << 20; // 413 beyond 1 MiB
/// let mut builder = Server::builder()
///     .workers(32) // handlers that wait on a database: more threads than cores
///     .header_read_timeout(Duration::from_secs(5))
///     .limits(limits)
///     .access_log(true);
/// let stats = builder.stats_handle(); // the counters, for the handler to report
/// let server = builder.serve("127.0.0.1:8080", handler_fn(move |_| {
///     Response::text(format!("{} requests so far", stats.stats().requests))
/// }))?;
/// # server.shutdown(Duration::from_secs(1))?;
/// # Ok::<(), twinhttp::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    workers: usize,
    queue: usize,
    /// What both engines set alike.
    settings: Settings,
    parking: Parking,
    park_linger: Duration,
    /// Shared with other processes, or not ([`Builder::reuse_port`]).
    port: Port,
    /// Handed out by [`Builder::stats_handle`], filled in by `serve`.
    stats: HandleSlot,
}

impl Default for Builder {
    fn default() -> Self {
        let cores = thread::available_parallelism().map_or(2, |n| n.get());
        Builder {
            workers: (cores * 4).max(4),
            queue: 1024,
            settings: Settings::default(),
            parking: Parking::All,
            park_linger: Duration::ZERO,
            port: Port::Own,
            stats: HandleSlot::default(),
        }
    }
}

impl Builder {
    /// Worker threads that run handlers. Default: 4 × available cores, at least 4. With parking
    /// on, this bounds concurrent *requests*, not connections.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// Bound of the queue between the acceptor (and parker) and the workers. Default: 1024.
    /// At most [`Builder::max_connections`] and [`MAX_QUEUE`] (its slots are allocated when
    /// the server starts): a larger value is taken as the smaller of the two.
    pub fn queue(mut self, n: usize) -> Self {
        self.queue = n.max(1);
        self
    }

    crate::settings::shared_setters!(settings);

    /// Shares the port with other processes (`SO_REUSEPORT`; `SO_REUSEPORT_LB` on FreeBSD):
    /// several servers, of the same user, each bound with this, take turns at its new
    /// connections (the kernel spreads them), so a new process can start serving before an old
    /// one stops. Off by default: a port another socket listens on fails to bind with "address
    /// in use". Deploying with it: `docs/deploying.md`.
    pub fn reuse_port(mut self, on: bool) -> Self {
        self.port = if on { Port::Shared } else { Port::Own };
        self
    }

    /// The slowest a request body may arrive: slower, it is answered `408` and the connection
    /// closed. Time the handler spends between reads does not count. `None`: no minimum.
    /// Default: [`MinRate::default()`] (240 bytes/s after 5 s).
    pub fn min_request_body_rate(mut self, rate: Option<MinRate>) -> Self {
        self.settings.min_request_body_rate = rate;
        self
    }

    /// The slowest a client may take a response (and, with parking on, a WebSocket's or event
    /// stream's output) while the server waits on it: slower, the connection is closed.
    /// `None`: no minimum. Default: [`MinRate::default()`] (240 bytes/s after 5 s).
    pub fn min_response_rate(mut self, rate: Option<MinRate>) -> Self {
        self.settings.min_response_rate = rate;
        self
    }

    /// What waits in the parker's poller instead of holding a worker or a thread: see
    /// [`Parking`]. Default: [`Parking::All`].
    pub fn parking(mut self, parking: Parking) -> Self {
        self.parking = parking;
        self
    }

    /// How long a worker waits for the next request on a connection before parking it. A short
    /// linger keeps a busy keep-alive connection on its worker and saves a round trip through
    /// the parker; while it lingers the worker serves no one else. The wait ends at the
    /// connection's idle deadline if that comes first. Default: 0 (park at once).
    pub fn park_linger(mut self, t: Duration) -> Self {
        self.park_linger = t;
        self
    }

    /// A handle that reads this server's [`Stats`] once it serves: made before `serve`, so the
    /// server's own handler can hold it (a `/stats` route). Every call gives the same handle; a
    /// clone of the builder does not share it (take one from each builder you serve).
    ///
    /// ```no_run
    /// use twinhttp::{Response, handler_fn, server::Server};
    ///
    /// let mut builder = Server::builder();
    /// let stats = builder.stats_handle();
    /// let server = builder.serve("127.0.0.1:8080", handler_fn(move |_| {
    ///     Response::text(format!("{} requests", stats.stats().requests))
    /// }))?;
    /// # server.shutdown(std::time::Duration::from_secs(1))?;
    /// # Ok::<(), twinhttp::Error>(())
    /// ```
    pub fn stats_handle(&mut self) -> StatsHandle {
        self.stats.get()
    }

    /// Binds `addr` and starts serving `handler`.
    ///
    /// # Errors
    ///
    /// When the address cannot be bound or a thread or poller cannot be created
    /// (what had started is stopped: nothing is left serving).
    pub fn serve<H: Handler>(self, addr: impl ToSocketAddrs, handler: H) -> Result<Server, Error> {
        let listener = crate::net::bind(addr, self.port)?;
        self.serve_listener(listener, handler)
    }

    /// Binds a Unix domain socket at `path` and starts serving `handler` on it (behind a proxy
    /// on the same machine: nginx's `proxy_pass http://unix:PATH`, `curl --unix-socket PATH`).
    /// A socket file left at `path` by a server that is gone is replaced; the file stays after
    /// shutdown.
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
    ) -> Result<Server, Error> {
        let path = path.as_ref();
        let listener = Listener::bind_unix(path).map_err(|e| Error::bind(path.display(), e))?;
        self.serve_listener(listener, handler)
    }

    /// Starts serving `handler` on a listener you bound, TCP or Unix (systemd socket
    /// activation, a port chosen by a test; it is made non-blocking).
    ///
    /// # Errors
    ///
    /// When the listener is unusable or a thread or poller cannot be created
    /// (what had started is stopped: nothing is left serving).
    pub fn serve_listener<H: Handler>(
        self,
        listener: impl Into<Listener>,
        handler: H,
    ) -> Result<Server, Error> {
        let listener = listener.into();
        listener.set_nonblocking()?;
        let address = listener.address()?;
        let control = Arc::new(Control::new(0, self.settings.memory_budget));
        control.publish_to(self.stats.handed_out());
        // The threads spawned through it run once every one is up; a failed start ends them unrun.
        let mut starting = Starting::new(control.clone());
        // No more connections than are open wait in it.
        let queue = self.queue.min(self.settings.max_connections).min(MAX_QUEUE);
        let (tx, rx) = crossbeam_channel::bounded(queue);
        let handler = Arc::new(handler);
        let mut rules = self.settings.rules();
        // A handler that streams its body reads it on its worker, from the socket.
        let asks = handler.clone();
        let panics = control.counters.panics().clone();
        rules.streams = Some(Streams(Arc::new(move |head| {
            crate::handler::streams_body(&*asks, head, &panics)
        })));
        // Buffers lent by the parker come back to the workers: they go round through this. It
        // holds as many as a loop of the reactor keeps (256 working sets, an 8 KiB read buffer
        // and a write buffer each, and 256 heads; after a burst of large responses up to the
        // pools' per-item caps): when it held two per worker, 64 keep-alive connections
        // dropped and allocated a zeroed working set every ten requests
        // (`bench/instructions.sh`).
        let pools = crate::http::pools::Shared::new(
            self.workers
                .saturating_mul(2)
                .clamp(crate::http::pools::POOL_KEEP, MAX_QUEUE),
        );
        let parker = if self.parking != Parking::Off {
            Some(Arc::new(park::Parker::new(
                rules.clone(),
                pools.clone(),
                control.clone(),
                tx.clone(),
            )?))
        } else {
            None
        };
        let shared = Arc::new(worker::Shared {
            handler,
            config: self.clone(),
            rules: rules.clone(),
            pools,
            parker: parker.clone(),
            control: control.clone(),
        });
        let kept = crate::engine::keep([&listener])?;
        let acceptor = Acceptor::new(
            listener,
            control.clone(),
            self.settings.max_connections,
            self.settings.wrap.clone(),
        )?;
        if let Some(p) = parker.clone() {
            starting.wakes(p.waker());
            starting.spawn("twinhttp-park", move || p.run())?;
        }
        for i in 0..self.workers {
            let (shared, rx) = (shared.clone(), rx.clone());
            starting.spawn(&format!("twinhttp-worker-{i}"), move || {
                worker::run(&shared, &rx)
            })?;
        }
        starting.wakes(acceptor.waker());
        let access_log = self.settings.access_log;
        starting.spawn("twinhttp-accept", move || {
            acceptor.run(|stream, peer, open| {
                let driver = Driver::new(access_log, Some(&peer), Instant::now(), &rules);
                let conn = connection::Connection::new(stream, peer, open, driver);
                match &parker {
                    // A new connection waits in the parker, costing no worker, until its
                    // first request head is buffered.
                    Some(parker) => parker.admit(conn),
                    // Thread per connection: blocks while the queue is full, backpressure into
                    // the kernel's accept backlog.
                    None => drop(tx.send(connection::Job::from(conn))),
                }
            })
        })?;
        Ok(Server(starting.finish(address, kept)))
    }
}

/// A running thread-pool server: handlers run as blocking code on its worker threads.
///
/// Started by [`Builder::serve`] (from [`Server::builder`]); it serves until
/// [`shutdown`](Server::shutdown) is called, or a [`ShutdownHandle`] from
/// [`shutdown_handle`](Server::shutdown_handle) is used from another thread (a signal handler).
/// Dropping it without either leaves its threads serving. Its [`stats`](Server::stats) are the
/// same [`Stats`] as the reactor's.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use twinhttp::{Response, handler_fn, server::Server};
///
/// let server = Server::builder().serve("127.0.0.1:0", handler_fn(|req| {
///     std::thread::sleep(Duration::from_millis(10)); // blocking is fine here: it holds a worker
///     Response::text(format!("you asked for {}", req.path()))
/// }))?;
/// println!("listening on http://{}", server.local_addr());
/// let stop = server.shutdown_handle(); // Send + Clone: stop it from any thread
/// std::thread::spawn(move || stop.shutdown());
/// server.wait(); // returns once the handle was used, every thread joined
/// # Ok::<(), twinhttp::Error>(())
/// ```
#[derive(Debug)]
pub struct Server(Running);

impl Server {
    /// The server's settings, to change before [`Builder::serve`].
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The address the server listens on (useful after binding port 0).
    ///
    /// For a server on a Unix domain socket this is the unspecified `0.0.0.0:0`; see
    /// [`Server::address`].
    pub fn local_addr(&self) -> SocketAddr {
        self.0.address.tcp().unwrap_or(UNSPECIFIED)
    }

    /// The address the server listens on: TCP or a Unix domain socket's path.
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

    /// Open connections right now, parked ones included.
    pub fn open_connections(&self) -> usize {
        self.0.open_connections()
    }

    /// The live counters now: connections by what they are doing, requests, refusals by
    /// reason, panics, threads ([`crate::stats`]).
    pub fn stats(&self) -> Stats {
        self.0.stats()
    }

    /// Blocks until the server is shut down through a [`ShutdownHandle`], then joins its
    /// threads (waiting for in-flight requests) and waits for those of WebSockets and event
    /// streams on threads of their own (closed at shutdown). It does not wait for upgraded
    /// connections' callbacks ([`Response::upgrade`](crate::Response::upgrade)): the shutdown
    /// does not interrupt them (as Go's `net/http` leaves hijacked connections);
    /// [`shutdown`](Self::shutdown) waits for them up to its grace.
    pub fn wait(self) {
        self.0.wait()
    }

    /// Graceful shutdown: stops accepting, closes idle connections, lets in-flight requests
    /// finish (their responses carry `Connection: close`), and joins every thread.
    ///
    /// # Errors
    ///
    /// [`crate::ErrorKind::ShutdownTimedOut`] when threads are still busy after `grace`; they are
    /// left to finish on their own.
    pub fn shutdown(self, grace: Duration) -> Result<(), Error> {
        self.0.shutdown(grace)
    }
}
