//! Command-line options shared by the examples, and starting the chosen engine.
#![allow(dead_code)]

pub mod child;

use std::io::Write;
use std::time::Duration;

use twinhttp::reactor::Dispatch;
use twinhttp::stats::StatsHandle;
use twinhttp::{Builder, Engine, Handler, Running};

/// Options every example takes.
pub struct Args {
    /// `--addr HOST:PORT`, default 127.0.0.1:8080.
    pub addr: String,
    /// `--unix PATH`: serve on a Unix domain socket at PATH instead of `--addr`.
    pub unix: Option<String>,
    /// `--engine server|reactor`: default `server` when the `server` feature is on.
    pub engine: String,
    /// `--dispatch inline|pool` (reactor only), default inline.
    pub dispatch: String,
    /// `--threads N`: workers for the server engine, event loops for the reactor.
    pub threads: Option<usize>,
    /// `--workers N`: pool threads for `--dispatch pool` (default 4 × cores).
    pub workers: Option<usize>,
    /// `--accept reuseport|thread` (reactor): a listener per loop, or one acceptor thread.
    pub accept: String,
    /// `--no-park`: server engine keeps a worker on each idle connection (thread-per-connection).
    pub no_park: bool,
    /// `--session-threads`: server engine parks idle HTTP connections but gives each WebSocket
    /// and event stream a thread.
    pub session_threads: bool,
    /// `--park-linger-us N`: server engine waits this long for the next request before parking.
    pub park_linger: Option<Duration>,
    /// `--tls-cert PEM` and `--tls-key PEM`: serve HTTPS (feature `tls`).
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
    /// `--static DIR`: the folder `app` serves under `/static/`.
    pub static_dir: Option<String>,
    /// `--access-log`: one line per exchange through `log` (target `twinhttp::access`, at info).
    pub access_log: bool,
    /// `--memory-budget MIB`: the server's memory budget (default 256 MiB).
    pub memory_budget: Option<usize>,
    /// `--reuse-port`: share the port with other processes (`SO_REUSEPORT`).
    pub reuse_port: bool,
    /// `--systemd`: serve on the socket systemd passed (feature `systemd`).
    pub systemd: bool,
    /// `--proxy-protocol`: every connection begins with a PROXY protocol header (v1 or v2).
    pub proxy_protocol: bool,
    /// `--trusted-proxy CIDR` (repeated, or comma-separated; `unix` for Unix socket peers):
    /// the proxies whose forwarded headers are believed.
    pub trusted_proxies: twinhttp::TrustedProxies,
    /// The reactor's options given (`--dispatch`, `--workers`, `--accept`): refused where
    /// they would be ignored.
    reactor_options: Vec<&'static str>,
}

const USAGE: &str = "options: -h, --help (this text)
         --addr HOST:PORT (127.0.0.1:8080)  --unix PATH (a Unix domain socket instead)
         --engine server|reactor (server when built with feature server, else reactor)
         --dispatch inline|pool (reactor: handlers on its loops, or on a pool; inline)
         --threads N (server: workers; reactor: loops)  --workers N (pool dispatch)
         --accept reuseport|thread (reactor)
         --no-park  --session-threads  --park-linger-us N (server engine)
         --tls-cert PEM --tls-key PEM (HTTPS; feature tls)
         --static DIR (app: the folder served under /static/)
         --access-log (log a line per exchange; off without it; RUST_LOG filters the log)
         --memory-budget MIB (bodies in memory, response tails, send queues; 256)
         --reuse-port (share the port with other processes: SO_REUSEPORT)
         --systemd (serve on the socket systemd passed; feature systemd)
         --proxy-protocol (connections begin with a PROXY protocol header, v1 or v2)
         --trusted-proxy CIDR (believe its Forwarded / X-Forwarded-*; repeat; `unix`)";

impl Args {
    /// The options from the command line; `--help` prints them and exits 0, a bad one prints
    /// what is wrong and them, and exits 2. `--static` is refused: only `app` serves files
    /// ([`Args::run_serving_files`]).
    pub fn parse() -> Args {
        Args::without_files(Args::parse_options(None, Files::None))
    }

    /// Refuses `--static` where no files are served.
    fn without_files(args: Args) -> Args {
        if args.static_dir.is_some() {
            usage("--static is for app only (the folder it serves under /static/)");
        }
        args
    }

