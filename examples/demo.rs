//! A server showing each feature on its own route of a `Router`; `GET /routes` lists them.
//!
//! `cargo run --release --example demo --features server`

mod support;

use std::sync::{Mutex, Once};
use std::time::Duration;

use twinhttp::sse::{Event, SseSender};
use twinhttp::stats::{Refusal, Stats, StatsHandle};
use twinhttp::ws::{RequestExt, SendError, WsHandler, WsMessage, WsSender};
use twinhttp::{Body, Request, Response, Router};

const ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/", "Hello, World!"),
    (
        "POST",
        "/echo",
        "the request body echoed back (Content-Length or chunked, up to the body limit)",
    ),
    (
        "GET",
        "/stream",
        "a chunked response: five chunks, 100 ms apart",
    ),
    (
        "GET",
        "/status/{code}",
        "an empty response with that status, e.g. /status/204",
    ),
    (
        "GET",
        "/ws",
        "a WebSocket echo: every text and binary message sent back",
    ),
    (
        "GET",
        "/room",
        "a WebSocket broadcast room: every text message sent is sent to every member",
    ),
    (
        "POST",
        "/length",
        "reads the request body (without keeping it) and answers its length",
    ),
    (
        "GET",
        "/sse",
        "server-sent events: one a second with an incrementing id (resumes after Last-Event-ID)",
    ),
    (
        "GET",
        "/file",
        "this example's own source, as a file (Range and If-Modified-Since work)",
    ),
    (
        "GET",
        "/stats",
        "the server's live counters as JSON (connections by state, requests, refusals)",
    ),
    (
        "GET",
        "/stats.html",
        "a page that shows /stats, refreshed every second",
    ),
    ("GET", "/routes", "this page"),
];

/// The members of `/room`.
static ROOM: Mutex<Vec<WsSender>> = Mutex::new(Vec::new());

/// Sends `text` to every member of `/room`, each its own copy (as a chat formats a line per
/// member); a member who left, or was dropped for the server's memory budget, leaves the list.
/// A member whose queue is full misses it.
fn broadcast(text: &str) {
    ROOM.lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|member| !matches!(member.send(text), Err(SendError::Closed)));
}

/// A member of `/room`.
struct Member;

impl WsHandler for Member {
    fn on_open(&mut self, ws: &WsSender) {
        ROOM.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ws.clone());
    }

    fn on_message(&mut self, _: &WsSender, msg: WsMessage) {
        if let Some(text) = msg.as_text() {
            broadcast(text);
        }
    }
}

/// Open event streams and the id each sends next; one ticker thread feeds them all.
static STREAMS: Mutex<Vec<(SseSender, u64)>> = Mutex::new(Vec::new());

/// The id after `id`. Ids count on modulo 2^64: a client may resume from any `Last-Event-ID`,
/// `u64::MAX` too, and the ticker must not overflow on it (a panic would end the ticker
/// thread, and with it every stream's events).
fn next_id(id: u64) -> u64 {
    id.wrapping_add(1)
}

fn ticker() {
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let mut streams = STREAMS.lock().unwrap_or_else(|e| e.into_inner());
        // A stream whose client went away reports it and is dropped.
        streams.retain_mut(|(events, id)| {
            let tick = Event::data(format!("tick {id}")).id(id.to_string());
            *id = next_id(*id);
            events.send(tick).is_ok()
        });
    }
}

/// The routes: `HEAD` is answered by each `GET` route, a known path with another method gets
/// `405` with `Allow`, anything else `404`. `stats` reads this server's own counters.
fn demo(stats: StatsHandle) -> Router {
    Router::new()
        .get("/stats", move |_| {
            Response::new(200)
                .with_content_type("application/json")
                .with_body(stats_json(&stats.stats()))
        })
        .get("/stats.html", |_| Response::html(STATS_PAGE))
        .get("/", |_| Response::text("Hello, World!"))
        .post("/echo", echo)
        .get("/stream", |_| {
            let chunks = (1..=5).map(|i| {
                if i > 1 {
                    std::thread::sleep(Duration::from_millis(100));
                }
                format!("chunk {i}\n").into_bytes()
            });
            Response::text(Body::chunks(chunks))
        })
        .get("/status/{code}", |req| {
            match req.param("code").map(str::parse::<u16>) {
                Some(Ok(code)) if (200..600).contains(&code) => Response::new(code),
                _ => Response::new(400),
            }
        })
        .get("/ws", |req| match req.upgrade_websocket() {
            Ok(upgrade) => upgrade.accept(|ws: &WsSender, msg: WsMessage| {
                let _ = ws.send(msg);
            }),
            Err(refusal) => refusal,
        })
        .get("/room", |req| match req.upgrade_websocket() {
            Ok(upgrade) => upgrade.accept(Member),
            Err(refusal) => refusal,
        })
        // Counted as it is read, not collected: a large body costs this handler nothing.
        .post("/length", |req| {
            match std::io::copy(req.body(), &mut std::io::sink()) {
                Ok(n) => Response::text(n.to_string()),
                Err(_) => Response::new(400),
            }
        })
        .get("/sse", sse)
        .get("/file", |req| {
            Response::file(
                req,
                concat!(env!("CARGO_MANIFEST_DIR"), "/examples/demo.rs"),
            )
        })
        .get("/routes", |_| Response::html(routes_page()))
}

