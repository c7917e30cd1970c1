//! Who a request comes from when proxies stand in front: the client's address and the scheme
//! it used, as the connection's peer, a PROXY protocol header, or the forwarded headers of a
//! trusted proxy tell them. The driver works them out once per request, when its head is
//! whole ([`locate`]); [`crate::Request::client_ip`] and [`crate::Request::scheme`] read them,
//! and the access log logs the client.
//!
//! Forwarded headers are anyone's to write, so they are read only from a peer in the
//! configured [`TrustedProxies`], and walked from the right (the hop nearest this server)
//! leftwards while each hop is a trusted proxy too: the client is the first hop that is not
//! (as nginx's `real_ip_recursive` and Go's `X-Forwarded-For` guidance do). `Forwarded`
//! (RFC 7239, parsed by `rfc7239`) is read when present; `X-Forwarded-For` and
//! `X-Forwarded-Proto` otherwise.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

use crate::http::address::Address;
use crate::http::request_head::RequestHead;

/// The scheme a request was made with: `http` or `https`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Scheme {
    /// Plain HTTP.
    #[default]
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    /// `"http"` or `"https"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The scheme a forwarded header names (`http` or `https`, any case), if one of them.
    fn named(value: &str) -> Option<Scheme> {
        let value = value.trim().trim_matches('"');
        if value.eq_ignore_ascii_case("https") {
            Some(Scheme::Https)
        } else if value.eq_ignore_ascii_case("http") {
            Some(Scheme::Http)
        } else {
            None
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The proxies whose forwarded headers (`Forwarded`, `X-Forwarded-For`, `X-Forwarded-Proto`)
/// a server believes: networks of IP addresses and, optionally, every peer on a Unix domain
/// socket (a local process). Empty by default: every forwarded header is ignored.
///
/// Parsed from a comma-separated list of networks (`10.0.0.0/8`), addresses (`192.0.2.7`,
/// `::1`) and the word `unix`:
///
/// ```
/// use twinhttp::TrustedProxies;
///
/// let trusted: TrustedProxies = "10.0.0.0/8, ::1, unix".parse()?;
/// assert!(trusted.trusts_ip("10.1.2.3".parse()?));
/// assert!(!trusted.trusts_ip("192.0.2.7".parse()?));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    networks: Vec<IpNet>,
    unix: bool,
    /// Which header the proxies write: only that one is read.
    header: Written,
}

/// The forwarded header trusted proxies write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Written {
    /// `X-Forwarded-For` and `X-Forwarded-Proto` (nginx's `$proxy_add_x_forwarded_for`,
    /// HAProxy's `option forwardfor`).
    #[default]
    XForwarded,
    /// `Forwarded` (RFC 7239).
    Forwarded,
}

impl TrustedProxies {
    /// Trusts nobody.
    pub fn new() -> Self {
        TrustedProxies::default()
    }

    /// Trusts the proxies in `network`.
    pub fn network(mut self, network: IpNet) -> Self {
        self.networks.push(network);
        self
    }

    /// Trusts every peer on a Unix domain socket: a process on this machine (a proxy that
    /// connects to the server's Unix socket).
    pub fn unix_peers(mut self) -> Self {
        self.unix = true;
        self
    }

    /// The proxies write `Forwarded` (RFC 7239) rather than `X-Forwarded-For` and
    /// `X-Forwarded-Proto` (the default): that header is read, and the others ignored. Only the
    /// header the proxies write may be read: one they pass through from the client unchanged
    /// is the client's to forge. (In a parsed list: the word `forwarded`.)
    pub fn rfc7239(mut self) -> Self {
        self.header = Written::Forwarded;
        self
    }

    /// True when nobody is trusted.
    pub fn is_empty(&self) -> bool {
        self.networks.is_empty() && !self.unix
    }

    /// True when a proxy at `ip` is trusted.
    pub fn trusts_ip(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.networks.iter().any(|n| n.contains(&ip))
    }

    /// True when the peer `hop` is trusted.
    fn trusts(&self, hop: Hop) -> bool {
        match hop {
            Hop::Ip(ip) => self.trusts_ip(ip),
            Hop::Unix => self.unix,
            Hop::Unknown => false,
        }
    }
}

/// A list that does not parse: the entry at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedProxiesError(String);

impl fmt::Display for TrustedProxiesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a network (10.0.0.0/8), an IP address, `unix` or `forwarded`",
            self.0
        )
    }
}

