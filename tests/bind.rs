//! A port in use is an error on every engine: the reactor's `SO_REUSEPORT` listeners must not
//! silently join a listener another program (or another server in this process) already has,
//! unless every server on the port asks to share it (`reuse_port`).
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use twinhttp::reactor::{Accept, Reactor};
use twinhttp::{Error, Request, Response};

fn hello(_: &mut Request<'_>) -> Response {
    Response::text("hi")
}

fn assert_in_use(result: Result<impl std::fmt::Debug, Error>, what: &str) {
    let err = result.expect_err(what);
    let io = std::error::Error::source(&err)
        .and_then(|e| e.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind);
    assert!(err.is_io(), "{what}: {err:?}");
    assert_eq!(io, Some(std::io::ErrorKind::AddrInUse), "{what}: {err:?}");
}

#[test]
fn a_port_another_listener_holds_is_refused() {
    let plain = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = plain.local_addr().expect("addr");
    assert_in_use(
        Reactor::builder().loops(2).serve(addr, hello),
        "reactor, reuseport",
    );
    assert_in_use(
        Reactor::builder().accept(Accept::Thread).serve(addr, hello),
        "reactor, acceptor thread",
    );
    #[cfg(feature = "server")]
    assert_in_use(
        twinhttp::server::Server::builder().serve(addr, hello),
        "server",
    );
}

/// Both engines serve a listener the caller bound (socket activation, ports chosen by tests).
#[test]
fn a_listener_bound_by_the_caller_is_served() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let reactor = Reactor::builder()
        .loops(2)
        .serve_listener(listener, hello)
        .expect("reactor");
    assert_eq!(reactor.local_addr(), addr);
    for _ in 0..4 {
        assert_hi(addr);
    }
    reactor.shutdown(Duration::from_secs(5)).expect("shutdown");
    #[cfg(feature = "server")]
    {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = twinhttp::server::Server::builder()
            .serve_listener(listener, hello)
            .expect("server");
        assert_hi(addr);
        server.shutdown(Duration::from_secs(5)).expect("shutdown");
    }
}

/// A start that fails part-way leaves nothing serving: the reactor's second listener cannot be
/// watched (it is a file: epoll refuses it), so `serve_listeners` fails, and the first
/// listener's port then refuses connections (its loop used to be serving already, for good).
/// (kqueue watches a file: there the second listener would not fail.)
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn a_start_that_fails_leaves_nothing_serving() {
    for pool in [false, true] {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let file = std::fs::File::open("Cargo.toml").expect("a file");
        let not_a_socket = TcpListener::from(std::os::fd::OwnedFd::from(file));
        let builder = match pool {
            false => Reactor::builder(),
            true => Reactor::builder().dispatch(twinhttp::reactor::Dispatch::Pool(2)),
        };
        let started = builder.serve_listeners(vec![listener.into(), not_a_socket.into()], hello);
        let err = started.expect_err("a listener that is a file");
        assert!(err.is_io(), "pool {pool}: {err:?}");
        let connect = TcpStream::connect_timeout(&addr, Duration::from_secs(5));
        assert_eq!(
            connect.map_err(|e| e.kind()).err(),
            Some(std::io::ErrorKind::ConnectionRefused),
            "pool {pool}: the first listener is closed"
        );
    }
}

/// One request with `Connection: close`; the answer is `hi`.
fn assert_hi(addr: std::net::SocketAddr) {
    assert_eq!(who(addr), "hi");
}

#[test]
fn a_second_reactor_does_not_share_the_first_ones_port() {
    let first = Reactor::builder()
        .loops(2)
        .serve("127.0.0.1:0", hello)
        .expect("first");
    assert_in_use(
        Reactor::builder().loops(2).serve(first.local_addr(), hello),
        "second reactor on the first's port",
    );
    // The first reactor's own loops share it: every connection is answered.
    for _ in 0..8 {
        assert_hi(first.local_addr());
    }
    first.shutdown(Duration::from_secs(5)).expect("shutdown");
}

/// The engines this build has, as `twinhttp::Engine` values.
fn engines() -> Vec<twinhttp::Engine> {
    vec![
        twinhttp::Engine::Reactor,
        twinhttp::Engine::ReactorPool,
        #[cfg(feature = "server")]
        twinhttp::Engine::Server,
    ]
}

/// One request with `Connection: close`; the body of the answer (which server it was).
fn who(addr: std::net::SocketAddr) -> String {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut got = String::new();
    c.read_to_string(&mut got).expect("read");
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    got.rsplit("\r\n\r\n").next().unwrap_or_default().to_owned()
}

/// `reuse_port(true)` on purpose: two servers (any engines) share one port and the kernel
/// spreads new connections over both; once one stops, the other answers every connection.
/// Without it on both, the second bind fails as before.
#[test]
fn servers_share_a_port_only_when_each_asks() {
    for (a, b) in engines()
        .into_iter()
        .zip(engines().into_iter().cycle().skip(1))
    {
        let first = a
            .builder()
            .reuse_port(true)
            .serve("127.0.0.1:0", |_: &mut Request<'_>| Response::text("first"))
            .expect("first");
        let addr = first.local_addr();
        assert_in_use(
            b.builder().serve(addr, hello),
            &format!("{b:?} without reuse_port beside {a:?} with it"),
        );
        let second = b
            .builder()
            .reuse_port(true)
            .serve(addr, |_: &mut Request<'_>| Response::text("second"))
            .expect("second, sharing the port");
        let answers: Vec<String> = (0..64).map(|_| who(addr)).collect();
        for name in ["first", "second"] {
            assert!(
                answers.iter().any(|a| a == name),
                "{a:?} + {b:?}: 64 connections, none to the {name}: {answers:?}"
            );
        }
        first.shutdown(Duration::from_secs(5)).expect("shutdown");
        for _ in 0..16 {
            assert_eq!(who(addr), "second", "{a:?} + {b:?}: the one left");
        }
        second.shutdown(Duration::from_secs(5)).expect("shutdown");
    }
    // Nor does one with it join a listener bound without it.
    let plain = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = plain.local_addr().expect("addr");
    for e in engines() {
        assert_in_use(
            e.builder().reuse_port(true).serve(addr, hello),
            &format!("{e:?} with reuse_port beside a plain listener"),
        );
    }
}
