//! Behind proxies, on every engine configuration, over real sockets: the PROXY protocol
//! (versions 1 and 2, whole or in pieces, over TCP, a Unix socket and under TLS) names the
//! client; a connection without a well-formed header is closed before any of it is served, and
//! one whose header never completes is closed at the head deadline; forwarded headers count
//! only from trusted proxies; the access log names the client.
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use ppp::v2;
use support::{Client, Config, Engine, TestServer, start_on, start_with};
use twinhttp::{Request, Response, TrustedProxies, handler_fn};

/// Answers `client_ip scheme peer`.
fn who(req: &mut Request<'_>) -> Response {
    let client = req
        .client_ip()
        .map_or_else(|| "-".to_owned(), |ip| ip.to_string());
    let peer = req
        .peer()
        .map_or_else(|| "-".to_owned(), |peer| peer.to_string());
    Response::text(format!("{client} {} {peer}", req.scheme()))
}

fn proxied(engine: Engine, cfg: Config) -> TestServer {
    start_with(
        engine,
        Config {
            proxy_protocol: true,
            ..cfg
        },
        handler_fn(who),
    )
}

/// A client address of the documentation range, distinct per engine (the tests of one binary
/// run together and share the access log).
fn client_of(engine: Engine, n: u8) -> SocketAddr {
    let id = Engine::all().iter().position(|e| *e == engine).unwrap_or(0) as u8;
    SocketAddr::from(([192, 0, 2, 10 * id + n], 50_000 + u16::from(n)))
}

fn v1(source: SocketAddr) -> Vec<u8> {
    let family = if source.is_ipv4() { "TCP4" } else { "TCP6" };
    let destination = if source.is_ipv4() {
        "10.0.0.2"
    } else {
        "2001:db8::2"
    };
    format!(
        "PROXY {family} {} {destination} {} 80\r\n",
        source.ip(),
        source.port()
    )
    .into_bytes()
}

fn v2(source: SocketAddr) -> Vec<u8> {
    let destination: SocketAddr = if source.is_ipv4() {
        "10.0.0.2:80".parse().expect("an address")
    } else {
        "[2001:db8::2]:80".parse().expect("an address")
    };
    v2::Builder::with_addresses(
        v2::Version::Two | v2::Command::Proxy,
        v2::Protocol::Stream,
        (source, destination),
    )
    .build()
    .expect("a version 2 header")
}

const WHO: &[u8] = b"GET /who HTTP/1.1\r\nHost: t\r\n\r\n";

fn version_1_names_the_client(engine: Engine) {
    let srv = proxied(engine, Config::default());
    let client = client_of(engine, 1);
    let mut c = Client::new(srv.addr);
    let mut bytes = v1(client);
    bytes.extend_from_slice(WHO);
    let r = c.roundtrip(&bytes);
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(
        text.starts_with(&format!("{} http 127.0.0.1:", client.ip())),
        "{text}"
    );
    // The next request on the connection comes from the same client.
    let text = c.roundtrip(WHO).text();
    assert!(text.starts_with(&format!("{} http", client.ip())), "{text}");
    // And so does an IPv6 one.
    let client = SocketAddr::from(([0x2001, 0xdb8, 0, 0, 0, 0, 0, 7], 4711));
    let mut c = Client::new(srv.addr);
    c.send(&v1(client));
    assert!(c.roundtrip(WHO).text().starts_with("2001:db8::7 http"));
    // In two pieces, cut after the source port (where the start alone reads as a header with
    // an empty destination port): read across the reads.
    let client = client_of(engine, 3);
    let header = v1(client);
    let cut = format!("PROXY TCP4 {} 10.0.0.2 {} ", client.ip(), client.port()).len();
    let mut c = Client::new(srv.addr);
    c.send(&header[..cut]);
    c.send(&header[cut..]);
    let text = c.roundtrip(WHO).text();
    assert!(text.starts_with(&format!("{} http", client.ip())), "{text}");
}

/// A version 2 header sent in pieces (one byte, the rest, then the request) is read across
/// the reads; a proxy's health check (`LOCAL`) names nobody, and the peer is the client.
fn version_2_in_pieces_names_the_client(engine: Engine) {
    let srv = proxied(engine, Config::default());
    let client = client_of(engine, 2);
    let header = v2(client);
    let mut c = Client::new(srv.addr);
    c.send(&header[..1]);
    c.send(&header[1..]);
    let text = c.roundtrip(WHO).text();
    assert!(text.starts_with(&format!("{} http", client.ip())), "{text}");
    let local = v2::Builder::new(v2::Version::Two | v2::Command::Local, 0)
        .build()
        .expect("a LOCAL header");
    let mut c = Client::new(srv.addr);
    let mut bytes = local;
    bytes.extend_from_slice(WHO);
    let text = c.roundtrip(&bytes).text();
    assert!(text.starts_with("127.0.0.1 http 127.0.0.1:"), "{text}");
}

