//! A small app that puts the crate together: a JSON API on items held in memory, static files,
//! and a WebSocket and an event stream that announce every change, on either engine.
//!
//! ```text
//! cargo run --release --example app --features server,json -- --static examples/public
//!
//! GET    /api/items         the items, a JSON array
//! POST   /api/items         {"name": "..."} in (or a form: name=...); 201 with the stored item
//! GET    /api/items/{id}    one item, or 404
//! DELETE /api/items/{id}    204, or 404
//! POST   /api/upload        multipart/form-data (feature multipart): each part's name, file
//!                           name and size, as JSON
//! GET    /static/...        the files under --static DIR (ETag, ranges; no way out of DIR);
//!                           examples/public/index.html lists, adds and deletes items live
//! GET    /ws                a WebSocket: {"listening":true}, then every change as JSON text
//! GET    /events            an event stream: every change, as JSON data, with ids (one that
//!                           reconnects with Last-Event-ID gets the last 64 it missed first)
//! ```
//!
//! Around the routes, layers: every response carries an `X-Request-Id` (kept from the request or
//! made; the access log writes it), `/api` answers cross-origin calls from any origin (CORS),
//! and with the feature `compression` JSON and static files go out compressed to clients that
//! accept it. The routes read the shared state from the router (`Request::state`): no clone
//! per route.
//!
//! `--engine server|reactor`, `--dispatch inline|pool` and `--addr` as for `hello`; SIGINT or
//! SIGTERM shuts it down gracefully (requests in flight answered, WebSockets closed with 1001).

mod support;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use twinhttp::layer::{Cors, HandlerExt, Layer, RequestIds, layer_fn};
use twinhttp::sse::Event;
use twinhttp::ws::{CloseFrame, RequestExt, WsHandler, WsMessage, WsSender};
use twinhttp::{Handler, Request, Response, Router, ServeDir};

/// A stored item.
#[derive(Clone, Serialize)]
struct Item {
    id: u64,
    name: String,
}

/// What a client sends to make an item (unknown fields refused: a typo is a 422, not data
/// silently dropped).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewItem {
    name: String,
}

/// A change, as announced to WebSockets and event streams.
#[derive(Serialize)]
#[serde(tag = "change", rename_all = "lowercase")]
enum Change<'a> {
    Created { item: &'a Item },
    Deleted { id: u64 },
}

/// The items, and everyone listening for changes.
#[derive(Default)]
struct State {
    items: Mutex<BTreeMap<u64, Item>>,
    next_id: AtomicU64,
    listeners: Mutex<Listeners>,
}

/// The open WebSockets (by connection number) and event streams.
#[derive(Default)]
struct Listeners {
    sockets: HashMap<u64, WsSender>,
    streams: Vec<twinhttp::sse::SseSender>,
    next_socket: u64,
    /// The event id of the last change announced.
    changes: u64,
    /// The last changes announced ([`RECENT`] of them), with their ids: what an event stream
    /// that reconnects with `Last-Event-ID` missed while it was away.
    recent: VecDeque<(u64, String)>,
}

/// How many changes an event stream may miss and still catch up when it reconnects.
const RECENT: usize = 64;

