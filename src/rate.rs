//! Minimum data rates: the rule that replaces per-engine read and write timeouts. A request body
//! that arrives slower, or a client that takes a response (or a WebSocket's or event stream's
//! output) slower, is cut off; a slow client costs a connection for a bounded time, never a
//! worker for as long as it likes.

use std::time::{Duration, Instant};

use crate::deadline;

/// The slowest transfer a connection may keep up: after `grace`, a transfer that has averaged
/// fewer than `bytes_per_second` over the time it waited on the client is cut off. Time the
/// server itself spends (a handler computing between reads of its body, a stream producing its
/// next piece) does not count. The anchor is ASP.NET Core Kestrel's `MinDataRate`; the default is
/// its default, 240 bytes/s after a 5 s grace period. A request body's bytes earn what they are
/// worth at the rate. Output's credit never exceeds the grace period and twice the time waited
/// when its bytes were seen taken: a client far above the rate may pause for as long as it has
/// waited so far and the grace period more, not for all its bytes are worth at the rate (a
/// receive buffer's worth taken at once is not a reader's progress).
///
/// A request body that is too slow is answered `408 Request Timeout` and the connection closed
/// (lingering); a response, WebSocket or event stream whose client reads too slowly is closed.
///
/// ```
/// use std::time::Duration;
/// use twinhttp::MinRate;
///
/// let strict = MinRate::new(1024, Duration::from_secs(2));
/// assert_eq!(MinRate::default(), MinRate::new(240, Duration::from_secs(5)));
/// # let _ = strict;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MinRate {
    /// The average a transfer must keep up once the grace period is over. 0 means no minimum.
    pub bytes_per_second: u64,
    /// How long a transfer may wait on its client before the rate applies.
    pub grace: Duration,
}

impl MinRate {
    /// A minimum of `bytes_per_second` after `grace`.
    pub const fn new(bytes_per_second: u64, grace: Duration) -> Self {
        MinRate {
            bytes_per_second,
            grace,
        }
    }

    /// What `bytes` are worth at the rate: the time they allow the transfer to wait.
    fn worth(&self, bytes: u64) -> Duration {
        let r = self.bytes_per_second;
        if r == 0 {
            return Duration::MAX;
        }
        let nanos = u128::from(bytes % r) * 1_000_000_000 / u128::from(r);
        Duration::from_secs(bytes / r).saturating_add(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }

    /// How long a transfer with `credit` may have waited in all: its credit, at least the
    /// grace period. `None` when there is no minimum.
    fn allowance(&self, credit: Duration) -> Option<Duration> {
        (self.bytes_per_second != 0).then(|| credit.max(self.grace))
    }
}

impl Default for MinRate {
    fn default() -> Self {
        MinRate::new(240, Duration::from_secs(5))
    }
}

/// Which way a metered transfer goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    /// A request body: what the server reads is the client's progress, worth its all.
    Input,
    /// Output: what the socket took may sit in the client's receive buffer, which the server
    /// cannot see; bytes earn credit at the rate, capped ([`Progress::next_deadline`]).
    Output,
}

/// A minimum rate and the way the transfer it judges goes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rule {
    rate: MinRate,
    flow: Flow,
}

/// One transfer measured against a [`MinRate`], sans-I/O: the engine says when it starts waiting
/// on the peer and when bytes move; the meter says until when the wait may last.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Meter {
    /// No minimum rate.
    Off,
    /// The transfer has not had to wait on the peer yet. Bytes a socket took (or had) at once
    /// earn no credit, so a client that stops reading after its socket buffers filled is cut at
    /// the end of the grace period, not megabytes later.
    Unhindered(Rule),
    /// The transfer waits on the peer, since `since`.
    Waiting {
        rule: Rule,
        since: Instant,
        done: Progress,
    },
    /// The transfer has waited on the peer and does not wait now.
    Moving { rule: Rule, done: Progress },
}

/// What a transfer did once it first had to wait on the peer.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Progress {
    /// Bytes moved.
    bytes: u64,
    /// Time spent waiting on the peer, waits that ended.
    waited: Duration,
    /// Output: the bytes its socket held unacknowledged when it first waited, where the
    /// transport knows ([`Transport::unacknowledged`](crate::Transport::unacknowledged)).
    held_at_first_wait: Option<usize>,
    /// When the peer's progress was last seen.
    seen: Seen,
}

