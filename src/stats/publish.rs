//! The live counters through the `metrics` facade (feature `metrics`).

use metrics::{counter, gauge};

use super::{Refusal, Stats};

/// Publishes a [`Stats`] snapshot through the `metrics` facade, to whatever recorder the
/// program installed (a Prometheus exporter, say): counters as counters (set to their
/// absolute value), gauges as gauges, all named `twinhttp_*`; refusals as
/// `twinhttp_refused_total` with a `reason` label (`over_capacity`, `header_timeout`,
/// `too_slow`, or the status, `431`); connections per reactor loop as `twinhttp_loop_connections`
/// with a `loop` label. Nothing is recorded on the hot path: call this periodically (every
/// scrape, every few seconds) from a thread of your own.
///
/// ```no_run
/// use std::time::Duration;
/// use twinhttp::{Response, handler_fn, reactor::Reactor};
///
/// let reactor = Reactor::builder().serve("127.0.0.1:8080", handler_fn(|_| Response::text("hi")))?;
/// while reactor.open_connections() < usize::MAX {
///     twinhttp::stats::publish(&reactor.stats());
///     std::thread::sleep(Duration::from_secs(5));
/// }
/// # Ok::<(), twinhttp::Error>(())
/// ```
pub fn publish(stats: &Stats) {
    counter!("twinhttp_accepted_total").absolute(stats.accepted);
    counter!("twinhttp_handled_total").absolute(stats.handled);
    counter!("twinhttp_requests_total").absolute(stats.requests);
    counter!("twinhttp_handler_panics_total").absolute(stats.panics);
    counter!("twinhttp_reads_paused_total").absolute(stats.reads_paused);
    let gauges = [
        ("twinhttp_connections_active", stats.active),
        ("twinhttp_connections_waiting", stats.waiting),
        ("twinhttp_connections_reading", stats.reading),
        ("twinhttp_connections_queued", stats.queued),
        ("twinhttp_connections_writing", stats.writing),
        ("twinhttp_connections_closing", stats.closing),
        ("twinhttp_connections_parked", stats.parked),
        ("twinhttp_websockets", stats.websockets),
        ("twinhttp_event_streams", stats.event_streams),
        ("twinhttp_upgraded", stats.upgraded),
        ("twinhttp_threads", stats.threads),
        ("twinhttp_memory_held_bytes", stats.memory_held),
        ("twinhttp_memory_budget_bytes", stats.memory_budget),
    ];
    for (name, value) in gauges {
        gauge!(name).set(value as f64);
    }
    for (i, n) in stats.per_loop.iter().enumerate() {
        gauge!("twinhttp_loop_connections", "loop" => i.to_string()).set(*n as f64);
    }
    for &(why, n) in &stats.refused {
        let reason = match why {
            Refusal::OverCapacity => "over_capacity".to_owned(),
            Refusal::HeaderTimeout => "header_timeout".to_owned(),
            Refusal::TooSlow => "too_slow".to_owned(),
            Refusal::HeadOverBudget => "head_over_budget".to_owned(),
            Refusal::BodyOverBudget => "body_over_budget".to_owned(),
            Refusal::SessionOverBudget => "session_over_budget".to_owned(),
            Refusal::Status(s) => s.to_string(),
        };
        counter!("twinhttp_refused_total", "reason" => reason).absolute(n);
    }
}
