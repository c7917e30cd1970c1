//! Feature `metrics`: `stats::publish` hands a snapshot to the installed `metrics` recorder,
//! counters as counters and gauges as gauges, refusals labelled by reason.
mod support;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use support::{Client, Engine, app, probe, start};

/// A published metric: its name, its labels and its value.
type Published = (String, Vec<(String, String)>, DebugValue);

/// What was published under `name` with `labels`, if anything.
fn value(published: &[Published], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    published
        .iter()
        .find(|(n, l, _)| {
            n == name
                && l.len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, v)| match v {
            DebugValue::Counter(c) => *c as f64,
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Histogram(_) => f64::NAN,
        })
}

fn publishes_a_snapshot(engine: Engine) {
    let srv = start(engine, app);
    let mut idle = Client::new(srv.addr);
    assert_eq!(idle.request("GET /", "").status, 200);
    let (refused, _) = probe(
        srv.addr,
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n",
    );
    assert_eq!(refused.status, 400);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let stats = loop {
        let s = srv.stats();
        if s.active == 1 && s.waiting == 1 {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "{s:#?}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || twinhttp::stats::publish(&stats));
    let published: Vec<Published> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, v)| {
            let (name, labels) = key.key().clone().into_parts();
            let labels = labels
                .into_iter()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            (name.as_str().to_owned(), labels, v)
        })
        .collect();
    assert_eq!(value(&published, "twinhttp_requests_total", &[]), Some(1.0));
    assert_eq!(value(&published, "twinhttp_accepted_total", &[]), Some(2.0));
    assert_eq!(
        value(&published, "twinhttp_connections_active", &[]),
        Some(1.0)
    );
    assert_eq!(
        value(&published, "twinhttp_connections_waiting", &[]),
        Some(1.0)
    );
    let bad = value(&published, "twinhttp_refused_total", &[("reason", "400")]);
    assert_eq!(bad, Some(1.0), "{published:#?}");
    let slow = value(
        &published,
        "twinhttp_refused_total",
        &[("reason", "too_slow")],
    );
    assert_eq!(slow, Some(0.0));
    let loops = (0..stats.per_loop.len())
        .filter_map(|i| {
            value(
                &published,
                "twinhttp_loop_connections",
                &[("loop", &i.to_string())],
            )
        })
        .sum::<f64>();
    assert_eq!(loops, if engine.is_reactor() { 1.0 } else { 0.0 });
}

engine_tests!(publishes_a_snapshot);
