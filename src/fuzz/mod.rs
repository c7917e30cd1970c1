//! The fuzz target's harness (feature `bench-internals`, not an API): whole exchanges driven
//! through the core's connection driver (what the engines run) over a scripted stream, with the
//! invariants checked on what it writes. `fuzz/` runs it under libFuzzer; `tests/fuzz_corpus.rs` replays the
//! committed corpus in `cargo test`.
//!
//! The input's first byte says how many bytes after it are the *script*; the rest is what the
//! client sends. Each script byte is one step: feed the next few bytes (arbitrary splits), let
//! the clock pass the current deadline, choose how the handler of the next request answers
//! (text, panic, chunks, a body that falls short, 204, an upgrade, `Connection: close`), or
//! begin a shutdown. When the script ends, the rest of the input is fed at once.
//!
//! Checked, not only "no panic": every answer the core writes is one well-framed response, in
//! the order of the requests (interim `100 Continue` only where the request asked for it on
//! HTTP/1.1); nothing is written after the driver shut the write side or aborted; the last
//! response before a close says so (or is close-delimited, cut short, or a `101`); a panic or a
//! shutdown costs the connection; a body never exceeds the body limit.

use std::io::Read as _;
use std::time::{Duration, Instant};

use crate::http::access::Logging;
use crate::http::answer::Answer;
use crate::http::date::DateLine;
use crate::http::driver::script::{Recorded, Scripted, Seen, harness_cx};
use crate::http::driver::{Action, Driver, Request, Rules};
use crate::http::pools::Pools;
use crate::http::refusal::Refusal;
use crate::http::request_head::{RequestHead, Version};
use crate::{Body, Limits, Response};

mod check;

pub use check::check_output;
use check::{Expected, check, normalized};

/// Runs one fuzz input; panics when an invariant breaks.
pub fn exchange(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let (script, input) = rest.split_at(usize::from(n).min(rest.len()));
    let run = Run::scripted(input, script, Shape::Loop);
    check(&run.io.out, &run.expected, run.awaiting());
    // The thread-pool engine drives the same connection another way (edge-triggered reads, no
    // handler code on the parker): what the client reads must not change.
    let parked = Run::scripted(input, script, Shape::Parker);
    assert_eq!(
        String::from_utf8_lossy(&normalized(&run.io.out)),
        String::from_utf8_lossy(&normalized(&parked.io.out)),
        "the engines' ways of driving answered differently"
    );
    // Where only the splits and the handlers' outcomes were scripted (no clock, deadline or
    // shutdown step), the same bytes fed at once must get the same answers: how the input was
    // cut must not change what it means.
    if script.iter().all(|&step| matches!(step & 7, 0..=3 | 5)) {
        let mut whole = Run::new(input, Shape::Loop);
        whole.outcomes.clone_from(&run.used);
        whole.feed_rest();
        assert_eq!(
            String::from_utf8_lossy(&normalized(&run.io.out)),
            String::from_utf8_lossy(&normalized(&whole.io.out)),
            "the same input, cut differently, was answered differently"
        );
    }
}

/// How the handler of the next request answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// `200` with the request body echoed (a length).
    Echo,
    Panic,
    /// `200`, chunked (or close-delimited to HTTP/1.0).
    Chunks,
    /// A sized body that falls short: the response is cut, the connection aborted.
    Short,
    NoContent,
    Upgrade,
    /// `200` with `Connection: close`.
    Close,
}

const OUTCOMES: [Outcome; 7] = [
    Outcome::Echo,
    Outcome::Panic,
    Outcome::Chunks,
    Outcome::Short,
    Outcome::NoContent,
    Outcome::Upgrade,
    Outcome::Close,
];

/// How the engine drives the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// An event loop: level-triggered, handlers and body producers run on it.
    Loop,
    /// The thread-pool engine: a parker that reads edge-triggered and runs no handler code, a
    /// worker for each request (and each streamed body's piece), which drives on until the
    /// connection waits.
    Parker,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Open,
    /// The driver closed the connection or handed it over: nothing more is fed.
    Closed,
}

struct Run<'a> {
    /// What the client has still to send.
    input: &'a [u8],
    shape: Shape,
    rules: Rules,
    driver: Driver,
    io: Scripted,
    pools: Pools,
    tally: Recorded,
    expected: Vec<Expected>,
    /// How each request's handler answers, in order (past the end: echo).
    outcomes: Vec<Outcome>,
    /// Requests run so far.
    answered: usize,
    /// The outcome each run request had, in order.
    used: Vec<Outcome>,
    /// Refusals already turned into expected responses.
    refusals_seen: usize,
    closing: bool,
    now: Instant,
    date: DateLine,
    /// The deadline of the driver's last wait.
    until: Option<Instant>,
    flow: Flow,
}

