//! The event stream's queue, budget and driver, with no socket.

use super::conn::INPUT_READS_PER_TURN;
use super::*;
use std::time::{Duration, Instant};

use crate::http::buf::ReadBuf;
use crate::http::framing::Encoder;
use crate::http::response::BodyKind;
use crate::http::session::memory::{Pipe, Wakes, waker};
use crate::http::session::{Callbacks, Next, Session, Start};
use crate::rate::MinRate;

/// An event stream started as an engine starts it after its head, chunked.
fn started(
    config: SseConfig,
    wakes: &Arc<Wakes>,
    rate: Option<MinRate>,
) -> (Box<dyn Session>, SseSender) {
    started_in(config, wakes, rate, &crate::http::budget::Budget::default())
}

/// [`started`], its queue counted against `budget`.
fn started_in(
    config: SseConfig,
    wakes: &Arc<Wakes>,
    rate: Option<MinRate>,
    budget: &crate::http::budget::Budget,
) -> (Box<dyn Session>, SseSender) {
    let (mut response, sender) = Response::event_stream_with(config);
    let BodyKind::Session(takeover) = response.take_body().kind else {
        panic!("an event stream is a session");
    };
    let session = takeover.start(Start {
        waker: waker(wakes),
        peer: None,
        now: Instant::now(),
        rate,
        encoder: Encoder::Chunked,
        budget: budget.clone(),
        panics: Default::default(),
    });
    (session, sender)
}

fn drive(s: &mut dyn Session, pipe: &mut Pipe, now: Instant) -> Next {
    let mut buf = ReadBuf::new();
    pipe.io(&mut buf, |io| s.drive(io, now, Callbacks::Inline))
}

fn taken(pipe: &mut Pipe) -> String {
    String::from_utf8(std::mem::take(&mut pipe.output)).unwrap_or_default()
}

#[test]
fn events_go_out_chunked_a_push_wakes_once_and_close_ends_the_body() {
    let wakes = Arc::new(Wakes::default());
    let (mut s, tx) = started(SseConfig::default().heartbeat(None), &wakes, None);
    let mut pipe = Pipe::new();
    let now = Instant::now();
    // Sent before the first turn: queued, no wake-up needed (the engine is about to run it).
    tx.send(Event::data("a")).expect("open");
    let idle = Next::Wait {
        write: false,
        deadline: None,
    };
    assert_eq!(drive(&mut *s, &mut pipe, now), idle);
    assert_eq!(taken(&mut pipe), "9\r\ndata: a\n\n\r\n");
    assert_eq!(wakes.count(), 0);
    // While it waits, the first push wakes the engine and the next needs no wake-up.
    tx.send(Event::data("b")).expect("the stream is open");
    tx.comment("c").expect("the stream is open");
    assert_eq!(wakes.count(), 1);
    assert_eq!(drive(&mut *s, &mut pipe, now), idle);
    // What was queued between two turns goes out as one chunk.
    assert_eq!(taken(&mut pipe), "E\r\ndata: b\n\n: c\n\n\r\n");
    tx.close();
    assert_eq!(tx.send(Event::data("late")), Err(SendError::Closed));
    assert_eq!(drive(&mut *s, &mut pipe, now), Next::Close);
    assert_eq!(taken(&mut pipe), "0\r\n\r\n");
    assert!(s.finish(Callbacks::Inline).is_none());
}

#[test]
fn the_client_going_away_closes_the_stream_for_its_senders() {
    let wakes = Arc::new(Wakes::default());
    let (mut s, tx) = started(SseConfig::default(), &wakes, None);
    let mut pipe = Pipe::new();
    pipe.input_closed = true;
    assert_eq!(drive(&mut *s, &mut pipe, Instant::now()), Next::Close);
    assert_eq!(tx.send(Event::data("x")), Err(SendError::Closed));
    assert!(tx.is_closed());
}

#[test]
fn a_quiet_stream_gets_a_heartbeat_when_its_deadline_passes() {
    let wakes = Arc::new(Wakes::default());
    let beat = Duration::from_secs(15);
    let (mut s, _tx) = started(SseConfig::default().heartbeat(Some(beat)), &wakes, None);
    let mut pipe = Pipe::new();
    let t0 = Instant::now();
    let Next::Wait {
        write: false,
        deadline: Some(due),
    } = drive(&mut *s, &mut pipe, t0)
    else {
        panic!("a quiet stream waits for its heartbeat");
    };
    assert!(due > t0 && due <= t0 + beat, "{due:?}");
    assert_eq!(taken(&mut pipe), "");
    let later = due + Duration::from_millis(1);
    let Next::Wait {
        deadline: Some(next),
        ..
    } = drive(&mut *s, &mut pipe, later)
    else {
        panic!("the stream goes on");
    };
    assert_eq!(taken(&mut pipe), "3\r\n:\n\n\r\n");
    assert_eq!(next, later + beat);
}

#[test]
fn shutdown_ends_after_what_is_queued() {
    let wakes = Arc::new(Wakes::default());
    let (mut s, tx) = started(SseConfig::default().heartbeat(None), &wakes, None);
    let mut pipe = Pipe::new();
    tx.send(Event::data("last")).expect("the stream is open");
    let mut buf = ReadBuf::new();
    pipe.io(&mut buf, |io| s.shutdown(io, Instant::now()));
    assert_eq!(drive(&mut *s, &mut pipe, Instant::now()), Next::Close);
    assert_eq!(taken(&mut pipe), "C\r\ndata: last\n\n\r\n0\r\n\r\n");
}