    /// The options; `engine`: the one engine an example runs, else the build's default;
    /// `files`: whether it serves `--static`'s folder (its help lists the option only then).
    fn parse_options(engine: Option<&str>, files: Files) -> Args {
        SERVES_FILES.store(files == Files::Served, std::sync::atomic::Ordering::Relaxed);
        let default_engine = if cfg!(feature = "server") {
            "server"
        } else {
            "reactor"
        };
        let mut args = Args {
            addr: "127.0.0.1:8080".to_owned(),
            unix: None,
            engine: engine.unwrap_or(default_engine).to_owned(),
            dispatch: "inline".to_owned(),
            threads: None,
            workers: None,
            accept: "reuseport".to_owned(),
            no_park: false,
            session_threads: false,
            park_linger: None,
            tls_cert: None,
            tls_key: None,
            static_dir: None,
            access_log: false,
            memory_budget: None,
            reuse_port: false,
            systemd: false,
            proxy_protocol: false,
            trusted_proxies: twinhttp::TrustedProxies::new(),
            reactor_options: Vec::new(),
        };
        let mut trusted = String::new();
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
            };
            if let Some(given) = ["--dispatch", "--workers", "--accept"]
                .into_iter()
                .find(|f| *f == flag)
            {
                args.reactor_options.push(given);
            }
            match flag.as_str() {
                "--addr" => args.addr = value(),
                "--unix" => args.unix = Some(value()),
                "--engine" => args.engine = value(),
                "--dispatch" => args.dispatch = value(),
                "--threads" => args.threads = Some(number(&value())),
                "--workers" => args.workers = Some(number(&value())),
                "--accept" => args.accept = value(),
                "--no-park" => args.no_park = true,
                "--session-threads" => args.session_threads = true,
                "--park-linger-us" => {
                    args.park_linger = Some(Duration::from_micros(number(&value()) as u64))
                }
                "--tls-cert" => args.tls_cert = Some(value()),
                "--tls-key" => args.tls_key = Some(value()),
                "--static" => args.static_dir = Some(value()),
                "--access-log" => args.access_log = true,
                "--reuse-port" => args.reuse_port = true,
                "--systemd" => args.systemd = true,
                "--proxy-protocol" => args.proxy_protocol = true,
                "--trusted-proxy" => {
                    trusted.push_str(&value());
                    trusted.push(',');
                }
                "--memory-budget" => {
                    let mib = number(&value());
                    args.memory_budget = Some(
                        mib.checked_mul(1 << 20)
                            .unwrap_or_else(|| usage("--memory-budget is in MiB and too large")),
                    );
                }
                "-h" | "--help" => help(),
                other => usage(&format!("unknown option {other}")),
            }
        }
        args.trusted_proxies = trusted
            .parse()
            .unwrap_or_else(|e| usage(&format!("--trusted-proxy: {e}")));
        if !matches!(args.engine.as_str(), "server" | "reactor") {
            usage("--engine is server or reactor");
        }
        if !matches!(args.dispatch.as_str(), "inline" | "pool") {
            usage("--dispatch is inline or pool");
        }
        if !matches!(args.accept.as_str(), "reuseport" | "thread") {
            usage("--accept is reuseport or thread");
        }
        if args.tls_cert.is_some() != args.tls_key.is_some() {
            usage("--tls-cert and --tls-key go together");
        }
        if args.tls_cert.is_some() && !cfg!(feature = "tls") {
            usage("this build has no TLS: add --features tls");
        }
        args.refuse_other_engines_options();
        args
    }

    /// Exits (2) when an option of one engine is given for the other, or `--workers` without
    /// pool dispatch: it would be ignored.
    fn refuse_other_engines_options(&self) {
        if self.engine != "reactor" {
            if let Some(flag) = self.reactor_options.first() {
                usage(&format!("{flag} is for the reactor, not the server engine"));
            }
            return;
        }
        if self.dispatch != "pool" && self.reactor_options.contains(&"--workers") {
            usage("--workers is for --dispatch pool (the pool's threads)");
        }
        let server_only = [
            ("--no-park", self.no_park),
            ("--session-threads", self.session_threads),
            ("--park-linger-us", self.park_linger.is_some()),
        ];
        if let Some((flag, _)) = server_only.iter().find(|(_, given)| *given) {
            usage(&format!("{flag} is for the server engine, not the reactor"));
        }
    }

    /// [`Args::parse`] for an example that runs one engine only: `--engine` naming another is
    /// refused (exit 2) rather than ignored.
    pub fn parse_for_engine(name: &str, engine: &str) -> Args {
        let explicit = std::env::args()
            .skip(1)
            .collect::<Vec<_>>()
            .windows(2)
            .find(|pair| pair[0] == "--engine")
            .map(|pair| pair[1].clone());
        if let Some(other) = explicit.filter(|e| e != engine) {
            usage(&format!(
                "{name} runs the {engine} engine only; --engine {other} is not supported here"
            ));
        }
        Args::without_files(Args::parse_options(Some(engine), Files::None))
    }

    /// The TLS configuration from `--tls-cert` and `--tls-key`, if given; exits when the files
    /// cannot be used.
    #[cfg(feature = "tls")]
    fn tls(&self) -> Option<std::sync::Arc<twinhttp::tls::rustls::ServerConfig>> {
        let (cert, key) = (self.tls_cert.as_ref()?, self.tls_key.as_ref()?);
        match twinhttp::tls::config_from_pem(cert.as_ref(), key.as_ref()) {
            Ok(config) => Some(config),
            Err(e) => {
                eprintln!("error: {e}"); // names the file
                std::process::exit(1)
            }
        }
    }

    /// The engine the options name: one value.
    pub fn engine(&self) -> Engine {
        match (self.engine.as_str(), self.dispatch.as_str()) {
            #[cfg(feature = "server")]
            ("server", _) => Engine::Server,
            ("reactor", "pool") => Engine::ReactorPool,
            ("reactor", _) => Engine::Reactor,
            _ => usage("this build has no server engine: add --features server"),
        }
    }

    /// `builder` with the options applied: the shared ones once, each engine's own to it.
    pub fn configure(&self, builder: Builder) -> Builder {
        let mut b = builder
            .access_log(self.access_log)
            .reuse_port(self.reuse_port)
            .proxy_protocol(self.proxy_protocol)
            .trusted_proxies(self.trusted_proxies.clone());
        if let Some(bytes) = self.memory_budget {
            b = b.memory_budget(bytes);
        }
        #[cfg(feature = "server")]
        {
            b = b.server(|mut s| {
                s = s.parking(match (self.no_park, self.session_threads) {
                    (true, _) => twinhttp::server::Parking::Off,
                    (false, true) => twinhttp::server::Parking::Http,
                    (false, false) => twinhttp::server::Parking::All,
                });
                if let Some(n) = self.threads {
                    s = s.workers(n);
                }
                if let Some(t) = self.park_linger {
                    s = s.park_linger(t);
                }
                s
            });
        }
        b = b.reactor(|mut r| {
            if let Some(n) = self.threads {
                r = r.loops(n);
            }
            if self.accept == "thread" {
                r = r.accept(twinhttp::reactor::Accept::Thread);
            }
            if let (Some(n), "pool") = (self.workers, self.dispatch.as_str()) {
                r = r.dispatch(Dispatch::Pool(n));
            }
            r
        });
        #[cfg(feature = "tls")]
        if let Some(config) = self.tls() {
            b = b.tls(config);
        }
        b
    }

    /// Starts `handler` on the chosen engine; exits with a message when it cannot.
    pub fn serve(&self, handler: impl Handler) -> Running {
        self.serve_with(|_| handler)
    }

    /// Starts the handler `make` returns, given the engine's live counters, on the chosen
    /// engine; exits with a message when it cannot.
    pub fn serve_with<H: Handler>(&self, make: impl FnOnce(StatsHandle) -> H) -> Running {
        let mut builder = self.configure(self.engine().builder());
        let handler = make(builder.stats_handle());
        self.start(builder, handler).unwrap_or_else(|e| {
            eprintln!("error: {e}"); // names the address: "cannot bind 127.0.0.1:8080: ..."
            std::process::exit(1)
        })
    }

    /// Installs the logger, parses the arguments, serves `handler`, prints
    /// `NAME: listening on http://ADDR (…)` (the line the measuring tools read), and runs until
    /// SIGINT (Ctrl-C) or SIGTERM, then shuts down gracefully.
    pub fn run(name: &str, handler: impl Handler) {
        Args::run_with(name, |_, _| handler);
    }

    /// [`Args::run`] with a handler made from the arguments and the engine's live counters.
    pub fn run_with<H: Handler>(name: &str, make: impl FnOnce(&Args, StatsHandle) -> H) {
        Args::run_parsed(name, Args::parse(), make);
    }

    /// [`Args::run_with`] for an example that serves the folder `--static` names.
    pub fn run_serving_files<H: Handler>(name: &str, make: impl FnOnce(&Args, StatsHandle) -> H) {
        Args::run_parsed(name, Args::parse_options(None, Files::Served), make);
    }

    fn run_parsed<H: Handler>(name: &str, args: Args, make: impl FnOnce(&Args, StatsHandle) -> H) {
        init_logger();
        let signals = Signals::install(name);
        let running = args.serve_with(|stats| make(&args, stats));
        say_listening(name, &running, &args);
        until_signal(running, name, signals);
    }

    /// A label for the configuration, for log lines.
    pub fn label(&self) -> String {
        let engine = match self.engine.as_str() {
            "reactor" => format!("reactor, {} dispatch", self.dispatch),
            _ if self.no_park => "server, thread per connection".to_owned(),
            _ => "server".to_owned(),
        };
        match self.tls_cert {
            Some(_) => engine + ", TLS",
            None => engine,
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP (stop), and SIGUSR2 (restart, as nginx upgrades its binary),
/// caught from [`Signals::install`] on: installed before the server says it is listening, so a
/// signal sent once it has said so is always acted on.
pub struct Signals(std::sync::mpsc::Receiver<Signal>);

/// What a signal asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT, SIGTERM or SIGHUP: a graceful shutdown.
    Stop,
    /// SIGUSR2: a successor on the same sockets, then a graceful shutdown.
    Restart,
}

impl Signals {
    pub fn install(name: &str) -> Signals {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR2};
        // The program as started: a successor runs the file at this path, even once it was
        // replaced (where the running one's own link then reads "(deleted)").
        if let Ok(exe) = std::env::current_exe() {
            let _ = PROGRAM.set(exe);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGUSR2]) {
            Ok(mut caught) => {
                std::thread::spawn(move || {
                    for signal in caught.forever() {
                        let what = match signal {
                            SIGUSR2 => Signal::Restart,
                            _ => Signal::Stop,
                        };
                        let _ = tx.send(what);
                    }
                });
            }
            Err(e) => eprintln!("{name}: cannot handle signals ({e}); stop it with SIGKILL"),
        }
        Signals(rx)
    }
}

