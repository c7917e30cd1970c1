//! The fuzz target's harness (feature `bench-internals`, not an API): whole exchanges driven
//! through the core the way the reactor drives a connection, with the invariants checked on
//! what it writes. `fuzz/` runs it under libFuzzer; `tests/fuzz_corpus.rs` replays the
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
//! HTTP/1.1); nothing is written after the core said close; the last response before a close
//! says so (or is close-delimited, cut short, or a `101`); the read buffer never grows past
//! the head limit and a body never past the body limit.

use std::time::{Duration, Instant};

use crate::http::body::Decoder;
use crate::http::buf::{INITIAL_READ_BUF, ReadBuf};
use crate::http::conn::{After, Answer, Conn, Late};
use crate::http::due::HeadDue;
use crate::http::refusal::Refusal;
use crate::http::request::{RequestHead, Version};
use crate::http::stream::Streaming;
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
    let mut run = Run::new(input);
    for &step in script {
        if run.step(step) == Flow::Closed {
            break;
        }
    }
    run.feed_rest();
    // A body still awaited may have had its 100 Continue already.
    let awaiting = matches!(run.reading, Reading::Body { interim: true, .. });
    check(&run.out, &run.expected, awaiting);
    // Where only the splits and the handlers' outcomes were scripted (no clock, deadline or
    // shutdown step), the same bytes fed at once must get the same answers: how the input was
    // cut must not change what it means.
    if script.iter().all(|&step| matches!(step & 7, 0..=3 | 5)) {
        let mut whole = Run::new(input);
        whole.outcomes.clone_from(&run.used);
        whole.feed_rest();
        if !run.full_buffer && !whole.full_buffer {
            assert_eq!(
                String::from_utf8_lossy(&normalized(&run.out)),
                String::from_utf8_lossy(&normalized(&whole.out)),
                "the same input, cut differently, was answered differently"
            );
        }
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Open,
    /// The core said close (or the connection was handed over): nothing more is fed.
    Closed,
}

/// Where the connection's current request stands.
enum Reading {
    Head,
    Body {
        decoder: Decoder,
        body: Vec<u8>,
        interim: bool,
    },
}

struct Run<'a> {
    input: &'a [u8],
    limits: Limits,
    conn: Conn,
    head: RequestHead,
    buf: ReadBuf,
    reading: Reading,
    out: Vec<u8>,
    expected: Vec<Expected>,
    /// How each request's handler answers, in order (past the end: echo).
    outcomes: Vec<Outcome>,
    /// Requests answered so far.
    answered: usize,
    /// The outcome each answered request had, in order.
    used: Vec<Outcome>,
    /// A body's framing outgrew the read buffer and the engine would close without answering
    /// (the one way the cut of the input may change the outcome).
    full_buffer: bool,
    closing: bool,
    now: Instant,
    due: HeadDue,
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

const HEADER_READ: Duration = Duration::from_secs(10);
const IDLE: Duration = Duration::from_secs(60);

impl<'a> Run<'a> {
    fn new(input: &'a [u8]) -> Self {
        let now = Instant::now();
        Run {
            input,
            limits: limits(),
            conn: Conn::default(),
            head: RequestHead::default(),
            buf: ReadBuf::new(),
            reading: Reading::Head,
            out: Vec::new(),
            expected: Vec::new(),
            outcomes: Vec::new(),
            answered: 0,
            used: Vec::new(),
            full_buffer: false,
            closing: false,
            now,
            due: HeadDue::first(now, HEADER_READ),
            flow: Flow::Open,
        }
    }

    fn step(&mut self, step: u8) -> Flow {
        let arg = usize::from(step >> 3);
        match step & 7 {
            0..=2 => self.feed(arg + 1),
            3 => self.feed(arg * 64),
            4 => self.deadline_passes(),
            5 => self.outcomes.push(OUTCOMES[arg % OUTCOMES.len()]),
            6 => self.closing = true,
            _ => self.now += Duration::from_millis(arg as u64 * 100),
        }
        self.flow
    }

    /// The client sends up to `n` more bytes; the core takes what the engine would read.
    fn feed(&mut self, mut n: usize) {
        while n > 0 && self.flow == Flow::Open && !self.input.is_empty() {
            let cap = match self.reading {
                Reading::Head => self.limits.max_head_bytes,
                Reading::Body { .. } => 0,
            };
            let head_begins = self.buf.is_empty() && matches!(self.reading, Reading::Head);
            let reading_head = matches!(self.reading, Reading::Head);
            let spare = self.buf.spare(cap);
            if spare.is_empty() {
                // The parser answers 431 before a head fills the buffer at its cap.
                assert!(
                    !reading_head,
                    "read buffer full at {} bytes",
                    self.buf.len()
                );
                // A body whose framing the decoder cannot take in a whole buffer (a chunk line
                // longer than it): the reactor closes, as here.
                self.full_buffer = true;
                self.flow = Flow::Closed;
                return;
            }
            let k = spare.len().min(n).min(self.input.len());
            spare[..k].copy_from_slice(&self.input[..k]);
            self.buf.filled_by(k);
            self.input = &self.input[k..];
            n -= k;
            assert!(
                self.buf.len() <= self.limits.max_head_bytes.max(INITIAL_READ_BUF),
                "read buffer grew to {}",
                self.buf.len()
            );
            if head_begins {
                self.due = self.due.bytes_came(self.now, HEADER_READ);
            }
            self.process();
        }
    }

    /// The client sends the rest of its bytes, unless the connection closed.
    fn feed_rest(&mut self) {
        if self.flow == Flow::Open {
            let rest = self.input.len();
            self.feed(rest);
        }
    }

