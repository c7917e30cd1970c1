//! Clients that vanish at every point of a connection's life: mid-head, mid-body, mid-pipeline,
//! while a handler runs, with a large response unread, mid-WebSocket-frame, after a WebSocket
//! echo without a close, with echoes unread, on an open event stream. Several threads of them at
//! once on every engine configuration; afterwards the server holds no connection, has the threads
//! it had before, still answers, ended every event stream's sender, and shuts down promptly.
//! The only test in this binary, so the process thread count is its own.
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
use support::thread_count;
use support::{Client, Config, Engine, TestServer, connect, read_head, start_with};
use twinhttp::sse::SseSender;
use twinhttp::{Request, Response};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
const UPGRADE: &[u8] =
    b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
/// A masked binary frame of three bytes (mask 0, so the payload reads as sent).
const FRAME: &[u8] = &[0x82, 0x83, 0, 0, 0, 0, 1, 2, 3];
const ECHO: &[u8] = &[0x82, 3, 1, 2, 3];
const KINDS: usize = 14;
const THREADS: usize = 6;
const PER_THREAD: usize = 56;

type Senders = Arc<Mutex<Vec<SseSender>>>;

fn storm_app(senders: Senders) -> impl Fn(&mut Request<'_>) -> Response + Send + Sync + 'static {
    move |req: &mut Request<'_>| match req.path() {
        "/ws" => support::echo_websocket(req),
        "/events" => {
            let (resp, sender) = Response::event_stream();
            if let Ok(mut all) = senders.lock() {
                all.push(sender);
            }
            resp
        }
        "/big" => Response::new(200).with_body(vec![b'x'; 4 << 20]),
        _ => support::app(req),
    }
}

fn websocket(addr: SocketAddr) -> TcpStream {
    let mut s = connect(addr);
    s.write_all(UPGRADE).expect("upgrade");
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101 "));
    s
}

/// One connection that ends abruptly in the way `kind` picks. A write may fail where the
/// server already closed (it may answer and close on bad input first): that is allowed.
fn vanish(addr: SocketAddr, kind: usize) {
    match kind {
        0 => {
            let mut c = Client::new(addr);
            for _ in 0..3 {
                assert_eq!(c.roundtrip(GET).status, 200);
            }
        }
        1 => {
            let _ = connect(addr).write_all(b"GET / HTTP/1.1\r\nHo");
        }
        2 => {
            let _ = connect(addr)
                .write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc");
        }
        3 => {
            let _ = connect(addr).write_all(&GET.repeat(8));
        }
        4 => {
            let _ = connect(addr).write_all(
                b"POST /len HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            );
        }
        5 => {
            let mut s = websocket(addr);
            s.write_all(FRAME).expect("frame");
            let mut echo = [0u8; 5];
            s.read_exact(&mut echo).expect("echo");
            assert_eq!(echo, ECHO);
        }
        6 => {
            let mut s = websocket(addr);
            // A frame header announcing 100 bytes, then 10 of them.
            let _ = s.write_all(&[0x82, 0x80 | 100, 0, 0, 0, 0]);
            let _ = s.write_all(&[7; 10]);
        }
        7 => {
            let mut s = websocket(addr);
            s.write_all(&[0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8])
                .expect("close frame");
            let mut reply = [0u8; 4];
            s.read_exact(&mut reply).expect("close reply");
            assert_eq!(reply[0], 0x88);
        }
        8 => {
            let mut s = connect(addr);
            s.write_all(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
                .expect("subscribe");
            assert!(read_head(&mut s).starts_with("HTTP/1.1 200 "));
        }
        9 => {
            let _ = connect(addr).write_all(b"GET /sleep?ms=30 HTTP/1.1\r\nHost: t\r\n\r\n");
        }
        10 => {
            let _ = connect(addr).write_all(&[0xff; 300]);
        }
        11 => {
            assert_eq!(
                Client::new(addr)
                    .roundtrip(b"GET /panic HTTP/1.1\r\nHost: t\r\n\r\n")
                    .status,
                500
            );
        }
        12 => {
            let mut s = connect(addr);
            s.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
                .expect("request");
            assert!(read_head(&mut s).starts_with("HTTP/1.1 200 "));
        }
        _ => {
            let mut s = websocket(addr);
            for _ in 0..50 {
                if s.write_all(FRAME).is_err() {
                    break;
                }
            }
        }
    }
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what} after {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn storm(engine: Engine) {
    let senders: Senders = Arc::default();
    let srv: TestServer = start_with(
        engine,
        Config {
            workers: 4,
            ..Config::default()
        },
        storm_app(senders.clone()),
    );
    let addr = srv.addr;
    assert_eq!(Client::new(addr).roundtrip(GET).status, 200);
    wait_until(
        "connections open before the storm",
        Duration::from_secs(5),
        || srv.open_connections() == 0,
    );
    #[cfg(target_os = "linux")]
    let threads_before = thread_count();

    let clients: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    vanish(addr, (t * 5 + i) % KINDS);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("client thread");
    }

    wait_until(
        &format!("{engine:?}: connections still open"),
        Duration::from_secs(5),
        || srv.open_connections() == 0,
    );
    // At most: a thread of the connection before the storm may still have been ending.
    // (Threads are counted from /proc: Linux only.)
    #[cfg(target_os = "linux")]
    wait_until(
        &format!("{engine:?}: threads not back to {threads_before}"),
        Duration::from_secs(5),
        || thread_count() <= threads_before,
    );
    let streams = senders.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(streams.len(), THREADS * PER_THREAD / KINDS);
    assert!(
        streams.iter().all(SseSender::is_closed),
        "{engine:?}: an event stream's sender outlived its client"
    );
    assert_eq!(Client::new(addr).roundtrip(GET).status, 200);
    let start = Instant::now();
    assert!(srv.shutdown(Duration::from_secs(5)).is_ok());
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{engine:?}: shutdown took {:?}",
        start.elapsed()
    );
}

#[test]
fn vanishing_clients_leave_nothing_behind() {
    for engine in Engine::all() {
        storm(engine);
    }
}