/// The program's path as it started ([`Signals::install`]).
static PROGRAM: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Starts this program again (the file at its path now: a new build, once replaced), with the
/// same options and `--systemd`, on `running`'s listening sockets, and returns once it serves.
/// Its standard input is closed; its output goes where this one's goes.
#[cfg(feature = "systemd")]
fn restart(running: &Running) -> Result<std::process::Child, twinhttp::Error> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--systemd") {
        args.push("--systemd".to_owned());
    }
    let program = match PROGRAM.get() {
        Some(path) => path.clone(),
        None => std::env::current_exe()?,
    };
    let mut successor = std::process::Command::new(program);
    successor.args(args).stdin(std::process::Stdio::null());
    twinhttp::systemd::hand_over(running.listener_fds()?, successor, Duration::from_secs(10))
}

#[cfg(not(feature = "systemd"))]
fn restart(_: &Running) -> Result<std::process::Child, twinhttp::Error> {
    Err(twinhttp::Error::from(std::io::Error::other(
        "restarting needs the feature: --features systemd",
    )))
}

/// Prints `NAME: listening on URL (configuration)`, the line the measuring tools read; a
/// standard error that is gone (a hung-up terminal, a successor's after its predecessor's
/// reader left) is no reason to stop serving.
pub fn say_listening(name: &str, running: &Running, args: &Args) {
    say(&format!(
        "{name}: listening on {} ({})",
        url(running, args.tls_cert.is_some()),
        args.label()
    ));
}

