//! The server side of the WebSocket opening handshake (RFC 6455 §4.2), checked against a parsed
//! request head. Pure: no socket, no I/O.

use crate::Response;
use crate::http::request_head::{BodyFraming, RequestHead, Version};

/// What a valid upgrade request offers.
#[derive(Debug)]
pub(crate) struct Offer {
    /// `Sec-WebSocket-Accept` for the response.
    pub(crate) accept: String,
    /// The subprotocols the client offers, in its order of preference.
    pub(crate) protocols: Vec<String>,
    pub(crate) origin: Option<String>,
}

/// True when any comma-separated token of any `name` field equals `token` (case-insensitive).
pub(crate) fn has_token(head: &RequestHead, name: &str, token: &str) -> bool {
    head.values_of(name).any(|v| {
        v.split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
    })
}

/// True when the request asks to switch to WebSocket (it may still be malformed).
pub(crate) fn is_websocket(head: &RequestHead) -> bool {
    has_token(head, "upgrade", "websocket")
}

/// Checks the opening handshake. `Err` is the response to send instead: 405 for a method other
/// than GET or HEAD, 426 for a HEAD, for a request that does not ask for WebSocket or asks for
/// a version other than 13 (with `Sec-WebSocket-Version: 13`), 400 for anything else malformed.
// The refusal is the response to send as is; it is the rare path.
#[allow(clippy::result_large_err)]
pub(crate) fn check(head: &RequestHead) -> Result<Offer, Response> {
    let bad = |why: &'static str| {
        Response::new(400)
            .with_content_type("text/plain")
            .with_body(why)
    };
    match head.method() {
        "GET" => {}
        // A HEAD gets the head of what a GET that does not ask to switch gets (RFC 9110
        // §9.3.2): a HEAD never switches. And the 405 allows both, as a router's GET route does.
        "HEAD" => return Err(upgrade_required("WebSocket upgrade needs GET")),
        _ => {
            return Err(Response::new(405)
                .with_header("Allow", "GET, HEAD")
                .with_body("WebSocket upgrade needs GET"));
        }
    }
    if !is_websocket(head) {
        return Err(upgrade_required("expected Upgrade: websocket"));
    }
    if head.version != Version::Http11 {
        return Err(bad("WebSocket upgrade needs HTTP/1.1"));
    }
    if !head.conn_upgrade {
        return Err(bad("expected Connection: upgrade"));
    }
    if head.body != BodyFraming::Empty {
        return Err(bad("a WebSocket upgrade request has no body"));
    }
    if head.header("sec-websocket-version").map(str::trim) != Some("13") {
        return Err(upgrade_required("unsupported Sec-WebSocket-Version"));
    }
    // One key (RFC 6455 §11.3.1: the field appears once in a request).
    if head.values_of("sec-websocket-key").nth(1).is_some() {
        return Err(bad("more than one Sec-WebSocket-Key"));
    }
    let key = head
        .header("sec-websocket-key")
        .map(str::trim)
        .filter(|k| valid_key(k))
        .ok_or_else(|| bad("missing or malformed Sec-WebSocket-Key"))?;
    let protocols = head
        .values_of("sec-websocket-protocol")
        .filter_map(|v| std::str::from_utf8(v).ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    Ok(Offer {
        accept: tungstenite::handshake::derive_accept_key(key.as_bytes()),
        protocols,
        origin: head.header("origin").map(str::to_owned),
    })
}

/// A 426 naming the protocol and version the server speaks.
fn upgrade_required(why: &'static str) -> Response {
    Response::new(426)
        .with_header("Upgrade", "websocket")
        .with_header("Sec-WebSocket-Version", "13")
        .with_content_type("text/plain")
        .with_body(why)
}

/// A key is the base64 encoding of 16 bytes (RFC 6455 §4.1).
fn valid_key(key: &str) -> bool {
    data_encoding::BASE64
        .decode(key.as_bytes())
        .is_ok_and(|k| k.len() == 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;
    use crate::http::parse::parse_head;

    fn head(req: &str) -> RequestHead {
        let mut head = RequestHead::default();
        let parsed = parse_head(req.as_bytes(), &Limits::default(), &mut head);
        assert!(matches!(parsed, Ok(Some(_))), "{parsed:?}");
        head
    }

    const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

    fn upgrade(extra: &str) -> String {
        format!(
            "GET /chat HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n{extra}\r\n"
        )
    }

    #[test]
    fn rfc_example_accept_key() {
        let h = head(&upgrade(&format!(
            "Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: chat, superchat\r\nOrigin: http://example.com\r\n"
        )));
        let offer = check(&h).expect("valid");
        assert_eq!(offer.accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(offer.protocols, ["chat", "superchat"]);
        assert_eq!(offer.origin.as_deref(), Some("http://example.com"));
    }

    #[test]
    fn malformed_requests_table() {
        let v13 = format!("Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n");
        let cases: Vec<(String, u16)> = vec![
            (upgrade(&v13).replacen("GET", "POST", 1), 405),
            (upgrade(&v13).replacen("GET", "HEAD", 1), 426),
            (upgrade(&v13).replace("Upgrade: websocket\r\n", ""), 426),
            (
                upgrade(&v13).replace("Upgrade: websocket", "Upgrade: h2c"),
                426,
            ),
            (
                upgrade(&v13).replace("Connection: Upgrade", "Connection: keep-alive"),
                400,
            ),
            (upgrade(&v13).replace("HTTP/1.1", "HTTP/1.0"), 400),
            (upgrade(&v13.replace("13", "8")), 426),
            (upgrade(&format!("Sec-WebSocket-Key: {KEY}\r\n")), 426),
            (upgrade("Sec-WebSocket-Version: 13\r\n"), 400),
            (upgrade(&v13.replace(KEY, "not base64!")), 400),
            (upgrade(&v13.replace(KEY, "AAAA")), 400),
            (upgrade(&format!("{v13}Content-Length: 2\r\n")), 400),
        ];
        for (req, status) in cases {
            let got = check(&head(&req)).map(|_| ()).map_err(|r| r.status());
            assert_eq!(got, Err(status), "{req}");
        }
        let r = check(&head(&upgrade(&v13.replace("13", "8")))).map(|_| ());
        let r = r.expect_err("version 8 refused");
        assert_eq!(r.header("sec-websocket-version"), Some("13"));
    }

    #[test]
    fn tokens_are_case_insensitive_and_listed() {
        let req = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: foo, WebSocket\r\nConnection: keep-alive, UPGRADE\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        assert!(check(&head(&req)).is_ok());
    }
}
