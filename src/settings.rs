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
