//! Deadlines from configured durations. A duration too long to add to the clock (`Duration::MAX`
//! is the natural way to say "never") means no deadline, never a panic.

use std::time::{Duration, Instant};

/// `now + after`, or `None` ("never") when that is past what an `Instant` can hold.
pub(crate) fn after(now: Instant, after: Duration) -> Option<Instant> {
    now.checked_add(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_saturates_to_none() {
        let now = Instant::now();
        assert_eq!(after(now, Duration::MAX), None);
        assert_eq!(
            after(now, Duration::from_secs(1)),
            Some(now + Duration::from_secs(1))
        );
    }
}
