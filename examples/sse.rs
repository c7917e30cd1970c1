//! Server-sent events: a clock pushed to every open `GET /events` stream from one background
//! thread, once a second, with an incrementing id. `GET /` serves a page that shows it.
//!
//! `cargo run --release --example sse --features server` then open http://127.0.0.1:8080/
//! (`--engine reactor` as for `hello`: there an open stream costs no thread).

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use twinhttp::sse::{Event, SseSender};
use twinhttp::{Request, Response};

const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>twinhttp clock</title></head>
<body><h1>twinhttp clock</h1><p id="now">waiting…</p>
<script>
const events = new EventSource("/events");
events.addEventListener("tick", (e) => {
  document.getElementById("now").textContent = `${e.data} (event ${e.lastEventId})`;
});
</script></body></html>
"#;

fn main() {
    let streams: Arc<Mutex<Vec<SseSender>>> = Arc::default();
    let clock = streams.clone();
    std::thread::spawn(move || {
        for id in 1u64.. {
            std::thread::sleep(Duration::from_secs(1));
            let secs = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let tick = Event::data(format!("{secs} s since the epoch"))
                .event("tick")
                .id(id.to_string());
            // Streams whose clients went away report it and are dropped.
            clock
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|s| s.send(tick.clone()).is_ok());
        }
    });
    let app = move |req: &mut Request<'_>| match req.path() {
        "/" => Response::html(PAGE),
        "/events" => {
            let (response, events) = Response::event_stream();
            let _ = events.send(Event::data("connected").event("hello").retry(2000));
            streams
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(events);
            response
        }
        _ => Response::new(404),
    };
    support::Args::run("sse", app);
}
