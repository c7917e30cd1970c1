//! `hello` behind a proxy, as the proxy tests and a user run it, on every engine configuration:
//! with `--proxy-protocol` a connection begins with a PROXY header, and with `--trusted-proxy`
//! the forwarded headers of the proxies named count; `GET /client` reports the client.
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use child::{ChildServer, EVERY_CONFIGURATION, example_for_test};

fn hello(flags: &[&str], extra: &[&str]) -> ChildServer {
    let mut cmd = Command::new(example_for_test("hello"));
    cmd.args(["--addr", "127.0.0.1:0"])
        .args(flags)
        .args(extra)
        .env("RUST_LOG", "off");
    ChildServer::spawn(cmd)
}

/// One exchange on a new connection: `bytes` sent, the response read to its close.
fn exchange(srv: &ChildServer, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(srv.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(bytes).expect("send");
    let mut got = String::new();
    let _ = s.read_to_string(&mut got);
    got
}

#[test]
fn hello_reports_the_client_a_proxy_names() {
    for flags in EVERY_CONFIGURATION {
        let srv = hello(
            flags,
            &["--proxy-protocol", "--trusted-proxy", "10.0.0.0/8"],
        );
        let got = exchange(
            &srv,
            b"PROXY TCP4 192.0.2.7 10.0.0.2 51000 80\r\n\
              GET /client HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert!(
            got.ends_with("\r\n\r\n192.0.2.7 http\n"),
            "{flags:?}: {got}"
        );
        let got = exchange(
            &srv,
            b"PROXY TCP4 10.0.0.8 10.0.0.2 51000 80\r\n\
              GET /client HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\
              X-Forwarded-For: 192.0.2.8\r\nX-Forwarded-Proto: https\r\n\r\n",
        );
        assert!(
            got.ends_with("\r\n\r\n192.0.2.8 https\n"),
            "{flags:?}: {got}"
        );
        // Without the header: closed, unanswered.
        let got = exchange(&srv, b"GET /client HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(got, "", "{flags:?}");
        srv.stop();
    }
}
