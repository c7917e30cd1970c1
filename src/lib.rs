//! # twinhttp
//!
//! HTTP/1.1 serving with one sans-I/O protocol core, two engines and one [`Handler`] trait, so
//! the same handler can run as blocking code on a thread pool or event-driven on epoll/kqueue
//! loops, and the two can be compared on the same HTTP core.
//!
//! - **Core** (always built): request parsing with `httparse`, RFC 9112 framing (Content-Length,
//!   chunked, the smuggling rules), keep-alive and pipelining, response framing, `100-continue`,
//!   the [`Limits`] every request is checked against, the [`MinRate`]s every transfer is held to,
//!   and how each exchange ends (keep-alive, close, or a lingering close after an error). It never touches a socket; both engines
//!   drive it, so framing, limits and error statuses are the same on both by construction.
//! - **[`server`]** (feature `server`): an OS-thread-pool engine. Handlers are plain blocking
//!   code on worker threads, and a worker gets a request, not a socket: new, idle and slow
//!   connections wait in an epoll/kqueue poller whose thread reads their heads, and reach the pool
//!   only with a whole request head buffered; a WebSocket is parked the same way between messages.
//! - **[`reactor`]**: event loops on the `polling` crate, non-blocking sockets, handlers run on the
//!   loop ([`reactor::Dispatch::Inline`]) or on a worker pool ([`reactor::Dispatch::Pool`]).
//! - **[`ws`]**: WebSocket (RFC 6455) on both engines: the core checks the upgrade, tungstenite
//!   drives the frames, one [`ws::WsHandler`] runs the callbacks and a [`ws::WsSender`] pushes
//!   from any thread. **[`sse`]**: server-sent events ([`Response::event_stream`]).
//!   [`Response::file`] serves a file with ranges and conditional requests (`ETag`,
//!   `Last-Modified`); [`ServeDir`] serves a folder safely (decoded paths, no way out of it).
//! - **[`Router`]**: a [`Handler`] that routes by method and path pattern (on `matchit`), with
//!   path parameters ([`Request::param`]), `HEAD` answered by `GET` routes, `405` with `Allow`,
//!   nesting and a fallback; it runs on both engines like any handler. [`Request`] also reads
//!   the query as decoded pairs ([`Request::query_pairs`]), the path percent-decoded
//!   ([`Request::path_decoded`]) and cookies ([`Request::cookies`]).
//! - **JSON** (feature `json`): `Response::json` from any `Serialize`, `Request::read_json` into
//!   any `DeserializeOwned` within the body limit, refused as a `JsonError` that converts into
//!   its 415, 400, 422 or 413. **`http` interop** (feature `http`): an `http::Response<B>` or a
//!   `StatusCode` into a [`Response`], `Request::to_http` for the head as an `http::Request<()>`.
//! - **[`stats`]**: live counters, the same [`stats::Stats`] on both engines (nginx
//!   `stub_status`'s counts, plus parked, queued and per-loop connections, sessions, refusals by
//!   reason, panics, threads), read by `Server::stats`, `Reactor::stats` or a
//!   [`stats::StatsHandle`]; feature `metrics` publishes them through the `metrics` facade.
//! - **Access log**: `.access_log(true)` on either builder logs one line per exchange through
//!   `log`, at `info` to target `twinhttp::access`:
//!   `127.0.0.1:53412 "GET /path HTTP/1.1" 200 13 0.21ms` (peer, request line, status, body
//!   bytes, time from the head to the end of the response). Off (the default), it costs nothing.
//!
//! ## Choosing
//!
//! | handlers that… | use |
//! |---|---|
//! | block (files, databases, sleeps), and you want the simplest model | [`server`] |
//! | never block, and you want the most requests per core | [`reactor`], inline dispatch |
//! | block, with many mostly idle connections | [`reactor`] with pool dispatch, or [`server`] |
//!
//! | feature  | what it adds |
//! |----------|--------------|
//! | `server` | [`server::Server`], the thread-pool engine |
//! | `tls`    | TLS on both engines with rustls (`ring` provider): `.tls(config)`, [`tls`] |
//! | `json`   | JSON bodies with serde: `Response::json`, `Request::read_json`, `JsonError` |
//! | `http`   | conversions with the `http` crate (1.x): `From<http::Response<B>>` and `From<StatusCode>` for [`Response`], `Request::to_http` |
//! | `metrics`| the live counters through the `metrics` facade: `stats::publish` |
//!
//! ## Examples
//!
//! The same handler on both engines:
//!
//! ```no_run
//! use std::time::Duration;
//! use twinhttp::{Request, Response, handler_fn, reactor::{Dispatch, Reactor}};
//!
//! fn hello(req: &mut Request<'_>) -> Response {
//!     match req.path() {
//!         "/" => Response::text("Hello, World!"),
//!         _ => Response::new(404),
//!     }
//! }
//!
//! # #[cfg(feature = "server")] {
//! let server = twinhttp::server::Server::builder().serve("127.0.0.1:8080", hello)?;
//! server.shutdown(Duration::from_secs(5))?;
//! # }
//! let reactor = Reactor::builder().dispatch(Dispatch::Inline).serve("127.0.0.1:8081", hello)?;
//! reactor.shutdown(Duration::from_secs(5))?;
//! // A closure in place: `handler_fn` names its argument type.
//! let inline = Reactor::builder().serve("127.0.0.1:8082", handler_fn(|_| Response::text("hi")))?;
//! inline.shutdown(Duration::from_secs(5))?;
//! # Ok::<(), twinhttp::Error>(())
//! ```
//!
//! Routes, with parameters, on either engine:
//!
//! ```no_run
//! use twinhttp::{Response, Router, reactor::Reactor};
//!
//! let app = Router::new()
//!     .get("/", |_| Response::text("Hello, World!"))
//!     .get("/users/{id}", |req| {
//!         let id = req.param("id").unwrap_or_default();
//!         let page = req.query_param("page").unwrap_or_default();
//!         Response::text(format!("user {id}, page {page}"))
//!     });
//! let reactor = Reactor::builder().serve("127.0.0.1:8080", app)?;
//! # reactor.shutdown(std::time::Duration::from_secs(1))?;
//! # Ok::<(), twinhttp::Error>(())
//! ```
#![deny(unsafe_code)]
#![deny(missing_docs)]
// The examples in the docs and the README compile without a warning.
#![doc(test(attr(deny(warnings), allow(dead_code))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// Entry points into the core for this crate's own criterion benches (feature
/// `bench-internals`): not part of the API.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench;
mod choice;
mod deadline;
mod engine;
mod error;
/// The fuzz target's harness (feature `bench-internals`): not part of the API.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod fuzz;
mod handler;
mod http;
#[cfg(feature = "http")]
mod interop;
#[cfg(feature = "json")]
mod json;
pub mod layer;
mod limits;
mod net;
mod rate;
pub mod reactor;
mod router;
mod serve_dir;
mod settings;
pub mod sse;
pub mod stats;
pub mod testing;
mod timers;
mod transport;
mod upgraded;
pub mod ws;

