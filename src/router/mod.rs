//! A [`Router`]: a [`Handler`] that picks a handler by path pattern and method, on the `matchit`
//! crate (as axum uses).

mod endpoint;
mod params;
mod wrap;

use std::fmt;
use std::sync::Arc;

use crate::{Handler, Request, Response};
use endpoint::{Endpoint, On};

/// The catch-all that sends a path under a nested router's prefix to that router's fallback.
/// A name no route of a user's can hold: these patterns live in a matcher of their own.
const NESTED_REST: &str = "/{*rest}";

/// A [`Handler`] that routes each request to the handler of its path and method.
///
/// Routes are path patterns, matched by [`matchit`](https://docs.rs/matchit/0.9): `/users`, a
/// parameter `/users/{id}` (one segment, up to the next `/`), one with a prefix or suffix in its
/// segment `/images/img-{id}.png`, a catch-all `/files/{*path}` (the rest of the path, at least
/// one character, at the end of a pattern). A static segment wins
/// over a parameter, a parameter over a catch-all; `/users` and `/users/` are different routes.
/// A route's handler reads its parameters with [`Request::param`].
///
/// What a request gets:
///
/// - the handler of its path and method;
/// - for `HEAD`, the `GET` handler when the route has no `HEAD` one: the server sends that
///   response's head (its `Content-Length` too) without the body;
/// - `405 Method Not Allowed` with `Allow` listing the route's methods (`HEAD` included when
///   `GET` is there) when the path matches a route but the method does not; `OPTIONS` is
///   answered so too unless a route handles it (the router adds no `OPTIONS` or CORS handling:
///   route `OPTIONS` yourself);
/// - otherwise the fallback of the innermost [nested](Router::nest) router whose prefix the path
///   is under, else this router's [`fallback`](Router::fallback), else `404 Not Found`.
///
/// # Paths are matched as sent
///
/// Patterns are matched against [`Request::path`], the path as the client sent it,
/// percent-encoded, as axum does: `/files/a%2Fb` is one segment (`%2F` is not a separator), and a
/// pattern for a path with characters that are sent encoded is written encoded (`/caf%C3%A9`).
/// Parameter values are as sent, too ([`Request::param`]); [`Request::param_decoded`] decodes
/// one, and refuses a malformed `%` or bytes that are not UTF-8. Nothing is normalised: no dot
/// segments resolved, no `//` merged, no trailing `/` added or removed.
///
/// # Handlers
///
/// Every method takes a closure or a `fn(&mut Request<'_>) -> Response`, named in its bounds so
/// that a closure needs no type annotation. A [`Handler`] value of another kind (a struct, an
/// `Arc`) goes in as `move |req| handler.handle(req)`:
///
/// ```
/// use twinhttp::{Handler, Request, Response, Router};
///
/// struct Greeter(&'static str);
/// impl Handler for Greeter {
///     fn handle(&self, _: &mut Request<'_>) -> Response {
///         Response::text(self.0)
///     }
/// }
/// let hello = Greeter("hello");
/// let app = Router::new().get("/hello", move |req| hello.handle(req));
/// # let _ = app;
/// ```
///
/// # Panics
///
/// Building a router panics, as axum's does, on a route that cannot work: a pattern not
/// starting with `/` or that `matchit` refuses (a conflict with another pattern, such as
/// `/users/{id}` beside `/users/{name}`, or a malformed parameter), a method that is not a
/// token, or a method added twice to one pattern. These are errors in the program, found on its
/// first run; a request never panics a router.
///
/// # Examples
///
/// ```no_run
/// use twinhttp::{Response, Router, reactor::Reactor};
///
/// let api = Router::new()
///     .get("/items", |_| Response::text("[]"))
///     .get("/items/{id}", |req| {
///         Response::text(format!("item {}", req.param("id").unwrap_or_default()))
///     })
///     .delete("/items/{id}", |_| Response::new(204));
/// let app = Router::new()
///     .get("/", |_| Response::text("Hello, World!"))
///     .route("/echo", &["POST", "PUT"], |req| match req.read_body() {
///         Ok(body) => Response::new(200).with_body(body),
///         Err(_) => Response::new(400),
///     })
///     .nest("/api", api)
///     .fallback(|_| Response::new(404).with_body("no such page"));
/// let reactor = Reactor::builder().serve("127.0.0.1:8080", app)?;
/// # reactor.shutdown(std::time::Duration::from_secs(1))?;
/// # Ok::<(), twinhttp::Error>(())
/// ```
#[derive(Default)]
pub struct Router {
    /// Pattern → index into `endpoints`.
    matcher: matchit::Router<usize>,
    endpoints: Vec<Endpoint>,
    /// Nested routers' fallbacks: prefix patterns → index into `nested`.
    nested_matcher: matchit::Router<usize>,
    nested: Vec<(String, Arc<dyn Handler>)>,
    fallback: Option<Arc<dyn Handler>>,
    /// Shared with every handler ([`Router::with_state`]).
    state: Option<Arc<crate::http::request::State>>,
}

