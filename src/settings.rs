//! What both engines' builders set alike, with one set of defaults: the rules the core's
//! connection driver follows (limits, deadlines, minimum rates, the stream's wrapping, whose
//! forwarded fields are believed), how many connections are admitted, the memory budget and
//! the access log.

use std::time::Duration;

use crate::http::access::Logging;
use crate::http::budget::DEFAULT_MEMORY_BUDGET;
use crate::http::driver::Rules;
use crate::http::origin::TrustedProxies;
use crate::net::transport::Wrap;
use crate::{Limits, MinRate};

/// The settings both engines share (each builder's setters document them).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) max_connections: usize,
    pub(crate) header_read_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) min_request_body_rate: Option<MinRate>,
    pub(crate) min_response_rate: Option<MinRate>,
    pub(crate) limits: Limits,
    pub(crate) memory_budget: usize,
    /// A PROXY protocol header or not; plain, or TLS.
    pub(crate) wrap: Wrap,
    /// Whose forwarded headers are believed.
    pub(crate) trusted_proxies: TrustedProxies,
    pub(crate) access_log: Logging,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_connections: 16_384,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            min_request_body_rate: Some(MinRate::default()),
            min_response_rate: Some(MinRate::default()),
            limits: Limits::default(),
            memory_budget: DEFAULT_MEMORY_BUDGET,
            wrap: Wrap::default(),
            trusted_proxies: TrustedProxies::new(),
            access_log: Logging::Off,
        }
    }
}

impl Settings {
    /// The rules the core's connection driver follows. Every body is read whole before its
    /// handler runs; the server engine sets [`Rules::streams`] for handlers that stream theirs.
    pub(crate) fn rules(&self) -> Rules {
        Rules {
            limits: self.limits,
            header_read: self.header_read_timeout,
            idle: self.idle_timeout,
            body_rate: self.min_request_body_rate,
            response_rate: self.min_response_rate,
            streams: None,
            relay: self.wrap.relay(&self.trusted_proxies),
        }
    }
}

/// The setters both engines' builders share, written once with their docs: expanded into each
/// builder's `impl`, with the path to its [`Settings`] (`settings`, or `cfg.settings`).
macro_rules! shared_setters {
    ($($settings:ident).+) => {
        /// Most open connections; beyond it new ones get `503 Service Unavailable` and are closed
        /// (over TLS closed without an answer: answering would cost the handshake the limit
        /// sheds). Default: 16,384.
        pub fn max_connections(mut self, n: usize) -> Self {
            self.$($settings).+.max_connections = n.max(1);
            self
        }

        /// Serves TLS (`https://`, and `wss://` WebSockets) with this rustls configuration, on
        /// every listener this builder serves (TCP or Unix). The handshake runs in the engine's
        /// first non-blocking reads of a connection, under the header-read deadline: never on the
        /// accept thread, and on the server engine never on a worker (with `Parking::Off`, where
        /// a connection holds its worker for life, on that worker). Files are copied through the
        /// encryption rather than sent with `sendfile(2)`. Give the configuration ALPN
        /// `http/1.1` ([`tls::config_from_pem`](crate::tls::config_from_pem) does). Default:
        /// plain.
        #[cfg(feature = "tls")]
        #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
        pub fn tls(mut self, config: std::sync::Arc<rustls::ServerConfig>) -> Self {
            self.$($settings).+.wrap.security =
                $crate::net::transport::Security::Tls($crate::net::tls::Tls(config));
            self
        }

        /// Requires a PROXY protocol header (version 1 or 2, as HAProxy's `send-proxy-v2` and
        /// nginx's `proxy_protocol on` send) at the start of every connection, before TLS: the
        /// client it names is [`Request::client_ip`](crate::Request::client_ip) and the access
        /// log's first field. It is read in the connection's first non-blocking reads, under the
        /// header-read deadline; a connection that does not begin with a well-formed header is
        /// closed before any of its bytes is served. Turn it on only behind a proxy that sends it:
        /// anyone who can connect could otherwise claim any address. Default: off.
        pub fn proxy_protocol(mut self, on: bool) -> Self {
            self.$($settings).+.wrap.preface = if on {
                $crate::net::transport::Preface::ProxyProtocol
            } else {
                $crate::net::transport::Preface::None
            };
            self
        }

        /// The proxies whose forwarded headers (`Forwarded`, `X-Forwarded-For`,
        /// `X-Forwarded-Proto`) are believed: a request from one of them (its peer, or the client
        /// its PROXY protocol header named) gets its client and scheme from them
        /// ([`Request::client_ip`](crate::Request::client_ip),
        /// [`Request::scheme`](crate::Request::scheme), the access log). From anyone else they are
        /// ignored. Default: nobody.
        pub fn trusted_proxies(mut self, trusted: $crate::TrustedProxies) -> Self {
            self.$($settings).+.trusted_proxies = trusted;
            self
        }

        /// The whole request head must arrive within this time, counted from the connection's
        /// accept or from the first byte of a later request; a slower head gets `408` and a close
        /// (Slowloris). Default: 10 s.
        pub fn header_read_timeout(mut self, t: std::time::Duration) -> Self {
            self.$($settings).+.header_read_timeout = t;
            self
        }

        /// How long a keep-alive connection may stay idle between requests before it is closed.
        /// Default: 60 s.
        pub fn idle_timeout(mut self, t: std::time::Duration) -> Self {
            self.$($settings).+.idle_timeout = t;
            self
        }

        /// The memory budget of the whole server: bytes held for request bodies in memory, response
        /// tails waiting for slow clients, and WebSocket and event-stream send queues, all
        /// connections together. Past it the server degrades instead of growing: bodies go to their
        /// temporary files, new requests with a body are answered `503` with `Retry-After`, and
        /// sessions that hold unsent data while their queue would grow are dropped, each counted in
        /// [`Stats`](crate::stats::Stats) by reason beside the bytes held. Buffers a connection
        /// needs to read and write (up to 16 KiB each while in use) are not counted. `usize::MAX`:
        /// no budget. Default: 256 MiB.
        pub fn memory_budget(mut self, bytes: usize) -> Self {
            self.$($settings).+.memory_budget = bytes;
            self
        }

        /// Size limits for requests. Default: [`Limits::default()`](crate::Limits::default).
        pub fn limits(mut self, limits: $crate::Limits) -> Self {
            self.$($settings).+.limits = limits;
            self
        }

        /// Logs one line per exchange through `log`, at `info` to target `twinhttp::access`: `PEER
        /// "METHOD TARGET VERSION" STATUS BYTES DURATION` (see the crate docs). Off, it costs
        /// nothing. Default: off.
        pub fn access_log(mut self, on: bool) -> Self {
            self.$($settings).+.access_log = $crate::http::access::Logging::from(on);
            self
        }
    };
}
pub(crate) use shared_setters;
