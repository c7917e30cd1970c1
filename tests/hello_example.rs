//! `hello`'s routes as the README and docs/examples.md describe them, on every engine
//! configuration: `/`, `/cpu?us=N`, `/sleep?ms=N` (a value that is not a number, or over its
//! bound, is a 400: a new user's trial found `/sleep?ms=abc` answered 200), anything else 404.
#![cfg(feature = "server")]
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;
mod support;

use std::process::Command;

use child::{ChildServer, EVERY_CONFIGURATION, example_for_test};
use support::Client;

/// One request on a new connection: the status and the body as text.
fn get(srv: &ChildServer, target: &str) -> (u16, String) {
    let r = Client::new(srv.addr).request(&format!("GET {target}"), "");
    (r.status, r.text())
}

#[test]
fn hellos_routes_answer_as_documented() {
    for flags in EVERY_CONFIGURATION {
        let mut cmd = Command::new(example_for_test("hello"));
        cmd.args(["--addr", "127.0.0.1:0"])
            .args(flags)
            .env("RUST_LOG", "off");
        let srv = ChildServer::spawn(cmd);
        let ok = |body: &str| (200, body.to_owned());
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
            assert_eq!(
                get(&srv, target),
                (400, why.to_owned()),
                "{flags:?} {target}"
            );
        }
        assert_eq!(get(&srv, "/nothing").0, 404, "{flags:?}");
        srv.stop();
    }
}
