//! The access log: one line per exchange, built here once for both engines from what the core
//! sees (the request line, the status, the body bytes, the time since the head was read) and
//! the peer the engine gave the connection. Logged through `log` at `info`, target
//! `twinhttp::access`:
//!
//! ```text
//! 127.0.0.1:53412 "GET /path HTTP/1.1" 200 13 0.21ms
//! ```
//!
//! Off (the default), a connection's log is one empty variant: no allocation, no clock.

use std::fmt::Write;
use std::net::IpAddr;
use std::time::Instant;

use crate::http::address::Address;
use crate::http::origin::Client;
use crate::http::request_head::{RequestHead, Version};

/// The `log` target of the access log.
pub(crate) const TARGET: &str = "twinhttp::access";

/// Whether a connection's exchanges are logged: the builders' `access_log` setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Logging {
    #[default]
    Off,
    On,
}

impl From<bool> for Logging {
    fn from(on: bool) -> Self {
        if on { Logging::On } else { Logging::Off }
    }
}

/// A connection's access log.
#[derive(Debug, Default)]
pub(crate) enum AccessLog {
    /// Not logged.
    #[default]
    Off,
    /// Logged: the exchange under way (boxed: a connection's state stays small).
    On(Box<Entry>),
}

/// The exchange being logged, reused for each request of the connection.
#[derive(Debug)]
pub(crate) struct Entry {
    peer: Option<Address>,
    /// The exchange's client, when a proxy in front reported it: logged instead of the peer.
    client: Client,
    /// The connection's client, as its PROXY protocol header named it: logged for an exchange
    /// that has no client of its own (one refused before its head was whole).
    proxied: Option<IpAddr>,
    /// The response's `X-Request-Id` (a request-id layer's), written at the line's end.
    request_id: String,
    /// `METHOD TARGET VERSION`; empty when no head was read for this exchange (an error
    /// answered to a malformed head is logged as `"-"`).
    line: String,
    started: Option<Instant>,
    status: u16,
}

impl AccessLog {
    /// A log for a connection from `peer`.
    pub(crate) fn on(peer: Option<Address>) -> Self {
        AccessLog::On(Box::new(Entry {
            peer,
            client: Client::Peer,
            proxied: None,
            request_id: String::new(),
            line: String::new(),
            started: None,
            status: 0,
        }))
    }

    /// A request head was read: its exchange starts now.
    #[inline]
    pub(crate) fn head(&mut self, head: &RequestHead) {
        if let AccessLog::On(e) = self {
            e.line.clear();
            e.client = Client::Peer;
            let version = match head.version {
                Version::Http10 => "HTTP/1.0",
                Version::Http11 => "HTTP/1.1",
            };
            e.line.push_str(head.method());
            e.line.push(' ');
            escape_into(&mut e.line, head.target());
            e.line.push(' ');
            e.line.push_str(version);
            e.started = Some(Instant::now());
            e.status = 0;
        }
    }

    /// The exchange's client, as a proxy in front reported it.
    #[inline]
    pub(crate) fn client(&mut self, client: Client) {
        if let AccessLog::On(e) = self {
            e.client = client;
        }
    }

    /// The connection's client, as its PROXY protocol header named it (`None` until read).
    #[inline]
    pub(crate) fn proxied(&mut self, client: Option<IpAddr>) {
        if let AccessLog::On(e) = self {
            e.proxied = client;
        }
    }

    /// The response carries this request id (`X-Request-Id`): looked up only when logging.
    #[inline]
    pub(crate) fn request_id<'r>(&mut self, id: impl FnOnce() -> Option<&'r str>) {
        if let AccessLog::On(e) = self {
            if let Some(id) = id() {
                e.request_id.clear();
                escape_into(&mut e.request_id, id);
            }
        }
    }

    /// The response head went out with `status`.
    #[inline]
    pub(crate) fn status(&mut self, status: u16) {
        if let AccessLog::On(e) = self {
            e.status = status;
        }
    }

    /// The exchange is over: `bytes` of body were sent (or produced, for a body the engine
    /// buffers whole). Logs its line.
    #[inline]
    pub(crate) fn done(&mut self, bytes: u64) {
        if let AccessLog::On(e) = self {
            e.log(bytes);
        }
    }
}

/// `target` as the log shows it: a `"`, a `\` and every byte outside `!`..`~` written `\xHH`
/// (as nginx does), so that a line always splits at its quotes.
fn escape_into(line: &mut String, target: &str) {
    for b in target.bytes() {
        match b {
            b'"' | b'\\' => {
                let _ = write!(line, "\\x{b:02X}");
            }
            0x21..=0x7e => line.push(char::from(b)),
            other => {
                let _ = write!(line, "\\x{other:02X}");
            }
        }
    }
}

impl Entry {
    /// Logs the exchange under way (its status `499` if no response went out: the client left
    /// first, as nginx logs it) and ends it.
    fn log(&mut self, bytes: u64) {
        let line = if self.line.is_empty() {
            "-"
        } else {
            &self.line
        };
        let ms = self
            .started
            .map_or(0.0, |t| t.elapsed().as_secs_f64() * 1000.0);
        let status = match self.status {
            0 => 499,
            status => status,
        };
        let client = match self.client {
            Client::Peer => self.proxied.map_or(Client::Peer, Client::At),
            named => named,
        };
        let who = Who(client, self.peer.as_ref());
        let (id_is, id) = match self.request_id.as_str() {
            "" => ("", ""),
            id => (" id=", id),
        };
        log::info!(target: TARGET, "{who} \"{line}\" {status} {bytes} {ms:.2}ms{id_is}{id}");
        self.line.clear();
        self.started = None;
        self.client = Client::Peer;
        self.request_id.clear();
    }
}

/// The log line's first field: the client a proxy named, else the peer, else `-`.
struct Who<'a>(Client, Option<&'a Address>);

impl std::fmt::Display for Who<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Who(Client::At(ip), _) => ip.fmt(f),
            Who(Client::Peer, Some(peer)) => peer.fmt(f),
            Who(Client::Peer | Client::Unknown, _) => f.write_str("-"),
        }
    }
}

impl Drop for Entry {
    /// An exchange that never ended (its client left mid-request, or the connection closed under
    /// a response) is logged all the same, with the bytes the core knows of: none.
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.log(0);
        }
    }
}