/// Writes `line` and a newline to standard error in one `write`: during a restart the
/// predecessor and its successor share the pipe, and `writeln!` on an unbuffered stderr writes
/// each piece of the format separately, so two processes' lines would interleave. One write of
/// less than `PIPE_BUF` bytes to a pipe is atomic. A standard error that is gone is ignored.
pub fn say(line: &str) {
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// `http://HOST:PORT` (`https://` with `tls`), or `unix:PATH` for a Unix domain socket.
impl Args {
    /// Starts `builder` serving `handler` where the options say: the socket systemd passed
    /// (`--systemd`), a Unix socket (`--unix`), or `--addr`.
    pub fn start<H: Handler>(
        &self,
        builder: Builder,
        handler: H,
    ) -> Result<Running, twinhttp::Error> {
        if self.systemd {
            return serve_passed(builder, handler);
        }
        match &self.unix {
            Some(path) => builder.serve_unix(path, handler),
            None => builder.serve(&*self.addr, handler),
        }
    }
}

/// Serves on the first socket systemd passed.
#[cfg(feature = "systemd")]
fn serve_passed<H: Handler>(builder: Builder, handler: H) -> Result<Running, twinhttp::Error> {
    let mut passed = twinhttp::systemd::listeners()?;
    match passed.len() {
        0 => usage(
            "--systemd: no socket was passed (LISTEN_FDS): run under systemd or systemd-socket-activate",
        ),
        1 => builder.serve_listener(passed.swap_remove(0), handler),
        // A predecessor's reactor hands over a listener per loop.
        _ => builder.serve_listeners(passed, handler),
    }
}

#[cfg(not(feature = "systemd"))]
fn serve_passed<H: Handler>(_: Builder, _: H) -> Result<Running, twinhttp::Error> {
    usage("--systemd needs the feature: --features systemd")
}

pub fn url(running: &Running, tls: bool) -> String {
    match running.address() {
        twinhttp::Address::Tcp(a) if tls => format!("https://{a}"),
        twinhttp::Address::Tcp(a) => format!("http://{a}"),
        other => other.to_string(),
    }
}

/// How long a shutdown waits for what is in flight: longer than a WebSocket's closing
/// handshake (`WsConfig::close_timeout`, 5 s), so that a peer that never answers the server's
/// close frame is let go before the grace ends and does not decide the exit status.
const GRACE: Duration = Duration::from_secs(7);

/// Serves until SIGINT (Ctrl-C) or SIGTERM, then shuts down gracefully: no new connections,
/// requests in flight answered (with `Connection: close`), WebSockets closed with 1001, every
/// thread joined within [`GRACE`]. Exits the process: 0 when the shutdown finished in time.
///
/// On SIGUSR2, first a copy of this program with the same options starts on the same
/// listening sockets (feature `systemd`): once it serves, this one shuts down as above, and no
/// connection is refused on the way (a zero-downtime restart, as nginx's binary upgrade does).
pub fn until_signal(running: Running, name: &str, signals: Signals) -> ! {
    // Whoever reads our standard error may be gone (a hung-up terminal): a failed write is
    // not a failed restart.
    while let Ok(Signal::Restart) = signals.0.recv() {
        match restart(&running) {
            Ok(successor) => {
                say(&format!("{name}: handed over to PID {}", successor.id()));
                break;
            }
            Err(e) => {
                say(&format!("{name}: restart: {e}; serving on"));
            }
        }
    }
    log::info!("{name}: shutting down");
    let done = running.shutdown(GRACE);
    // Whoever reads our stderr may be gone by now: a failed write is not a failed shutdown.
    match done {
        Ok(()) => {
            say(&format!("{name}: shut down"));
            std::process::exit(0)
        }
        Err(e) => {
            say(&format!("{name}: shutdown: {e}"));
            std::process::exit(1)
        }
    }
}

/// Logs through `env_logger`: warnings and errors (handler panics, accept errors when out of
/// descriptors) and the access log's lines when `--access-log` is given; `RUST_LOG` overrides
/// (`RUST_LOG=debug` for more).
pub fn init_logger() {
    let default = "warn,twinhttp::access=info";
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default)).init();
}

fn number(s: &str) -> usize {
    s.parse()
        .unwrap_or_else(|_| usage(&format!("not a number: {s}")))
}

/// Whether an example serves the folder `--static` names (only `app` does).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Files {
    None,
    Served,
}

/// Whether this example serves files, as its options are parsed ([`usage`] has no `Args`).
static SERVES_FILES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The options this example takes: `--static` only where files are served.
fn options() -> impl Iterator<Item = &'static str> {
    let files = SERVES_FILES.load(std::sync::atomic::Ordering::Relaxed);
    USAGE
        .lines()
        .filter(move |line| files || !line.contains("--static"))
}

/// `--help`: the options on standard output, exit 0.
fn help() -> ! {
    options().for_each(|line| println!("{line}"));
    std::process::exit(0)
}

/// A bad command line: what is wrong and the options on standard error, exit 2.
fn usage(problem: &str) -> ! {
    eprintln!("error: {problem}");
    options().for_each(|line| eprintln!("{line}"));
    std::process::exit(2)
}