impl std::error::Error for TrustedProxiesError {}

impl FromStr for TrustedProxies {
    type Err = TrustedProxiesError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut trusted = TrustedProxies::new();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            trusted = if entry.eq_ignore_ascii_case("unix") {
                trusted.unix_peers()
            } else if entry.eq_ignore_ascii_case("forwarded") {
                trusted.rfc7239()
            } else if let Ok(network) = entry.parse::<IpNet>() {
                trusted.network(network)
            } else if let Ok(ip) = entry.parse::<IpAddr>() {
                trusted.network(IpNet::from(ip))
            } else {
                return Err(TrustedProxiesError(entry.to_owned()));
            };
        }
        Ok(trusted)
    }
}

/// The engine's settings for finding a request's origin.
#[derive(Clone, Debug, Default)]
pub(crate) struct Relay {
    /// Connections begin with a PROXY protocol header, which names the client.
    pub(crate) proxy_protocol: bool,
    /// Whose forwarded headers are read.
    pub(crate) trusted: TrustedProxies,
    /// The connections' own scheme (`https` over TLS).
    pub(crate) scheme: Scheme,
}

/// A peer, as far as trust goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hop {
    Ip(IpAddr),
    Unix,
    /// The engine gave no address.
    Unknown,
}

impl Hop {
    pub(crate) fn of(peer: Option<&Address>) -> Hop {
        match peer {
            Some(Address::Tcp(a)) => Hop::Ip(a.ip()),
            Some(Address::Unix(_)) => Hop::Unix,
            None => Hop::Unknown,
        }
    }
}

/// Where a request comes from, as its head carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) client: Client,
    pub(crate) scheme: Scheme,
}

/// Who the client is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Client {
    /// The connection's peer: nobody in front said otherwise.
    #[default]
    Peer,
    /// The address a PROXY protocol header or a trusted proxy's forwarded header named.
    At(IpAddr),
    /// A trusted proxy's forwarded header was there but named nobody this server can believe
    /// (an entry that is no address): not the proxy, not a guess.
    Unknown,
}

impl Client {
    /// The client's address, given the peer's.
    pub(crate) fn ip(self, peer: Option<IpAddr>) -> Option<IpAddr> {
        match self {
            Client::Peer => peer,
            Client::At(ip) => Some(ip),
            Client::Unknown => None,
        }
    }
}

/// Works out where the request `head` comes from: its connection's `peer`, the address a
/// PROXY protocol header gave (`proxied`), and the forwarded headers when the nearest of these
/// is a trusted proxy. Every request passes here: where no proxy is trusted, as on most
/// servers, it is inlined to a check and the connection's own origin (the whole step cost 54
/// instructions of a keep-alive request as a call, counted by callgrind).
#[inline]
pub(crate) fn locate(
    head: &RequestHead,
    peer: Hop,
    proxied: Option<IpAddr>,
    relay: &Relay,
) -> Origin {
    let origin = Origin {
        client: proxied.map_or(Client::Peer, Client::At),
        scheme: relay.scheme,
    };
    match relay.trusted.is_empty() {
        true => origin,
        false => behind_trusted(head, peer, proxied, relay, origin),
    }
}

/// [`locate`] where some proxies are trusted: `origin` as the connection says, replaced by
/// what the forwarded headers say when the nearest hop is trusted.
fn behind_trusted(
    head: &RequestHead,
    peer: Hop,
    proxied: Option<IpAddr>,
    relay: &Relay,
    mut origin: Origin,
) -> Origin {
    // Behind the PROXY protocol the nearest hop is the one its header named: a header that
    // named nobody (`UNKNOWN`, `LOCAL`, a Unix socket) leaves no hop to trust.
    let nearest = match relay.proxy_protocol {
        true => proxied.map_or(Hop::Unknown, Hop::Ip),
        false => peer,
    };
    if !relay.trusted.trusts(nearest) {
        return origin;
    }
    let (walked, scheme) = match relay.trusted.header {
        Written::Forwarded => from_forwarded(head, &relay.trusted),
        Written::XForwarded => from_x_forwarded(head, &relay.trusted),
    };
    match walked {
        Walked::Client(ip) => origin.client = Client::At(ip),
        Walked::Unknown => origin.client = Client::Unknown,
        Walked::NoHeader => {}
    }
    if let Some(scheme) = scheme {
        origin.scheme = scheme;
    }
    origin
}