impl Router {
    /// A router with no routes: it answers every request `404 Not Found`.
    pub fn new() -> Router {
        Router::default()
    }

    /// Routes `GET` (and so `HEAD`) requests for `path` to `handler`.
    ///
    /// # Panics
    ///
    /// See [Panics](Router#panics): a malformed or conflicting `path`, or a second `GET` handler
    /// for it.
    pub fn get<F>(self, path: &str, handler: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.route(path, &["GET"], handler)
    }

    /// Routes `POST` requests for `path` to `handler`.
    ///
    /// # Panics
    ///
    /// As [`Router::get`].
    pub fn post<F>(self, path: &str, handler: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.route(path, &["POST"], handler)
    }

    /// Routes `PUT` requests for `path` to `handler`.
    ///
    /// # Panics
    ///
    /// As [`Router::get`].
    pub fn put<F>(self, path: &str, handler: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.route(path, &["PUT"], handler)
    }

    /// Routes `PATCH` requests for `path` to `handler`.
    ///
    /// # Panics
    ///
    /// As [`Router::get`].
    pub fn patch<F>(self, path: &str, handler: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.route(path, &["PATCH"], handler)
    }

    /// Routes `DELETE` requests for `path` to `handler`.
    ///
    /// # Panics
    ///
    /// As [`Router::get`].
    pub fn delete<F>(self, path: &str, handler: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.route(path, &["DELETE"], handler)
    }

    /// Routes requests for `path` with any of `methods` (case-sensitive, as HTTP methods are:
    /// `"GET"`, not `"get"`) to `handler`: one handler for several methods, or a method with no
    /// method of its own here (`&["OPTIONS"]`, `&["PROPFIND"]`).
    ///
    /// ```
    /// use twinhttp::{Response, Router};
    ///
    /// let app = Router::new().route("/form", &["GET", "POST"], |req| match req.method() {
    ///     "POST" => Response::text("sent"),
    ///     _ => Response::html("<form method=post><button>send</button></form>"),
    /// });
    /// # let _ = app;
    /// ```
    ///
    /// # Panics
    ///
    /// As [`Router::get`], and when `methods` is empty or holds something that is not an HTTP
    /// method token.
    pub fn route<F>(self, path: &str, methods: &[&str], handler: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.route_to(path, methods, handler)
    }

