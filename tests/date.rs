//! The `Date` field follows the clock: each engine thread keeps its own line, formatted again
//! when the second changed, and each response reads the clock, so a response is dated when it
//! is written, after its handler returned, however long the handler or the loop's turn took.
mod support;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::{Client, Engine, Raw, app, start};
use twinhttp::{Request, Response};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

fn unix_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Waits until the next second has begun and 50 ms of it have passed (beyond the coarse
/// clock's lag of a tick); returns that second. (It waits on the clock: the clock is what is
/// tested.)
fn next_second() -> u64 {
    let second = unix_now().as_secs() + 1;
    while unix_now() < Duration::from_secs(second) + Duration::from_millis(50) {
        std::thread::sleep(Duration::from_millis(5));
    }
    second
}

/// The response's `Date`, in seconds since the Unix epoch.
fn date_of(r: &Raw) -> u64 {
    let date = r.header("date").expect("a Date field");
    let at = httpdate::parse_http_date(date).expect("an HTTP date");
    at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

fn a_kept_connection_s_date_moves_with_the_clock(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let before = unix_now().as_secs();
    let first = date_of(&c.roundtrip(GET));
    let after = unix_now().as_secs();
    assert!(
        before.saturating_sub(1) <= first && first <= after,
        "{first} outside {before}..={after}"
    );
    // The same connection and engine thread, in a later second.
    let second = next_second();
    let later = date_of(&c.roundtrip(GET));
    let after = unix_now().as_secs();
    assert!(
        second <= later && later <= after,
        "{later} outside {second}..={after}"
    );
}

fn a_slow_handler_s_response_is_dated_when_it_returns(engine: Engine) {
    // The handler returns once the second it was called in has ended, and says which second
    // that was.
    let srv = start(engine, |_req: &mut Request<'_>| {
        Response::text(next_second().to_string())
    });
    let mut c = Client::new(srv.addr);
    for _ in 0..2 {
        let r = c.roundtrip(GET);
        let returned: u64 = r.text().parse().expect("the handler's second");
        let dated = date_of(&r);
        assert!(
            returned <= dated && dated <= unix_now().as_secs(),
            "dated {dated}, returned in {returned}"
        );
    }
}

engine_tests!(
    a_kept_connection_s_date_moves_with_the_clock,
    a_slow_handler_s_response_is_dated_when_it_returns
);
