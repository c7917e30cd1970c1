//! The HTTP/1.1 connection state machine: request heads in, response heads and body framing out,
//! and the persistence decision between them. It never touches a socket: both engines drive it.

use std::io::Write;
use std::net::IpAddr;

use crate::http::access::{AccessLog, Logging};
use crate::http::address::Address;
use crate::http::answer::{After, Answer};
use crate::http::body::Decoder;
use crate::http::buf::ReadBuf;
use crate::http::date::DateLine;
use crate::http::framing::Encoder;
use crate::http::origin::Origin;
use crate::http::parse::{ParseError, parse_head};
use crate::http::refusal::Refusal;
use crate::http::request_head::{RequestHead, Version};
use crate::http::response::{BodyKind, ContentType, Response, Switch};
use crate::http::status::{reason, status_line};
use crate::limits::Limits;

/// Where a connection is between messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Waiting for (the rest of) a request head.
    Head,
    /// A request was parsed and its response is being produced.
    Responding,
    /// The response being written is the last: close once it is out, as [`Close`] says.
    Closing(Close),
    /// `101 Switching Protocols` was written: the connection now speaks another protocol.
    Switched,
}

/// How a connection ends once its last response is out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Close {
    /// The exchange ended cleanly and the client asked to close (`Connection: close`, HTTP/1.0):
    /// it sends nothing more (RFC 9112 §9.6). Close, lingering only over input already read.
    Now,
    /// The exchange ended cleanly, and the server ends a connection its client would have
    /// kept (a handler's `Connection: close`, shutdown): requests the client pipelined may be
    /// on their way. Closing on them would reset the connection and could destroy the response
    /// still in flight: the socket is looked at once, and any input makes the close linger.
    Ended,
    /// Framing is lost (an error was answered, a request body was left unread): shut the write
    /// side and read what the client still sends before closing ([`crate::http::linger`]), so
    /// that closing with unread input does not reset the connection and destroy the response.
    Linger,
    /// The response was cut short (its body failed or fell short of its length): close at once,
    /// and not cleanly where the transport can tell (`Transport::abort`: no TLS `close_notify`),
    /// so that a client reading a close-delimited body sees a truncation, not an end.
    Abort,
}

/// Why a request's deadline passed, as [`Conn::request_timed_out`] hears it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Late {
    /// Nothing of a next request came before the connection's time was up.
    Idle,
    /// Part of a request head came, not the whole of it by the header-read deadline.
    Head,
    /// A request body came slower than its minimum rate.
    Body,
}

/// One HTTP/1.1 connection's protocol state.
#[derive(Debug)]
pub(crate) struct Conn {
    state: State,
    access: AccessLog,
}

impl Default for Conn {
    fn default() -> Self {
        Conn {
            state: State::Head,
            access: AccessLog::Off,
        }
    }
}

impl Conn {
    /// A connection from `peer` whose exchanges go to the access log ([`crate::http::access`]).
    pub(crate) fn logged(peer: Option<Address>) -> Self {
        Conn {
            state: State::Head,
            access: AccessLog::on(peer),
        }
    }

    /// A connection, logged or not.
    #[inline]
    pub(crate) fn new(logging: Logging, peer: Option<&Address>) -> Self {
        match logging {
            Logging::On => Conn::logged(peer.cloned()),
            Logging::Off => Conn::default(),
        }
    }

    pub(crate) fn state(&self) -> State {
        self.state
    }

    /// The connection's PROXY protocol header named `client` (the access log names it for an
    /// exchange refused before its head was whole).
    pub(crate) fn proxied(&mut self, client: Option<IpAddr>) {
        self.access.proxied(client);
    }

    /// The request just read comes from `origin` (the access log names its client).
    pub(crate) fn located(&mut self, origin: &Origin) {
        self.access.client(origin.client);
    }

    /// Tries to parse a request head from the front of `buf`. On success the head's bytes are
    /// consumed, `head` is filled, and the returned decoder frames the body that follows.
    /// `Ok(None)`: more bytes are needed. `Err`: answer with [`Conn::write_error`] and close.
    /// (The engine counts a head read in full as a request.)
    pub(crate) fn recv_head(
        &mut self,
        buf: &mut ReadBuf,
        head: &mut RequestHead,
        limits: &Limits,
    ) -> Result<Option<Decoder>, ParseError> {
        debug_assert_eq!(self.state, State::Head);
        match parse_head(buf.filled(), limits, head) {
            Ok(Some(n)) => {
                buf.consume(n);
                self.state = State::Responding;
                self.access.head(head);
                Ok(Some(Decoder::new(head.body, limits.max_body_bytes)))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.state = State::Closing(Close::Linger);
                // Refused after its request line was read (a field, the framing rules): the
                // access log names the request.
                if head.has_line() {
                    self.access.head(head);
                }
                Err(e)
            }
        }
    }

