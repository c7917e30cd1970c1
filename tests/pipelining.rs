//! Pipelined requests are answered in order, including ones split across writes and ones with
//! bodies.
#![cfg(feature = "server")]
mod support;
use support::{Client, Engine, app, start};

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

engine_tests!(
    pipelined_requests_answered_in_order,
    pipelined_requests_split_anywhere,
    many_pipelined_responses_are_bounded_and_complete,
);
