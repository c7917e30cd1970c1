//! The `Date` header field: the clock read for each response, the line formatted once a
//! second, kept by each engine thread.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
fn unix_second() -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let ts = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        if let Ok(second) = u64::try_from(ts.tv_sec) {
            return second;
        }
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// An engine thread's `Date` field line (the reactor's loop, the server engine's parker and
/// each worker own one; the driver's `Cx` carries it). Each response reads the clock, and the
/// line is formatted again only when the second changed. Owned by the thread rather than kept
/// in a thread-local, it costs no lookup: a response's `Date` cost 73 user instructions with
/// the thread-local, the clock read, the copy and the lookup among them.
pub(crate) struct DateLine {
    second: u64,
    line: [u8; LINE_LEN],
}

impl DateLine {
    /// A line for the current second.
    pub(crate) fn new() -> Self {
        let mut line = DateLine {
            second: 0,
            line: [0; LINE_LEN],
        };
        line.format(unix_second());
        line
    }

    /// Appends `Date: `, the current date as an IMF-fixdate, CRLF.
    #[inline]
    pub(crate) fn append(&mut self, out: &mut Vec<u8>) {
        let second = unix_second();
        if second != self.second {
            self.format(second);
        }
        out.extend_from_slice(&self.line);
    }

    #[cold]
    fn format(&mut self, second: u64) {
        let mut line = [0u8; LINE_LEN];
        let mut cursor = &mut line[..];
        let date = UNIX_EPOCH + Duration::from_secs(second);
        let _ = write!(cursor, "Date: {}\r\n", httpdate::HttpDate::from(date));
        self.line = line;
        self.second = second;
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
    fn the_line_is_formatted_again_once_the_second_changed() {
        use super::{DateLine, LINE_LEN, unix_second};
        let line = |date: &mut DateLine| {
            let mut out = Vec::new();
            date.append(&mut out);
            out
        };
        let stale = [b'x'; LINE_LEN];
        // A line of another second: formatted again at once.
        let mut date = DateLine {
            second: 0,
            line: stale,
        };
        let now = line(&mut date);
        assert!(
            now.starts_with(b"Date: ") && now.ends_with(b" GMT\r\n"),
            "{now:?}"
        );
        // A line of this second is kept as it is (unless the second ended meanwhile).
        let second = unix_second();
        let mut date = DateLine {
            second,
            line: stale,
        };
        let kept = line(&mut date);
        assert!(kept == stale || unix_second() != second, "{kept:?}");
    }
}