    /// Writes the response head for `head`'s request and returns how to frame its body.
    ///
    /// `body_in_sync` says whether the request body was read (or drained) to its end;
    /// `closing` says whether the engine wants this to be the last response (shutdown).
    pub(crate) fn write_head(
        &mut self,
        head: &RequestHead,
        resp: &Response,
        body_in_sync: bool,
        closing: bool,
        out: &mut Vec<u8>,
        date: &mut DateLine,
    ) -> Encoder {
        // (Never a 1xx: `write_response` answers a handler's with a 500 before this, and
        // upgrades have their own path.)
        let status = resp.status();
        self.access.status(status);
        self.access.request_id(|| resp.header("x-request-id"));
        let bodyless = status == 204 || status == 304;
        // After a 2xx to CONNECT the client takes the connection for a tunnel, and the response
        // has no framing fields (RFC 9110 §9.3.6): the body goes out as the tunnel's bytes and
        // the connection closes after it (with no body, at once).
        let tunnel = head.is_connect() && (200..300).contains(&status);
        // A 205 has no content either (RFC 9110 §15.3.6), and says so: `Content-Length: 0`.
        let reset = status == 205 && !tunnel;
        let mut len = resp.body().len();
        let mut keep_alive = head.wants_keep_alive() && body_in_sync && !closing && !tunnel;
        if tunnel {
            len = None;
        }
        let encoder = match (bodyless || reset, len) {
            (true, _) => Encoder::Skip,
            (false, None) if tunnel => Encoder::CloseDelimited,
            (false, Some(_)) if head.is_head() => Encoder::Skip,
            (false, Some(n)) => Encoder::Length { remaining: n },
            (false, None) if head.is_head() => Encoder::Skip,
            (false, None) if head.version == Version::Http11 => Encoder::Chunked,
            (false, None) => Encoder::CloseDelimited,
        };
        if encoder == Encoder::CloseDelimited {
            keep_alive = false;
        }

        status_line(out, status);
        if !resp
            .other_fields()
            .any(|(n, _)| n.eq_ignore_ascii_case("date"))
        {
            date.append(out);
        }
        // `Content-Type` is held apart: written without the checks below, and without any
        // when it is one of the crate's own.
        match resp.content_type_field() {
            ContentType::Unset => {}
            ContentType::Known(known) => out.extend_from_slice(known.line.as_bytes()),
            ContentType::Set(name, value) => field(out, name, value),
        }
        // A response naming protocols to upgrade to (a 426) says so in `Connection` too, so
        // that intermediaries do not forward its `Upgrade` (RFC 9110 §7.8).
        let mut upgrade = false;
        for (name, value) in resp.other_fields() {
            if name.eq_ignore_ascii_case("content-length")
                || name.eq_ignore_ascii_case("transfer-encoding")
            {
                continue;
            }
            upgrade |= name.eq_ignore_ascii_case("upgrade");
            if name.eq_ignore_ascii_case("connection") {
                if value
                    .split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("close"))
                {
                    keep_alive = false;
                }
                continue;
            }
            field(out, name, value);
        }
        match (bodyless, len, encoder) {
            (true, _, _) => {}
            (false, _, _) if reset => out.extend_from_slice(b"Content-Length: 0\r\n"),
            (false, Some(n), _) => {
                out.extend_from_slice(b"Content-Length: ");
                out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            (false, None, Encoder::Chunked) => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n")
            }
            (false, None, _) => {}
        }
        match (keep_alive, head.version == Version::Http10, upgrade) {
            (false, _, false) => out.extend_from_slice(b"Connection: close\r\n"),
            (false, _, true) => out.extend_from_slice(b"Connection: upgrade, close\r\n"),
            (true, true, false) => out.extend_from_slice(b"Connection: keep-alive\r\n"),
            (true, true, true) => out.extend_from_slice(b"Connection: upgrade, keep-alive\r\n"),
            (true, false, false) => {}
            (true, false, true) => out.extend_from_slice(b"Connection: upgrade\r\n"),
        }
        out.extend_from_slice(b"\r\n");
        self.state = match (keep_alive, body_in_sync) {
            (true, _) => State::Head,
            (false, true) if !head.wants_keep_alive() => State::Closing(Close::Now),
            (false, true) => State::Closing(Close::Ended),
            (false, false) => State::Closing(Close::Linger),
        };
        encoder
    }

    /// Writes the response: its head and, for a body known in full, the body. Returns what is
    /// left: a streamed body to write through its encoder, piece by piece as the engine's
    /// socket takes it (then [`Conn::streamed`]), or a protocol switch. A handler that panicked
    /// is answered `500` and the connection closes: its state is not to be trusted.
    pub(crate) fn write_response(
        &mut self,
        head: &RequestHead,
        answer: Answer,
        body_in_sync: bool,
        closing: bool,
        out: &mut Vec<u8>,
        date: &mut DateLine,
    ) -> After {
        let (resp, closing) = match answer {
            Answer::Returned(resp) => (resp, closing),
            Answer::Panicked => (Response::new(500), true),
        };
        if matches!(resp.body().kind, BodyKind::Switch(_)) {
            return self.write_switch(head, resp, body_in_sync, closing, out, date);
        }
        if resp.status() < 200 {
            return self.write_interim_refused(head, resp, body_in_sync, out, date);
        }
        let mut encoder = self.write_head(head, &resp, body_in_sync, closing, out, date);
        let kind = resp.into_body().kind;
        let sent = match kind {
            BodyKind::Static(b) => {
                let sent = self.write_full_body(&mut encoder, b, out);
                // A `&'static` body holds nothing to drop: forgotten, it skips the enum's drop
                // glue (an out-of-line call once a response).
                std::mem::forget(kind);
                sent
            }
            BodyKind::Bytes(b) => self.write_full_body(&mut encoder, &b, out),
            // Never sent (HEAD, 304): a handler's reader or iterator goes unread.
            kind if encoder == Encoder::Skip => {
                self.access.done(0);
                return After::Unsent(kind);
            }
            BodyKind::Session(takeover) => {
                self.access.done(0);
                return After::Session(encoder, takeover);
            }
            kind => return After::Stream(encoder, kind),
        };
        self.access.done(sent as u64);
        After::Done
    }

    /// A handler answered with a 1xx, an interim status the server sends itself (`100
    /// Continue`) that cannot end an exchange: the 500 of a panic goes instead (its head
    /// written where every head is, with no body, and the connection closes), and the handler's
    /// fields and body are not sent (its body is handler code: the driver drops it caught).
    #[cold]
    #[inline(never)]
    fn write_interim_refused(
        &mut self,
        head: &RequestHead,
        resp: Response,
        body_in_sync: bool,
        out: &mut Vec<u8>,
        date: &mut DateLine,
    ) -> After {
        log::error!(
            "handler answered {} {} with {}, an interim status; sent 500 instead",
            head.method(),
            head.path(),
            resp.status()
        );
        // The log keeps the id the handler's response carried. (A bodyless 500 leaves nothing
        // to do after its head.)
        self.access.request_id(|| resp.header("x-request-id"));
        let _done = self.write_response(head, Answer::Panicked, body_in_sync, true, out, date);
        After::Unsent(resp.into_body().kind)
    }

    /// A streamed body ended, `bytes` of it sent: the exchange is over.
    pub(crate) fn streamed(&mut self, bytes: u64) {
        self.access.done(bytes);
    }

    /// Writes `101 Switching Protocols` for an upgrade response, when the request allows it:
    /// HTTP/1.1 with `Connection: upgrade` and its body read (else 426 or 500, and close), and
    /// the server not shutting down (else 503).
    #[cold]
    fn write_switch(
        &mut self,
        head: &RequestHead,
        mut resp: Response,
        body_in_sync: bool,
        closing: bool,
        out: &mut Vec<u8>,
        date: &mut DateLine,
    ) -> After {
        let refusal = if closing {
            Some(503)
        } else if !head.conn_upgrade
            || head.version != Version::Http11
            || !offered(head, resp.header("upgrade"))
        {
            Some(426)
        } else if !body_in_sync {
            // The handler switched without taking the body (a streaming handler): the new
            // protocol's bytes would start somewhere in it. The server's fault, not the
            // request's (RFC 9110 §7.8 allows a switch once the body is read).
            Some(500)
        } else {
            None
        };
        if let Some(status) = refusal {
            // A 426 names the protocol the handler would have switched to.
            let upgrade = resp.header("upgrade").filter(|_| status == 426);
            self.error_response(status, upgrade, out, date);
            return After::Declined(Refusal::Status(status), resp.take_body().kind);
        }
        let BodyKind::Switch(switch) = resp.take_body().kind else {
            return After::Done;
        };
        status_line(out, 101);
        // A 1xx has no content, so no framing of its own (RFC 9110 §8.6, RFC 9112 §6.1).
        for (name, value) in resp.headers() {
            let framing = ["connection", "content-length", "transfer-encoding"];
            if !framing.iter().any(|f| name.eq_ignore_ascii_case(f)) {
                field(out, name, value);
            }
        }
        out.extend_from_slice(b"Connection: Upgrade\r\n\r\n");
        self.state = State::Switched;
        self.access.status(101);
        self.access.done(0);
        match switch {
            // After a 101 the session's bytes go out as they are.
            Switch::Session(takeover) => After::Session(Encoder::CloseDelimited, takeover),
            Switch::Thread(then) => After::Detach(then),
        }
    }

    /// Writes a body known in full; a Content-Length body that does not match closes. Returns
    /// the body bytes sent.
    #[inline]
    fn write_full_body(&mut self, encoder: &mut Encoder, body: &[u8], out: &mut Vec<u8>) -> usize {
        let sent = encoder.encode(body, out);
        if !encoder.finish(out) {
            self.abort();
        }
        sent
    }

    /// Marks the connection as closing after a response body could not be completed: whatever
    /// close was due, it is now an abort.
    pub(crate) fn abort(&mut self) {
        self.state = State::Closing(Close::Abort);
    }

    /// The engine reads `head`'s body now, before its handler runs (the reactor reads every
    /// body whole): a client holding it back for `100 Continue` is told to send it, unless part
    /// of it came already (`buffered`). The parser keeps the expectation for HTTP/1.1 only.
    pub(crate) fn body_wanted(&self, head: &RequestHead, buffered: &ReadBuf, out: &mut Vec<u8>) {
        if head.expect_continue && buffered.is_empty() {
            out.extend_from_slice(CONTINUE);
        }
    }

    /// True once the response being written is the last.
    pub(crate) fn is_closing(&self) -> bool {
        matches!(self.state, State::Closing(_))
    }

    /// The deadline for a request passed. Once any of it came (part of a head, or a head and
    /// part of its body) the client is answered `408` and the close lingers: the refusal, for
    /// its reason, is returned for the engine to count. A connection that sent nothing of its
    /// next request just closes (`None`).
    #[must_use = "a refusal is counted by the engine"]
    pub(crate) fn request_timed_out(
        &mut self,
        late: Late,
        out: &mut Vec<u8>,
        date: &mut DateLine,
    ) -> Option<Refusal> {
        let why = match late {
            Late::Idle => {
                self.state = State::Closing(Close::Now);
                return None;
            }
            Late::Head => Refusal::HeaderTimeout,
            Late::Body => Refusal::TooSlow,
        };
        self.error_response(408, None, out, date);
        Some(why)
    }

    /// Writes a complete error response that closes the connection, lingering: the client may
    /// still be sending the request that failed. Returns the refusal, for the engine to count.
    #[must_use = "a refusal is counted by the engine"]
    pub(crate) fn write_error(
        &mut self,
        status: u16,
        out: &mut Vec<u8>,
        date: &mut DateLine,
    ) -> Refusal {
        self.error_response(status, None, out, date);
        Refusal::Status(status)
    }

    /// `upgrade`: the protocol a 426 names, in its `Upgrade` field and with the `upgrade`
    /// connection option (RFC 9110 §15.5.22, §7.8).
    fn error_response(
        &mut self,
        status: u16,
        upgrade: Option<&str>,
        out: &mut Vec<u8>,
        date: &mut DateLine,
    ) {
        self.state = State::Closing(Close::Linger);
        let sent = error_page(out, status, upgrade, date);
        self.access.status(status);
        self.access.done(sent as u64);
    }
}

