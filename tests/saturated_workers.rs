//! The server engine's parker never blocks on a full worker queue: with every worker busy and
//! the queue full, a request that is ready waits in the parker's backlog, and the parker goes
//! on serving deadlines (a partial head gets its 408 on time) and, once a worker is free, hands
//! the backlog on in order.
#![cfg(feature = "server")]
mod support;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::Client;
use twinhttp::Response;
use twinhttp::server::Server;

/// A handler's block, opened by the test: [`Gate::hold`] (in the handler) says it entered and
/// waits to be let go, at most `limit`; [`Gate::entered`] and [`Gate::open`] are the test's.
struct Gate {
    entered_tx: Mutex<mpsc::Sender<()>>,
    entered: Mutex<mpsc::Receiver<()>>,
    release_tx: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
    limit: Duration,
}

impl Gate {
    fn new(limit: Duration) -> std::sync::Arc<Gate> {
        let (entered_tx, entered) = mpsc::channel();
        let (release_tx, release) = mpsc::channel();
        std::sync::Arc::new(Gate {
            entered_tx: Mutex::new(entered_tx),
            entered: Mutex::new(entered),
            release_tx: Mutex::new(release_tx),
            release: Mutex::new(release),
            limit,
        })
    }

    /// In the handler: bounded, the test opens it or it gives up after its limit.
    fn hold(&self) {
        let _ = self.entered_tx.lock().expect("lock").send(());
        let _ = self.release.lock().expect("lock").recv_timeout(self.limit);
    }

    /// Waits until a handler holds.
    fn entered(&self) {
        self.entered
            .lock()
            .expect("lock")
            .recv_timeout(Duration::from_secs(5))
            .expect("the handler ran");
    }

    /// Lets one held handler go.
    fn open(&self) {
        self.release_tx
            .lock()
            .expect("lock")
            .send(())
            .expect("release");
    }
}

#[test]
fn deadlines_are_kept_while_the_workers_and_their_queue_are_full() {
    let gate = Gate::new(Duration::from_secs(10));
    let held = gate.clone();
    let srv = Server::builder()
        .workers(1)
        .queue(1)
        .header_read_timeout(Duration::from_millis(400))
        .serve("127.0.0.1:0", move |req: &mut twinhttp::Request<'_>| {
            if req.path() == "/block" {
                held.hold();
            }
            Response::text("ok")
        })
        .expect("serve");
    let addr = srv.local_addr();
    // The one worker blocks in a handler.
    let mut first = Client::new(addr);
    first.send(b"GET /block HTTP/1.1\r\nHost: t\r\n\r\n");
    gate.entered();
    // The next request fills the queue (capacity 1); the one after it finds the queue full.
    let mut queued = Client::new(addr);
    queued.send(b"GET /block HTTP/1.1\r\nHost: t\r\n\r\n");
    let mut backlogged = Client::new(addr);
    backlogged.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    support::stats_until(
        || srv.stats(),
        "two requests never queued",
        |s| s.queued >= 2,
    );
    // A client that sends part of a head is answered 408 at the header-read timeout, while
    // the worker is still blocked: the parker is not stuck on the full queue.
    let started = Instant::now();
    let mut slow = Client::new(addr);
    slow.send(b"GET / HTTP/1.1\r\nHo");
    let r = slow.response();
    let took = started.elapsed();
    assert_eq!(r.status, 408);
    assert!(
        took < Duration::from_secs(3),
        "408 after {took:?} with the workers busy (header-read timeout 400 ms)"
    );
    // Released, every request is answered, in order.
    for _ in 0..2 {
        gate.open();
    }
    assert_eq!(first.response().text(), "ok");
    assert_eq!(queued.response().text(), "ok");
    assert_eq!(backlogged.response().text(), "ok");
}