fn echo(req: &mut Request<'_>) -> Response {
    // The accessors return the request's own data, so the body can be read while they are held.
    let content_type = req.header("content-type");
    match req.read_body() {
        Ok(body) => Response::new(200)
            .with_content_type(
                content_type
                    .unwrap_or("application/octet-stream")
                    .to_owned(),
            )
            .with_body(body),
        // The server answers 400/413 itself when the body was malformed or too large.
        Err(_) => Response::new(400),
    }
}

fn sse(req: &mut Request<'_>) -> Response {
    static TICKER: Once = Once::new();
    TICKER.call_once(|| {
        std::thread::spawn(ticker);
    });
    let next = req
        .last_event_id()
        .and_then(|id| id.parse::<u64>().ok())
        .map_or(1, next_id);
    let (response, events) = Response::event_stream();
    STREAMS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((events, next));
    response
}

/// The counters as JSON: fixed keys and whole numbers only, so `format!` writes it safely.
fn stats_json(s: &Stats) -> String {
    let per_loop: Vec<String> = s.per_loop.iter().map(u64::to_string).collect();
    let refused: Vec<String> = s
        .refused
        .iter()
        .map(|(why, n)| match why {
            Refusal::OverCapacity => format!("\"over_capacity\": {n}"),
            Refusal::HeaderTimeout => format!("\"header_timeout\": {n}"),
            Refusal::TooSlow => format!("\"too_slow\": {n}"),
            Refusal::HeadOverBudget => format!("\"head_over_budget\": {n}"),
            Refusal::BodyOverBudget => format!("\"body_over_budget\": {n}"),
            Refusal::SessionOverBudget => format!("\"session_over_budget\": {n}"),
            Refusal::Status(status) => format!("\"{status}\": {n}"),
            _ => format!("\"other\": {n}"),
        })
        .collect();
    format!(
        "{{\"accepted\": {}, \"handled\": {}, \"requests\": {}, \"active\": {}, \
         \"waiting\": {}, \"reading\": {}, \"queued\": {}, \"writing\": {}, \"closing\": {}, \
         \"websockets\": {}, \"event_streams\": {}, \"upgraded\": {}, \"parked\": {}, \
         \"per_loop\": [{}], \"refused\": {{{}}}, \"panics\": {}, \"threads\": {}, \
         \"memory_held\": {}, \"memory_budget\": {}, \"reads_paused\": {}}}\n",
        s.accepted,
        s.handled,
        s.requests,
        s.active,
        s.waiting,
        s.reading,
        s.queued,
        s.writing,
        s.closing,
        s.websockets,
        s.event_streams,
        s.upgraded,
        s.parked,
        per_loop.join(", "),
        refused.join(", "),
        s.panics,
        s.threads,
        s.memory_held,
        s.memory_budget,
        s.reads_paused,
    )
}

/// Shows `/stats` as a table, fetched again every second.
const STATS_PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>twinhttp demo: live counters</title>
<style>body{font-family:sans-serif}td{padding:2px 12px}td+td{text-align:right;font-family:monospace}</style>
</head><body><h1>Live counters</h1>
<table id="stats"></table>
<p id="note">from <a href="/stats">/stats</a>, every second</p>
<script>
async function refresh() {
  try {
    const stats = await (await fetch("/stats", {cache: "no-store"})).json();
    const rows = [];
    for (const [key, value] of Object.entries(stats)) {
      const shown = typeof value === "object" ? JSON.stringify(value) : value;
      rows.push(`<tr><td>${key}</td><td>${shown}</td></tr>`);
    }
    document.getElementById("stats").innerHTML = rows.join("");
  } catch (e) {
    document.getElementById("note").textContent = "cannot read /stats: " + e;
  }
}
refresh();
setInterval(refresh, 1000);
</script></body></html>
"#;

fn routes_page() -> String {
    let rows: String = ROUTES
        .iter()
        .map(|(m, p, what)| {
            format!("<tr><td>{m}</td><td><code>{p}</code></td><td>{what}</td></tr>\n")
        })
        .collect();
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>twinhttp demo</title></head>\n<body><h1>twinhttp demo routes</h1>\n<table>\n<tr><th>method</th><th>path</th><th>what it does</th></tr>\n{rows}</table></body></html>\n"
    )
}

fn main() {
    support::init_logger();
    let signals = support::Signals::install("demo");
    let args = support::Args::parse();
    let running = args.serve_with(demo);
    support::say(&format!(
        "demo: listening on {} ({}) (routes: /routes)",
        support::url(&running, args.tls_cert.is_some()),
        args.label()
    ));
    support::until_signal(running, "demo", signals);
}
