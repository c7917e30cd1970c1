//! The driver with no socket: (bytes in, time, room to write) → actions, one decision each.

use std::io::Read as _;
use std::time::{Duration, Instant};

use super::cx::REQUEST_BUDGET;
use super::script::{Recorded, Scripted, harness_cx};
use super::*;
use crate::http::access::Logging;
use crate::http::date::DateLine;
use crate::http::linger::LINGER_TIME;
use crate::http::refusal::Refusal;
use crate::http::response::BodyKind;
use crate::http::spool::Received;
use crate::limits::Limits;
use crate::{Body, Response};

const HEAD: Duration = Duration::from_secs(10);
const IDLE: Duration = Duration::from_secs(60);
const RATE: MinRate = MinRate::new(100, Duration::from_secs(5));

fn rules() -> Rules {
    Rules {
        limits: Limits::default(),
        header_read: HEAD,
        idle: IDLE,
        body_rate: Some(RATE),
        response_rate: Some(RATE),
        streams: None,
        relay: Default::default(),
    }
}

/// A driver, its stream, the engine's pools and counts, and a clock the test moves.
struct Bench {
    driver: Driver,
    io: Scripted,
    pools: Pools,
    tally: Recorded,
    rules: Rules,
    t0: Instant,
    now: Instant,
    date: DateLine,
    closing: bool,
}

impl Bench {
    fn new() -> Self {
        let t0 = Instant::now();
        Bench {
            driver: Driver::new(Logging::Off, None, t0, &rules()),
            io: Scripted::default(),
            pools: Pools::default(),
            tally: Recorded::default(),
            rules: rules(),
            t0,
            now: t0,
            date: DateLine::new(),
            closing: false,
        }
    }

    fn at(&mut self, secs: u64) {
        self.now = self.t0 + Duration::from_secs(secs);
    }

    /// One turn: drives until the driver waits, yields or closes, answering each request the
    /// way `answer` says. Returns the requests run and the action that ended the turn.
    fn turn(&mut self, mut answer: impl FnMut(&RequestHead, &[u8]) -> Answer) -> (usize, Action) {
        let mut cx = harness_cx!(self, self.closing);
        let mut ran = 0;
        loop {
            match self.driver.drive(&mut self.io, &mut cx) {
                Action::Run(Request { head, mut body }) => {
                    ran += 1;
                    let mut bytes = Vec::new();
                    let answered = match body.read_to_end(&mut bytes) {
                        Ok(_) => answer(&head, &bytes),
                        Err(e) => panic!("a received body cannot be read: {e}"),
                    };
                    self.driver.answer(head, answered, cx.now, &mut cx);
                }
                other => return (ran, other),
            }
        }
    }

    fn echo(&mut self) -> (usize, Action) {
        self.turn(|_, body| Answer::Returned(Response::text(body.to_vec())))
    }

    fn expire(&mut self) -> bool {
        let mut cx = harness_cx!(self, false);
        self.driver.expire(&mut self.io, &mut cx)
    }

    /// The deadline the driver waited for passed: it is asked, and driven when it says so, as
    /// the engines do. What it came to.
    fn expire_and_drive(&mut self) -> String {
        match self.expire() {
            true => shown(&self.echo().1),
            false => "close".into(),
        }
    }

    /// Drives until the driver waits or closes, answering each request with `respond`,
    /// producing streamed pieces here and driving on after a yield.
    fn produce_all(&mut self, mut respond: impl FnMut() -> Response) -> Action {
        let mut cx = harness_cx!(self, false);
        let now = cx.now;
        loop {
            match self.driver.drive(&mut self.io, &mut cx) {
                Action::Run(Request { head, .. }) => {
                    let answer = Answer::Returned(respond());
                    self.driver.answer(head, answer, cx.now, &mut cx);
                }
                Action::Produce => self.driver.produce(&mut cx, || now),
                Action::Yield => {}
                other => return other,
            }
        }
    }

    fn refusals(&self) -> Vec<Refusal> {
        self.tally.refusals.borrow().clone()
    }