/// A lock whose holder panicked still guards consistent data here (every change is one insert
/// or remove): carry on with it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    fn announce(&self, change: &Change<'_>) {
        let Ok(json) = serde_json::to_string(change) else {
            return;
        };
        let mut listeners = lock(&self.listeners);
        listeners.changes += 1;
        let changes = listeners.changes;
        if listeners.recent.len() == RECENT {
            listeners.recent.pop_front();
        }
        listeners.recent.push_back((changes, json.clone()));
        let id = changes.to_string();
        // A listener that is gone (or too slow to keep a queue) is dropped.
        listeners
            .sockets
            .retain(|_, ws| ws.send(json.as_str()).is_ok());
        listeners
            .streams
            .retain(|events| events.send(Event::data(&json).id(&id)).is_ok());
    }

    fn list(&self) -> Response {
        let items: Vec<Item> = lock(&self.items).values().cloned().collect();
        Response::json(&items)
    }

    fn create(&self, req: &mut Request<'_>) -> Response {
        let form = req
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
        let new = match form {
            // An HTML form's post: the field `name`.
            true => match req.read_form() {
                Ok(form) => match form.get("name") {
                    Some(name) => NewItem {
                        name: name.to_owned(),
                    },
                    None => return Response::text("a form with a name field\n").with_status(422),
                },
                Err(refusal) => return refusal.into(),
            },
            false => match req.read_json::<NewItem>() {
                Ok(new) => new,
                Err(refusal) => return refusal.into(),
            },
        };
        let item = Item {
            id: self.next_id.fetch_add(1, Ordering::Relaxed) + 1,
            name: new.name,
        };
        lock(&self.items).insert(item.id, item.clone());
        self.announce(&Change::Created { item: &item });
        Response::json(&item)
            .with_status(201)
            .with_header("Location", format!("/api/items/{}", item.id))
    }

    fn get(&self, req: &mut Request<'_>) -> Response {
        match item_id(req).and_then(|id| lock(&self.items).get(&id).cloned()) {
            Some(item) => Response::json(&item),
            None => not_found(),
        }
    }

    fn delete(&self, req: &mut Request<'_>) -> Response {
        let Some(id) = item_id(req) else {
            return not_found();
        };
        let removed = lock(&self.items).remove(&id);
        match removed {
            Some(_) => {
                self.announce(&Change::Deleted { id });
                Response::new(204)
            }
            None => not_found(),
        }
    }

    /// An event stream of the changes from now on; one that reconnects with the id of the last
    /// change it had (`Last-Event-ID`, which browsers send by themselves) gets those it missed
    /// first, as far as [`RECENT`] goes back.
    fn events(&self, req: &Request<'_>) -> Response {
        let (response, events) = Response::event_stream();
        let mut listeners = lock(&self.listeners);
        if let Some(had) = req.last_event_id().and_then(|id| id.parse::<u64>().ok()) {
            for (id, json) in listeners.recent.iter().filter(|(id, _)| *id > had) {
                if events.send(Event::data(json).id(id.to_string())).is_err() {
                    return response;
                }
            }
        }
        listeners.streams.push(events);
        response
    }

    fn websocket(self: &Arc<Self>, req: &mut Request<'_>) -> Response {
        match req.upgrade_websocket() {
            Ok(upgrade) => upgrade.accept(Listener {
                state: Arc::clone(self),
                number: None,
            }),
            Err(refusal) => refusal,
        }
    }
}

/// The `{id}` of an items route; an id that is not a number names no item.
fn item_id(req: &Request<'_>) -> Option<u64> {
    req.param("id")?.parse().ok()
}

fn not_found() -> Response {
    Response::json(&serde_json::json!({ "error": "no such item" })).with_status(404)
}

/// A WebSocket that listens for changes; what it sends is ignored.
struct Listener {
    state: Arc<State>,
    number: Option<u64>,
}