/// The plain-text page a server answers with itself, closing: `status` and its reason, `Date`,
/// `Retry-After` on a 503 (what is refused for want of room is worth trying again soon), and
/// for a 426 the protocol to upgrade to. Returns the body's length.
pub(crate) fn error_page(
    out: &mut Vec<u8>,
    status: u16,
    upgrade: Option<&str>,
    date: &mut DateLine,
) -> usize {
    let text = reason(status);
    status_line(out, status);
    date.append(out);
    if status == 503 {
        out.extend_from_slice(b"Retry-After: 1\r\n");
    }
    let connection = match upgrade {
        Some(protocol) => {
            field(out, "Upgrade", protocol);
            "upgrade, close"
        }
        None => "close",
    };
    let _ = write!(
        out,
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n{text}",
        text.len()
    );
    text.len()
}

/// `100 Continue`, sent when a body the client is holding back is first needed.
pub(crate) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Whether the request's `Upgrade` fields list `protocol`, the one the response switches to: a
/// server switches only to a protocol the client offered (RFC 9110 §7.8). An element matches by
/// its name and version, or by its name alone where the response names no version.
/// Compared as bytes, as the WebSocket handshake reads the field (a value with other bytes
/// still lists what it lists).
fn offered(head: &RequestHead, protocol: Option<&str>) -> bool {
    let Some(protocol) = protocol
        .map(|p| p.as_bytes().trim_ascii())
        .filter(|p| !p.is_empty())
    else {
        return false;
    };
    let versioned = protocol.contains(&b'/');
    let named = |element: &[u8]| {
        element.eq_ignore_ascii_case(protocol)
            || (!versioned
                && element.split(|&b| b == b'/').next().is_some_and(|name| {
                    name.len() < element.len() && name.eq_ignore_ascii_case(protocol)
                }))
    };
    head.values_of("upgrade")
        .flat_map(|v| v.split(|&b| b == b','))
        .any(|element| named(element.trim_ascii()))
}