/// Small limits, so that inputs of a few kilobytes reach them.
fn limits() -> Limits {
    Limits {
        max_target_bytes: 256,
        max_head_bytes: 1024,
        max_headers: 16,
        max_body_bytes: 2048,
        ..Limits::default()
    }
}

impl<'a> Run<'a> {
    /// A run through a whole script, then the rest of the input at once.
    fn scripted(input: &'a [u8], script: &[u8], shape: Shape) -> Self {
        let mut run = Run::new(input, shape);
        for &step in script {
            if run.step(step) == Flow::Closed {
                break;
            }
        }
        run.feed_rest();
        run
    }

    fn new(input: &'a [u8], shape: Shape) -> Self {
        let now = Instant::now();
        // The engines' defaults, with the fuzzer's limits.
        let rules = crate::settings::Settings {
            limits: limits(),
            ..Default::default()
        }
        .rules();
        let driver = Driver::new(Logging::Off, None, now, &rules);
        Run {
            input,
            shape,
            until: driver.first_deadline(),
            rules,
            driver,
            io: Scripted::default(),
            pools: Pools::default(),
            tally: Recorded::default(),
            expected: Vec::new(),
            outcomes: Vec::new(),
            answered: 0,
            used: Vec::new(),
            refusals_seen: 0,
            closing: false,
            now,
            date: DateLine::new(),
            flow: Flow::Open,
        }
    }

    fn step(&mut self, step: u8) -> Flow {
        let arg = usize::from(step >> 3);
        match step & 7 {
            0..=2 => self.feed(arg + 1),
            3 => self.feed(arg * 64),
            4 => {
                if let Some(until) = self.until {
                    self.now = self.now.max(until);
                    self.expire();
                }
            }
            5 => self.outcomes.push(OUTCOMES[arg % OUTCOMES.len()]),
            6 => self.closing = true,
            _ => {
                self.now += Duration::from_millis(arg as u64 * 100);
                if self.until.is_some_and(|until| until <= self.now) {
                    self.expire();
                }
            }
        }
        self.flow
    }

    /// The client sends up to `n` more bytes; the stream becomes readable.
    fn feed(&mut self, n: usize) {
        if self.flow == Flow::Closed {
            return;
        }
        let k = n.min(self.input.len());
        self.io.send(&self.input[..k]);
        self.input = &self.input[k..];
        self.turn();
    }

    /// The client sends the rest of its bytes, unless the connection closed.
    fn feed_rest(&mut self) {
        let rest = self.input.len();
        self.feed(rest);
    }

    /// One turn of the engine: drive until the driver waits or closes, running each request.
    fn turn(&mut self) {
        // On the thread-pool engine a worker has the connection from its first request on.
        let mut worker = false;
        loop {
            let cx = harness_cx!(self, self.closing);
            let mut cx = match (self.shape, worker) {
                (Shape::Loop, _) => cx,
                (Shape::Parker, false) => cx.edge_triggered().without_producers(),
                (Shape::Parker, true) => cx.edge_triggered(),
            };
            let action = self.driver.drive(&mut self.io, &mut cx);
            worker |= matches!(action, Action::Run(_) | Action::Produce);
            self.refused();
            match action {
                Action::Run(request) => self.run(request),
                Action::Wait { until, .. } => {
                    self.until = until;
                    return;
                }
                Action::Yield | Action::Produce => {}
                Action::Close => return self.close(false),
                Action::Switch(_) => return self.close(true),
            }
        }
    }

    /// The deadline passed: the driver says what it means (drive on: to write the `408` of a
    /// request it refused as late, or output that waited for its client).
    fn expire(&mut self) {
        if self.flow == Flow::Closed {
            return;
        }
        let mut cx = harness_cx!(self, false);
        let answers = self.driver.expire(&mut self.io, &mut cx);
        let refusals = self.tally.refusals.borrow().len();
        if answers {
            if refusals > self.refusals_seen {
                self.expect_error(408);
            }
            self.refusals_seen = refusals;
            self.turn();
        } else {
            self.refusals_seen = refusals;
            self.close(false);
        }
    }

    /// Requests refused while the driver ran: each is answered with an error, the last.
    fn refused(&mut self) {
        let refusals = self.tally.refusals.borrow()[self.refusals_seen..].to_vec();
        self.refusals_seen += refusals.len();
        for why in refusals {
            match why {
                Refusal::Status(status) => self.expect_error(status),
                other => panic!("refused as {other:?} with no deadline passed"),
            }
        }
        self.mark_last();
    }

    /// The request whose head was read and not yet run (its body is awaited), if any.
    fn awaited(&self) -> Option<Seen> {
        let requests = self.tally.requests.borrow();
        (requests.len() > self.answered).then(|| requests[requests.len() - 1])
    }

    /// 100 Continue may end the output: a request's body is awaited after it.
    fn awaiting(&self) -> bool {
        self.flow == Flow::Open && self.awaited().is_some_and(interim_allowed)
    }

