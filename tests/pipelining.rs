//! Pipelined requests are answered in order, including ones split across writes and ones with
//! bodies.
mod support;
use support::{Client, Engine, Raw, app, start};

fn pipelined_requests_answered_in_order(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let mut batch = Vec::new();
    for i in 0..32 {
        if i % 3 == 0 {
            batch.extend_from_slice(
                format!(
                    "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\nbody{i}",
                    4 + i.to_string().len()
                )
                .as_bytes(),
            );
        } else {
            batch.extend_from_slice(
                format!("GET /status/{} HTTP/1.1\r\nHost: t\r\n\r\n", 200 + i).as_bytes(),
            );
        }
    }
    c.send(&batch);
    for i in 0..32 {
        let r = c.response();
        if i % 3 == 0 {
            assert_eq!((r.status, r.text()), (200, format!("body{i}")));
        } else {
            assert_eq!(r.status, 200 + i);
        }
    }
}

fn pipelined_requests_split_anywhere(engine: Engine) {
    let srv = start(engine, app);
    let two = b"GET / HTTP/1.1\r\nHost: t\r\n\r\nPOST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    for cut in [1, 10, 27, 28, 40, 75, two.len() - 1] {
        let mut c = Client::new(srv.addr);
        c.send(&two[..cut]);
        std::thread::sleep(std::time::Duration::from_millis(5));
        c.send(&two[cut..]);
        assert_eq!(c.response().text(), "Hello, World!", "cut {cut}");
        assert_eq!(c.response().text(), "abc", "cut {cut}");
    }
}

fn many_pipelined_responses_are_bounded_and_complete(engine: Engine) {
    // 2,000 requests at once: the server must flush as it goes rather than buffer all replies.
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let batch = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n".repeat(2000);
    let writer = {
        let mut s = c.reader.get_ref().try_clone().expect("clone");
        std::thread::spawn(move || std::io::Write::write_all(&mut s, &batch).is_ok())
    };
    for _ in 0..2000 {
        assert_eq!(c.response().status, 200);
    }
    assert!(writer.join().unwrap_or(false));
}

fn pipelined_batch_that_fills_the_read_buffer_exactly(engine: Engine) {
    // 64-byte requests, 384 of them in one write: the first read can fill the 8 KiB buffer to
    // the byte and end on a request boundary, leaving the rest in the socket. An engine that
    // went idle on an empty buffer without draining the socket would wait for an event that
    // never comes (edge-triggered parking).
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    c.read_timeout(std::time::Duration::from_secs(10));
    let one = b"GET / HTTP/1.1\r\nHost: t\r\nX-Pad: 0123456789012345678901234567\r\n\r\n";
    assert_eq!(one.len(), 64);
    c.send(&one.repeat(384));
    for i in 0..384 {
        assert_eq!(c.response().text(), "Hello, World!", "response {i}");
    }
    assert_eq!(c.roundtrip(one).status, 200);
}

/// Sends a request in two writes 20 ms apart (the server sees the second half arrive while it
/// holds the first) and reads the response.
fn split_roundtrip(c: &mut Client, first: &[u8], rest: &[u8]) -> Raw {
    c.send(first);
    std::thread::sleep(std::time::Duration::from_millis(20));
    c.send(rest);
    c.response()
}

fn split_request_then_idle_then_more(engine: Engine) {
    // The second half of a head arrives while the connection is being served (an event the
    // parker must not lose or misread); then the connection idles, parks, and is served again.
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    c.read_timeout(std::time::Duration::from_secs(10));
    for round in 0..4 {
        let r = split_roundtrip(&mut c, b"GET /status/2", b"01 HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.status, 201, "round {round}");
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(
            c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
            200,
            "round {round}"
        );
    }
    c.read_timeout(std::time::Duration::from_millis(200));
    assert!(!c.is_closed());
}

/// Reads `s` to its end: a 200 whose body has `len` bytes, then the end of the stream (not a
/// reset).
fn arrives_whole(s: &mut std::net::TcpStream, len: usize) {
    use std::io::Read;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("timeout");
    let mut got = Vec::new();
    let ended = s.read_to_end(&mut got);
    let head_end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |p| p + 4);
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        &got[..got.len().min(64)]
    );
    assert_eq!(got.len() - head_end, len, "the whole body; then {ended:?}");
    assert!(ended.is_ok(), "ended by a reset: {ended:?}");
}