/// haproxy's proxy-protocol.txt §2.2: with the `LOCAL` command the receiver must accept the
/// connection and use its real endpoints, the family and the address block ignored. A `LOCAL`
/// header that declares `AF_INET` over `STREAM` with an address length of 0 (no room for the
/// 12 bytes of IPv4 addresses) is such a header: the request after it is answered, from the
/// peer; so is one whose block holds bytes that are no addresses, whole or in pieces.
fn version_2_local_ignores_its_family_and_addresses(engine: Engine) {
    let srv = proxied(engine, Config::default());
    let mut local_inet = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    local_inet.extend_from_slice(&[0x20, 0x11, 0x00, 0x00]);
    let mut c = Client::new(srv.addr);
    let mut bytes = local_inet.clone();
    bytes.extend_from_slice(WHO);
    let r = c.roundtrip(&bytes);
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(text.starts_with("127.0.0.1 http 127.0.0.1:"), "{text}");
    // The next request on the connection is answered too.
    assert_eq!(c.roundtrip(WHO).status, 200);
    // `AF_INET6` with a 3-byte block (not an address), sent in pieces.
    let mut local_odd = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    local_odd.extend_from_slice(&[0x20, 0x21, 0x00, 0x03, 1, 2, 3]);
    let mut c = Client::new(srv.addr);
    c.send(&local_odd[..13]);
    c.send(&local_odd[13..17]);
    c.send(&local_odd[17..]);
    let text = c.roundtrip(WHO).text();
    assert!(text.starts_with("127.0.0.1 http 127.0.0.1:"), "{text}");
}