    /// As [`Router::route`], with any [`Handler`]: a [`streaming`](crate::streaming) one, a
    /// router, a type of your own.
    ///
    /// ```
    /// use twinhttp::{Response, Router, handler_fn, streaming};
    ///
    /// let app = Router::new().route_to("/upload", &["POST", "PUT"], streaming(handler_fn(|req| {
    ///     let copied = std::io::copy(req.body(), &mut std::io::sink());
    ///     Response::text(format!("{copied:?}"))
    /// })));
    /// # let _ = app;
    /// ```
    ///
    /// # Panics
    ///
    /// As [`Router::route`].
    pub fn route_to<H: Handler>(mut self, path: &str, methods: &[&str], handler: H) -> Router {
        assert!(!methods.is_empty(), "route {path:?}: no method given");
        let handler: Arc<dyn Handler> = Arc::new(handler);
        for method in methods {
            assert!(
                is_token(method),
                "route {path:?}: {method:?} is not an HTTP method"
            );
            self.add(path, On::Method((*method).to_owned()), Arc::clone(&handler));
        }
        self
    }

    /// Routes requests for `path` with every method that has no handler of its own there to
    /// `handler`, so the path never answers 405 (a WebSocket endpoint, a proxy).
    ///
    /// # Panics
    ///
    /// As [`Router::get`], and for a second `any` handler for `path`.
    pub fn any<F>(mut self, path: &str, handler: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.add(path, On::Any, Arc::new(handler));
        self
    }

    /// Answers requests whose path matches no route with `handler` instead of `404 Not Found`
    /// (a path that matches a route with another method is answered 405). A later call replaces
    /// the fallback.
    pub fn fallback<F>(mut self, handler: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.fallback = Some(Arc::new(handler));
        self
    }

    /// Serves `router`'s routes under `prefix`: its `/users/{id}` becomes
    /// `{prefix}/users/{id}`, its `/` becomes `{prefix}` itself (as in axum; `{prefix}/` is a
    /// path of its own, which this router may route). Handlers see the whole path;
    /// parameters in `prefix` reach them with the route's own. `router`'s fallback answers the
    /// paths under `prefix` (`{prefix}`, and every path starting `{prefix}/`) that match none of
    /// the routes; its nested routers keep theirs. The routes are merged into this router, so
    /// a nested route costs one match like any other.
    ///
    /// ```
    /// use twinhttp::{Response, Router};
    ///
    /// let users = Router::new()
    ///     .get("/", |_| Response::text("every user"))
    ///     .get("/{id}", |req| Response::text(format!("user {}", req.param("id").unwrap_or(""))))
    ///     .fallback(|_| Response::new(404).with_body("no such user page"));
    /// let app = Router::new().nest("/users", users); // GET /users, GET /users/7
    /// # let _ = app;
    /// ```
    ///
    /// # Panics
    ///
    /// When `prefix` does not start with `/`, ends with `/` or is `/` alone (merge the routes
    /// into one router instead), and as [`Router::get`] for a nested route that conflicts with
    /// one here, or a nested fallback at a prefix that already has one.
    pub fn nest(mut self, prefix: &str, mut router: Router) -> Router {
        assert!(
            prefix.starts_with('/') && !prefix.ends_with('/'),
            "nest {prefix:?}: a prefix starts with '/' and does not end with one"
        );
        // Its handlers keep its state once merged here.
        if let Some(state) = router.state.take() {
            router.map_handlers(|inner| {
                Arc::new(wrap::Stated {
                    state: state.clone(),
                    inner,
                })
            });
        }
        for endpoint in router.endpoints {
            let path = match endpoint.pattern.as_str() {
                "/" => prefix.to_owned(),
                p => format!("{prefix}{p}"),
            };
            for (on, handler) in endpoint.into_handlers() {
                self.add(&path, on, handler);
            }
        }
        for (inner, handler) in router.nested {
            self.add_nested(format!("{prefix}{inner}"), handler);
        }
        if let Some(handler) = router.fallback {
            self.add_nested(prefix.to_owned(), handler);
        }
        self
    }