/// A response that ends its connection (`Connection: close`) with requests pipelined behind
/// it: the server lingers instead of closing on the unread input, which would answer it with a
/// reset and destroy the response's tail still in flight. The client gets all of it, then the
/// end of the stream.
fn a_closing_response_with_input_behind_it_arrives_whole(engine: Engine) {
    use std::io::Write;
    const LEN: usize = 4 << 20;
    let srv = start(engine, |req: &mut twinhttp::Request<'_>| match req.path() {
        "/big" => twinhttp::Response::new(200).with_body(vec![b'x'; LEN]),
        _ => app(req),
    });
    let mut s = support::connect(srv.addr);
    let mut wire = b"GET /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".to_vec();
    wire.extend(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n".repeat(2000));
    s.write_all(&wire).expect("send");
    arrives_whole(&mut s, LEN);
}

/// The server ends a keep-alive connection (its handler answers `Connection: close`) while its
/// client, which may pipeline, sends more requests after the server read the last one: the
/// server finds them before it closes and lingers, and the response arrives whole.
fn a_response_ending_a_kept_connection_with_requests_on_their_way_arrives_whole(engine: Engine) {
    use std::io::Write;
    use std::sync::{Mutex, mpsc};
    const LEN: usize = 4 << 20;
    let (tell, answered) = mpsc::channel();
    let tell = Mutex::new(tell);
    let srv = start(engine, move |req: &mut twinhttp::Request<'_>| {
        match req.path() {
            "/big" => {
                if let Ok(tell) = tell.lock() {
                    let _ = tell.send(());
                }
                twinhttp::Response::new(200)
                    .with_body(vec![b'x'; LEN])
                    .with_header("Connection", "close")
            }
            _ => app(req),
        }
    });
    let mut s = support::connect(srv.addr);
    s.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("send");
    // Its request is read (the handler runs); the next ones come after.
    answered
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the handler ran");
    s.write_all(&b"GET / HTTP/1.1\r\nHost: t\r\n\r\n".repeat(200))
        .expect("send more");
    arrives_whole(&mut s, LEN);
}

engine_tests!(
    a_response_ending_a_kept_connection_with_requests_on_their_way_arrives_whole,
    a_closing_response_with_input_behind_it_arrives_whole,
    pipelined_batch_that_fills_the_read_buffer_exactly,
    split_request_then_idle_then_more,
    pipelined_requests_answered_in_order,
    pipelined_requests_split_anywhere,
    many_pipelined_responses_are_bounded_and_complete,
);

/// On the thread-pool engine with one worker: a connection woken by an event for bytes its
/// worker had already read (the second half of a split head) must park again when it finds
/// nothing, not hold the only worker until its head timeout while another client waits.
#[cfg(feature = "server")]
#[test]
fn server_a_spurious_wake_does_not_hold_a_worker() {
    use support::{Config, start_with};
    let srv = start_with(
        Engine::Server,
        Config {
            workers: 1,
            header_read_timeout: std::time::Duration::from_secs(5),
            ..Config::default()
        },
        app,
    );
    let mut a = Client::new(srv.addr);
    let mut b = Client::new(srv.addr);
    b.read_timeout(std::time::Duration::from_secs(2));
    for round in 0..10 {
        let r = split_roundtrip(&mut a, b"GET / HTTP/1.1\r\nHo", b"st: t\r\n\r\n");
        assert_eq!(r.status, 200, "round {round}");
        // `a` is now idle; `b` is served at once, by the only worker.
        let started = std::time::Instant::now();
        assert_eq!(
            b.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
            200,
            "round {round}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "round {round}: {:?}",
            started.elapsed()
        );
    }
}