    /// A bench whose stream takes nothing (and is set up further by `with`), sent `input`:
    /// the turn answers it with `answer`, and its output first waits at t0, with the grace
    /// period to run.
    fn stalled(
        input: &[u8],
        with: impl FnOnce(&mut Scripted),
        answer: impl FnMut(&RequestHead, &[u8]) -> Answer,
    ) -> Bench {
        let mut b = Bench::new();
        b.io.room = Some(0);
        with(&mut b.io);
        b.io.send(input);
        let (_, next) = b.turn(answer);
        assert_eq!(shown(&next), wait(false, true, Some(b.t0 + RATE.grace)));
        b
    }
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";

/// A response of `len` bytes.
fn text_of(len: usize) -> impl FnMut(&RequestHead, &[u8]) -> Answer {
    move |_, _| Answer::Returned(Response::text("x".repeat(len)))
}

/// The size on the wire of what `run` has a bench write to a stream that takes everything.
fn on_the_wire(run: impl FnOnce(&mut Bench)) -> usize {
    let mut whole = Bench::new();
    run(&mut whole);
    whole.io.out.len()
}

/// The first response's `size` bytes are all out, and what followed it waits a grace period
/// of its own, from now.
fn assert_a_meter_of_its_own(b: &Bench, then: &Action, size: usize, what: &str) {
    assert_eq!(b.io.out.len(), size, "{what}");
    assert_eq!(
        shown(then),
        wait(false, true, Some(b.now + RATE.grace)),
        "{what}"
    );
}

/// Heads whose answer the driver writes itself, and what it is.
const ANSWERED_BY_THE_DRIVER: [(&[u8], &str); 2] = [
    (
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n",
        "100 Continue",
    ),
    (
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
        "400",
    ),
];

fn wait(read: bool, write: bool, until: Option<Instant>) -> String {
    format!("{:?}", (read, write, until))
}

fn shown(action: &Action) -> String {
    match action {
        Action::Wait { on, until } => wait(on.reads(), on.writes(), *until),
        Action::Run(_) => "run".into(),
        Action::Yield => "yield".into(),
        Action::Produce => "produce".into(),
        Action::Close => "close".into(),
        Action::Switch(_) => "switch".into(),
    }
}

#[test]
fn a_request_is_run_answered_and_the_connection_waits_idle() {
    let mut b = Bench::new();
    let (ran, next) = b.echo();
    assert_eq!(
        (ran, shown(&next)),
        (0, wait(true, false, Some(b.t0 + HEAD)))
    );
    b.at(2);
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let (ran, next) = b.echo();
    assert_eq!(ran, 1);
    assert_eq!(shown(&next), wait(true, false, Some(b.now + IDLE)));
    assert!(b.io.take_out().starts_with("HTTP/1.1 200 OK\r\n"));
    assert!(b.driver.is_idle(), "an idle connection holds no buffer");
}

#[test]
fn the_first_byte_of_a_later_head_starts_its_deadline() {
    let mut b = Bench::new();
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    b.echo();
    b.at(30);
    b.io.send(b"GET / HT");
    let (_, next) = b.echo();
    assert_eq!(shown(&next), wait(true, false, Some(b.now + HEAD)));
    assert_eq!(b.driver.stage(), Stage::Reading);
}

#[test]
fn expect_continue_is_answered_for_http11_only_and_only_when_the_body_is_held_back() {
    let cases: [(&[u8], bool, &[u8]); 3] = [
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n",
            true,
            b"hi",
        ),
        (
            b"POST / HTTP/1.0\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n",
            false,
            b"hi",
        ),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nh",
            false,
            b"i",
        ),
    ];
    for (request, interim, rest) in cases {
        let mut b = Bench::new();
        b.io.send(request);
        let (ran, next) = b.echo();
        assert_eq!(ran, 0);
        // A body under way waits under its minimum rate (the grace period from now).
        assert_eq!(shown(&next), wait(true, false, Some(b.now + RATE.grace)));
        let out = b.io.take_out();
        assert_eq!(out == "HTTP/1.1 100 Continue\r\n\r\n", interim, "{out:?}");
        assert_eq!(out.is_empty(), !interim);
        b.io.send(rest);
        let (ran, _) = b.echo();
        assert_eq!(ran, 1);
        assert!(b.io.take_out().ends_with("\r\n\r\nhi"));
    }
}

#[test]
fn a_panic_is_answered_500_and_closes() {
    let mut b = Bench::new();
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let (ran, next) = b.turn(|_, _| Answer::Panicked);
    assert_eq!((ran, shown(&next)), (1, "close".into()));
    let out = b.io.take_out();
    assert!(
        out.starts_with("HTTP/1.1 500 Internal Server Error\r\n"),
        "{out}"
    );
    assert!(out.contains("Connection: close\r\n"));
    assert!(
        !b.io.shut,
        "a body in sync, nothing behind it: closes without lingering"
    );
}

#[test]
fn a_closing_response_with_requests_behind_it_lingers() {
    let mut b = Bench::new();
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n");
    let (ran, next) = b.turn(|_, _| Answer::Panicked);
    assert_eq!(ran, 1, "the request behind is not run");
    assert!(b.io.take_out().contains("Connection: close\r\n"));
    // Closing on the unread request would reset the connection: the write side is shut and
    // what the client sends is read until it closes or the lingering ends.
    assert!(b.io.shut, "lingers");
    assert_eq!(shown(&next), wait(true, false, Some(b.now + LINGER_TIME)));
}

#[test]
fn a_head_not_whole_by_its_deadline_is_answered_408_and_lingers() {
    let mut b = Bench::new();
    b.io.send(b"GET / HTTP/1.1\r\nHo");
    let (_, next) = b.echo();
    assert_eq!(shown(&next), wait(true, false, Some(b.t0 + HEAD)));
    b.at(10);
    assert!(b.expire(), "a request under way is answered");
    let (_, next) = b.echo();
    assert!(
        b.io.take_out()
            .starts_with("HTTP/1.1 408 Request Timeout\r\n")
    );
    assert!(b.io.shut, "the close lingers");
    assert_eq!(shown(&next), wait(true, false, Some(b.now + LINGER_TIME)));
    assert_eq!(b.refusals(), [Refusal::HeaderTimeout]);
    b.at(11);
    assert!(!b.expire(), "the lingering close ran its time");
}

#[test]
fn an_idle_connection_past_its_time_closes_quietly() {
    let mut b = Bench::new();
    b.at(10);
    assert!(!b.expire());
    assert_eq!(b.io.take_out(), "");
    assert!(b.refusals().is_empty());
}

