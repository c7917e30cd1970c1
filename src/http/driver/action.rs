//! What the connection driver tells its engine: the [`Action`] to carry out, a [`Request`] to
//! run, a [`Handover`], and where the connection stands ([`Stage`]).

use std::time::Instant;

use crate::http::buf::ReadBuf;
use crate::http::framing::Encoder;
use crate::http::request_head::RequestHead;
use crate::http::session::Takeover;
use crate::http::spool::Received;
use crate::upgraded::Upgraded;

/// Where a connection stands, for the engine's live counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Nothing of its next request has come.
    Waiting,
    /// Part of a request head has come.
    Reading,
    /// A request is being served: its body read, its handler run, its response written.
    Writing,
    /// A lingering close.
    Closing,
}

/// A request ready for its handler: its head and its whole body.
pub(crate) struct Request {
    pub(crate) head: Box<RequestHead>,
    pub(crate) body: Received,
}

/// What the engine does next.
pub(crate) enum Action {
    /// Run this request's handler, then give its answer to [`Driver::answer`]. An engine that
    /// runs it elsewhere drives the connection again at once: earlier responses go out while
    /// the handler runs.
    Run(Request),
    /// Wait for what `on` says until the deadline, then drive it again, or call
    /// [`Driver::expire`] once the deadline passed.
    Wait { on: WaitFor, until: Option<Instant> },
    /// Work is left after the turn's budget: drive it again once other connections had a turn.
    Yield,
    /// A streamed body's next piece is due: produce it where handler code may run, then drive
    /// on (only with [`Cx::files_only`] or [`Cx::without_producers`]).
    Produce,
    /// The connection is over: close it (a lingering close or an abort was carried out).
    Close,
    /// The response that hands the connection over is out: the engine gives it on.
    Switch(Handover),
}

/// What a connection waits for from its stream. Whatever it is, a wake-up (a handler's answer
/// back, a pool's work back) or the deadline also ends the wait, and a hang-up is reported.
///
/// (Its discriminants are the two bits a registration is made of, so that reading them costs
/// the hot path nothing over the two `bool`s this replaced.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum WaitFor {
    /// Nothing from the stream but its hang-up: a wake-up or the deadline (a registration may
    /// watch input for the hang-up; the server engine's does).
    Wake = 0,
    /// Input: a request, a body, a lingering close's drain.
    Input = 1,
    /// The stream taking output, and nothing else (input sent meanwhile must not wake it).
    Output = 2,
    /// Input, and the stream taking output its transport holds back (a TLS flight).
    Both = 3,
}

impl WaitFor {
    /// Input, and output too where the transport holds some back.
    pub(crate) fn input_and_held_output(held: bool) -> WaitFor {
        match held {
            true => WaitFor::Both,
            false => WaitFor::Input,
        }
    }

    /// Whether the stream's input is watched.
    #[inline]
    pub(crate) fn reads(self) -> bool {
        self as u8 & 1 != 0
    }

    /// Whether the stream's room for output is watched.
    #[inline]
    pub(crate) fn writes(self) -> bool {
        self as u8 & 2 != 0
    }
}

/// What takes a connection over, with the bytes read past its request.
pub(crate) enum Handover {
    /// A session (a WebSocket, an event stream): the engine starts it with the encoder of its
    /// output. `input`: bytes already read (`None` when there are none), a pooled buffer.
    Session {
        takeover: Box<dyn Takeover>,
        encoder: Encoder,
        input: Option<ReadBuf>,
    },
    /// A generic upgrade: a thread of its own runs this.
    Detach {
        then: Box<dyn FnOnce(Upgraded) + Send>,
        leftover: Vec<u8>,
    },
}

#[cfg(test)]
mod tests {
    use super::WaitFor;

    #[test]
    fn what_each_wait_watches() {
        let watched = |on: WaitFor| (on.reads(), on.writes());
        assert_eq!(watched(WaitFor::Wake), (false, false));
        assert_eq!(watched(WaitFor::Input), (true, false));
        assert_eq!(watched(WaitFor::Output), (false, true));
        assert_eq!(watched(WaitFor::Both), (true, true));
        assert_eq!(WaitFor::input_and_held_output(false), WaitFor::Input);
        assert_eq!(WaitFor::input_and_held_output(true), WaitFor::Both);
    }
}
