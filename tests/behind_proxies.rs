//! `hello` behind the real proxies, across hosts: three backends, each in a network namespace
//! of its own (a test host on this machine, reached over a veth pair), behind HAProxy (PROXY
//! protocol v2, `send-proxy-v2`) and nginx (PROXY protocol v1 from its `stream` module;
//! `X-Forwarded-For` from its `http` proxy), over TCP and over Unix sockets, on every engine
//! configuration. Each backend reports the client's own address (`GET /client`), not the
//! proxy's; forwarded headers from a proxy that is not trusted are ignored; under load, a
//! backend restarted the zero-downtime way (SIGHUP) fails no request, and one killed costs at
//! most its requests in flight while HAProxy serves on from the others.
//!
//! Needs root (namespaces), nginx and HAProxy from Debian's packages: ignored by default;
//! `.ci/run` installs them and runs it (`cargo test --all-features --test behind_proxies --
//! --ignored`). The namespaces, links and processes it makes are removed when it ends.
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use child::{EVERY_CONFIGURATION, example_for_test};

/// Runs a command to its end; panics with its output when it fails.
fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test host: a network namespace joined to this one by a veth pair, `10.201.N.1` on this
/// side and `10.201.N.2` inside. Removed when dropped.
struct Host {
    ns: String,
    link: String,
    n: u8,
}

impl Host {
    fn new(n: u8) -> Host {
        let tag = std::process::id() % 100_000;
        let host = Host {
            ns: format!("twh-{tag}-{n}"),
            link: format!("twh{tag}h{n}"),
            n,
        };
        let peer = format!("twh{tag}p{n}");
        run("ip", &["netns", "add", &host.ns]);
        run(
            "ip",
            &[
                "link", "add", &host.link, "type", "veth", "peer", "name", &peer,
            ],
        );
        run("ip", &["link", "set", &peer, "netns", &host.ns]);
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("10.201.{n}.1/24"),
                "dev",
                &host.link,
            ],
        );
        run("ip", &["link", "set", &host.link, "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &host.ns, "ip"];
            all.extend_from_slice(args);
            run("ip", &all);
        };
        inside(&["addr", "add", &format!("10.201.{n}.2/24"), "dev", &peer]);
        inside(&["link", "set", &peer, "up"]);
        inside(&["link", "set", "lo", "up"]);
        host
    }

    /// The backend's address inside.
    fn addr(&self) -> String {
        format!("10.201.{}.2:8080", self.n)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.link])
            .status();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

/// A process this test started; stopped by its PID when dropped.
struct Process {
    child: Child,
    stop: Stop,
    /// Its standard error's lines (a backend's), and any successor's it started.
    lines: Option<std::sync::mpsc::Receiver<String>>,
    /// A successor it handed its sockets to, stopped with it.
    successor: Option<u32>,
}

/// How a process is stopped.
#[derive(Clone, Copy)]
enum Stop {
    /// `SIGKILL`.
    Kill,
    /// `SIGTERM`, which a master process passes on to its workers (nginx), then waited for.
    Term,
}

impl Process {
    fn new(child: Child, stop: Stop) -> Process {
        Process {
            child,
            stop,
            lines: None,
            successor: None,
        }
    }

