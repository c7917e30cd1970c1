//! The `Date` header value, formatted at most once a second per thread.

use std::cell::RefCell;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
const DATE_LEN: usize = 29;

struct Cached {
    second: u64,
    text: [u8; DATE_LEN],
}

thread_local! {
    static CACHE: RefCell<Cached> = const { RefCell::new(Cached { second: u64::MAX, text: [0; DATE_LEN] }) };
}

/// Appends the current date as an IMF-fixdate. Reads the clock (a vDSO call, not a syscall) and
/// formats only when the second changed since this thread last asked.
pub(crate) fn append_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.second != second {
            let mut text = [0u8; DATE_LEN];
            let mut cursor = &mut text[..];
            let _ = write!(cursor, "{}", httpdate::HttpDate::from(now));
            c.text = text;
            c.second = second;
        }
        out.extend_from_slice(&c.text);
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn date_is_an_imf_fixdate() {
        let mut out = Vec::new();
        super::append_date(&mut out);
        let s = String::from_utf8(out).unwrap_or_default();
        assert_eq!(s.len(), 29);
        assert!(s.ends_with(" GMT"), "{s}");
        assert!(httpdate::parse_http_date(&s).is_ok(), "{s}");
    }
}
