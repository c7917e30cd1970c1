//! # twinhttp
//!
//! HTTP/1.1 serving with one sans-I/O protocol core, two engines and one [`Handler`] trait.
//!
//! - **Core** (always built): request parsing with `httparse`, RFC 9112 framing (Content-Length,
//!   chunked, the smuggling rules), keep-alive and pipelining, response framing, `100-continue`,
//!   and the [`Limits`] every request is checked against. It never touches a socket.
//! - **[`server`]** (feature `server`): an OS-thread-pool engine. Handlers are plain blocking code
//!   on worker threads. An idle keep-alive connection does not hold a worker: it is parked in an
//!   epoll/kqueue poller and handed back to the pool when its next request arrives.
//! - **reactor**: event loops on the `polling` crate. Planned; see the README.
//!
//! | feature  | what it adds |
//! |----------|--------------|
//! | `server` | [`server::Server`], the thread-pool engine |
//!
//! ## Example
//!
//! ```no_run
//! # #[cfg(feature = "server")] {
//! use twinhttp::{Request, Response, server::Server};
//!
//! let server = Server::builder()
//!     .serve("127.0.0.1:8080", |req: &mut Request<'_>| match req.path() {
//!         "/" => Response::text("Hello, World!"),
//!         _ => Response::new(404),
//!     })
//!     .expect("bind");
//! server.wait();
//! # }
//! ```
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(hidden)]
pub mod bench;
mod engine;
mod error;
mod handler;
mod http;
mod limits;
mod net;
pub mod reactor;

#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod server;

pub use engine::ShutdownHandle;
pub use error::{Error, ErrorKind};
pub use handler::Handler;
pub use http::request::{Request, RequestBody, Version};
pub use http::response::{Body, HeaderText, Response};
pub use limits::Limits;