/// Shutdown while the parker holds connections back: every request already read is answered,
/// and the server ends well within its grace (the parker thread sees its backlog emptied; it
/// waited for ever before, and shutdown timed out).
#[test]
fn shutdown_with_a_backlog_answers_everything_and_ends() {
    let (entered_tx, entered) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let srv = Server::builder()
        .workers(1)
        .queue(1)
        .serve("127.0.0.1:0", move |req: &mut twinhttp::Request<'_>| {
            if req.path() == "/first" {
                let _ = entered_tx.lock().expect("lock").send(());
            }
            std::thread::sleep(Duration::from_millis(300));
            Response::text("ok")
        })
        .expect("serve");
    let addr = srv.local_addr();
    let mut first = Client::new(addr);
    first.send(b"GET /first HTTP/1.1\r\nHost: t\r\n\r\n");
    entered
        .recv_timeout(Duration::from_secs(5))
        .expect("the handler ran");
    // One in the queue, two held back by the parker.
    let mut others: Vec<Client> = (0..3).map(|_| Client::new(addr)).collect();
    for c in &mut others {
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    }
    support::stats_until(|| srv.stats(), "never queued", |s| s.queued >= 3);
    let started = Instant::now();
    let done = srv.shutdown(Duration::from_secs(4));
    let took = started.elapsed();
    assert_eq!(first.response().text(), "ok");
    for c in &mut others {
        assert_eq!(c.response().text(), "ok");
    }
    assert!(done.is_ok(), "shutdown: {done:?} after {took:?}");
    assert!(took < Duration::from_secs(3), "shutdown took {took:?}");
}

/// A queue bound as large as a `usize` allows is taken as the largest the server allocates:
/// the server starts and serves (`usize::MAX` panicked in the channel's allocation, and
/// `1 << 40` aborted the process).
#[test]
fn a_huge_queue_bound_is_served() {
    for n in [usize::MAX, 1 << 40] {
        let srv = Server::builder()
            .queue(n)
            .max_connections(usize::MAX)
            .serve("127.0.0.1:0", |_: &mut twinhttp::Request<'_>| {
                Response::text("ok")
            })
            .expect("serve");
        let mut c = Client::new(srv.local_addr());
        assert_eq!(c.request("GET /", "").text(), "ok", "queue({n})");
        srv.shutdown(Duration::from_secs(5)).expect("shutdown");
    }
}

/// A file is sent by the parker, never by a worker (no handler code is due): with the one
/// worker held by a handler, a 32 MiB file whose response began before goes on to its end.
#[test]
fn a_file_goes_on_while_every_worker_is_busy() {
    const LEN: usize = 32 << 20;
    let path = std::env::temp_dir().join(format!("twinhttp-parker-file-{}", std::process::id()));
    std::fs::write(&path, vec![b'f'; LEN]).expect("write the file");
    let gate = Gate::new(Duration::from_secs(20));
    let held = gate.clone();
    let served = path.clone();
    let srv = Server::builder()
        .workers(1)
        .serve("127.0.0.1:0", move |req: &mut twinhttp::Request<'_>| {
            if req.path() == "/block" {
                held.hold();
                return Response::text("ok");
            }
            Response::file(req, &served)
        })
        .expect("serve");
    let addr = srv.local_addr();
    let mut file = Client::new(addr);
    file.send(b"GET /file HTTP/1.1\r\nHost: t\r\n\r\n");
    // Its head, then the one worker blocks in a handler.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        std::io::Read::read_exact(&mut file.reader, &mut byte).expect("the file's head");
        head.push(byte[0]);
    }
    let mut blocked = Client::new(addr);
    blocked.send(b"GET /block HTTP/1.1\r\nHost: t\r\n\r\n");
    gate.entered();
    let mut body = vec![0u8; LEN];
    let got = std::io::Read::read_exact(&mut file.reader, &mut body);
    gate.open();
    let _ = std::fs::remove_file(&path);
    got.expect("the whole file while the worker is busy");
    assert!(body.iter().all(|&b| b == b'f'));
    assert_eq!(blocked.response().text(), "ok");
}
