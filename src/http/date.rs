//! The `Date` header field: the real-time clock read and the line formatted once a second per
//! engine thread.

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
const DATE_LEN: usize = 29;

/// `Date: `, the date, CRLF.
const LINE_LEN: usize = DATE_LEN + 8;

/// Time since the Unix epoch, from the coarse real-time clock where there is one: a `Date`
/// header has one-second resolution, and `CLOCK_REALTIME_COARSE` is a vDSO read of the time of
/// the last tick (a few milliseconds behind at most), several times cheaper than the precise
/// clock — it showed as 4% of the reactor's time on pipelined hello requests (3.3 ns a read
/// against 35.5 ns for `SystemTime::now()` here).
///
/// Only on glibc Linux, where rustix finds the vDSO through `getauxval` (its `use-libc-auxv`
/// feature, set in Cargo.toml for this target alone): that is what keeps this read working
/// under valgrind. Elsewhere (musl, Android, the BSDs, macOS) the libc's own clock read, which
/// valgrind knows.
fn unix_time() -> Duration {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let ts = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        if let (Ok(secs), Ok(nanos)) = (u64::try_from(ts.tv_sec), u32::try_from(ts.tv_nsec)) {
            return Duration::new(secs, nanos);
        }
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// An engine thread's `Date` field line. The real-time clock is read once a second, not once a
/// response: [`refresh`](Self::refresh) is given the turn's monotonic time (which the engine
/// reads anyway, for its deadlines) and reads the clock again only once that passes the end of
/// the second the line holds. Between, a response costs the line's copy. The second ends on the
/// monotonic clock where the real-time clock said it would, so a step of the real-time clock
/// (an administrator setting it) shows within a second.
pub(crate) struct DateLine {
    /// Until when (on the monotonic clock) the line holds: the end of its second.
    until: Instant,
    second: u64,
    line: [u8; LINE_LEN],
}

impl DateLine {
    /// A line for the current second.
    pub(crate) fn new() -> Self {
        let now = Instant::now();
        let mut line = DateLine {
            until: now,
            second: u64::MAX,
            line: [0; LINE_LEN],
        };
        line.read_clock(now);
        line
    }

    /// Brings the line up to `now`, the turn's time: a comparison while the second lasts, a
    /// clock read (a vDSO call, not a system call) after it.
    #[inline]
    pub(crate) fn refresh(&mut self, now: Instant) {
        if now >= self.until {
            self.read_clock(now);
        }
    }

    /// Appends the line as of the last [`refresh`](Self::refresh): `Date: `, the date as an
    /// IMF-fixdate, CRLF.
    #[inline]
    pub(crate) fn append(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.line);
    }

    #[cold]
    fn read_clock(&mut self, now: Instant) {
        let time = unix_time();
        let second = time.as_secs();
        if self.second != second {
            let mut line = [0u8; LINE_LEN];
            let mut cursor = &mut line[..];
            let date = UNIX_EPOCH + Duration::from_secs(second);
            let _ = write!(cursor, "Date: {}\r\n", httpdate::HttpDate::from(date));
            self.line = line;
            self.second = second;
        }
        let left = Duration::from_secs(1)
            .saturating_sub(Duration::from_nanos(u64::from(time.subsec_nanos())));
        // (Past the end of the monotonic clock's range: `now`, read again every time.)
        self.until = now.checked_add(left).unwrap_or(now);
    }
}

impl Default for DateLine {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_date_line_holds_an_imf_fixdate() {
        let mut out = Vec::new();
        super::DateLine::new().append(&mut out);
        let line = String::from_utf8(out).unwrap_or_default();
        let s = line
            .strip_prefix("Date: ")
            .and_then(|s| s.strip_suffix("\r\n"))
            .unwrap_or_default();
        assert_eq!(s.len(), 29, "{line:?}");
        assert!(s.ends_with(" GMT"), "{s}");
        let sent = httpdate::parse_http_date(s);
        assert!(sent.is_ok(), "{s}");
        // The coarse clock lags the precise one by a tick, never by a second or more.
        if let Ok(sent) = sent {
            let now = std::time::SystemTime::now();
            let lag = now.duration_since(sent).unwrap_or_default();
            assert!(
                lag < std::time::Duration::from_secs(2),
                "{s} is {lag:?} behind"
            );
            assert!(
                sent <= now + std::time::Duration::from_secs(1),
                "{s} is ahead"
            );
        }
    }

    #[test]
    fn the_clock_is_read_again_only_once_the_second_has_ended() {
        use super::{DateLine, LINE_LEN};
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let stale = [b'x'; LINE_LEN];
        let mut date = DateLine {
            until: t0 + Duration::from_secs(1),
            second: 0,
            line: stale,
        };
        let line = |date: &DateLine| {
            let mut out = Vec::new();
            date.append(&mut out);
            out
        };
        // Within the second: the line is the one held, whatever the clock says.
        date.refresh(t0 + Duration::from_millis(999));
        assert_eq!(line(&date), stale);
        // Its end passed: the clock is read and the line is today's.
        date.refresh(t0 + Duration::from_secs(1));
        let now = line(&date);
        assert!(
            now.starts_with(b"Date: ") && now.ends_with(b" GMT\r\n"),
            "{now:?}"
        );
        assert!(
            date.until > t0 + Duration::from_secs(1) && date.until <= t0 + Duration::from_secs(2),
            "{:?}",
            date.until
        );
    }
}
