//! The opening handshake as a handler sees it: checking the request, choosing a subprotocol,
//! accepting, and the one place an accepted WebSocket becomes a connection.

use super::calls::Callee;
use super::{WsConfig, WsConn, WsHandler, WsSender, handshake};
use crate::http::response::{Body, BodyKind, Switch};
use crate::http::session::{Session, Start, Takeover};
use crate::{Request, Response, Upgraded};

/// WebSocket methods on [`Request`]: bring them in scope with `use twinhttp::ws::RequestExt;`.
pub trait RequestExt {
    /// True when the request asks to switch to WebSocket (`Upgrade: websocket`); it may still
    /// be malformed, which [`RequestExt::upgrade_websocket`] tells.
    fn is_websocket_upgrade(&self) -> bool;

    /// Checks the opening handshake: [`WsUpgrade::from_request`].
    // The refusal is the response to send as is; it is the rare path.
    #[allow(clippy::result_large_err)]
    fn upgrade_websocket(&self) -> Result<WsUpgrade, Response>;
}

impl RequestExt for Request<'_> {
    fn is_websocket_upgrade(&self) -> bool {
        handshake::is_websocket(self.head())
    }

    fn upgrade_websocket(&self) -> Result<WsUpgrade, Response> {
        WsUpgrade::from_request(self)
    }
}

/// A valid WebSocket upgrade request, to accept (or refuse) — from
/// [`RequestExt::upgrade_websocket`] or [`WsUpgrade::from_request`].
#[derive(Debug)]
pub struct WsUpgrade {
    offer: handshake::Offer,
    protocol: Option<String>,
    config: WsConfig,
}

impl WsUpgrade {
    /// Checks the WebSocket opening handshake (RFC 6455 §4.2) of `req`. `Ok`: accept it (or
    /// refuse it). `Err`: the response to send instead — 405 with `Allow: GET, HEAD` for a
    /// method other than GET or HEAD; 426 with `Sec-WebSocket-Version: 13` for a HEAD (what a
    /// GET that does not ask to switch gets) and when the request does not ask for WebSocket or
    /// for version 13; 400 for a missing or malformed `Sec-WebSocket-Key`, a missing
    /// `Connection: upgrade`, HTTP/1.0 or a request body.
    // The refusal is the response to send as is; it is the rare path.
    #[allow(clippy::result_large_err)]
    pub fn from_request(req: &Request<'_>) -> Result<WsUpgrade, Response> {
        handshake::check(req.head()).map(|offer| WsUpgrade {
            offer,
            protocol: None,
            config: WsConfig::default(),
        })
    }

    /// The subprotocols the client offers (`Sec-WebSocket-Protocol`), in its order.
    pub fn protocols(&self) -> impl Iterator<Item = &str> {
        self.offer.protocols.iter().map(String::as_str)
    }

    /// The `Origin` field, if sent (browsers always send it).
    pub fn origin(&self) -> Option<&str> {
        self.offer.origin.as_deref()
    }

    /// The origin check hook: `allow` sees the `Origin` field; a refusal answers 403.
    // The refusal is the response to send as is; it is the rare path.
    #[allow(clippy::result_large_err)]
    pub fn check_origin(self, allow: impl FnOnce(Option<&str>) -> bool) -> Result<Self, Response> {
        if allow(self.origin()) {
            Ok(self)
        } else {
            Err(Response::new(403).with_body("origin not allowed"))
        }
    }

    /// Selects the first of `supported` (the server's order of preference) that the client
    /// offers, if any (sent back as `Sec-WebSocket-Protocol`). Without a match no subprotocol is
    /// selected, as RFC 6455 allows.
    pub fn select_protocol(mut self, supported: &[&str]) -> Self {
        self.protocol = supported
            .iter()
            .find(|s| self.offer.protocols.iter().any(|p| p == *s))
            .map(|s| (*s).to_owned());
        self
    }

    /// The selected subprotocol.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// Sets the connection's [`WsConfig`].
    pub fn with_config(mut self, config: WsConfig) -> Self {
        self.config = config;
        self
    }

    fn switching(&self, body: Body) -> Response {
        let mut r = Response::new(101)
            .with_header("Upgrade", "websocket")
            .with_header("Sec-WebSocket-Accept", self.offer.accept.clone());
        if let Some(p) = &self.protocol {
            r = r.with_header("Sec-WebSocket-Protocol", p.clone());
        }
        r.with_body(body)
    }

    /// Accepts: the response (`101`) that switches the connection to WebSocket with `handler`.
    pub fn accept(self, handler: impl WsHandler) -> Response {
        let accepted = Accepted {
            handler: Box::new(handler),
            config: self.config,
        };
        self.switching(Body {
            kind: BodyKind::Switch(Switch::Session(Box::new(accepted))),
        })
    }

    /// Accepts, handing a plain blocking [`tungstenite::WebSocket`] to `then` on a thread of its
    /// own, for users who want their own read loop.
    pub fn accept_blocking(
        self,
        then: impl FnOnce(tungstenite::WebSocket<Upgraded>) + Send + 'static,
    ) -> Response {
        let config = self.config.tungstenite().write_buffer_size(0);
        let raw = move |up: Upgraded| {
            // `Upgraded` reads the bytes that came after the request first.
            let role = tungstenite::protocol::Role::Server;
            then(tungstenite::WebSocket::from_raw_socket(
                up,
                role,
                Some(config),
            ))
        };
        self.switching(Body {
            kind: BodyKind::Switch(Switch::Thread(Box::new(raw))),
        })
    }
}

/// An accepted WebSocket, waiting in its response for the 101 to go out.
struct Accepted {
    handler: Box<dyn WsHandler>,
    config: WsConfig,
}

impl Takeover for Accepted {
    /// Every engine builds its WebSocket connections here.
    fn start(self: Box<Self>, start: Start) -> Box<dyn Session> {
        let sender = WsSender::new(
            start.waker,
            self.config.max_send_queue,
            start.peer,
            &start.budget,
        );
        let handler = Callee::new(self.handler, start.panics);
        let conn = WsConn::new(handler, self.config, sender, start.now, start.rate);
        Box::new(conn)
    }
}
