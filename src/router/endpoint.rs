//! One route pattern and its handlers by method: which handler answers a method, and the
//! `405 Method Not Allowed` (with `Allow`) when none does.

use std::fmt;
use std::sync::Arc;

use crate::{Handler, Response};

/// Which requests of an endpoint a handler answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum On {
    /// One method, compared case-sensitively (RFC 9110 §9.1).
    Method(String),
    /// Every method the endpoint has no handler of its own for.
    Any,
}

/// The handlers of one route pattern.
pub(crate) struct Endpoint {
    /// The pattern as registered (`/users/{id}`), for nesting and `Debug`.
    pub(crate) pattern: String,
    /// Handlers by method, in the order they were added (the order of `Allow`).
    methods: Vec<(String, Arc<dyn Handler>)>,
    any: Option<Arc<dyn Handler>>,
}

impl Endpoint {
    pub(crate) fn new(pattern: String) -> Endpoint {
        Endpoint {
            pattern,
            methods: Vec::new(),
            any: None,
        }
    }

    /// Adds a handler; `false` (and nothing changed) when `on` already has one.
    pub(crate) fn add(&mut self, on: On, handler: Arc<dyn Handler>) -> bool {
        match on {
            On::Any if self.any.is_some() => false,
            On::Any => {
                self.any = Some(handler);
                true
            }
            On::Method(m) if self.find(&m).is_some() => false,
            On::Method(m) => {
                self.methods.push((m, handler));
                true
            }
        }
    }

    /// Replaces each handler with what `f` makes of it.
    pub(crate) fn map_handlers(
        &mut self,
        f: &mut impl FnMut(Arc<dyn Handler>) -> Arc<dyn Handler>,
    ) {
        for (_, handler) in &mut self.methods {
            *handler = f(handler.clone());
        }
        if let Some(handler) = self.any.take() {
            self.any = Some(f(handler));
        }
    }

    /// Every handler with what it answers, for moving them into another router.
    pub(crate) fn into_handlers(self) -> impl Iterator<Item = (On, Arc<dyn Handler>)> {
        let any = self.any.map(|h| (On::Any, h));
        self.methods
            .into_iter()
            .map(|(m, h)| (On::Method(m), h))
            .chain(any)
    }

    fn find(&self, method: &str) -> Option<&Arc<dyn Handler>> {
        self.methods
            .iter()
            .find(|(m, _)| m == method)
            .map(|(_, h)| h)
    }

    /// The handler for `method`: its own, else a `GET` one for `HEAD` (the core sends a HEAD
    /// response's head without its body), else the handler of every method.
    pub(crate) fn handler(&self, method: &str) -> Option<&dyn Handler> {
        self.find(method)
            .or_else(|| (method == "HEAD").then(|| self.find("GET")).flatten())
            .or(self.any.as_ref())
            .map(|h| &**h)
    }

    /// `405 Method Not Allowed`, with `Allow` listing the methods there are handlers for
    /// (`HEAD` after `GET` when `GET` has one and `HEAD` none of its own: RFC 9110 §15.5.6).
    pub(crate) fn method_not_allowed(&self) -> Response {
        Response::new(405).with_header("Allow", self.allow())
    }

    fn allow(&self) -> String {
        let implicit_head = self.find("HEAD").is_none();
        let mut allow: Vec<&str> = Vec::with_capacity(self.methods.len() + 1);
        for (m, _) in &self.methods {
            allow.push(m);
            if implicit_head && m == "GET" {
                allow.push("HEAD");
            }
        }
        allow.join(", ")
    }

    /// The methods with handlers, `*` for the handler of every method.
    pub(crate) fn methods(&self) -> impl Iterator<Item = &str> {
        self.methods
            .iter()
            .map(|(m, _)| m.as_str())
            .chain(self.any.as_ref().map(|_| "*"))
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("pattern", &self.pattern)
            .field("methods", &self.methods().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Request;

    fn status(code: u16) -> Arc<dyn Handler> {
        Arc::new(move |_: &mut Request<'_>| Response::new(code))
    }

    fn endpoint(methods: &[(&str, u16)]) -> Endpoint {
        let mut e = Endpoint::new("/x".to_owned());
        for (m, code) in methods {
            let on = match *m {
                "*" => On::Any,
                m => On::Method(m.to_owned()),
            };
            assert!(e.add(on, status(*code)));
        }
        e
    }

    #[test]
    fn allow_lists_methods_in_order_with_head_after_get() {
        let cases: &[(&[(&str, u16)], &str)] = &[
            (&[("GET", 200)], "GET, HEAD"),
            (&[("POST", 201), ("GET", 200)], "POST, GET, HEAD"),
            (&[("GET", 200), ("HEAD", 204)], "GET, HEAD"),
            (&[("HEAD", 204), ("GET", 200)], "HEAD, GET"),
            (&[("DELETE", 204), ("PUT", 200)], "DELETE, PUT"),
        ];
        for (methods, want) in cases {
            let resp = endpoint(methods).method_not_allowed();
            assert_eq!(resp.status(), 405);
            assert_eq!(resp.header("allow"), Some(*want), "{methods:?}");
        }
    }

    #[test]
    fn which_handler_answers() {
        let e = endpoint(&[("GET", 200), ("POST", 201)]);
        let mut body: &[u8] = b"";
        let head = crate::http::request_head::RequestHead::default();
        let mut req = Request::new(&head, &mut body, None);
        let answer = |m: &str, req: &mut Request<'_>| e.handler(m).map(|h| h.handle(req).status());
        assert_eq!(answer("GET", &mut req), Some(200));
        assert_eq!(answer("HEAD", &mut req), Some(200));
        assert_eq!(answer("POST", &mut req), Some(201));
        assert_eq!(answer("get", &mut req), None);
        assert_eq!(answer("PUT", &mut req), None);

        let e = endpoint(&[("GET", 200), ("HEAD", 204), ("*", 202)]);
        let answer = |m: &str, req: &mut Request<'_>| e.handler(m).map(|h| h.handle(req).status());
        assert_eq!(answer("HEAD", &mut req), Some(204));
        assert_eq!(answer("PATCH", &mut req), Some(202));
        let e = endpoint(&[("POST", 201), ("*", 202)]);
        assert_eq!(
            e.handler("HEAD").map(|h| h.handle(&mut req).status()),
            Some(202)
        );
    }

    #[test]
    fn a_method_is_added_once() {
        let mut e = endpoint(&[("GET", 200), ("*", 202)]);
        assert!(!e.add(On::Method("GET".to_owned()), status(500)));
        assert!(!e.add(On::Any, status(500)));
        assert!(e.add(On::Method("PUT".to_owned()), status(200)));
        assert_eq!(e.methods().collect::<Vec<_>>(), ["GET", "PUT", "*"]);
    }
}
