//! Entry points into the sans-I/O core for the criterion benches. Not a stable API.

use std::time::Instant;

use crate::handler::answer;
use crate::http::access::Logging;
use crate::http::body::Decoder;
use crate::http::date::DateLine;
use crate::http::driver::script::Scripted;
use crate::http::driver::{self, Action, Cx, Driver, Rules};
use crate::http::parse::parse_head;
use crate::http::pools::Pools;
use crate::http::request_head::{BodyFraming, RequestHead};
use crate::stats::Counters;
use crate::{Handler, Limits, Request, Response};

/// Parses request heads with reused storage, as an engine does.
#[derive(Default)]
pub struct HeadParser {
    head: RequestHead,
    limits: Limits,
}

impl HeadParser {
    /// Parses one head; its length when complete.
    pub fn parse(&mut self, bytes: &[u8]) -> Option<usize> {
        parse_head(bytes, &self.limits, &mut self.head)
            .ok()
            .flatten()
    }
}

/// One parsed request with no body, handed to a handler as an engine hands it, without a
/// connection: what a handler call costs alone (the router bench).
pub struct OneRequest {
    head: RequestHead,
}

impl OneRequest {
    /// The request of `bytes`, one whole head; `None` when it does not parse.
    pub fn new(bytes: &[u8]) -> Option<OneRequest> {
        let mut head = RequestHead::default();
        parse_head(bytes, &Limits::default(), &mut head)
            .ok()
            .flatten()?;
        Some(OneRequest { head })
    }

    /// Runs `handler` on the request.
    pub fn call(&self, handler: &impl Handler) -> Response {
        let mut body: &[u8] = b"";
        handler.handle(&mut Request::new(&self.head, &mut body, None))
    }
}

/// Decodes a whole chunked body; payload bytes seen.
pub fn decode_chunked(bytes: &[u8]) -> usize {
    let mut dec = Decoder::new(BodyFraming::Chunked, u64::MAX);
    let (mut pos, mut payload) = (0, 0);
    while pos < bytes.len() && !dec.is_done() {
        match dec.decode(&bytes[pos..], usize::MAX) {
            Ok(d) if d.consumed > 0 => {
                pos += d.consumed;
                payload += d.data.len();
            }
            _ => break,
        }
    }
    payload
}

/// One connection's core driver with its buffers, over an in-memory stream fed whole byte
/// batches: what the engines run, without sockets.
pub struct Pipeline {
    driver: Driver,
    io: Scripted,
    pools: Pools,
    rules: Rules,
    counters: Counters,
    date: DateLine,
}

impl Default for Pipeline {
    fn default() -> Self {
        // The engines' defaults, without the minimum rates (a script's clock does not move).
        let rules = crate::settings::Settings {
            min_request_body_rate: None,
            min_response_rate: None,
            ..Default::default()
        }
        .rules();
        Pipeline {
            driver: Driver::new(Logging::Off, None, Instant::now(), &rules),
            io: Scripted::default(),
            pools: Pools::default(),
            rules,
            counters: Counters::default(),
            date: DateLine::new(),
        }
    }
}

impl Pipeline {
    /// Feeds `input`, runs `handler` on every request it completes and writes the responses to
    /// [`Pipeline::out`]; the number answered.
    pub fn serve(&mut self, input: &[u8], handler: &impl Handler) -> usize {
        self.io.out.clear();
        self.io.send(input);
        let mut cx = Cx::new(
            &self.rules,
            &mut self.pools,
            &self.counters,
            Instant::now(),
            &mut self.date,
            false,
        );
        let mut answered = 0;
        loop {
            match self.driver.drive(&mut self.io, &mut cx) {
                Action::Run(driver::Request { head, mut body }) => {
                    let given = answer(handler, &head, &mut body, None, &self.counters);
                    body.release();
                    self.driver.answer(head, given, cx.now, &mut cx);
                    answered += 1;
                }
                Action::Yield | Action::Produce => cx = cx.next_turn(),
                Action::Wait { .. } | Action::Close | Action::Switch(_) => return answered,
            }
        }
    }

    /// The response bytes of the last [`Pipeline::serve`].
    pub fn out(&self) -> &[u8] {
        &self.io.out
    }
}