    /// Runs the "handler" as the script chose, and gives its answer to the driver.
    fn run(
        &mut self,
        Request {
            head,
            body: mut received,
        }: Request,
    ) {
        let mut body = Vec::new();
        if let Err(e) = received.read_to_end(&mut body) {
            panic!("a received body cannot be read: {e}");
        }
        assert!(
            body.len() as u64 <= self.rules.limits.max_body_bytes,
            "a body of {} bytes",
            body.len()
        );
        let seen = self.tally.requests.borrow()[self.answered];
        let outcome = self
            .outcomes
            .get(self.answered)
            .copied()
            .unwrap_or(Outcome::Echo);
        self.answered += 1;
        self.used.push(outcome);
        // What the client must read back, where the outcome fixes it.
        let given = match outcome {
            Outcome::Echo => Some(body.clone()),
            Outcome::Chunks => Some([&b"ab"[..], &body].concat()),
            Outcome::Close => Some(b"bye".to_vec()),
            Outcome::Panic | Outcome::NoContent => Some(Vec::new()),
            Outcome::Short | Outcome::Upgrade => None,
        };
        let status = match outcome {
            Outcome::Panic => 500,
            Outcome::NoContent => 204,
            Outcome::Upgrade => 101,
            _ => 200,
        };
        self.expected.push(Expected {
            status,
            head_request: seen.is_head,
            interim: interim_allowed(seen),
            may_be_cut: outcome == Outcome::Short && !seen.is_head,
            last: false,
            http10: seen.version == Version::Http10,
            body: given.filter(|_| !seen.is_head),
        });
        let answer = answer(outcome, body, &head);
        let mut cx = harness_cx!(self, self.closing);
        self.driver.answer(head, answer, cx.now, &mut cx);
        // An upgrade the request does not allow is refused with an error instead.
        let refusals = self.tally.refusals.borrow()[self.refusals_seen..].to_vec();
        self.refusals_seen += refusals.len();
        if let (Some(Refusal::Status(status)), Some(expected)) =
            (refusals.first(), self.expected.last_mut())
        {
            expected.status = *status;
            expected.head_request = false;
            expected.may_be_cut = false;
            expected.body = None;
        }
        self.mark_last();
        // The core's rules for the connection: a panic costs it, and so does shutdown.
        assert!(
            self.driver.is_closing() || !(outcome == Outcome::Panic || self.closing),
            "kept alive after {outcome:?} (shutting down: {})",
            self.closing
        );
    }

    /// Once the driver says the response under way is the last, the client must read so.
    fn mark_last(&mut self) {
        if self.driver.is_closing() {
            if let Some(expected) = self.expected.last_mut() {
                expected.last = true;
            }
        }
    }

    /// An error response answers the request under way (after its 100 Continue, if one was
    /// due), or none: a head that failed.
    fn expect_error(&mut self, status: u16) {
        let interim = self.awaited().is_some_and(interim_allowed);
        self.expected.push(Expected {
            status,
            head_request: false,
            interim,
            may_be_cut: false,
            last: true,
            http10: false,
            body: None,
        });
    }

    /// The driver closed the connection (`handed`: or handed it over): nothing more is read.
    /// At shutdown one idle after an exchange closes too.
    fn close(&mut self, handed: bool) {
        let idle_at_shutdown = self.closing && self.answered > 0 && self.awaited().is_none();
        assert!(
            self.driver.is_closing()
                || handed
                || idle_at_shutdown
                || self
                    .expected
                    .last()
                    .is_some_and(|e| e.status == 408 || e.last),
            "closed while the core keeps the connection"
        );
        self.flow = Flow::Closed;
    }
}

/// Whether `100 Continue` may come before the answer to this request.
fn interim_allowed(seen: Seen) -> bool {
    seen.expect_continue && seen.version == Version::Http11
}

/// The response each outcome gives.
fn answer(outcome: Outcome, body: Vec<u8>, head: &RequestHead) -> Answer {
    match outcome {
        Outcome::Panic => Answer::Panicked,
        Outcome::Echo => Answer::Returned(Response::text(body)),
        Outcome::Chunks => Answer::Returned(Response::new(200).with_body(Body::chunks(
            vec![b"ab".to_vec(), Vec::new(), body].into_iter(),
        ))),
        Outcome::Short => {
            Answer::Returned(Response::new(200).with_body(Body::sized_reader(&b"abc"[..], 10)))
        }
        Outcome::NoContent => Answer::Returned(Response::new(204).with_body("ignored")),
        // To the protocol the request offers first, if any (a switch goes to one it lists).
        Outcome::Upgrade => {
            let offered = head
                .header("upgrade")
                .and_then(|v| v.split(',').next())
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .unwrap_or("x-fuzz")
                .to_owned();
            Answer::Returned(Response::upgrade(&offered, |_| {}))
        }
        Outcome::Close => {
            Answer::Returned(Response::text("bye").with_header("Connection", "close"))
        }
    }
}
