//! `hello`'s routes as the README and docs/examples.md describe them, on every engine
//! configuration: `/`, `/cpu?us=N`, `/sleep?ms=N` (a value that is not a number, or over its
//! bound, is a 400: a new user's trial found `/sleep?ms=abc` answered 200), anything else 404.
#![cfg(feature = "server")]
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use child::{ChildServer, EVERY_CONFIGURATION, example_for_test};

/// One request on a new connection, closed after it: the status line and the body.
fn get(srv: &ChildServer, target: &str) -> (String, String) {
    let mut s = TcpStream::connect(srv.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut got = String::new();
    s.read_to_string(&mut got)
        .expect("the response, to its close");
    let (head, body) = got.split_once("\r\n\r\n").unwrap_or((&got, ""));
    let status = head.lines().next().unwrap_or_default().to_owned();
    (status, body.to_owned())
}

#[test]
fn hellos_routes_answer_as_documented() {
    for flags in EVERY_CONFIGURATION {
        let mut cmd = Command::new(example_for_test("hello"));
        cmd.args(["--addr", "127.0.0.1:0"])
            .args(flags)
            .env("RUST_LOG", "off");
        let srv = ChildServer::spawn(cmd);
        let ok = |body: &str| ("HTTP/1.1 200 OK".to_owned(), body.to_owned());
        assert_eq!(get(&srv, "/"), ok("Hello, World!"), "{flags:?}");
        assert_eq!(get(&srv, "/cpu?us=10"), ok("done"), "{flags:?}");
        assert_eq!(get(&srv, "/sleep?ms=1"), ok("slept"), "{flags:?}");
        assert_eq!(get(&srv, "/sleep"), ok("slept"), "{flags:?}");
        for (target, why) in [
            ("/sleep?ms=abc", "ms is not a number\n"),
            ("/cpu?us=-1", "us is not a number\n"),
            // Bounded: a worker spinning for ever held up the shutdown too (the review).
            ("/cpu?us=18446744073709551615", "us is over 1000000\n"),
            ("/sleep?ms=10001", "ms is over 10000\n"),
        ] {
            let (status, body) = get(&srv, target);
            assert_eq!(status, "HTTP/1.1 400 Bad Request", "{flags:?} {target}");
            assert_eq!(body, why, "{flags:?} {target}");
        }
        assert_eq!(
            get(&srv, "/nothing").0,
            "HTTP/1.1 404 Not Found",
            "{flags:?}"
        );
        srv.stop();
    }
}