    /// A zero-downtime restart: SIGUSR2, then the old process's exit once its successor serves.
    fn restart(&mut self) {
        let pid = self.child.id().to_string();
        run("kill", &["-USR2", &pid]);
        let lines = self.lines.as_ref().expect("a backend's lines");
        let handed = loop {
            let line = lines
                .recv_timeout(Duration::from_secs(20))
                .expect("a line saying it handed over");
            if line.contains("handed over to PID") {
                break line;
            }
        };
        self.successor = handed.rsplit(' ').next().and_then(|p| p.parse().ok());
        assert!(self.successor.is_some(), "{handed}");
        let status = self.child.wait().expect("the old process ends");
        assert!(status.success(), "the old process exited with {status}");
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(pid) = self.successor {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        match self.stop {
            Stop::Kill => self.kill(),
            Stop::Term => {
                let pid = self.child.id().to_string();
                let _ = Command::new("kill").args(["-TERM", &pid]).status();
                let _ = self.child.wait();
            }
        }
    }
}

/// Where a backend listens.
enum Listen<'a> {
    Tcp(&'a Host),
    Unix(&'a Host, PathBuf),
}

/// `hello` started inside its host with `flags`, once it says it listens.
fn backend(listen: &Listen<'_>, config: &[&str], flags: &[&str]) -> Process {
    let (host, place) = match listen {
        Listen::Tcp(host) => (host, vec!["--addr".to_owned(), host.addr()]),
        Listen::Unix(host, path) => (host, vec!["--unix".to_owned(), path.display().to_string()]),
    };
    let mut child = Command::new("ip")
        .args(["netns", "exec", &host.ns])
        .arg(example_for_test("hello"))
        .args(place)
        .args(config)
        .args(flags)
        .env("RUST_LOG", "off")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a backend");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("its first line");
    assert!(line.contains("listening on"), "{line}");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut process = Process::new(child, Stop::Kill);
    process.lines = Some(lines);
    process
}

/// A free port on 127.0.0.1 for a proxy.
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("address").port()
}

/// One `GET path` through `proxy` on a new connection: the status and body, or `None` when
/// the exchange failed.
fn get(proxy: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(proxy).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut got = String::new();
    s.read_to_string(&mut got).ok()?;
    let status = got.get(9..12)?.parse().ok()?;
    let body = got.split_once("\r\n\r\n")?.1.to_owned();
    Some((status, body))
}

/// Waits until `proxy` answers `GET /client` (the proxy and its backends are up).
fn wait_served(proxy: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if matches!(get(proxy, "/client"), Some((200, _))) {
            return;
        }
        assert!(Instant::now() < deadline, "{proxy} never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every one of `n` requests through `proxy` reports `want` as the client.
fn assert_clients(proxy: SocketAddr, want: &str, n: usize, what: &str) {
    for _ in 0..n {
        let got = get(proxy, "/client");
        assert_eq!(got, Some((200, format!("{want}\n"))), "{what}");
    }
}

/// A directory of its own for a proxy's files, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("twinhttp-proxies-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a directory");
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether HAProxy resends a request a server failed to another.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Retries {
    /// `retries 3`, `option redispatch`, `retry-on conn-failure empty-response`.
    On,
    /// None: a request a server fails, fails.
    Off,
}

/// HAProxy on `port`, sending PROXY protocol v2 to `servers` (`host:port` or a socket path),
/// with health checks.
fn haproxy(dir: &Path, port: u16, servers: &[String], retries: Retries) -> Process {
    let servers: String = servers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            format!(
                "  server s{i} {s} send-proxy-v2 check check-send-proxy inter 200 fall 1 rise 2\n"
            )
        })
        .collect();
    let retry = match retries {
        Retries::On => {
            "  retries 3\n  option redispatch 1\n  retry-on conn-failure empty-response\n"
        }
        Retries::Off => "  retries 0\n",
    };
    let conf = format!(
        "{}{retry}\n{}\n{servers}",
        "global\n  maxconn 2000\n\
         defaults\n  mode http\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n",
        format_args!(
            "frontend front\n  bind 127.0.0.1:{port}\n  default_backend back\n\
             backend back\n  balance roundrobin\n  option httpchk GET /"
        ),
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, conf).expect("write haproxy.cfg");
    let child = Command::new("haproxy")
        .args(["-db", "-f"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start haproxy");
    Process::new(child, Stop::Term)
}

/// How nginx passes the client on.
enum Nginx {
    /// `stream` module, `proxy_protocol on`: PROXY protocol v1.
    Stream,
    /// `http` proxy: `X-Forwarded-For` and `X-Forwarded-Proto`.
    Http,
}

/// nginx on `port` in front of `servers` (`host:port`, or `unix:PATH`).
fn nginx(dir: &Path, port: u16, servers: &[String], kind: Nginx) -> Process {
    let upstream: String = servers
        .iter()
        .map(|s| format!("    server {s};\n"))
        .collect();
    let d = dir.display();
    let body = match kind {
        Nginx::Stream => format!(
            "stream {{\n  upstream back {{\n{upstream}  }}\n  server {{\n    listen 127.0.0.1:{port};\n    \
             proxy_pass back;\n    proxy_protocol on;\n  }}\n}}\n"
        ),
        Nginx::Http => format!(
            "http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  \
             fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  \
             upstream back {{\n{upstream}    keepalive 16;\n  }}\n  server {{\n    listen 127.0.0.1:{port};\n    \
             location / {{\n      proxy_pass http://back;\n      proxy_http_version 1.1;\n      \
             proxy_set_header Connection \"\";\n      \
             proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n      \
             proxy_set_header X-Forwarded-Proto $scheme;\n    }}\n  }}\n}}\n"
        ),
    };
    let conf = format!(
        "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\nuser root;\nworker_processes 1;\n\
         pid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{\n  worker_connections 1024;\n}}\n{body}"
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).expect("write nginx.conf");
    let child = Command::new("nginx")
        .args(["-g", "daemon off;", "-p"])
        .arg(dir)
        .arg("-c")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nginx");
    Process::new(child, Stop::Term)
}

fn proxy_addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// HAProxy (v2) and nginx (v1) in front of three TCP backends with `--proxy-protocol`: each
/// reports the client, 127.0.0.1, never its proxy's 10.201.N.1.
fn proxy_protocol_over_tcp(hosts: &[Host], config: &[&str]) {
    let backends: Vec<Process> = hosts
        .iter()
        .map(|h| backend(&Listen::Tcp(h), config, &["--proxy-protocol"]))
        .collect();
    let servers: Vec<String> = hosts.iter().map(Host::addr).collect();
    let dir = Dir::new("pp-tcp");
    let port = free_port();
    let proxy = haproxy(&dir.0, port, &servers, Retries::On);
    wait_served(proxy_addr(port));
    assert_clients(
        proxy_addr(port),
        "127.0.0.1 http",
        9,
        "HAProxy send-proxy-v2, TCP",
    );
    drop(proxy);
    let port = free_port();
    let proxy = nginx(&dir.0, port, &servers, Nginx::Stream);
    wait_served(proxy_addr(port));
    assert_clients(
        proxy_addr(port),
        "127.0.0.1 http",
        9,
        "nginx proxy_protocol (v1), TCP",
    );
    drop(proxy);
    drop(backends);
}

/// nginx's `X-Forwarded-For` names the client to backends that trust it, and not to backends
/// that trust another network (they report the proxy).
fn forwarded_headers_over_tcp(hosts: &[Host], config: &[&str]) {
    let dir = Dir::new("xff-tcp");
    let servers: Vec<String> = hosts.iter().map(Host::addr).collect();
    for (trusted, want) in [
        ("10.201.0.0/16", "127.0.0.1 http".to_owned()),
        ("10.99.0.0/16", format!("10.201.{}.1 http", hosts[0].n)),
    ] {
        let backends: Vec<Process> = hosts
            .iter()
            .take(if trusted.starts_with("10.99") { 1 } else { 3 })
            .map(|h| backend(&Listen::Tcp(h), config, &["--trusted-proxy", trusted]))
            .collect();
        let servers = &servers[..backends.len()];
        let port = free_port();
        let proxy = nginx(&dir.0, port, servers, Nginx::Http);
        wait_served(proxy_addr(port));
        assert_clients(
            proxy_addr(port),
            &want,
            6,
            &format!("nginx X-Forwarded-For, trusting {trusted}"),
        );
        drop(proxy);
        drop(backends);
    }
}

/// Over Unix sockets: HAProxy's v2 header, and nginx's `X-Forwarded-For` to backends that
/// trust Unix socket peers.
fn over_unix_sockets(hosts: &[Host], config: &[&str]) {
    let dir = Dir::new("unix");
    let paths: Vec<PathBuf> = (0..hosts.len())
        .map(|i| dir.0.join(format!("b{i}.sock")))
        .collect();
    let listen = |i: usize| Listen::Unix(&hosts[i], paths[i].clone());
    let backends: Vec<Process> = (0..hosts.len())
        .map(|i| backend(&listen(i), config, &["--proxy-protocol"]))
        .collect();
    let servers: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let port = free_port();
    let proxy = haproxy(&dir.0, port, &servers, Retries::On);
    wait_served(proxy_addr(port));
    assert_clients(
        proxy_addr(port),
        "127.0.0.1 http",
        6,
        "HAProxy send-proxy-v2, Unix",
    );
    drop(proxy);
    drop(backends);
    let backends: Vec<Process> = (0..hosts.len())
        .map(|i| backend(&listen(i), config, &["--trusted-proxy", "unix"]))
        .collect();
    let servers: Vec<String> = paths
        .iter()
        .map(|p| format!("unix:{}", p.display()))
        .collect();
    let port = free_port();
    let proxy = nginx(&dir.0, port, &servers, Nginx::Http);
    wait_served(proxy_addr(port));
    assert_clients(
        proxy_addr(port),
        "127.0.0.1 http",
        6,
        "nginx X-Forwarded-For, Unix",
    );
    drop(proxy);
    drop(backends);
}

/// Clients sending `GET /client` through a proxy until stopped, counting what was answered
/// with the client's own address and what failed.
struct Load {
    stop: Arc<AtomicBool>,
    served: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    clients: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    const CLIENTS: u64 = 4;

    /// Starts the clients; returns once each has had an answer.
    fn start(proxy: SocketAddr) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let clients = (0..Self::CLIENTS)
            .map(|_| {
                let (stop, served, failed) = (stop.clone(), served.clone(), failed.clone());
                let started_tx = started_tx.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let counter = match get(proxy, "/client") {
                            Some((200, body)) if body == "127.0.0.1 http\n" => &served,
                            _ => &failed,
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                        let _ = started_tx.send(());
                    }
                })
            })
            .collect();
        for _ in 0..Self::CLIENTS {
            started_rx.recv().expect("a client started");
        }
        Load {
            stop,
            served,
            failed,
            clients,
        }
    }

