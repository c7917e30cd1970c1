//! Unix domain sockets on every engine configuration: HTTP (keep-alive, pipelining, bodies, the
//! peer's address), WebSocket and an event stream over the socket, a listener the test bound,
//! stale and live socket files, and curl as a real client.
mod support;

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::{Client, Config, Engine, On, TestServer, start_on};
use twinhttp::sse::Event;
use twinhttp::ws::{RequestExt, WsMessage, WsSender};
use twinhttp::{Address, Request, Response};

/// A socket path of its own for each test and engine, with no file at it yet; whatever file
/// is there when the test ends is removed (the server leaves its socket file, as a stale one is
/// replaced at the next bind).
struct SocketPath(PathBuf);

impl std::ops::Deref for SocketPath {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for SocketPath {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for SocketPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn socket_path(test: &str, engine: Engine) -> SocketPath {
    let path = std::env::temp_dir().join(format!(
        "twinhttp-{}-{test}-{engine:?}.sock",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    SocketPath(path)
}

/// HTTP, the peer's address, a WebSocket echo and a three-event stream.
fn app(req: &mut Request<'_>) -> Response {
    match req.path() {
        "/peer" => Response::text(format!("{:?} {:?}", req.peer(), req.peer_addr())),
        "/ws" => match req.upgrade_websocket() {
            Ok(u) => u.accept(|ws: &WsSender, msg: WsMessage| {
                let _ = ws.send(msg);
            }),
            Err(refusal) => refusal,
        },
        "/events" => {
            let (response, events) = Response::event_stream();
            for i in 1..=3 {
                let _ = events.send(Event::data(format!("tick {i}")));
            }
            events.close();
            response
        }
        _ => support::app(req),
    }
}

fn serve(test: &str, engine: Engine) -> (TestServer, SocketPath) {
    let path = socket_path(test, engine);
    let srv = start_on(engine, Config::default(), On::Unix(path.to_path_buf()), app);
    (srv, path)
}

fn http_keep_alive_pipelining_and_the_peer(engine: Engine) {
    let (_srv, path) = serve("http", engine);
    let mut c = Client::unix(&path);
    let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "Hello, World!"));
    let r = c.roundtrip(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /peer HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.response().text(), "Hello, World!");
    // A client's socket has no name; it has no TCP address either.
    assert_eq!(c.response().text(), "Some(Unix(None)) None");
    let r = c.roundtrip(b"GET /missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 404);
    assert!(r.closes());
}

fn websocket_echo(engine: Engine) {
    let (_srv, path) = serve("ws", engine);
    let stream = UnixStream::connect(&path).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let (mut ws, response) =
        tungstenite::client("ws://localhost/ws", stream).expect("WebSocket handshake");
    assert_eq!(response.status(), 101);
    for text in ["one", "two"] {
        ws.send(tungstenite::Message::text(text)).expect("send");
        assert_eq!(ws.read().expect("echo"), tungstenite::Message::text(text));
    }
    ws.close(None).expect("close");
    while let Ok(m) = ws.read() {
        assert!(m.is_close(), "{m:?}");
    }
}

fn event_stream(engine: Engine) {
    let (_srv, path) = serve("sse", engine);
    let mut c = Client::unix(&path);
    let r = c.roundtrip(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(
        r.text(),
        "data: tick 1\n\ndata: tick 2\n\ndata: tick 3\n\n",
        "the events, then the last chunk"
    );
}

fn a_listener_the_caller_bound(engine: Engine) {
    let path = socket_path("bound", engine);
    let listener = UnixListener::bind(&path).expect("bind");
    let srv = start_on(
        engine,
        Config::default(),
        On::Listener(listener.into()),
        app,
    );
    let mut c = Client::unix(&path);
    let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.text(), "Hello, World!");
    drop(srv);
}

/// Starts (and at once drops) a server of `engine` on the socket path: whether it could bind.
fn serve_unix(engine: Engine, path: &Path) -> Result<(), twinhttp::Error> {
    match engine {
        #[cfg(feature = "server")]
        Engine::Server | Engine::ServerNoPark => twinhttp::server::Server::builder()
            .serve_unix(path, app)
            .map(drop),
        _ => twinhttp::reactor::Reactor::builder()
            .serve_unix(path, app)
            .map(drop),
    }
}

/// A socket file left by a server that is gone is replaced; one a live server listens on is not.
fn stale_and_live_socket_files(engine: Engine) {
    let path = socket_path("stale", engine);
    drop(UnixListener::bind(&path).expect("bind"));
    assert!(path.exists(), "the file outlives its listener");
    let srv = start_on(engine, Config::default(), On::Unix(path.to_path_buf()), app);
    assert_eq!(
        Client::unix(&path)
            .roundtrip(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .status,
        200
    );
    let err = serve_unix(engine, &path).expect_err("a live server's socket is not taken over");
    assert!(err.is_io(), "{err:?}");
    // The first server still answers.
    assert_eq!(
        Client::unix(&path)
            .roundtrip(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .status,
        200
    );
    srv.shutdown(Duration::from_secs(5)).expect("shutdown");
}

/// A file at the path that is not a socket is never replaced.
fn a_regular_file_is_not_replaced(engine: Engine) {
    let path = socket_path("file", engine);
    std::fs::write(&path, b"keep me").expect("write a file");
    let err = serve_unix(engine, &path).expect_err("a regular file is not a stale socket");
    assert!(err.is_io(), "{err:?}");
    assert_eq!(
        std::fs::read(&path).expect("the file is still there"),
        b"keep me"
    );
}

/// The engine reports where it listens.
fn the_address_is_the_path(engine: Engine) {
    let (srv, path) = serve("addr", engine);
    assert_eq!(srv.address, Some(Address::Unix(Some(path.to_path_buf()))));
    assert_eq!(srv.addr.port(), 0);
}

/// curl, a real client, over the socket (run by CI, which installs curl:
/// `cargo test --all-features --test unix -- --ignored`).
fn curl(engine: Engine) {
    let (_srv, path) = serve("curl", engine);
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10", "--unix-socket"])
        .arg(&*path)
        .args(["http://localhost/", "http://localhost/stream"])
        .output()
        .expect("curl runs (install it: apt-get install -y curl)");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello, World!part1;part2;part3;"
    );
}

engine_tests!(
    http_keep_alive_pipelining_and_the_peer,
    websocket_echo,
    event_stream,
    a_listener_the_caller_bound,
    stale_and_live_socket_files,
    a_regular_file_is_not_replaced,
    the_address_is_the_path,
);

mod with_curl {
    use super::*;

    #[test]
    #[ignore = "needs curl; CI runs it"]
    fn every_engine() {
        for engine in Engine::all() {
            curl(engine);
        }
    }
}