#[test]
fn a_client_that_takes_nothing_is_dropped_at_the_minimum_rate() {
    let wakes = Arc::new(Wakes::default());
    let rate = MinRate::new(240, Duration::from_secs(5));
    let (mut s, tx) = started(SseConfig::default().heartbeat(None), &wakes, Some(rate));
    let mut pipe = Pipe::new();
    pipe.room = 0;
    tx.send(Event::data("stuck")).expect("the stream is open");
    let t0 = Instant::now();
    let Next::Wait {
        write: true,
        deadline: Some(cut),
    } = drive(&mut *s, &mut pipe, t0)
    else {
        panic!("blocked output waits to write, with a deadline");
    };
    assert_eq!(cut, t0 + Duration::from_secs(5));
    assert_eq!(drive(&mut *s, &mut pipe, cut), Next::Close);
    assert_eq!(tx.send(Event::data("x")), Err(SendError::Closed));
}

#[test]
fn event_wire_format() {
    let cases = [
        (Event::data("hi"), "data: hi\n\n"),
        (
            Event::data("a\nb\r\nc\rd").id("7").event("tick").retry(500),
            "id: 7\nevent: tick\nretry: 500\ndata: a\ndata: b\ndata: c\ndata: d\n\n",
        ),
        (Event::data("").id("x\ny"), "id: xy\ndata: \n\n"),
    ];
    for (event, want) in cases {
        let mut out = Vec::new();
        event.encode(&mut out);
        assert_eq!(String::from_utf8_lossy(&out), want);
    }
}

#[test]
fn past_the_budget_the_stream_slow_the_longest_goes() {
    use crate::http::budget::ALLOWANCE;
    let wakes = Arc::new(Wakes::default());
    let budget = crate::http::budget::Budget::new(300);
    let (_old_session, old) = started_in(SseConfig::default(), &wakes, None, &budget);
    let (_young_session, young) = started_in(SseConfig::default(), &wakes, None, &budget);
    // A comment line is its text and 4 bytes of framing.
    assert_eq!(old.comment(&"o".repeat(ALLOWANCE + 196)), Ok(()));
    assert_eq!(budget.held(), 200);
    assert_eq!(young.comment(&"y".repeat(ALLOWANCE + 36)), Ok(()));
    assert_eq!(young.comment(&"y".repeat(96)), Ok(()));
    assert!(
        old.is_closed(),
        "the stream over its allowance the longest went"
    );
    assert!(!young.is_closed());
    assert_eq!(budget.refusals(), (0, 1));
    assert_eq!(budget.held(), 40 + 100);
}

#[test]
fn what_a_client_sends_is_dropped_a_share_per_turn() {
    let wakes = Arc::new(Wakes::default());
    let (mut s, _events) = started(SseConfig::default(), &wakes, None);
    let mut pipe = Pipe::new();
    pipe.input
        .extend(vec![b'x'; INPUT_READS_PER_TURN * 512 + 1]);
    let now = Instant::now();
    assert!(matches!(drive(&mut *s, &mut pipe, now), Next::Again));
    assert_eq!(pipe.input.len(), 1);
    assert!(matches!(
        drive(&mut *s, &mut pipe, now),
        Next::Wait { write: false, .. }
    ));
    assert!(pipe.input.is_empty());
}

#[test]
fn a_full_queue_counts_what_is_being_written_and_still_closes() {
    let wakes = Arc::new(Wakes::default());
    // Events of 10 bytes ("data: abc\n\n" is 11); the client takes nothing.
    let (mut s, tx) = started(
        SseConfig::default().heartbeat(None).max_queue(20),
        &wakes,
        None,
    );
    let mut pipe = Pipe::new();
    pipe.room = 0;
    tx.send(Event::data("abc")).expect("room");
    tx.send(Event::data("abc")).expect("11 bytes behind: room");
    assert_eq!(tx.send(Event::data("abc")), Err(SendError::Full));
    // The stream moves its queue to its output, which the client does not take: those bytes
    // are still behind.
    let _ = drive(&mut *s, &mut pipe, Instant::now());
    assert_eq!(
        tx.send(Event::data("abc")),
        Err(SendError::Full),
        "22 bytes in the output count"
    );
    // Full or not, close ends the stream after what is queued.
    tx.close();
    assert!(tx.is_closed());
    assert_eq!(tx.send(Event::data("x")), Err(SendError::Closed));
    pipe.room = usize::MAX;
    assert_eq!(drive(&mut *s, &mut pipe, Instant::now()), Next::Close);
    assert_eq!(
        taken(&mut pipe),
        "16\r\ndata: abc\n\ndata: abc\n\n\r\n0\r\n\r\n"
    );
}

#[test]
fn dropping_the_last_sender_ends_the_stream_after_what_is_queued() {
    let wakes = Arc::new(Wakes::default());
    let (mut s, tx) = started(SseConfig::default().heartbeat(None), &wakes, None);
    let mut pipe = Pipe::new();
    let idle = Next::Wait {
        write: false,
        deadline: None,
    };
    assert_eq!(drive(&mut *s, &mut pipe, Instant::now()), idle);
    let other = tx.clone();
    drop(tx);
    assert_eq!(drive(&mut *s, &mut pipe, Instant::now()), idle, "one left");
    other.send(Event::data("last")).expect("open");
    let woken = wakes.count();
    drop(other);
    assert_eq!(drive(&mut *s, &mut pipe, Instant::now()), Next::Close);
    assert_eq!(taken(&mut pipe), "C\r\ndata: last\n\n\r\n0\r\n\r\n");
    assert!(
        wakes.count() >= woken,
        "the drop wakes the stream if need be"
    );
}