/// A connection that does not begin with a header (a client speaking HTTP straight away, or
/// a malformed header) is closed, and nothing of it is answered.
fn a_connection_without_a_header_is_closed_unanswered(engine: Engine) {
    let srv = proxied(engine, Config::default());
    for bytes in [
        WHO.to_vec(),
        b"PROXY TCP4 999.0.2.7 10.0.0.2 51000 80\r\nGET / HTTP/1.1\r\n\r\n".to_vec(),
        b"PROXY TCP4 192.0.2.7 10.0.0.2 51000\r\nGET / HTTP/1.1\r\n\r\n".to_vec(),
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(),
    ] {
        let mut s = TcpStream::connect(srv.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let sent = Instant::now();
        s.write_all(&bytes).expect("send");
        let mut got = Vec::new();
        // Closed: the end of the stream, or a reset for the bytes left unread; at once, not at
        // the head deadline (5 s) nor this read's timeout.
        let ended = match s.read_to_end(&mut got) {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        };
        assert!(ended, "the connection was not closed");
        assert!(
            sent.elapsed() < Duration::from_secs(2),
            "closed after {:?}",
            sent.elapsed()
        );
        assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    }
    // The server serves on.
    let mut c = Client::new(srv.addr);
    c.send(&v1(client_of(engine, 3)));
    assert_eq!(c.roundtrip(WHO).status, 200);
}

/// A header that never completes holds nothing past the head deadline: the connection is
/// closed when it passes, not before.
fn a_header_that_never_completes_closes_at_the_head_deadline(engine: Engine) {
    let deadline = Duration::from_millis(400);
    let srv = proxied(
        engine,
        Config {
            header_read_timeout: deadline,
            ..Config::default()
        },
    );
    let mut s = TcpStream::connect(srv.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let started = Instant::now();
    s.write_all(b"PROXY TCP4 192.0.2.7").expect("send");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let took = started.elapsed();
    assert!(took >= deadline, "closed after {took:?}");
    assert!(
        took < deadline + Duration::from_secs(3),
        "closed after {took:?}"
    );
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
}

/// Over a Unix socket (nginx's `proxy_pass http://unix:…` with `proxy_protocol on`).
fn over_a_unix_socket(engine: Engine) {
    let dir = std::env::temp_dir().join(format!(
        "twinhttp-proxied-{}-{engine:?}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory");
    let path = dir.join("s");
    let srv = start_on(
        engine,
        Config {
            proxy_protocol: true,
            ..Config::default()
        },
        support::On::Unix(path.clone()),
        handler_fn(who),
    );
    let client = client_of(engine, 4);
    let mut c = Client::unix(&path);
    c.send(&v2(client));
    let text = c.roundtrip(WHO).text();
    assert!(
        text.starts_with(&format!("{} http unix:", client.ip())),
        "{text}"
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Forwarded headers are believed only from a trusted proxy, and walked from the right.
fn forwarded_headers_count_only_from_trusted_proxies(engine: Engine) {
    let fields = "X-Forwarded-For: 198.51.100.1, 192.0.2.9\r\nX-Forwarded-Proto: https\r\n";
    let trusting = |trusted: &str| {
        start_with(
            engine,
            Config {
                trusted_proxies: trusted.parse().expect("networks"),
                ..Config::default()
            },
            handler_fn(who),
        )
    };
    let srv = trusting("127.0.0.0/8");
    let text = Client::new(srv.addr).request("GET /", fields).text();
    assert!(text.starts_with("192.0.2.9 https 127.0.0.1:"), "{text}");
    // A client's own `Forwarded` is not read where the proxies write `X-Forwarded-For`…
    let forwarded = "Forwarded: for=192.0.2.60;proto=http, for=\"[2001:db8::17]:4711\"\r\n";
    let text = Client::new(srv.addr).request("GET /", forwarded).text();
    assert!(text.starts_with("127.0.0.1 http"), "{text}");
    // …and is where they write `Forwarded`.
    let srv = trusting("127.0.0.0/8, forwarded");
    let text = Client::new(srv.addr).request("GET /", forwarded).text();
    assert!(text.starts_with("2001:db8::17 http"), "{text}");
    let srv = trusting("10.0.0.0/8");
    let text = Client::new(srv.addr).request("GET /", fields).text();
    assert!(text.starts_with("127.0.0.1 http 127.0.0.1:"), "{text}");
    let srv = start_with(engine, Config::default(), handler_fn(who));
    let text = Client::new(srv.addr).request("GET /", fields).text();
    assert!(text.starts_with("127.0.0.1 http"), "{text}");
}

/// Behind two proxies: the first sends a PROXY header naming the second, which is trusted,
/// so its `X-Forwarded-For` names the client.
fn a_proxied_trusted_hop_forwards_its_client(engine: Engine) {
    let srv = proxied(
        engine,
        Config {
            trusted_proxies: TrustedProxies::new()
                .network("10.0.0.0/8".parse().expect("a network")),
            ..Config::default()
        },
    );
    let mut c = Client::new(srv.addr);
    c.send(&v1("10.0.0.8:41000".parse().expect("an address")));
    let text = c.request("GET /", "X-Forwarded-For: 192.0.2.77\r\n").text();
    assert!(text.starts_with("192.0.2.77 http"), "{text}");
    // From an untrusted client's PROXY header, the forwarded header is the client's own claim.
    let mut c = Client::new(srv.addr);
    c.send(&v1(client_of(engine, 5)));
    let text = c.request("GET /", "X-Forwarded-For: 10.9.9.9\r\n").text();
    assert!(
        text.starts_with(&format!("{} http", client_of(engine, 5).ip())),
        "{text}"
    );
}

/// The access log's first field is the client a proxy named: one line per exchange, including
/// one refused before its head was whole, and none twice.
fn the_access_log_names_the_client(engine: Engine) {
    support::logs::capture(log::Level::Info, "twinhttp::access");
    let srv = proxied(
        engine,
        Config {
            access_log: true,
            ..Config::default()
        },
    );
    let client = client_of(engine, 6);
    let mut c = Client::new(srv.addr);
    c.send(&v2(client));
    assert_eq!(c.roundtrip(WHO).status, 200);
    assert_eq!(c.roundtrip(b"NOT A REQUEST LINE\r\n\r\n").status, 400);
    // The connection ends (the client closes after the server's lingering close), and with it
    // anything its log would still write.
    assert!(c.is_closed());
    drop(c);
    srv.until_none_open();
    let prefix = format!("{} ", client.ip());
    let lines: Vec<String> = support::logs::lines()
        .into_iter()
        .filter(|l| l.starts_with(&prefix))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].starts_with(&format!("{prefix}\"GET /who HTTP/1.1\" 200 ")),
        "{lines:#?}"
    );
    assert!(
        lines[1].starts_with(&format!("{prefix}\"-\" 400 ")),
        "{lines:#?}"
    );
}

/// Under TLS the header comes first, then the handshake: the scheme is `https`.
#[cfg(feature = "tls")]
fn under_tls(engine: Engine) {
    let pki = support::tls::Pki::new();
    let srv = proxied(
        engine,
        Config {
            tls: Some(pki.server.clone()),
            ..Config::default()
        },
    );
    let client = client_of(engine, 7);
    let mut tcp = TcpStream::connect(srv.addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    tcp.write_all(&v2(client)).expect("send");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    let conn = rustls::ClientConnection::new(pki.client.clone(), name).expect("a connection");
    let mut c = Client {
        reader: std::io::BufReader::new(rustls::StreamOwned::new(conn, tcp)),
    };
    let text = c.roundtrip(WHO).text();
    assert!(
        text.starts_with(&format!("{} https", client.ip())),
        "{text}"
    );
}

#[cfg(not(feature = "tls"))]
fn under_tls(_: Engine) {}

engine_tests!(
    version_1_names_the_client,
    version_2_in_pieces_names_the_client,
    version_2_local_ignores_its_family_and_addresses,
    a_connection_without_a_header_is_closed_unanswered,
    a_header_that_never_completes_closes_at_the_head_deadline,
    over_a_unix_socket,
    forwarded_headers_count_only_from_trusted_proxies,
    a_proxied_trusted_hop_forwards_its_client,
    the_access_log_names_the_client,
    under_tls,
);