#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod server;
#[cfg(feature = "systemd")]
#[cfg_attr(docsrs, doc(cfg(feature = "systemd")))]
pub mod systemd;
#[cfg(not(feature = "systemd"))]
mod systemd;

/// TLS (feature `tls`): rustls, re-exported so that its version is this crate's, and a
/// configuration from PEM files. Serve it with `.tls(config)` on either builder.
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub mod tls {
    pub use crate::net::tls::config_from_pem;
    pub use rustls;
}

/// The README's Rust blocks, compiled as doctests so that what it shows keeps building.
#[cfg(all(doctest, feature = "server"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The Rust blocks of the pages in `docs/`, compiled as doctests like the README's.
#[cfg(all(doctest, feature = "server"))]
#[doc = include_str!("../docs/handlers.md")]
#[doc = include_str!("../docs/deploying.md")]
#[doc = include_str!("../docs/websocket.md")]
#[doc = include_str!("../docs/files.md")]
pub struct DocsDoctests;

pub use choice::{Builder, Engine, Running};
pub use engine::ShutdownHandle;
pub use error::{Error, ErrorKind};
pub use handler::{Handler, Streaming, handler_fn, streaming};
pub use http::form::{Form, FormError};
#[cfg(feature = "multipart")]
#[cfg_attr(docsrs, doc(cfg(feature = "multipart")))]
pub use http::multipart::{Multipart, MultipartError, MultipartLimits, Part};
pub use http::origin::{Scheme, TrustedProxies, TrustedProxiesError};
pub use http::request::{Request, RequestBody};
pub use http::request_head::Version;
pub use http::response::{Body, HeaderText, Response};
/// A network of IP addresses (`10.0.0.0/8`), as [`TrustedProxies`] takes it: `ipnet`'s.
pub use ipnet::IpNet;
#[cfg(feature = "json")]
#[cfg_attr(docsrs, doc(cfg(feature = "json")))]
pub use json::{JsonError, JsonErrorKind};
pub use limits::Limits;
pub use net::transport::{Address, Listener, Transport};
pub use rate::MinRate;
pub use router::Router;
pub use serve_dir::ServeDir;
pub use upgraded::{ShutdownSignal, Upgraded};