/// The values of the header `name`, as sent, last line first.
fn lines_from_the_right<'h>(
    head: &'h RequestHead,
    name: &'static str,
) -> impl Iterator<Item = &'h [u8]> {
    head.values_of(name).rev()
}

/// The elements of a list field's line (`a, b`), split at the commas outside quoted strings
/// (`"…"`, with `\` escapes), last first, trimmed, empty ones skipped.
fn elements_from_the_right(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut cuts = Vec::new();
    let (mut quoted, mut escaped) = (false, false);
    for (i, &b) in line.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => cuts.push(i),
            _ => {}
        }
    }
    let starts = std::iter::once(0).chain(cuts.iter().map(|c| c + 1));
    let ends = cuts.iter().copied().chain(std::iter::once(line.len()));
    let elements: Vec<&[u8]> = starts
        .zip(ends)
        .filter_map(|(s, e)| line.get(s..e))
        .map(<[u8]>::trim_ascii)
        .filter(|e| !e.is_empty())
        .collect();
    elements.into_iter().rev()
}

/// How a walk of the hops ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Walked {
    /// At the client: the first hop that is not a trusted proxy (or the leftmost, when all
    /// are).
    Client(IpAddr),
    /// At an entry that is no address before any hop that is not a trusted proxy.
    Unknown,
    /// No hop at all: the header is not there.
    NoHeader,
}

/// Walks hops from the right (the nearest first) past trusted proxies: the client is the first
/// that is not one. An entry that is no address (`None`) ends the walk with no client: what is
/// left of it is anyone's to write.
fn walk(hops: impl Iterator<Item = Option<IpAddr>>, trusted: &TrustedProxies) -> Walked {
    let mut last = None;
    for hop in hops {
        let Some(ip) = hop else {
            return Walked::Unknown;
        };
        if !trusted.trusts_ip(ip) {
            return Walked::Client(ip);
        }
        last = Some(ip);
    }
    last.map_or(Walked::NoHeader, Walked::Client)
}

/// The client and scheme from `Forwarded` (RFC 7239, each element parsed by `rfc7239`):
/// `for=` of each element from the right, `proto=` of the last element (the one the trusted
/// peer added).
fn from_forwarded(head: &RequestHead, trusted: &TrustedProxies) -> (Walked, Option<Scheme>) {
    let elements = || lines_from_the_right(head, "forwarded").flat_map(elements_from_the_right);
    let parsed = |element: &[u8]| -> Option<(Option<IpAddr>, Option<Scheme>)> {
        let text = std::str::from_utf8(element).ok()?;
        let mut parsed = rfc7239::parse(text);
        let one = parsed.next()?.ok()?;
        if parsed.next().is_some() {
            return None;
        }
        let ip = one.forwarded_for.and_then(|node| node.ip().copied());
        Some((ip, one.protocol.and_then(Scheme::named)))
    };
    let hops = elements().map(|e| parsed(e).and_then(|(ip, _)| ip));
    let scheme = elements()
        .next()
        .and_then(parsed)
        .and_then(|(_, scheme)| scheme);
    (walk(hops, trusted), scheme)
}

/// The client from `X-Forwarded-For` (addresses, optionally with a port), the scheme from the
/// last `X-Forwarded-Proto`.
fn from_x_forwarded(head: &RequestHead, trusted: &TrustedProxies) -> (Walked, Option<Scheme>) {
    let hops = lines_from_the_right(head, "x-forwarded-for")
        .flat_map(|line| line.split(|&b| b == b',').rev())
        .map(<[u8]>::trim_ascii)
        .filter(|hop| !hop.is_empty())
        .map(parse_hop);
    let scheme = lines_from_the_right(head, "x-forwarded-proto")
        .next()
        .and_then(|line| line.rsplit(|&b| b == b',').next())
        .and_then(|value| std::str::from_utf8(value).ok())
        .and_then(Scheme::named);
    (walk(hops, trusted), scheme)
}