/// What the peer had taken when its progress was last seen, and the credit it had earned by
/// then: how long the transfer may have waited in all (at least the grace period).
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    taken: u64,
    credit: Duration,
}

impl Progress {
    /// The bytes moved that the peer took: those the socket holds unacknowledged beyond what it
    /// held at the first wait went into room its send buffer grew, not to the peer.
    fn taken(&self, held_now: Option<usize>) -> u64 {
        match (self.held_at_first_wait, held_now) {
            (Some(first), Some(now)) => {
                let grown = u64::try_from(now.saturating_sub(first)).unwrap_or(u64::MAX);
                self.bytes.saturating_sub(grown)
            }
            _ => self.bytes,
        }
    }

    /// The deadline of a wait that began at `since`, asked at `now` with `taken` bytes taken
    /// by the peer. Input earns what its bytes are worth at the rate. Output's new bytes add
    /// their worth to the credit, which never exceeds the grace period and twice the time
    /// waited when they were seen: a client that reads nothing has its kernel take a receive
    /// buffer's worth after the output first waits (tens of kilobytes to megabytes: minutes to
    /// hours at the default rate), which buys it about a grace period when seen at once and
    /// three when seen at the first deadline (Linux reports a grown send buffer writable only
    /// once a third of it is free); a client that goes on reading may pause, at most, for the
    /// grace period and the time it has waited so far; and what reads after the cap earn is
    /// their own worth, so a few small reads do not unlock the credit the cap withheld.
    fn next_deadline(
        &mut self,
        rule: Rule,
        since: Instant,
        now: Instant,
        taken: u64,
    ) -> Option<Instant> {
        if taken > self.seen.taken {
            let credit = match rule.flow {
                Flow::Input => rule.rate.worth(taken),
                Flow::Output => {
                    let waited = self
                        .waited
                        .saturating_add(now.saturating_duration_since(since));
                    let cap = rule.rate.grace.saturating_add(waited.saturating_mul(2));
                    let new = rule.rate.worth(taken.saturating_sub(self.seen.taken));
                    self.seen.credit.saturating_add(new).min(cap)
                }
            };
            self.seen = Seen { taken, credit };
        }
        let allowance = rule.rate.allowance(self.seen.credit)?;
        deadline::after(since, allowance.saturating_sub(self.waited))
    }
}

impl Meter {
    /// Output (a response, a WebSocket's or an event stream's) that has moved nothing yet;
    /// `None`: no minimum.
    #[inline]
    pub(crate) fn output(rate: Option<MinRate>) -> Self {
        Meter::new(rate, Flow::Output)
    }

    /// A request body that has moved nothing yet; `None`: no minimum.
    #[inline]
    pub(crate) fn input(rate: Option<MinRate>) -> Self {
        Meter::new(rate, Flow::Input)
    }

    #[inline]
    fn new(rate: Option<MinRate>, flow: Flow) -> Self {
        match rate {
            Some(rate) => Meter::Unhindered(Rule { rate, flow }),
            None => Meter::Off,
        }
    }

    /// The transfer waits on the peer from `now` (or from when the wait under way began): when
    /// it falls below the rate if nothing moves. `None`: never. `unacknowledged`: for output,
    /// what its socket holds that the peer has not acknowledged, where the transport knows
    /// (bytes the kernel took into a grown send buffer are not the peer's progress); asked
    /// only when there is a rate (it may be a system call). Asked again once the deadline
    /// passed, with what moved since, it moves the deadline on if the transfer is still above
    /// the rate ([`Progress::next_deadline`]).
    pub(crate) fn deadline(
        &mut self,
        now: Instant,
        unacknowledged: impl FnOnce() -> Option<usize>,
    ) -> Option<Instant> {
        // What the socket holds now: asked at the first wait (growth is counted from there),
        // and afterwards only of a transport that answered then.
        let (rule, since, done, held_now) = match *self {
            Meter::Off => return None,
            // (A rate of 0 is none: the transport is not asked.)
            Meter::Unhindered(rule) if rule.rate.bytes_per_second == 0 => return None,
            Meter::Unhindered(rule) => {
                let held = unacknowledged();
                let first = Progress {
                    held_at_first_wait: held,
                    ..Progress::default()
                };
                (rule, now, first, held)
            }
            Meter::Waiting { rule, since, done } => {
                let held = done.held_at_first_wait.and_then(|_| unacknowledged());
                (rule, since, done, held)
            }
            Meter::Moving { rule, done } => {
                let held = done.held_at_first_wait.and_then(|_| unacknowledged());
                (rule, now, done, held)
            }
        };
        let mut done = done;
        let until = done.next_deadline(rule, since, now, done.taken(held_now));
        *self = Meter::Waiting { rule, since, done };
        until
    }

