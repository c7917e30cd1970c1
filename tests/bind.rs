//! A port in use is an error on every engine: the reactor's `SO_REUSEPORT` listeners must not
//! silently join a listener another program (or another server in this process) already has.
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

/// One request with `Connection: close`; the answer is `hi`.
fn assert_hi(addr: std::net::SocketAddr) {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut got = String::new();
    c.read_to_string(&mut got).expect("read");
    assert!(
        got.starts_with("HTTP/1.1 200 OK\r\n") && got.ends_with("\r\n\r\nhi"),
        "{got}"
    );
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