/// An `X-Forwarded-For` hop: an IP address, or one with a port (`192.0.2.7:5100`,
/// `[2001:db8::7]:5100`); anything else (not text, quoted, a name) is none.
fn parse_hop(hop: &[u8]) -> Option<IpAddr> {
    let hop = std::str::from_utf8(hop).ok()?;
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(fields: &str) -> RequestHead {
        RequestHead::parsed(format!("GET / HTTP/1.1\r\nHost: x\r\n{fields}\r\n").as_bytes())
    }

    fn relay(trusted: &str) -> Relay {
        Relay {
            proxy_protocol: false,
            trusted: trusted.parse().expect("networks"),
            scheme: Scheme::Http,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    const PROXY: &str = "10.0.0.1";

    #[test]
    fn forwarded_headers_from_an_untrusted_peer_are_ignored() {
        let head = request("X-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Proto: https\r\n");
        let origin = locate(
            &head,
            Hop::Ip(ip("203.0.113.9")),
            None,
            &relay("10.0.0.0/8"),
        );
        assert_eq!(origin, Origin::default());
        let origin = locate(&head, Hop::Ip(ip(PROXY)), None, &relay(""));
        assert_eq!(origin, Origin::default());
        let origin = locate(&head, Hop::Unix, None, &relay("10.0.0.0/8"));
        assert_eq!(origin, Origin::default());
    }

    #[test]
    fn x_forwarded_for_is_walked_from_the_right_past_trusted_hops() {
        let head = request(
            "X-Forwarded-For: 198.51.100.1, 192.0.2.7\r\nX-Forwarded-For: 10.0.0.5\r\n\
             X-Forwarded-Proto: http, https\r\n",
        );
        let origin = locate(&head, Hop::Ip(ip(PROXY)), None, &relay("10.0.0.0/8"));
        assert_eq!(origin.client, Client::At(ip("192.0.2.7")));
        assert_eq!(origin.scheme, Scheme::Https);
        // A Unix peer, trusted.
        let origin = locate(&head, Hop::Unix, None, &relay("unix, 10.0.0.0/8"));
        assert_eq!(origin.client, Client::At(ip("192.0.2.7")));
        // Every hop trusted: the leftmost is the client.
        let origin = locate(&head, Hop::Ip(ip(PROXY)), None, &relay("0.0.0.0/0"));
        assert_eq!(origin.client, Client::At(ip("198.51.100.1")));
    }

    #[test]
    fn a_hop_that_is_no_address_ends_the_walk() {
        // Behind the trusted 10.0.0.9 an entry that is no address: nobody can be believed.
        let head = request("X-Forwarded-For: 198.51.100.1, garbage, 10.0.0.9\r\n");
        let origin = locate(&head, Hop::Ip(ip(PROXY)), None, &relay("10.0.0.0/8"));
        assert_eq!(origin.client, Client::Unknown);
        // A client's garbage left of the address the proxy appended does not hide it.
        let head = request("X-Forwarded-For: \"garbage, 198.51.100.7\r\n");
        let origin = locate(&head, Hop::Ip(ip(PROXY)), None, &relay("10.0.0.0/8"));
        assert_eq!(origin.client, Client::At(ip("198.51.100.7")));
        let head = request("X-Forwarded-For: [2001:db8::7]:5100\r\n");
        let origin = locate(&head, Hop::Ip(ip(PROXY)), None, &relay("10.0.0.0/8"));
        assert_eq!(origin.client, Client::At(ip("2001:db8::7")));
    }

    #[test]
    fn only_the_header_the_proxies_write_is_read() {
        let head = request(
            "X-Forwarded-For: 198.51.100.1\r\n\
             Forwarded: for=192.0.2.60;proto=http, for=\"[2001:db8:cafe::17]:4711\";proto=https\r\n",
        );
        // A client's own `Forwarded` beside the proxy's `X-Forwarded-For`: not read.
        let origin = locate(&head, Hop::Ip(ip(PROXY)), None, &relay("10.0.0.0/8"));
        assert_eq!(origin.client, Client::At(ip("198.51.100.1")));
        assert_eq!(origin.scheme, Scheme::Http);
        let origin = locate(
            &head,
            Hop::Ip(ip(PROXY)),
            None,
            &relay("10.0.0.0/8, forwarded"),
        );
        assert_eq!(origin.client, Client::At(ip("2001:db8:cafe::17")));
        assert_eq!(origin.scheme, Scheme::Https);
        let origin = locate(
            &head,
            Hop::Ip(ip(PROXY)),
            None,
            &relay("10.0.0.0/8, 2001:db8::/32, forwarded"),
        );
        assert_eq!(origin.client, Client::At(ip("192.0.2.60")));
        let obfuscated = request("Forwarded: for=_hidden, for=192.0.2.61\r\n");
        let origin = locate(
            &obfuscated,
            Hop::Ip(ip(PROXY)),
            None,
            &relay("10.0.0.0/8, forwarded"),
        );
        assert_eq!(origin.client, Client::At(ip("192.0.2.61")));
    }

    #[test]
    fn a_separator_inside_quotes_ends_the_walk() {
        let head = request("Forwarded: for=192.0.2.1;host=\"x,for=9.9.9.9\"\r\n");
        let origin = locate(
            &head,
            Hop::Ip(ip(PROXY)),
            None,
            &relay("10.0.0.0/8, forwarded"),
        );
        assert_eq!(origin.client, Client::Unknown);
        let head = request("Forwarded: for=\"[2001:db8::1]:80\";proto=https\r\n");
        let origin = locate(
            &head,
            Hop::Ip(ip(PROXY)),
            None,
            &relay("10.0.0.0/8, forwarded"),
        );
        assert_eq!(origin.client, Client::At(ip("2001:db8::1")));
    }

    #[test]
    fn a_line_that_is_not_text_ends_the_walk() {
        let mut raw = b"GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 192.0.2.1\r\n".to_vec();
        raw.extend_from_slice(b"X-Forwarded-For: 198.51.100.1, \xff\r\n\r\n");
        let head = RequestHead::parsed(&raw);
        let origin = locate(&head, Hop::Ip(ip(PROXY)), None, &relay("10.0.0.0/8"));
        assert_eq!(origin.client, Client::Unknown);
        // Merged by the proxy into one line after the client's bytes: the proxy's entry counts.
        let raw = b"GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: \xff, 198.51.100.7\r\n\r\n";
        let origin = locate(
            &RequestHead::parsed(raw),
            Hop::Ip(ip(PROXY)),
            None,
            &relay("10.0.0.0/8"),
        );
        assert_eq!(origin.client, Client::At(ip("198.51.100.7")));
        let head = request("Forwarded: host=\"a, for=192.0.2.9\r\n");
        let origin = locate(
            &head,
            Hop::Ip(ip(PROXY)),
            None,
            &relay("10.0.0.0/8, forwarded"),
        );
        assert_eq!(
            origin.client,
            Client::Unknown,
            "an unclosed quote hides the rest"
        );
    }

    #[test]
    fn a_proxy_protocol_header_that_names_nobody_leaves_nobody_trusted() {
        let head = request("X-Forwarded-For: 198.51.100.1\r\n");
        let mut relay = relay("10.0.0.0/8");
        relay.proxy_protocol = true;
        let origin = locate(&head, Hop::Ip(ip(PROXY)), None, &relay);
        assert_eq!(origin, Origin::default());
    }

    #[test]
    fn the_proxy_protocol_source_is_the_peer_for_trust() {
        let head = request("X-Forwarded-For: 198.51.100.1\r\n");
        let mut relay = relay("10.0.0.0/8");
        relay.proxy_protocol = true;
        // The PROXY header's source is a client, not a trusted proxy: its header is ignored.
        let origin = locate(&head, Hop::Ip(ip(PROXY)), Some(ip("192.0.2.7")), &relay);
        assert_eq!(origin.client, Client::At(ip("192.0.2.7")));
        // The source is itself a trusted proxy: its forwarded header is read.
        let origin = locate(&head, Hop::Ip(ip(PROXY)), Some(ip("10.0.0.8")), &relay);
        assert_eq!(origin.client, Client::At(ip("198.51.100.1")));
    }

    #[test]
    fn trusted_proxies_parse_and_say_what_is_wrong() {
        let t: TrustedProxies = "10.0.0.0/8, ::1 ,unix".parse().expect("networks");
        assert!(t.trusts_ip(ip("10.255.0.1")));
        assert!(t.trusts_ip(ip("::1")));
        assert!(t.trusts_ip(ip("::ffff:10.0.0.1")), "a mapped IPv4 address");
        assert!(!t.trusts_ip(ip("::2")));
        assert!(t.trusts(Hop::Unix));
        assert!(!t.trusts(Hop::Unknown));
        let e = "10.0.0.0/8, nine"
            .parse::<TrustedProxies>()
            .expect_err("not a network");
        assert!(e.to_string().contains("`nine`"), "{e}");
        assert!("".parse::<TrustedProxies>().expect("nothing").is_empty());
    }
}