/// Writes `name: value` unless the name is not a token-like visible string or the value holds
/// CR, LF or NUL (a field a handler built from input must not split the head). The checks fold
/// over every byte without an early exit so that they compile to SIMD: this runs for every field
/// of every response (it was 3% of the reactor's time on pipelined hello as a short-circuit loop).
fn field(out: &mut Vec<u8>, name: &str, value: &str) {
    let name_bad = name.bytes().fold(false, |bad, b| {
        bad | !(b'!'..=b'~').contains(&b) | (b == b':')
    });
    let value_bad = value
        .bytes()
        .fold(false, |bad, b| bad | (b == b'\r') | (b == b'\n') | (b == 0));
    let (name_ok, value_ok) = (!name.is_empty() && !name_bad, !value_bad);
    if name_ok && value_ok {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::response::Body;

    fn respond(req: &[u8], resp: Response) -> (String, State) {
        let mut buf = ReadBuf::new();
        buf.push(req);
        let mut head = RequestHead::default();
        let mut conn = Conn::default();
        let dec = conn.recv_head(&mut buf, &mut head, &Limits::default());
        assert!(matches!(dec, Ok(Some(_))), "{dec:?}");
        let mut out = Vec::new();
        conn.write_response(
            &head,
            Answer::Returned(resp),
            true,
            false,
            &mut out,
            &mut DateLine::new(),
        );
        (String::from_utf8_lossy(&out).into_owned(), conn.state())
    }

    fn without_date(s: &str) -> String {
        s.lines()
            .filter(|l| !l.starts_with("Date: "))
            .collect::<Vec<_>>()
            .join("\n")
    }

    const GET11: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";

    #[test]
    fn response_framing_table() {
        let long_404 = format!(
            "HTTP/1.1 404 Not Found\nContent-Length: 12345\n\n{}",
            "x".repeat(12345)
        );
        let cases: Vec<(&[u8], Response, &str, State)> = vec![
            (
                GET11,
                Response::text("hi"),
                "HTTP/1.1 200 OK\nContent-Type: text/plain; charset=utf-8\nContent-Length: 2\n\nhi",
                State::Head,
            ),
            (
                b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n",
                Response::text("hi"),
                "HTTP/1.1 200 OK\nContent-Type: text/plain; charset=utf-8\nContent-Length: 2\n",
                State::Head,
            ),
            (
                GET11,
                Response::new(204).with_body("x"),
                "HTTP/1.1 204 No Content\n",
                State::Head,
            ),
            (
                GET11,
                Response::new(304),
                "HTTP/1.1 304 Not Modified\n",
                State::Head,
            ),
            (
                GET11,
                Response::new(200).with_body(Body::chunks(std::iter::empty())),
                "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n",
                State::Head,
            ),
            (
                b"GET / HTTP/1.0\r\n\r\n",
                Response::new(200).with_body(Body::chunks(std::iter::empty())),
                "HTTP/1.1 200 OK\nConnection: close\n",
                State::Closing(Close::Now),
            ),
            (
                b"GET / HTTP/1.0\r\n\r\n",
                Response::text("hi"),
                "HTTP/1.1 200 OK\nContent-Type: text/plain; charset=utf-8\nContent-Length: 2\nConnection: close\n\nhi",
                State::Closing(Close::Now),
            ),
            (
                b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
                Response::new(200),
                "HTTP/1.1 200 OK\nContent-Length: 0\nConnection: keep-alive\n",
                State::Head,
            ),
            (
                b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
                Response::new(200),
                "HTTP/1.1 200 OK\nContent-Length: 0\nConnection: close\n",
                State::Closing(Close::Now),
            ),
            (
                GET11,
                Response::new(200).with_header("Connection", "close"),
                "HTTP/1.1 200 OK\nContent-Length: 0\nConnection: close\n",
                State::Closing(Close::Ended),
            ),
            (
                GET11,
                Response::new(426).with_header("Upgrade", "websocket"),
                "HTTP/1.1 426 Upgrade Required\nUpgrade: websocket\nContent-Length: 0\nConnection: upgrade\n",
                State::Head,
            ),
            (
                b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
                Response::new(426).with_header("Upgrade", "websocket"),
                "HTTP/1.1 426 Upgrade Required\nUpgrade: websocket\nContent-Length: 0\nConnection: upgrade, keep-alive\n",
                State::Head,
            ),
            (
                GET11,
                Response::new(426)
                    .with_header("Upgrade", "websocket")
                    .with_header("Connection", "close"),
                "HTTP/1.1 426 Upgrade Required\nUpgrade: websocket\nContent-Length: 0\nConnection: upgrade, close\n",
                State::Closing(Close::Ended),
            ),
            (
                GET11,
                Response::new(200)
                    .with_header("content-length", "99")
                    .with_header("X-Bad", "a\r\nInjected: 1")
                    .with_header("X-Nul", "a\0b")
                    .with_header("X Space", "1")
                    .with_header("X:Colon", "1")
                    .with_header("", "1")
                    .with_header("X-Ünicode", "1")
                    .with_header("X-Ok", "1")
                    .with_header("X-Tab", "a\tb ü~"),
                "HTTP/1.1 200 OK\nX-Ok: 1\nX-Tab: a\tb ü~\nContent-Length: 0\n",
                State::Head,
            ),
            (
                GET11,
                Response::new(404).with_body(vec![b'x'; 12345]),
                &long_404,
                State::Head,
            ),
            (
                GET11,
                Response::new(599),
                "HTTP/1.1 599 \nContent-Length: 0\n",
                State::Head,
            ),
            (
                GET11,
                Response::new(100),
                "HTTP/1.1 500 Internal Server Error\nContent-Length: 0\nConnection: close\n",
                State::Closing(Close::Ended),
            ),
        ];
        for (req, resp, want, state) in cases {
            let (got, st) = respond(req, resp);
            assert_eq!(without_date(&got), want, "{}", String::from_utf8_lossy(req));
            assert_eq!(st, state, "{}", String::from_utf8_lossy(req));
            assert!(got.contains("Date: ") && got.contains(" GMT\r\n"));
        }
    }

    #[test]
    fn unsynced_body_or_shutdown_closes() {
        let mut buf = ReadBuf::new();
        buf.push(GET11);
        let mut head = RequestHead::default();
        let mut conn = Conn::default();
        let _ = conn.recv_head(&mut buf, &mut head, &Limits::default());
        let mut out = Vec::new();
        conn.write_head(
            &head,
            &Response::new(200),
            false,
            false,
            &mut out,
            &mut DateLine::new(),
        );
        assert_eq!(conn.state(), State::Closing(Close::Linger));
        assert!(String::from_utf8_lossy(&out).contains("Connection: close\r\n"));
    }

    #[test]
    fn error_response_closes() {
        let mut conn = Conn::default();
        let mut out = Vec::new();
        assert_eq!(
            conn.write_error(431, &mut out, &mut DateLine::new()),
            Refusal::Status(431)
        );
        let s = String::from_utf8_lossy(&out);
        assert!(
            s.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{s}"
        );
        assert!(
            s.ends_with("Connection: close\r\n\r\nRequest Header Fields Too Large"),
            "{s}"
        );
        assert_eq!(conn.state(), State::Closing(Close::Linger));
    }
}