#[test]
fn a_body_slower_than_its_rate_is_answered_408() {
    let mut b = Bench::new();
    b.io.send(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\nabc");
    let (_, next) = b.echo();
    assert_eq!(shown(&next), wait(true, false, Some(b.now + RATE.grace)));
    b.at(5);
    assert!(b.expire());
    b.echo();
    assert!(
        b.io.take_out()
            .starts_with("HTTP/1.1 408 Request Timeout\r\n")
    );
    assert_eq!(b.refusals(), [Refusal::TooSlow]);
}

#[test]
fn a_response_its_client_takes_too_slowly_is_cut() {
    let mut b = Bench::new();
    b.io.room = Some(10);
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let (ran, next) = b.turn(|_, _| Answer::Returned(Response::text("x".repeat(1000))));
    assert_eq!(ran, 1);
    assert_eq!(shown(&next), wait(false, true, Some(b.now + RATE.grace)));
    b.at(5);
    assert_eq!(b.expire_and_drive(), "close");
    assert_eq!(b.refusals(), [Refusal::TooSlow]);
}

/// At a response's output deadline the socket is written again and asked what its peer took:
/// Linux reports a grown send buffer writable only once a third of it is free, so a client
/// reading far above the rate could go a grace period with no writable event (tests/rates.rs:
/// 16 MB read at 100 KB/s, cut at the grace period before). What it took earns credit, at most
/// the grace period and twice the time waited when it was seen: a client that reads nothing
/// has its kernel take a receive buffer's worth after the output first waits (tests/rates.rs's
/// stalled reader: 95 KB, 396 s at 240 B/s), so that is worth two grace periods more, not the
/// minutes; a deadline that passes with nothing taken since ends the transfer.
#[test]
fn at_an_output_deadline_what_the_socket_took_moves_the_deadline_on() {
    let mut b = Bench::stalled(GET, |io| io.unacknowledged = Some(100), text_of(100_000));
    // The send buffer grows: 2,000 bytes taken, all of them still held, none of them credit.
    b.at(1);
    b.io.room = Some(2000);
    b.io.unacknowledged = Some(2100);
    let (_, next) = b.echo();
    assert_eq!(shown(&next), wait(false, true, Some(b.t0 + RATE.grace)));
    // 1,000 of them acknowledged (10 s at the rate) with no writable event, and the socket
    // takes 3,000 more at the deadline (held): 10 s earned (15 s allowed).
    b.at(5);
    b.io.room = Some(3000);
    b.io.unacknowledged = Some(4100);
    let next = b.expire_and_drive();
    assert_eq!(next, wait(false, true, Some(b.now + RATE.grace)));
    // 600 more acknowledged by 10 s (16 s at the rate; 25 s allowed), 600 more taken.
    b.at(10);
    b.io.room = Some(600);
    let next = b.expire_and_drive();
    let six = Duration::from_secs(6);
    assert_eq!(next, wait(false, true, Some(b.now + six)));
    assert!(b.refusals().is_empty());
    // Nothing more by then: cut at that deadline.
    b.at(16);
    assert_eq!(b.expire_and_drive(), "close");
    assert_eq!(b.refusals(), [Refusal::TooSlow]);
}

/// A stream that fails as its output's deadline is checked closes the driver there: its buffers
/// go back and an exchange cut off is logged (found by review: the driver was left busy, and
/// the server engine dropped it so).
#[test]
fn a_stream_that_fails_at_the_output_deadline_closes_the_driver() {
    let mut b = Bench::stalled(GET, |_| {}, text_of(100_000));
    b.at(5);
    b.io.reset = true;
    assert!(!b.expire(), "closed");
    assert!(
        matches!(b.driver.phase, Phase::Over),
        "{:?}",
        b.driver.stage()
    );
}

/// A client that pipelines and reads nothing is cut at its output's deadline before another of
/// its requests runs (found by review: the deadline's turn ran a turn's budget of them first,
/// 64 handlers, then cut it).
#[test]
fn a_pipelining_client_too_slow_is_cut_at_its_deadline_before_more_requests_run() {
    let mut b = Bench::stalled(&GET.repeat(300), |_| {}, text_of(10));
    let read = b.tally.requests.borrow().len();
    b.at(5);
    assert_eq!(b.expire_and_drive(), "close");
    assert_eq!(
        b.tally.requests.borrow().len(),
        read,
        "requests read after the deadline"
    );
    assert_eq!(b.refusals(), [Refusal::TooSlow]);
}

/// What a client waits for after a response its socket took in the turn that read the client's
/// next head (a `100 Continue`, an error page) is measured afresh: it does not inherit the
/// credit the response earned (100 KB at 100 B/s: 1,000 s).
#[test]
fn output_after_a_large_response_starts_a_meter_of_its_own() {
    let size = on_the_wire(|b| {
        b.io.send(GET);
        b.turn(text_of(100_000));
    });
    for (head, what) in ANSWERED_BY_THE_DRIVER {
        let mut b = Bench::stalled(GET, |_| {}, text_of(100_000));
        // A second later the socket takes the whole response and is full again; the next head
        // has come, and what it is answered waits from now, with a grace period of its own.
        b.at(1);
        b.io.room = Some(size);
        b.io.send(head);
        let (ran, then) = b.turn(text_of(100_000));
        assert_eq!(ran, 0, "{what}");
        assert_a_meter_of_its_own(&b, &then, size, what);
    }
}

/// Pipelined responses queued behind output not yet out are one transfer with it, until all of
/// it is out: a client that reads a fortieth of the rate is cut at the grace period, however
/// many requests each writable turn answers, and one that reads above the rate keeps its
/// credit (each answer once started the meter afresh, both ways wrong).
#[test]
fn a_pipelined_batch_is_one_transfer_until_all_of_it_is_out() {
    let small = |_: &RequestHead, _: &[u8]| Answer::Returned(Response::text("x".repeat(100)));
    // 10 bytes every 2 s: the deadline stays.at the end of the grace period.
    let mut b = Bench::stalled(&GET.repeat(300), |_| {}, small);
    b.at(4);
    b.io.room = Some(10);
    let (ran, next) = b.turn(small);
    assert!(ran > 0, "more of the batch answered");
    assert_eq!(shown(&next), wait(false, true, Some(b.t0 + RATE.grace)));
    // 1,500 bytes in the first 4 s: 15 s of waiting at the rate, 13 s earned (the grace period
    // and twice the time waited), kept while more is answered (afresh it would be 9 s).
    let mut b = Bench::new();
    b.io.room = Some(0);
    b.io.send(&GET.repeat(100));
    b.turn(small);
    b.at(4);
    b.io.room = Some(1500);
    let (ran, next) = b.turn(small);
    assert!(ran > 0, "more of the batch answered");
    assert_eq!(
        shown(&next),
        wait(false, true, Some(b.t0 + Duration::from_secs(13)))
    );
}

/// Over a transport that holds output (TLS: rustls takes plaintext while the socket is full),
/// nothing left unwritten is not everything out: the batch is one transfer until the
/// transport's flush is done, both ways (a slow reader cut at the grace period, one above the
/// rate keeping its credit).
#[test]
fn a_pipelined_batch_over_a_transport_that_holds_output_is_one_transfer() {
    let small = |_: &RequestHead, _: &[u8]| Answer::Returned(Response::text("x".repeat(100)));
    let holding = |requests: usize| {
        let holds = |io: &mut Scripted| {
            io.holds = Some(64 << 10);
            io.sent = Some(0);
        };
        Bench::stalled(&GET.repeat(requests), holds, small)
    };
    // 10 bytes every 2 s: the deadline stays.
    let mut b = holding(300);
    for secs in [2, 4] {
        b.at(secs);
        b.io.room = Some(10);
        let (ran, next) = b.turn(small);
        assert!(ran > 0, "more of the batch answered");
        assert_eq!(shown(&next), wait(false, true, Some(b.t0 + RATE.grace)));
    }
    // 1,500 bytes in 4 s: 13 s earned (afresh: 9 s).
    let mut b = holding(100);
    b.at(4);
    b.io.room = Some(1500);
    let (_, next) = b.turn(small);
    assert_eq!(
        shown(&next),
        wait(false, true, Some(b.t0 + Duration::from_secs(13)))
    );
}

/// A client too slow to take a response, with part of its next head read, is cut as too slow
/// at the output's deadline, over a transport that holds output (TLS) as over a plain socket:
/// once it was taken for a late head (a 408 queued behind the response, counted as a header
/// timeout, closed a turn later).
#[test]
fn a_slow_reader_with_a_partial_head_behind_is_cut_as_too_slow() {
    for holds in [None, Some(64 << 10)] {
        let mut b = Bench::new();
        b.io.room = Some(0);
        b.io.holds = holds;
        b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HT");
        let (ran, next) = b.turn(|_, _| Answer::Returned(Response::text("x".repeat(1000))));
        assert_eq!(ran, 1);
        assert_eq!(
            shown(&next),
            wait(false, true, Some(b.t0 + RATE.grace)),
            "{holds:?}"
        );
        b.at(5);
        assert_eq!(b.expire_and_drive(), "close", "{holds:?}");
        assert_eq!(b.refusals(), [Refusal::TooSlow], "{holds:?}");
    }
}

/// A sized streamed body ends with a last piece that adds nothing, after its last bytes went
/// out: what a request pipelined behind it is answered (a `100 Continue`, an error page) is a
/// transfer of its own, not on the body's credit (600 s for 60 KB at 100 B/s).
#[test]
fn output_after_a_sized_streamed_body_starts_a_meter_of_its_own() {
    const LEN: usize = 60_000;
    let sized = || {
        let body = std::io::Cursor::new(vec![b'x'; LEN]);
        Response::new(200).with_body(Body::sized_reader(body, LEN as u64))
    };
    let size = on_the_wire(|b| {
        b.io.send(GET);
        b.produce_all(sized);
    });
    for (head, what) in ANSWERED_BY_THE_DRIVER {
        let mut b = Bench::new();
        b.io.room = Some(0);
        b.io.send(&[GET, head].concat());
        let first = b.produce_all(sized);
        assert_eq!(shown(&first), wait(false, true, Some(b.t0 + RATE.grace)));
        b.at(1);
        b.io.room = Some(size);
        let then = b.produce_all(sized);
        assert_a_meter_of_its_own(&b, &then, size, what);
    }
}

/// An error page for a request pipelined behind a large response, queued after that response
/// went out (a malformed chunk, a body that never came: 400, 408), waits a grace period of its
/// own, not on the credit the response earned.
#[test]
fn an_error_page_after_a_pipelined_response_starts_a_meter_of_its_own() {
    let size = on_the_wire(|b| {
        b.io.send(GET);
        b.turn(text_of(60_000));
    });
    let posts: [&[u8]; 2] = [
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
    ];
    let refused = [(400, Refusal::Status(400)), (408, Refusal::TooSlow)];
    for (post, (status, why)) in posts.into_iter().zip(refused) {
        let mut b = Bench::new();
        b.io.room = Some(0);
        b.io.send(&[GET, post].concat());
        b.turn(text_of(60_000));
        // A second later the response goes out whole (600 s of credit at 100 B/s) while the
        // POST's body is awaited.
        b.at(1);
        b.io.room = Some(size);
        b.turn(text_of(60_000));
        assert_eq!(b.io.out.len(), size);
        b.io.room = Some(0);
        match status {
            400 => {
                b.at(2);
                b.io.send(b"zz\r\n");
            }
            _ => {
                b.at(6);
                assert!(b.expire(), "{status} queued");
            }
        }
        let (_, next) = b.turn(text_of(60_000));
        assert_eq!(
            shown(&next),
            wait(false, true, Some(b.now + RATE.grace)),
            "{status}"
        );
        assert_eq!(b.refusals(), [why], "{status}");
    }
}

/// Over a transport that says what its socket took (TLS: records, not the plaintext its writes
/// returned), the response's meter credits that: nothing of what went out before the response
/// first waited (a handshake, earlier responses), and records pushed out while the writes
/// themselves said `WouldBlock`.
#[test]
fn a_response_credits_what_the_socket_took_from_its_first_wait_on() {
    let mut b = Bench::stalled(GET, |io| io.sent = Some(50_000), text_of(100_000));
    // 100 bytes a second later: within the grace period, whose end stays (50,100 bytes would
    // have earned 501 s).
    b.at(1);
    b.io.room = Some(100);
    let (_, next) = b.echo();
    assert_eq!(shown(&next), wait(false, true, Some(b.t0 + RATE.grace)));
    // The writes take nothing, but 2,000 bytes of held records went out: 2,100 bytes, 21 s at
    // the rate, earn 9 s of waiting in all (the grace period and twice the 2 s waited; the
    // 100 bytes alone: the grace period).
    b.at(2);
    b.io.room = Some(0);
    b.io.sent = Some(2000);
    let (_, next) = b.echo();
    assert_eq!(
        shown(&next),
        wait(false, true, Some(b.t0 + Duration::from_secs(9)))
    );
}

#[test]
fn a_malformed_head_is_answered_400_and_lingers() {
    let mut b = Bench::new();
    b.io.send(b"GET / HTTP/1.1\r\nBad Field: x\r\n\r\n");
    let (ran, next) = b.echo();
    assert_eq!(ran, 0);
    assert!(b.io.take_out().starts_with("HTTP/1.1 400 Bad Request\r\n"));
    assert!(b.io.shut);
    assert_eq!(shown(&next), wait(true, false, Some(b.now + LINGER_TIME)));
    assert_eq!(b.refusals(), [Refusal::Status(400)]);
}

#[test]
fn pipelined_requests_are_answered_in_order_and_the_turn_yields_at_its_budget() {
    let mut b = Bench::new();
    let one = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    b.io.send(&one.repeat(REQUEST_BUDGET as usize + 1));
    let mut n = 0;
    let (ran, next) = b.turn(|_, _| {
        n += 1;
        Answer::Returned(Response::text(n.to_string()))
    });
    assert_eq!(
        (ran, shown(&next)),
        (REQUEST_BUDGET as usize, "yield".into())
    );
    let (ran, _) = b.turn(|_, _| Answer::Returned(Response::text("last")));
    assert_eq!(ran, 1);
    let out = b.io.take_out();
    assert_eq!(
        out.matches("HTTP/1.1 200 OK").count(),
        REQUEST_BUDGET as usize + 1
    );
    assert!(out.find("\r\n\r\n1").unwrap_or(usize::MAX) < out.find("\r\n\r\n2").unwrap_or(0));
    assert!(out.ends_with("last"));
}

#[test]
fn shutdown_makes_the_response_the_last() {
    let mut b = Bench::new();
    b.closing = true;
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let (ran, next) = b.echo();
    assert_eq!((ran, shown(&next)), (1, "close".into()));
    assert!(b.io.take_out().contains("Connection: close\r\n"));
}

/// Shutdown's rule for a keep-alive connection is the driver's: idle after an exchange, it
/// closes at its next turn; one whose first request has not come waits on for it.
#[test]
fn at_shutdown_a_connection_idle_after_an_exchange_closes() {
    let mut b = Bench::new();
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let (ran, next) = b.echo();
    assert_eq!(ran, 1);
    let waits_for_input =
        |next: &Action| matches!(next, Action::Wait { on, .. } if *on == WaitFor::Input);
    assert!(waits_for_input(&next), "{}", shown(&next));
    b.closing = true;
    assert_eq!(shown(&b.echo().1), "close");
    let mut fresh = Bench::new();
    fresh.closing = true;
    let (_, next) = fresh.echo();
    assert!(waits_for_input(&next), "{}", shown(&next));
}

#[test]
fn a_body_that_falls_short_aborts_the_connection() {
    let mut b = Bench::new();
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let (_, next) = b.turn(|_, _| {
        Answer::Returned(Response::new(200).with_body(Body::sized_reader(&b"abc"[..], 10)))
    });
    assert_eq!(shown(&next), "close");
    assert!(b.io.aborted);
}

#[test]
fn an_upgrade_hands_the_connection_over_with_the_bytes_after_its_request() {
    let mut b = Bench::new();
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: x\r\n\r\nafter");
    let (_, next) = b.turn(|_, _| Answer::Returned(Response::upgrade("x", |_| {})));
    assert!(
        b.io.take_out()
            .starts_with("HTTP/1.1 101 Switching Protocols\r\n")
    );
    match next {
        Action::Switch(Handover::Detach { leftover, .. }) => assert_eq!(leftover, b"after"),
        other => panic!("{}", shown(&other)),
    }
    assert_eq!(
        shown(&b.echo().1),
        "close",
        "nothing more after a hand-over"
    );
}

/// Handler code whose `Drop` panics.
struct PanicsWhenDropped;

impl Drop for PanicsWhenDropped {
    fn drop(&mut self) {
        panic!("dropped");
    }
}

/// An upgrade whose 101 never goes out (its client takes nothing) and whose callback panics
/// when dropped: the cut connection drops it caught, and counts the panic.
fn stalled_upgrade() -> Bench {
    let upgrade = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: x\r\n\r\n";
    Bench::stalled(
        upgrade,
        |_| {},
        |_, _| {
            let held = PanicsWhenDropped;
            Answer::Returned(Response::upgrade("x", move |_| drop(held)))
        },
    )
}

#[test]
fn a_switch_whose_response_is_cut_as_too_slow_is_dropped_caught() {
    let mut b = stalled_upgrade();
    b.at(RATE.grace.as_secs() + 1);
    assert!(!b.expire(), "cut: nothing went out");
    assert_eq!(b.tally.panics.counted(), 1);
}

#[test]
fn a_switch_whose_connection_closes_before_its_response_is_out_is_dropped_caught() {
    let mut b = stalled_upgrade();
    assert_eq!(shown(&b.driver.close(&mut b.pools)), "close");
    assert_eq!(b.tally.panics.counted(), 1);
}

#[test]
fn the_client_closing_closes() {
    let mut b = Bench::new();
    b.io.eof = true;
    assert_eq!(shown(&b.echo().1), "close");
}

#[test]
fn a_short_read_spares_the_read_that_would_block() {
    let mut b = Bench::new();
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    b.echo();
    assert_eq!(
        b.io.reads, 1,
        "one read per request on a keep-alive connection"
    );
}

#[test]
fn body_framing_longer_than_the_buffer_is_answered_400() {
    let mut b = Bench::new();
    b.io.send(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;");
    b.io.send(&[b'e'; 12 * 1024]);
    let (ran, next) = b.echo();
    assert_eq!(ran, 0);
    let out = b.io.take_out();
    assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{out}");
    assert!(b.io.shut, "framing is lost: the close lingers");
    assert_eq!(shown(&next), wait(true, false, Some(b.now + LINGER_TIME)));
    assert_eq!(b.refusals(), [Refusal::Status(400)]);
}

#[test]
fn pipelined_responses_stop_at_max_pipeline_output_while_the_client_reads_nothing() {
    let mut b = Bench::new();
    b.io.room = Some(0);
    let one = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    b.io.send(&one.repeat(100));
    let ten_k = || Answer::Returned(Response::new(200).with_body(vec![b'x'; 10 * 1024]));
    let (ran, next) = b.turn(|_, _| ten_k());
    // 64 KiB of output is queued after the seventh: written (nothing goes), then it waits.
    assert_eq!(ran, 7);
    assert_eq!(shown(&next), wait(false, true, Some(b.now + RATE.grace)));
    let (ran, _) = b.turn(|_, _| ten_k());
    assert_eq!(
        ran, 0,
        "nothing more is answered while the output cannot drain"
    );
    b.io.room = None;
    let (ran, _) = b.turn(|_, _| ten_k());
    assert_eq!(
        ran, REQUEST_BUDGET as usize,
        "once it drains, the rest is answered"
    );
}

#[test]
fn past_the_memory_budget_a_request_with_a_body_is_told_to_retry() {
    let mut b = Bench::new();
    b.tally.budget = crate::http::budget::Budget::new(0);
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(b.echo().0, 1, "a request without a body needs no buffer");
    b.io.take_out();
    b.io.send(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi");
    assert_told_to_retry(&mut b, Refusal::BodyOverBudget);
}

/// The request waiting on `b` is answered 503 with `Retry-After`, counted as `why`, and the
/// connection lingers to its close.
fn assert_told_to_retry(b: &mut Bench, why: Refusal) {
    let (ran, next) = b.echo();
    assert_eq!(ran, 0);
    let out = b.io.take_out();
    assert!(
        out.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{out}"
    );
    assert!(out.contains("\r\nRetry-After: 1\r\n"), "{out}");
    assert_eq!(b.refusals(), [why]);
    assert_eq!(shown(&next), wait(true, false, Some(b.now + LINGER_TIME)));
}

#[test]
fn a_body_in_memory_and_a_response_tail_count_against_the_budget_until_done() {
    use crate::http::budget::ALLOWANCE;
    let mut b = Bench::new();
    let budget = crate::http::budget::Budget::default();
    b.tally.budget = budget.clone();
    b.io.room = Some(10);
    let body = vec![b'b'; ALLOWANCE * 2];
    b.io.send(
        format!(
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
            body.len() + 1
        )
        .as_bytes(),
    );
    b.io.send(&body);
    let (ran, _) = b.echo();
    assert_eq!(ran, 0);
    let held = budget.held();
    assert!(
        held >= ALLOWANCE,
        "the body so far, past its allowance: {held}"
    );
    b.io.send(b"!");
    let (ran, next) = b.turn(|_, got| {
        assert_eq!(got.len(), ALLOWANCE * 2 + 1);
        Answer::Returned(Response::text("x".repeat(ALLOWANCE * 4)))
    });
    assert_eq!(ran, 1);
    assert_eq!(shown(&next), wait(false, true, Some(b.now + RATE.grace)));
    let tail = budget.held();
    assert!(
        tail > ALLOWANCE * 3 - 10 && tail < ALLOWANCE * 3 + 200,
        "the response head and body less 10 bytes, past the allowance: {tail}"
    );
    b.io.room = None;
    b.echo();
    assert_eq!(budget.held(), 0, "all written");
}

#[test]
fn a_long_head_that_waits_is_charged_and_turned_away_without_room() {
    use crate::http::budget::{ALLOWANCE, Budget};
    let long = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nX-Long: {}\r\n",
        "x".repeat(ALLOWANCE + 4096)
    );
    // Room: the buffer it waits in (grown to 32 KiB for its 20 KiB) is held past the
    // allowance while the head waits, and given back once the head is whole.
    let mut b = Bench::new();
    let budget = Budget::new(1 << 20);
    b.tally.budget = budget.clone();
    b.io.send(long.as_bytes());
    assert_eq!(b.echo().0, 0);
    assert_eq!(budget.held(), 32 * 1024 - ALLOWANCE);
    b.io.send(b"\r\n");
    assert_eq!(b.echo().0, 1);
    assert_eq!(budget.held(), 0);
    // A head within the allowance waits uncharged.
    b.io.take_out();
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n");
    assert_eq!(b.echo().0, 0);
    assert_eq!(budget.held(), 0);
    // No room: 503 with Retry-After, and a lingering close.
    let mut b = Bench::new();
    b.tally.budget = Budget::new(1024);
    b.io.send(long.as_bytes());
    assert_told_to_retry(&mut b, Refusal::HeadOverBudget);
}

/// A bench whose handler streams every body.
fn streaming() -> Bench {
    let mut b = Bench::new();
    b.rules.streams = Some(Streams(std::sync::Arc::new(|_| true)));
    b
}

impl Bench {
    /// Drives until a request is ready for its handler, and gives it without answering.
    fn next_request(&mut self) -> Request {
        let mut cx = harness_cx!(self, false);
        match self.driver.drive(&mut self.io, &mut cx) {
            Action::Run(request) => request,
            other => panic!("no request: {}", shown(&other)),
        }
    }

    fn read_body(&mut self, buf: &mut [u8]) -> BodyRead {
        self.driver.read_body(&mut self.io, buf, self.now)
    }

    /// Gives the handler's answer, then drives on.
    fn answer_with(&mut self, head: Box<RequestHead>, response: Response) -> Action {
        let mut cx = harness_cx!(self, false);
        self.driver
            .answer(head, Answer::Returned(response), cx.now, &mut cx);
        self.driver.drive(&mut self.io, &mut cx)
    }
}

#[test]
fn a_streamed_body_reaches_its_handler_as_it_arrives() {
    let mut b = streaming();
    b.io.send(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nExpect: 100-continue\r\n\r\n");
    let Request { head, body } = b.next_request();
    assert!(matches!(body, Received::Streamed));
    assert_eq!(b.io.take_out(), "", "no 100 before the handler reads");
    let mut buf = [0u8; 16];
    assert_eq!(
        b.read_body(&mut buf),
        BodyRead::Wait {
            write: false,
            until: Some(b.now + RATE.grace)
        }
    );
    assert_eq!(b.io.take_out(), "HTTP/1.1 100 Continue\r\n\r\n");
    b.io.send(b"abc");
    assert_eq!(b.read_body(&mut buf), BodyRead::Data(3));
    assert_eq!(&buf[..3], b"abc");
    b.io.send(b"def");
    assert_eq!(b.read_body(&mut buf), BodyRead::Data(3));
    assert_eq!(b.read_body(&mut buf), BodyRead::End);
    b.answer_with(head, Response::text("ok"));
    let out = b.io.take_out();
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(!out.contains("Connection: close"), "in sync: {out}");
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(b.echo().0, 1, "and the next request is served");
}

#[test]
fn a_streamed_body_that_fails_stalls_or_is_left_is_answered_by_the_driver() {
    // Malformed: the read fails, and the failure is the answer.
    let mut b = streaming();
    b.io.send(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    let Request { head, .. } = b.next_request();
    let mut buf = [0u8; 16];
    assert_eq!(
        b.read_body(&mut buf),
        BodyRead::Failed(std::io::ErrorKind::InvalidData)
    );
    b.answer_with(head, Response::text("handler"));
    let out = b.io.take_out();
    assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{out}");
    assert!(!out.contains("handler"));
    assert!(b.io.shut, "a lingering close");

    // Too slow: the engine's wait ran out.
    let mut b = streaming();
    b.io.send(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nab");
    let Request { head, .. } = b.next_request();
    assert_eq!(b.read_body(&mut buf), BodyRead::Data(2));
    assert!(matches!(b.read_body(&mut buf), BodyRead::Wait { .. }));
    b.driver.body_timed_out();
    assert_eq!(
        b.read_body(&mut buf),
        BodyRead::Failed(std::io::ErrorKind::TimedOut)
    );
    b.answer_with(head, Response::text("handler"));
    assert!(
        b.io.take_out()
            .starts_with("HTTP/1.1 408 Request Timeout\r\n")
    );
    assert_eq!(b.refusals(), [Refusal::TooSlow]);

    // Left unread: the response closes the connection.
    let mut b = streaming();
    b.io.send(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcd");
    let Request { head, .. } = b.next_request();
    b.answer_with(head, Response::text("handler"));
    let out = b.io.take_out();
    assert!(out.contains("Connection: close\r\n"), "{out}");
    assert!(out.ends_with("handler"));
}

/// A pool's answer begins a turn that no readable event began: a stream an earlier read left
/// drained is waited on (level-triggered, the wait reports any byte that came since), not read
/// once more; a turn after a readable event reads; so does the shutdown pass.
#[test]
fn an_answer_turn_does_not_read_a_drained_stream_again() {
    let mut b = Bench::new();
    // One exchange: a readable event's turn reads the head, the answer's turn writes and
    // waits; `meanwhile` comes while the handler runs. Returns the reads each turn made.
    let exchange = |b: &mut Bench, meanwhile: &[u8]| {
        let before = b.io.reads;
        b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        let Request { head, .. } = b.next_request();
        let request_reads = b.io.reads - before;
        b.io.send(meanwhile);
        let mut cx = harness_cx!(b, b.closing);
        cx.not_readable();
        b.driver.answer(
            head,
            Answer::Returned(Response::text("ok")),
            cx.now,
            &mut cx,
        );
        let action = shown(&b.driver.drive(&mut b.io, &mut cx));
        assert!(b.io.take_out().starts_with("HTTP/1.1 200 OK\r\n"));
        (request_reads, b.io.reads - before - request_reads, action)
    };
    let waits = shown(&Action::Wait {
        on: WaitFor::Input,
        until: Some(b.now + rules().idle),
    });
    // The first: nothing yet said whether the stream is drained, so the answer's turn reads
    // (WouldBlock) before it waits.
    assert_eq!(exchange(&mut b, b""), (1, 1, waits.clone()));
    // The next: the answer's turn waits to read, with no read, even with a request come
    // meanwhile (the level-triggered wait reports it) ...
    assert_eq!(
        exchange(&mut b, b"GET /2 HTTP/1.1\r\n"),
        (1, 0, waits.clone())
    );
    // ... which the turn its readable event begins reads.
    b.io.send(b"Host: a\r\n\r\n");
    let (ran, _) = b.echo();
    assert_eq!(ran, 1, "the request that came meanwhile is served");
    assert!(b.io.take_out().starts_with("HTTP/1.1 200 OK\r\n"));

    // At shutdown the pass over every connection reads what is in its socket.
    assert_eq!(exchange(&mut b, b""), (1, 0, waits));
    b.io.send(b"GET /3 HTTP/1.1\r\nHost: a\r\n\r\n");
    b.closing = true;
    let mut cx = harness_cx!(b, true);
    cx.not_readable();
    assert!(matches!(b.driver.drive(&mut b.io, &mut cx), Action::Run(_)));
}

#[test]
fn a_producer_lent_to_a_worker_comes_back_with_its_piece_and_the_response_goes_on() {
    let mut b = Bench::new();
    b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let mut cx = harness_cx!(b, false).without_producers();
    let Action::Run(Request { head, .. }) = b.driver.drive(&mut b.io, &mut cx) else {
        panic!("the request is run");
    };
    let body = Body::chunks(vec![b"ab".to_vec(), b"cd".to_vec()].into_iter());
    let resp = Response::new(200).with_body(body);
    b.driver
        .answer(head, Answer::Returned(resp), cx.now, &mut cx);
    // Each piece: the driver asks for it, a worker (here the test) produces it, and the driver
    // writes it. While the producer is away, the driver waits for it whatever comes.
    let mut lent = 0;
    let last = loop {
        match b.driver.drive(&mut b.io, &mut cx) {
            Action::Produce => {
                let (st, mut out) = b.driver.lend_producer().expect("a producer to lend");
                assert!(b.driver.lend_producer().is_none(), "lent once");
                b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
                let waits = b.driver.drive(&mut b.io, &mut cx);
                assert_eq!(shown(&waits), wait(false, false, None));
                let produced = st.produce_away(&mut out);
                assert!(b.driver.produced(out, produced).is_none(), "taken back");
                lent += 1;
            }
            other => break other,
        }
    };
    assert_eq!(lent, 3, "two chunks and the end");
    let out = b.io.take_out();
    assert!(out.contains("\r\nTransfer-Encoding: chunked\r\n"), "{out}");
    assert!(
        out.ends_with("\r\n\r\n2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n"),
        "{out}"
    );
    // The response said it was the last: what came meanwhile is not answered.
    assert_eq!(shown(&last), "close");
}

#[test]
fn a_fast_reader_of_a_streamed_body_yields_the_turn_after_its_share() {
    const PIECE: usize = 16 << 10;
    const PIECES: usize = 512; // 8 MiB: eight turns' share
    for producers in [true, false] {
        let mut b = Bench::new();
        b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        let mut turns = Vec::new();
        let mut last = None;
        for turn in 0..2 * PIECES {
            let mut cx = harness_cx!(b, false);
            if !producers {
                cx = cx.without_producers();
            }
            let before = b.io.out.len();
            let action = loop {
                match b.driver.drive(&mut b.io, &mut cx) {
                    Action::Run(Request { head, .. }) => {
                        assert_eq!(turn, 0, "one request");
                        let pieces = std::iter::repeat_n(vec![b'x'; PIECE], PIECES);
                        let resp = Response::new(200).with_body(Body::chunks(pieces));
                        b.driver
                            .answer(head, Answer::Returned(resp), cx.now, &mut cx);
                    }
                    // The engine that drives without producers produces on the loop (inline).
                    Action::Produce => b.driver.produce(&mut cx, Instant::now),
                    other => break other,
                }
            };
            turns.push(b.io.out.len() - before);
            if !matches!(action, Action::Yield) {
                last = Some(action);
                break;
            }
        }
        // The client takes all it is sent, yet each turn ends once it has sent its share (1 MiB
        // and the piece that passed it), and the next turn goes on from there.
        let share = super::cx::BODY_BYTES_PER_TURN;
        assert_eq!(turns.len(), 9, "{producers}: {turns:?}");
        for sent in &turns[..8] {
            assert!(
                (share..share + 2 * PIECE).contains(sent),
                "{producers}: {turns:?}"
            );
        }
        assert_eq!(shown(&last.expect("the response ends")), "close");
        let out = b.io.take_out();
        assert_eq!(out.matches(&"x".repeat(PIECE)).count(), PIECES);
        assert!(out.ends_with("\r\n0\r\n\r\n"), "{producers}");
    }
}

#[test]
fn on_a_loop_a_file_body_is_read_by_the_driver_and_a_handler_body_is_left_to_the_engine() {
    use std::io::{Seek as _, Write as _};
    let mut file = tempfile::tempfile().expect("a temporary file");
    file.write_all(&[b'f'; 40_000]).expect("written");
    file.rewind().expect("rewound");
    let bodies = [
        (BodyKind::File(file, 40_000), 0),
        (Body::chunks(vec![b"ab".to_vec()].into_iter()).kind, 2),
    ];
    for (kind, asked) in bodies {
        let mut b = Bench::new();
        b.io.send(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        // The reactor's loop: a stream that cannot send from the file (TLS), no handler code.
        let mut cx = harness_cx!(b, false).files_only();
        let Action::Run(Request { head, .. }) = b.driver.drive(&mut b.io, &mut cx) else {
            panic!("the request is run");
        };
        let resp = Response::new(200).with_body(Body { kind });
        b.driver
            .answer(head, Answer::Returned(resp), cx.now, &mut cx);
        let mut produce = 0;
        let last = loop {
            match b.driver.drive(&mut b.io, &mut cx) {
                Action::Produce => {
                    produce += 1;
                    b.driver.produce(&mut cx, Instant::now);
                }
                other => break other,
            }
        };
        assert_eq!(shown(&last), "close");
        assert_eq!(produce, asked, "pieces left to the engine");
        let out = b.io.take_out();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        if asked == 0 {
            assert!(out.contains("\r\nContent-Length: 40000\r\n"), "{out}");
            assert!(out.ends_with(&"f".repeat(40_000)), "a file read whole");
        }
    }
}