    /// The transfer is over (all of its output is out): the next one starts unhindered, at the
    /// same rate.
    #[inline]
    pub(crate) fn restart(&mut self) {
        if let Meter::Waiting { rule, .. } | Meter::Moving { rule, .. } = *self {
            *self = Meter::Unhindered(rule);
        }
    }

    /// Whether the transfer waits on the peer now: its last attempt to get output out had to
    /// wait (bytes queued, or held by the transport: TLS), and nothing has moved since.
    #[inline]
    pub(crate) fn is_waiting(&self) -> bool {
        matches!(self, Meter::Waiting { .. })
    }

    /// Whether the transfer has waited on the peer: what moves earns credit from then on.
    #[inline]
    pub(crate) fn has_waited(&self) -> bool {
        matches!(self, Meter::Waiting { .. } | Meter::Moving { .. })
    }

    /// `n` bytes moved at `now`; the wait under way, if any, ends.
    #[inline]
    pub(crate) fn moved(&mut self, now: Instant, n: usize) {
        match self {
            Meter::Off | Meter::Unhindered(_) => {}
            Meter::Waiting { rule, since, done } => {
                let done = Progress {
                    bytes: done.bytes.saturating_add(n as u64),
                    waited: done
                        .waited
                        .saturating_add(now.saturating_duration_since(*since)),
                    ..*done
                };
                *self = Meter::Moving { rule: *rule, done };
            }
            Meter::Moving { done, .. } => done.bytes = done.bytes.saturating_add(n as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trickle_is_cut_at_the_grace_period_and_a_steady_stream_is_not() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut m = Meter::output(Some(MinRate::default()));
        assert_eq!(m.deadline(t0, || None), Some(t0 + 5 * s));
        // Two bytes a second: the deadline stays at the end of the grace period.
        for i in 1..5 {
            m.moved(t0 + i * s, 2);
            assert_eq!(m.deadline(t0 + i * s, || None), Some(t0 + 5 * s));
        }
        // 1,200 bytes a second: each second buys five more, up to the grace period and twice
        // the time waited (25 s after 10).
        let mut m = Meter::output(Some(MinRate::default()));
        for i in 1..=10 {
            m.deadline(t0 + (i - 1) * s, || None);
            m.moved(t0 + i * s, 1200);
        }
        assert_eq!(m.deadline(t0 + 10 * s, || None), Some(t0 + 25 * s));
        // 480 bytes a second, twice the rate: each second buys two, the pace it keeps.
        let mut m = Meter::output(Some(MinRate::default()));
        for i in 1..=10 {
            m.deadline(t0 + (i - 1) * s, || None);
            m.moved(t0 + i * s, 480);
        }
        assert_eq!(m.deadline(t0 + 10 * s, || None), Some(t0 + 20 * s));
    }

    #[test]
    fn bytes_before_the_first_wait_earn_no_credit() {
        let t0 = Instant::now();
        let mut m = Meter::output(Some(MinRate::default()));
        m.moved(t0, 4 << 20);
        assert_eq!(m.deadline(t0, || None), Some(t0 + Duration::from_secs(5)));
    }

    /// Bytes the kernel took into send-buffer room that grew after the first wait, and still
    /// holds unacknowledged, are not the peer's: 4 MiB taken that way by a client that reads
    /// nothing earns nothing (it earned 4.6 hours at 240 B/s); what the peer acknowledged
    /// counts.
    #[test]
    fn bytes_a_grown_send_buffer_holds_earn_no_credit() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut m = Meter::output(Some(MinRate::default()));
        // 128 KiB held unacknowledged when the output first waits.
        assert_eq!(m.deadline(t0, || Some(128 << 10)), Some(t0 + 5 * s));
        // The buffer grows: 4 MiB more taken, all of it still held, after a minute's wait.
        m.moved(t0 + 60 * s, 4 << 20);
        let held = (128 << 10) + (4 << 20);
        assert_eq!(m.deadline(t0 + 60 * s, || Some(held)), Some(t0 + 60 * s));
        // The peer acknowledges 24,000 bytes: 100 s at 240 B/s, counted from the first wait
        // (a minute of it spent).
        assert_eq!(
            m.deadline(t0 + 60 * s, || Some(held - 24_000)),
            Some(t0 + 100 * s)
        );
        // Where the transport cannot tell, every byte taken counts.
        let mut m = Meter::output(Some(MinRate::default()));
        m.deadline(t0, || None);
        m.moved(t0 + 60 * s, 24_000);
        assert_eq!(m.deadline(t0 + 60 * s, || None), Some(t0 + 100 * s));
    }

    /// The transport is asked (a system call) only where there is a rate, and after the first
    /// wait only if it answered then.
    #[test]
    fn the_transport_is_asked_only_where_its_answer_counts() {
        let now = Instant::now();
        let asked = std::cell::Cell::new(0);
        let ask = |held: Option<usize>| {
            asked.set(asked.get() + 1);
            held
        };
        Meter::output(None).deadline(now, || ask(Some(1)));
        Meter::output(Some(MinRate::new(0, Duration::from_secs(1)))).deadline(now, || ask(Some(1)));
        assert_eq!(asked.get(), 0, "no rate");
        let mut m = Meter::output(Some(MinRate::default()));
        m.deadline(now, || ask(None));
        m.moved(now, 10);
        m.deadline(now, || ask(None));
        assert_eq!(asked.get(), 1, "a transport that cannot tell is asked once");
        let mut m = Meter::output(Some(MinRate::default()));
        m.deadline(now, || ask(Some(5)));
        m.moved(now, 10);
        m.deadline(now, || ask(Some(5)));
        assert_eq!(asked.get(), 3);
    }

    /// Credit is at most the grace period and twice the time waited when the progress was
    /// seen. 95 KB taken after the output first waits (a stalled client's receive buffer
    /// filling; 396 s of credit at the rate) buys 15 s seen at the first deadline, and 7 s
    /// seen by a writable event a second into the wait (it bought the 396 s: found by review).
    /// Progress below the rate buys nothing; a reader that goes on reading may pause for as
    /// long as it has waited, and a grace period more.
    #[test]
    fn credit_is_at_most_the_grace_period_and_twice_the_time_waited() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut m = Meter::output(Some(MinRate::default()));
        assert_eq!(m.deadline(t0, || None), Some(t0 + 5 * s));
        m.moved(t0 + 5 * s, 95_000);
        assert_eq!(m.deadline(t0 + 5 * s, || None), Some(t0 + 15 * s));
        // Nothing more: its deadline stands, passed, whatever the bytes were worth.
        let mut stalled = m;
        assert_eq!(stalled.deadline(t0 + 15 * s, || None), Some(t0 + 15 * s));
        // Seen a second into the wait.
        let mut early = Meter::output(Some(MinRate::default()));
        early.deadline(t0, || None);
        early.moved(t0 + s, 95_000);
        assert_eq!(early.deadline(t0 + s, || None), Some(t0 + 7 * s));
        // Less than the rate asks (1,199 bytes in 5 s) seen at the first deadline: it stands.
        let mut slow = Meter::output(Some(MinRate::default()));
        slow.deadline(t0, || None);
        slow.moved(t0 + 5 * s, 1199);
        assert_eq!(slow.deadline(t0 + 5 * s, || None), Some(t0 + 5 * s));
        // 4,800 bytes more at 15 s: 35 s.
        m.moved(t0 + 15 * s, 4800);
        assert_eq!(m.deadline(t0 + 15 * s, || None), Some(t0 + 35 * s));
    }

