//! `hello`, `demo` and `ws_echo` as users run them with `--tls-cert PEM --tls-key PEM`, on every
//! engine configuration: HTTPS, a WebSocket echo over `wss` and an event stream over TLS, with a
//! certificate made at run time. The `#[ignore]`d tests use real clients (`curl --cacert`, and
//! `openssl s_client` for a handshake the server must refuse); `.ci/run` installs both and runs
//! them with `--ignored`.
#![cfg(all(feature = "server", feature = "tls"))]
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;
mod support;

use std::net::SocketAddr;
use std::process::Command;

use support::tls::Pki;

fn start(name: &str, pki: &Pki, flags: &[&str]) -> child::ChildServer {
    let mut cmd = Command::new(child::example_for_test(name));
    cmd.args(["--addr", "127.0.0.1:0", "--tls-cert"])
        .arg(&pki.cert_pem)
        .arg("--tls-key")
        .arg(&pki.key_pem)
        .args(flags);
    child::ChildServer::spawn(cmd)
}

fn hello_world(pki: &Pki, addr: SocketAddr) {
    let mut c = pki.client(addr);
    let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "Hello, World!"));
}

fn websocket_echo(pki: &Pki, addr: SocketAddr, route: &str) {
    let url = format!("wss://localhost{route}");
    let (mut ws, _) = tungstenite::client(url.as_str(), pki.connect(addr)).expect("handshake");
    ws.send(tungstenite::Message::text("over TLS"))
        .expect("send");
    assert_eq!(
        ws.read().expect("echo"),
        tungstenite::Message::text("over TLS")
    );
}

#[test]
fn hello_serves_https_and_wss() {
    let pki = Pki::new();
    for flags in child::EVERY_CONFIGURATION {
        let s = start("hello", &pki, flags);
        hello_world(&pki, s.addr);
        websocket_echo(&pki, s.addr, "/ws");
    }
}

#[test]
fn demo_serves_https_wss_and_events() {
    let pki = Pki::new();
    for flags in child::EVERY_CONFIGURATION {
        let s = start("demo", &pki, flags);
        hello_world(&pki, s.addr);
        websocket_echo(&pki, s.addr, "/ws");
        assert_eq!(
            support::event_ids(pki.connect(s.addr)),
            ["1", "2"],
            "{flags:?}"
        );
    }
}

#[test]
fn ws_echo_serves_wss() {
    let pki = Pki::new();
    for flags in child::EVERY_CONFIGURATION {
        let s = start("ws_echo", &pki, flags);
        websocket_echo(&pki, s.addr, "/");
    }
}

fn curl(pki: &Pki, addr: SocketAddr) -> String {
    let out = Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "10", "--cacert"])
        .arg(&pki.cert_pem)
        .arg("--resolve")
        .arg(format!("localhost:{}:127.0.0.1", addr.port()))
        .arg(format!("https://localhost:{}/", addr.port()))
        .output()
        .expect("run curl (installed by .ci/run)");
    assert!(out.status.success(), "curl: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "needs curl; .ci/run installs it and runs this"]
fn curl_gets_hello_over_https() {
    let pki = Pki::new();
    for flags in child::EVERY_CONFIGURATION {
        let s = start("hello", &pki, flags);
        assert_eq!(curl(&pki, s.addr), "Hello, World!", "{flags:?}");
    }
}

#[test]
#[ignore = "needs openssl and curl; .ci/run installs them and runs this"]
fn openssl_handshake_the_server_refuses_leaves_it_serving() {
    let pki = Pki::new();
    for flags in child::EVERY_CONFIGURATION {
        let s = start("hello", &pki, flags);
        // TLS 1.1, which rustls does not speak: the handshake fails with an alert.
        let out = Command::new("openssl")
            .args(["s_client", "-connect"])
            .arg(s.addr.to_string())
            .args(["-servername", "localhost", "-tls1_1"])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run openssl (installed by .ci/run)");
        assert!(
            !out.status.success(),
            "{flags:?}: a TLS 1.1 handshake succeeded"
        );
        // The server's own refusal: an alert it sent (OpenSSL names its number), not one the
        // client gave itself.
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("SSL alert number"), "{flags:?}: {said}");
        assert_eq!(
            curl(&pki, s.addr),
            "Hello, World!",
            "{flags:?}: still serving"
        );
    }
}