    /// Works through what is buffered: heads, bodies, answers.
    fn process(&mut self) {
        while self.flow == Flow::Open && !self.buf.is_empty() {
            match &mut self.reading {
                Reading::Head => {
                    match self
                        .conn
                        .recv_head(&mut self.buf, &mut self.head, &self.limits)
                    {
                        Ok(None) => return,
                        Err(e) => {
                            let _ = self.conn.write_error(e.status(), &mut self.out);
                            self.expect_error(e.status());
                            return self.close();
                        }
                        Ok(Some(decoder)) if decoder.is_done() => self.answer(Vec::new(), false),
                        Ok(Some(decoder)) => {
                            let before = self.out.len();
                            self.conn.body_wanted(&self.head, &self.buf, &mut self.out);
                            let interim = self.out.len() > before;
                            assert!(
                                !interim
                                    || (self.head.expect_continue
                                        && self.head.version == Version::Http11),
                                "100 Continue without an HTTP/1.1 expectation"
                            );
                            self.reading = Reading::Body {
                                decoder,
                                body: Vec::new(),
                                interim,
                            };
                        }
                    }
                }
                Reading::Body {
                    decoder,
                    body,
                    interim,
                } => {
                    let input = self.buf.filled();
                    match decoder.decode(input, usize::MAX) {
                        Err(e) => {
                            let _ = self.conn.write_error(e.status(), &mut self.out);
                            self.expect_error(e.status());
                            return self.close();
                        }
                        Ok(d) => {
                            body.extend_from_slice(&input[d.data]);
                            self.buf.consume(d.consumed);
                            assert!(body.len() as u64 <= self.limits.max_body_bytes);
                            if decoder.is_done() {
                                let (body, interim) = (std::mem::take(body), *interim);
                                self.reading = Reading::Head;
                                self.answer(body, interim);
                            } else if d.consumed == 0 {
                                return;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Runs the "handler" as the script chose, and writes its answer through the core.
    fn answer(&mut self, body: Vec<u8>, interim: bool) {
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
        let answer = match outcome {
            Outcome::Panic => Answer::Panicked,
            Outcome::Echo => Answer::Returned(Response::text(body)),
            Outcome::Chunks => Answer::Returned(Response::new(200).with_body(Body::chunks(
                vec![b"ab".to_vec(), Vec::new(), body].into_iter(),
            ))),
            Outcome::Short => {
                Answer::Returned(Response::new(200).with_body(Body::sized_reader(&b"abc"[..], 10)))
            }
            Outcome::NoContent => Answer::Returned(Response::new(204).with_body("ignored")),
            Outcome::Upgrade => Answer::Returned(Response::upgrade("x-fuzz", |_| {})),
            Outcome::Close => {
                Answer::Returned(Response::text("bye").with_header("Connection", "close"))
            }
        };
        let status = match outcome {
            Outcome::Panic => 500,
            Outcome::NoContent => 204,
            Outcome::Upgrade => 101,
            _ => 200,
        };
        let head_request = self.head.is_head();
        let after = self
            .conn
            .write_response(&self.head, answer, true, self.closing, &mut self.out);
        let http10 = self.head.version == Version::Http10;
        let mut expected = Expected {
            status,
            head_request,
            interim,
            may_be_cut: false,
            last: false,
            http10,
            body: given.filter(|_| !head_request),
        };
        match after {
            After::Done => {}
            After::Refused(why) => {
                expected.status = match why {
                    Refusal::Status(s) => s,
                    other => panic!("an upgrade refused as {other:?}"),
                };
                expected.head_request = false;
                expected.body = None;
            }
            After::Stream(encoder, kind) => {
                let mut streaming = Streaming::new(encoder, kind);
                let complete = loop {
                    if let Some(complete) = streaming.produce(&mut self.out) {
                        break complete;
                    }
                };
                self.conn.streamed(streaming.sent());
                if !complete {
                    self.conn.abort();
                    expected.may_be_cut = true;
                }
            }
            After::Session(..) => panic!("no session was asked for"),
            After::Detach(_) => {
                self.expected.push(expected);
                return self.close();
            }
        }
        expected.last = self.conn.is_closing();
        // The core's rules for the connection: a panic costs it, and so does shutdown.
        assert!(
            expected.last || !(outcome == Outcome::Panic || self.closing),
            "kept alive after {outcome:?} (shutting down: {})",
            self.closing
        );
        self.expected.push(expected);
        if self.conn.is_closing() {
            return self.close();
        }
        self.due = HeadDue::after_response(self.now, !self.buf.is_empty(), HEADER_READ, IDLE);
    }

    /// The clock passes the deadline the engine would wait for; the core says what it means.
    fn deadline_passes(&mut self) {
        if self.flow == Flow::Closed {
            return;
        }
        let late = match (&self.reading, self.buf.is_empty(), self.due) {
            (Reading::Body { .. }, _, _) => Late::Body,
            (Reading::Head, true, _) => Late::Idle,
            (Reading::Head, false, _) => Late::Head,
        };
        if let Some(until) = self.due.until() {
            self.now = self.now.max(until);
        }
        if self.conn.request_timed_out(late, &mut self.out).is_some() {
            self.expect_error(408);
        }
        self.close();
    }

    /// An error response answers the request under way, after its 100 Continue if one went.
    fn expect_error(&mut self, status: u16) {
        let interim = matches!(self.reading, Reading::Body { interim: true, .. });
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

    /// The engine closes: nothing more is read or written.
    fn close(&mut self) {
        assert!(
            self.conn.is_closing() || self.expected.last().is_some_and(|e| e.status == 101),
            "closed while the core keeps the connection"
        );
        self.flow = Flow::Closed;
    }
}