    /// A client that reads far above the rate and then stops (a receive buffer Linux grew
    /// while it read, filled) may pause as long as it had waited and a grace period more, not
    /// for what its bytes are worth at the rate (2 MB: 2.3 hours at 240 B/s, kept before).
    #[test]
    fn a_reader_that_stops_after_reading_fast_is_cut_after_as_long_again() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut m = Meter::output(Some(MinRate::default()));
        m.deadline(t0, || None);
        for i in 1..=20 {
            m.moved(t0 + i * s, 100_000);
            m.deadline(t0 + i * s, || None);
        }
        assert_eq!(m.deadline(t0 + 20 * s, || None), Some(t0 + 45 * s));
    }

    /// Reads after the cap earn their own worth: a client whose kernel took 4 MB at once (17,476
    /// s at the rate, capped at the grace period) and that then reads one 1,448-byte segment
    /// just before each deadline is cut after ten of them, about a minute: each bought 6 s.
    /// (Found by review: with the credit counted over all bytes taken, each such read doubled
    /// the time allowed, ten kept it 4.9 hours.)
    #[test]
    fn a_few_small_reads_do_not_unlock_a_receive_buffers_credit() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let mut m = Meter::output(Some(MinRate::default()));
        m.deadline(t0, || None);
        m.moved(t0 + 100 * ms, 4 << 20);
        let mut due = m.deadline(t0 + 100 * ms, || None).expect("a deadline");
        assert_eq!(due, t0 + 5200 * ms);
        for _ in 0..10 {
            let now = due - ms;
            m.moved(now, 1448);
            due = m.deadline(now, || None).expect("a deadline");
        }
        assert!(due < t0 + Duration::from_secs(70), "kept {:?}", due - t0);
        // Nothing more: cut there.
        assert_eq!(m.deadline(due, || None), Some(due));
    }

    /// Input earns what its bytes are worth: an uploader whose 2 MB a slow handler drains over
    /// 3 s (time the server spends, not counted) may pause for what they are worth (2,097 s at
    /// 1,000 B/s), not for the grace period and twice the 1 ms it waited (found by review: the
    /// output's cap cut it at 1.2 s). Its receive buffer is the server's own socket.
    #[test]
    fn an_uploader_earns_what_its_bytes_are_worth() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let rate = MinRate::new(1000, Duration::from_secs(1));
        let mut m = Meter::input(Some(rate));
        m.deadline(t0, || None);
        m.moved(t0 + ms, 2 << 20);
        let later = t0 + 3000 * ms;
        let worth = Duration::from_micros(2_097_152_000);
        assert_eq!(m.deadline(later, || None), Some(later + worth - ms));
        // The same as output: capped.
        let mut m = Meter::output(Some(rate));
        m.deadline(t0, || None);
        m.moved(t0 + ms, 2 << 20);
        assert_eq!(m.deadline(later, || None), Some(later + 1001 * ms));
    }

    /// A reader far above the rate whose progress comes in steps more than a grace period
    /// apart (TCP reopening a shut window by 64 KiB: 8 KB/s, 34 times the default rate), each
    /// seen only at the deadline after it (no writable event: a grown send buffer), is kept
    /// (found by review: with one grace period a window it was cut at 10 s).
    #[test]
    fn a_reader_whose_progress_is_seen_only_at_deadlines_is_kept() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let mut m = Meter::output(Some(MinRate::default()));
        let mut due = m.deadline(t0, || None).expect("a deadline");
        let mut next_step = t0 + 3000 * ms;
        while due < t0 + 120_000 * ms {
            let now = due;
            let mut seen = 0;
            while next_step <= now {
                seen += 64 << 10;
                next_step += 8000 * ms;
            }
            m.moved(now, seen);
            let next = m.deadline(now, || None).expect("a deadline");
            assert!(next > now, "cut at {:?}", now - t0);
            due = next;
        }
    }

    #[test]
    fn only_time_spent_waiting_counts() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut m = Meter::output(Some(MinRate::new(100, 2 * s)));
        m.deadline(t0, || None);
        m.moved(t0 + s, 0);
        // The server worked for an hour without waiting on the peer.
        let later = t0 + 3600 * s;
        assert_eq!(m.deadline(later, || None), Some(later + s));
    }

    #[test]
    fn off_and_huge_values_never_overflow() {
        let now = Instant::now();
        assert_eq!(Meter::output(None).deadline(now, || None), None);
        assert_eq!(
            Meter::output(Some(MinRate::new(0, Duration::ZERO))).deadline(now, || None),
            None
        );
        let mut m = Meter::output(Some(MinRate::new(1, Duration::MAX)));
        assert_eq!(m.deadline(now, || None), None);
        let mut m = Meter::output(Some(MinRate::new(u64::MAX, Duration::ZERO)));
        m.moved(now, usize::MAX);
        m.moved(now, usize::MAX);
        assert!(m.deadline(now, || None).is_some());
    }
}