    /// Waits until `n` more requests were served.
    fn run_for(&self, n: u64) {
        let until = self.served.load(Ordering::Relaxed) + n;
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.served.load(Ordering::Relaxed) < until {
            assert!(Instant::now() < deadline, "the proxy stopped serving");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Stops the clients: what was served and what failed.
    fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for c in self.clients {
            c.join().expect("a client");
        }
        (
            self.served.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

/// Under continuous load through HAProxy, one of three backends is restarted the zero-downtime
/// way (SIGUSR2: a successor on its sockets, then its graceful exit) with HAProxy's retries
/// off, so that nothing is hidden by a resend: no request fails. Then, with retries on,
/// another is killed: at most the requests it had in flight fail, and every request after it
/// is served by the others.
fn a_restarted_backend_costs_nothing_and_a_killed_one_its_requests_in_flight(
    hosts: &[Host],
    config: &[&str],
) {
    let mut backends: Vec<Process> = hosts
        .iter()
        .map(|h| backend(&Listen::Tcp(h), config, &["--proxy-protocol"]))
        .collect();
    let servers: Vec<String> = hosts.iter().map(Host::addr).collect();
    let dir = Dir::new("kill");
    let port = free_port();
    let strict = haproxy(&dir.0, port, &servers, Retries::Off);
    wait_served(proxy_addr(port));
    let load = Load::start(proxy_addr(port));
    load.run_for(300);
    backends[0].restart();
    load.run_for(300);
    let (served, failed) = load.finish();
    eprintln!("{config:?}: restart, no retries: {served} served, {failed} failed");
    assert_eq!(failed, 0, "failures across the restart");
    drop(strict);
    let port = free_port();
    let _proxy = haproxy(&dir.0, port, &servers, Retries::On);
    wait_served(proxy_addr(port));
    let load = Load::start(proxy_addr(port));
    load.run_for(300);
    let before = load.failed();
    backends[1].kill();
    load.run_for(600);
    let (served, failed) = load.finish();
    eprintln!("{config:?}: kill, with retries: {served} served, {failed} failed");
    assert_eq!(before, 0, "failures before the kill");
    assert!(
        failed <= Load::CLIENTS,
        "{failed} failed: more than were in flight"
    );
}

#[test]
#[ignore = "needs root, nginx and HAProxy: .ci/run runs it"]
fn behind_nginx_and_haproxy_on_every_configuration() {
    let hosts: Vec<Host> = (1..=3).map(Host::new).collect();
    for config in EVERY_CONFIGURATION {
        proxy_protocol_over_tcp(&hosts, config);
        forwarded_headers_over_tcp(&hosts, config);
        over_unix_sockets(&hosts, config);
        a_restarted_backend_costs_nothing_and_a_killed_one_its_requests_in_flight(&hosts, config);
    }
}
