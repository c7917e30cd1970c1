//! What a handler's answer to a request comes to: the answer as the engine reports it
//! ([`Answer`]), and what is left to do once the connection wrote its response head ([`After`]).

use crate::http::framing::Encoder;
use crate::http::panics::Panics;
use crate::http::refusal::Refusal;
use crate::http::response::{BodyKind, Response};
use crate::http::session::Takeover;
use crate::upgraded::Upgraded;

/// A handler's answer to a request, as the engine that ran it reports it. What a panic means
/// for the connection (a `500`, then close) is the core's to decide, in
/// [`Conn::write_response`](crate::http::conn::Conn::write_response).
pub(crate) enum Answer {
    /// The handler returned this response.
    Returned(Response),
    /// The handler panicked (the engine caught it, counted and logged it).
    Panicked,
}

impl Answer {
    /// Drops an answer that is not written (its connection went away while the handler ran,
    /// or its request's body failed): its body is handler code, dropped with a panic in its
    /// `Drop` caught and counted in `panics`.
    pub(crate) fn drop_caught(self, panics: &Panics) {
        if let Answer::Returned(resp) = self {
            panics.drop_caught(resp);
        }
    }
}

/// What is left to do after a response head (and any full body) was written.
pub(crate) enum After {
    /// Nothing: the response is complete.
    Done,
    /// The response could not be given as asked: an error response was written instead, and
    /// the connection closes. The engine counts the refusal.
    Refused(Refusal),
    /// A body that is never sent (HEAD, 304), to drop where handler code may run: a handler's
    /// reader or iterator goes unread. The response is complete.
    Unsent(BodyKind),
    /// The switch the response asked for could not be made (an upgrade the request does not
    /// allow, a session at shutdown): an error response was written instead, and the
    /// connection closes. The engine counts the refusal and drops the switch (the handler's
    /// callback or session: handler code) where handler code may run.
    Declined(Refusal, BodyKind),
    /// A streamed body, to write through its encoder as the socket takes it.
    Stream(Encoder, BodyKind),
    /// Once the head is out, a session takes the connection over (an event stream after its
    /// head, a WebSocket after its 101): the engine starts it with the encoder of its output.
    Session(Encoder, Box<dyn Takeover>),
    /// Once the 101 is out, the connection leaves the engine for a thread running this.
    Detach(Box<dyn FnOnce(Upgraded) + Send>),
}