    fn add(&mut self, path: &str, on: On, handler: Arc<dyn Handler>) {
        assert!(
            path.starts_with('/'),
            "route {path:?}: a path starts with '/'"
        );
        let index = match self.endpoints.iter().position(|e| e.pattern == path) {
            Some(i) => i,
            None => {
                let i = self.endpoints.len();
                if let Err(e) = self.matcher.insert(path, i) {
                    panic!("route {path:?}: {e}");
                }
                self.endpoints.push(Endpoint::new(path.to_owned()));
                i
            }
        };
        let endpoint = &mut self.endpoints[index];
        if !endpoint.add(on.clone(), handler) {
            panic!("route {path:?}: {on:?} has a handler already");
        }
    }

    /// Replaces each handler (routes', fallbacks') with what `f` makes of it.
    fn map_handlers(&mut self, mut f: impl FnMut(Arc<dyn Handler>) -> Arc<dyn Handler>) {
        for endpoint in &mut self.endpoints {
            endpoint.map_handlers(&mut f);
        }
        for (_, handler) in &mut self.nested {
            *handler = f(handler.clone());
        }
        if let Some(handler) = self.fallback.take() {
            self.fallback = Some(f(handler));
        }
    }

    /// Registers a nested router's fallback for `prefix` and every path under it.
    fn add_nested(&mut self, prefix: String, handler: Arc<dyn Handler>) {
        let i = self.nested.len();
        for pattern in [
            prefix.clone(),
            format!("{prefix}/"),
            format!("{prefix}{NESTED_REST}"),
        ] {
            if let Err(e) = self.nested_matcher.insert(pattern, i) {
                panic!("nest {prefix:?}: its fallback: {e}");
            }
        }
        self.nested.push((prefix, handler));
    }
}