impl WsHandler for Listener {
    fn on_open(&mut self, ws: &WsSender) {
        let mut listeners = lock(&self.state.listeners);
        listeners.next_socket += 1;
        let number = listeners.next_socket;
        listeners.sockets.insert(number, ws.clone());
        self.number = Some(number);
        // Sent once it is registered: a client that has read it misses no change after it.
        let _ = ws.send(r#"{"listening":true}"#);
    }

    fn on_message(&mut self, _: &WsSender, _: WsMessage) {}

    fn on_close(&mut self, _: Option<CloseFrame>) {
        if let Some(number) = self.number.take() {
            lock(&self.state.listeners).sockets.remove(&number);
        }
    }
}

const INDEX: &str = "twinhttp app: GET/POST /api/items, GET/DELETE /api/items/{id}, \
GET /static/..., GET /ws, GET /events\n";

/// A route's handler: one step on the state the router shares with its routes.
fn on(
    step: fn(&Arc<State>, &mut Request<'_>) -> Response,
) -> impl Fn(&mut Request<'_>) -> Response + Send + Sync + 'static {
    move |req| match req.state::<Arc<State>>() {
        Some(state) => step(state, req),
        None => Response::new(500),
    }
}

fn app(state: Arc<State>, files: Option<ServeDir>) -> impl Handler {
    let router = Router::new()
        .get("/", |_| Response::text(INDEX))
        .get("/api/items", on(|s, _| s.list()))
        .post("/api/items", on(|s, req| s.create(req)))
        .get("/api/items/{id}", on(|s, req| s.get(req)))
        .delete("/api/items/{id}", on(|s, req| s.delete(req)))
        .post("/api/upload", upload)
        .get("/ws", on(|s, req| s.websocket(req)))
        .get("/events", on(|s, req| s.events(req)));
    // The folder is the fallback: `/static`, `/static/` and everything under it.
    let router = match files {
        Some(files) => router.fallback(move |req| files.handle(req)),
        None => router,
    };
    // Every method the API routes (the default allows GET, HEAD and POST only).
    let cors = Cors::any_origin().methods(&["GET", "HEAD", "POST", "DELETE"]);
    let app = router
        .with_state(state)
        // Cross-origin calls to the API from any page.
        .layer(layer_fn(move |req, next| {
            match req.path().starts_with("/api") {
                true => cors.call(req, next),
                false => next.run(req),
            }
        }))
        .layer(RequestIds::new());
    compressed(app)
}

/// A part of an upload, as reported.
#[derive(Serialize)]
struct Uploaded {
    name: String,
    file_name: Option<String>,
    bytes: u64,
}

/// Reports an upload's parts (read through, never kept).
#[cfg(feature = "multipart")]
fn upload(req: &mut Request<'_>) -> Response {
    let mut form = match req.multipart(twinhttp::MultipartLimits::default()) {
        Ok(form) => form,
        Err(refusal) => return refusal.into(),
    };
    let mut parts = Vec::new();
    loop {
        let mut part = match form.next_part() {
            Ok(Some(part)) => part,
            Ok(None) => return Response::json(&parts),
            Err(refusal) => return refusal.into(),
        };
        let name = part.name().unwrap_or("").to_owned();
        let file_name = part.file_name().map(str::to_owned);
        match std::io::copy(&mut part, &mut std::io::sink()) {
            Ok(bytes) => parts.push(Uploaded {
                name,
                file_name,
                bytes,
            }),
            // A limit or a malformed body, met while reading the part.
            Err(e) => {
                let refusal = e
                    .into_inner()
                    .and_then(|inner| inner.downcast::<twinhttp::MultipartError>().ok());
                return refusal.map_or(Response::new(400), |refusal| (*refusal).into());
            }
        }
    }
}

#[cfg(not(feature = "multipart"))]
fn upload(_: &mut Request<'_>) -> Response {
    let _ = Uploaded {
        name: String::new(),
        file_name: None,
        bytes: 0,
    };
    Response::text("uploads need the feature: --features multipart\n").with_status(501)
}

/// `app` with its responses compressed (feature `compression`).
#[cfg(feature = "compression")]
fn compressed(app: impl Handler) -> impl Handler {
    app.layer(twinhttp::layer::Compression::new())
}

#[cfg(not(feature = "compression"))]
fn compressed(app: impl Handler) -> impl Handler {
    app
}

fn main() {
    support::Args::run_serving_files("app", |args, _| {
        let files = args.static_dir.as_ref().map(|dir| {
            ServeDir::new(dir)
                .unwrap_or_else(|e| {
                    eprintln!("app: --static: {e}"); // names the folder
                    std::process::exit(2)
                })
                .prefix("/static")
        });
        app(Arc::new(State::default()), files)
    });
}
