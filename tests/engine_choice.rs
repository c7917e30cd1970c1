//! One way to choose the engine: `twinhttp::Builder` takes the shared settings once and serves
//! on whichever `Engine` it is given; each engine's own settings go through `.server(..)` and
//! `.reactor(..)` and apply only to that engine. Checked over real sockets on every engine.
mod support;
use std::time::{Duration, Instant};

use support::Client;
use twinhttp::{Engine, Limits, Response, handler_fn};

fn engines() -> Vec<Engine> {
    vec![
        Engine::Reactor,
        Engine::ReactorPool,
        #[cfg(feature = "server")]
        Engine::Server,
    ]
}

#[test]
fn shared_settings_are_set_once_and_hold_on_every_engine() {
    for engine in engines() {
        let mut limits = Limits::default();
        limits.max_target_bytes = 64;
        #[cfg_attr(not(feature = "server"), allow(unused_mut))]
        let mut builder = engine
            .builder()
            .limits(limits)
            .header_read_timeout(Duration::from_millis(300))
            .reactor(|r| r.loops(1));
        #[cfg(feature = "server")]
        {
            builder = builder.server(|s| s.workers(2));
        }
        assert_eq!(builder.engine(), engine);
        let stats = builder.stats_handle();
        let running = builder
            .serve(
                "127.0.0.1:0",
                handler_fn(move |_| Response::text(stats.stats().requests.to_string())),
            )
            .expect("serve");
        let addr = running.local_addr();
        // The handler reads the counters through the handle the builder gave.
        let r = Client::new(addr).roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!((r.status, r.text()), (200, "1".to_owned()), "{engine:?}");
        // The shared limit holds: a target over 64 bytes is 414.
        let long = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(100));
        assert_eq!(
            Client::new(addr).roundtrip(long.as_bytes()).status,
            414,
            "{engine:?}"
        );
        // The shared header-read timeout holds: a silent connection closes at about 300 ms.
        let started = Instant::now();
        assert!(Client::new(addr).is_closed(), "{engine:?}");
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(3),
            "{engine:?}: closed after {took:?}"
        );
        // Each engine's own setting went to it alone.
        let stats = running.stats();
        match engine {
            Engine::Reactor | Engine::ReactorPool => assert_eq!(stats.per_loop.len(), 1),
            _ => assert!(stats.per_loop.is_empty(), "{engine:?}"),
        }
        running.shutdown(Duration::from_secs(5)).expect("shut down");
    }
}