/// Which handler answers a request.
enum Pick<'r, 'p> {
    /// A route's, with the route's parameters.
    Route(&'r dyn Handler, matchit::Params<'r, 'p>),
    /// A route with no handler for the method.
    NotAllowed(&'r Endpoint),
    /// A nested router's fallback or this router's: it sees the whole request.
    Whole(&'r dyn Handler),
    NotFound,
}

impl Router {
    fn pick<'r, 'p>(&'r self, method: &str, path: &'p str) -> Pick<'r, 'p> {
        if let Ok(matched) = self.matcher.at(path) {
            if let Some(endpoint) = self.endpoints.get(*matched.value) {
                return match endpoint.handler(method) {
                    Some(handler) => Pick::Route(handler, matched.params),
                    None => Pick::NotAllowed(endpoint),
                };
            }
        }
        let nested = self.nested_matcher.at(path).ok();
        match nested.and_then(|m| self.nested.get(*m.value)) {
            Some((_, handler)) => Pick::Whole(&**handler),
            None => match &self.fallback {
                Some(handler) => Pick::Whole(&**handler),
                None => Pick::NotFound,
            },
        }
    }
}

impl Handler for Router {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        let state = self.state.as_deref();
        match self.pick(req.method(), req.path()) {
            // The route's handler sees its parameters, and only them.
            Pick::Route(handler, params) => wrap::run(req, Some(&params), state, handler),
            Pick::NotAllowed(endpoint) => endpoint.method_not_allowed(),
            Pick::Whole(handler) => wrap::run(req, None, state, handler),
            Pick::NotFound => Response::new(404),
        }
    }

    /// As the handler that would answer it says.
    fn streams_body(&self, req: &Request<'_>) -> bool {
        match self.pick(req.method(), req.path()) {
            Pick::Route(handler, _) | Pick::Whole(handler) => handler.streams_body(req),
            Pick::NotAllowed(_) | Pick::NotFound => false,
        }
    }
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("routes", &self.endpoints)
            .field(
                "nested_fallbacks",
                &self.nested.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

/// Whether `s` is an HTTP token (RFC 9110 §5.6.2), as a method must be.
fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(crate::http::parse::is_tchar)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request_head::RequestHead;
    use crate::testing::TestRequest;

    /// What `router` answers `method target`: status, body (a `HEAD` request's too, as the
    /// handler made it), `Allow`.
    fn call(router: &Router, method: &str, target: &str) -> (u16, String, Option<String>) {
        let response = TestRequest::new(method, target)
            .call(router)
            .into_response();
        let allow = response.header("allow").map(str::to_owned);
        let status = response.status();
        let text = crate::testing::TestResponse::body_text(response);
        (status, text, allow)
    }

    /// Answers with the method, the path and every parameter.
    fn show(req: &mut Request<'_>) -> Response {
        let params: Vec<String> = req.params().map(|(k, v)| format!("{k}={v}")).collect();
        Response::text(format!(
            "{} {} {}",
            req.method(),
            req.path(),
            params.join(",")
        ))
    }

    fn app() -> Router {
        let api = Router::new()
            .get("/", show)
            .get("/items/{id}", show)
            .put("/items/{id}", show)
            .fallback(|_| Response::new(404).with_body("api fallback"));
        Router::new()
            .get("/", show)
            .get("/users/{id}", show)
            .post("/users", show)
            .patch("/users/{id}", show)
            .delete("/users/{id}", show)
            .get("/users/{id}/posts/{post}", show)
            .get("/users/new", show)
            .get("/files/{*path}", show)
            .route("/form", &["GET", "POST"], show)
            .any("/ws", show)
            .nest("/api", api)
            .nest("/org/{org}", Router::new().get("/repos/{repo}", show))
            .fallback(|_| Response::new(404).with_body("top fallback"))
    }

    #[test]
    fn routes_by_path_and_method() {
        let router = app();
        let cases: &[(&str, &str, u16, &str, Option<&str>)] = &[
            ("GET", "/", 200, "GET / ", None),
            ("GET", "/users/7", 200, "GET /users/7 id=7", None),
            ("GET", "/users/7?x=1", 200, "GET /users/7 id=7", None),
            ("GET", "/users/new", 200, "GET /users/new ", None),
            ("POST", "/users", 200, "POST /users ", None),
            ("PATCH", "/users/7", 200, "PATCH /users/7 id=7", None),
            ("DELETE", "/users/7", 200, "DELETE /users/7 id=7", None),
            (
                "GET",
                "/users/7/posts/9",
                200,
                "GET /users/7/posts/9 id=7,post=9",
                None,
            ),
            (
                "GET",
                "/files/a/b%2Fc.txt",
                200,
                "GET /files/a/b%2Fc.txt path=a/b%2Fc.txt",
                None,
            ),
            (
                "GET",
                "/users/a%2Fb",
                200,
                "GET /users/a%2Fb id=a%2Fb",
                None,
            ),
            ("POST", "/form", 200, "POST /form ", None),
            ("PURGE", "/ws", 200, "PURGE /ws ", None),
            // HEAD is answered by the GET route.
            ("HEAD", "/users/7", 200, "HEAD /users/7 id=7", None),
            // The path matches, the method does not.
            ("PUT", "/users/7", 405, "", Some("GET, HEAD, PATCH, DELETE")),
            ("GET", "/users", 405, "", Some("POST")),
            ("DELETE", "/form", 405, "", Some("GET, HEAD, POST")),
            ("OPTIONS", "/", 405, "", Some("GET, HEAD")),
            ("get", "/", 405, "", Some("GET, HEAD")),
            // Nested: the prefix's own path, its routes, its fallback under the prefix.
            ("GET", "/api", 200, "GET /api ", None),
            ("GET", "/api/items/3", 200, "GET /api/items/3 id=3", None),
            ("POST", "/api/items/3", 405, "", Some("GET, HEAD, PUT")),
            ("GET", "/api/", 404, "api fallback", None),
            ("GET", "/api/nothing/here", 404, "api fallback", None),
            (
                "GET",
                "/org/rust/repos/std",
                200,
                "GET /org/rust/repos/std org=rust,repo=std",
                None,
            ),
            // No route: the fallback.
            ("GET", "/users/", 404, "top fallback", None),
            ("GET", "/apix", 404, "top fallback", None),
            ("GET", "/files/", 404, "top fallback", None),
            ("GET", "/nope", 404, "top fallback", None),
            ("OPTIONS", "*", 404, "top fallback", None),
            (
                "GET",
                "http://example.com/users/8",
                200,
                "GET /users/8 id=8",
                None,
            ),
        ];
        for (method, target, status, body, allow) in cases {
            let got = call(&router, method, target);
            let want = (*status, (*body).to_owned(), allow.map(str::to_owned));
            assert_eq!(got, want, "{method} {target}");
        }
    }

    #[test]
    fn no_fallback_is_404() {
        let router = Router::new().get("/a", show);
        assert_eq!(call(&router, "GET", "/b"), (404, String::new(), None));
        assert_eq!(call(&Router::new(), "GET", "/"), (404, String::new(), None));
    }

    #[test]
    fn params_reach_only_the_route_handler() {
        // A router inside a route: the inner handler sees the inner route's parameters.
        let inner = Router::new().get("/x/{b}", show);
        let outer = Router::new().any("/x/{a}", move |req| inner.handle(req));
        assert_eq!(call(&outer, "GET", "/x/1").1, "GET /x/1 b=1");
        // A request no router matched has none.
        let head = RequestHead::parsed(b"GET /x/1 HTTP/1.1\r\nHost: t\r\n\r\n");
        let mut body: &[u8] = b"";
        let req = Request::new(&head, &mut body, None);
        assert_eq!((req.param("a"), req.params().count()), (None, 0));
    }

    #[test]
    fn decoded_params() {
        let router = Router::new().get("/f/{name}", |req| match req.param_decoded("name") {
            Some(Ok(name)) => Response::text(name.into_owned()),
            Some(Err(e)) => Response::new(e.status().unwrap_or(500)),
            None => Response::new(500),
        });
        assert_eq!(call(&router, "GET", "/f/a%20b").1, "a b");
        assert_eq!(call(&router, "GET", "/f/a%2Fb").1, "a/b");
        assert_eq!(call(&router, "GET", "/f/caf%C3%A9").1, "café");
        assert_eq!(call(&router, "GET", "/f/%zz").0, 400);
        assert_eq!(call(&router, "GET", "/f/%FF").0, 400);
    }

    #[test]
    fn building_errors_panic_with_the_route() {
        type Build = fn() -> Router;
        let cases: Vec<(&str, Build)> = vec![
            ("conflict", || {
                Router::new().get("/u/{id}", show).get("/u/{name}", show)
            }),
            ("twice", || Router::new().get("/u", show).get("/u", show)),
            ("twice nested", || {
                Router::new()
                    .get("/a/b", show)
                    .nest("/a", Router::new().get("/b", show))
            }),
            ("any twice", || {
                Router::new().any("/u", show).any("/u", show)
            }),
            ("no slash", || Router::new().get("u", show)),
            ("bad param", || Router::new().get("/u/{", show)),
            ("no method", || Router::new().route("/u", &[], show)),
            ("bad method", || Router::new().route("/u", &["GE T"], show)),
            ("root prefix", || Router::new().nest("/", Router::new())),
            ("trailing prefix", || {
                Router::new().nest("/a/", Router::new())
            }),
            ("two fallbacks", || {
                let f = || Router::new().fallback(show);
                Router::new().nest("/a", f()).nest("/a", f())
            }),
        ];
        for (what, build) in cases {
            let built = std::panic::catch_unwind(build);
            assert!(built.is_err(), "{what}: built");
        }
    }

    #[test]
    fn debug_lists_routes() {
        let text = format!("{:?}", app());
        for needle in [
            "/users/{id}",
            "PATCH",
            "/api/items/{id}",
            "\"/api\"",
            "fallback: true",
        ] {
            assert!(text.contains(needle), "{needle} in {text}");
        }
    }
}
