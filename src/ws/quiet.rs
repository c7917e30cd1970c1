//! How long a WebSocket's peer has been quiet: what the idle timeout and the keepalive ping
//! count from.

use std::time::{Duration, Instant};

use crate::deadline;

/// Since when the peer has sent nothing, and whether it was pinged for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Quiet {
    /// Its last frame came then; not pinged since.
    Since(Instant),
    /// Quiet since then, and pinged for it: no second ping until it speaks.
    Pinged(Instant),
}

impl Quiet {
    /// The peer's last frame came then.
    fn since(self) -> Instant {
        match self {
            Quiet::Since(t) | Quiet::Pinged(t) => t,
        }
    }

    /// When the connection is idle for `timeout` (`None`: never).
    pub(crate) fn idle_at(self, timeout: Option<Duration>) -> Option<Instant> {
        timeout.and_then(|t| deadline::after(self.since(), t))
    }

    /// When a ping is due every `interval` of quiet: none once pinged, until the peer speaks.
    pub(crate) fn ping_at(self, interval: Option<Duration>) -> Option<Instant> {
        match self {
            Quiet::Since(t) => interval.and_then(|i| deadline::after(t, i)),
            Quiet::Pinged(_) => None,
        }
    }

    /// A ping went out.
    pub(crate) fn pinged(self) -> Quiet {
        Quiet::Pinged(self.since())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn one_ping_per_quiet_spell_and_the_idle_deadline_stays() {
        let t0 = Instant::now();
        let quiet = Quiet::Since(t0);
        assert_eq!(quiet.ping_at(Some(S)), Some(t0 + S));
        assert_eq!(quiet.ping_at(None), None);
        let pinged = quiet.pinged();
        assert_eq!(pinged.ping_at(Some(S)), None);
        assert_eq!(pinged.idle_at(Some(3 * S)), Some(t0 + 3 * S));
        assert_eq!(quiet.idle_at(None), None);
    }

    #[test]
    fn a_timeout_past_the_clock_range_never_comes() {
        let quiet = Quiet::Since(Instant::now());
        assert_eq!(quiet.idle_at(Some(Duration::MAX)), None);
        assert_eq!(quiet.ping_at(Some(Duration::MAX)), None);
    }
}
