//! Cross-origin resource sharing (the Fetch standard's CORS protocol) as a layer: which other
//! origins' pages may call these routes from a browser, with which methods and fields, and
//! whether with credentials.

use std::time::Duration;

use super::{Layer, Next};
use crate::{HeaderText, Request, Response};

/// The CORS layer: answers preflight requests (`OPTIONS` with
/// `Access-Control-Request-Method`) itself, and adds `Access-Control-Allow-Origin` (and the
/// rest) to the responses of requests from an allowed origin. A request without `Origin` (not
/// from a browser's cross-origin call) passes through unchanged, as does one from an origin
/// not allowed (the browser then refuses the page the response); a preflight from such an
/// origin is answered `403`. Where the answer depends on the origin (a list of them), every
/// response says so with `Vary: Origin`.
///
/// Wrap the whole router (or what answers `OPTIONS`): a router answers an `OPTIONS` for a route
/// without one `405` itself, so a layer around its routes only
/// ([`Router::route_layer`](crate::Router::route_layer)) never sees the preflight.
///
/// ```
/// use std::time::Duration;
/// use twinhttp::layer::{Cors, HandlerExt};
/// use twinhttp::{Response, Router};
///
/// let api = Router::new()
///     .get("/items", |_| Response::text("[]"))
///     .layer(Cors::origins(["https://app.example"])
///         .methods(&["GET", "POST"])
///         .credentials(true)
///         .max_age(Duration::from_secs(600)));
/// # let _ = api;
/// ```
#[derive(Clone, Debug)]
pub struct Cors {
    origins: Origins,
    /// `Access-Control-Allow-Methods`.
    methods: String,
    headers: Fields,
    expose: Option<String>,
    credentials: bool,
    max_age: Option<u64>,
}

/// Which origins are allowed.
#[derive(Clone, Debug)]
enum Origins {
    Any,
    List(Vec<String>),
}

/// Which request fields a preflight allows.
#[derive(Clone, Debug)]
enum Fields {
    /// Those the preflight asks for (`Access-Control-Request-Headers`), whatever they are.
    Requested,
    /// These.
    List(String),
}

impl Cors {
    fn with(origins: Origins) -> Cors {
        Cors {
            origins,
            methods: "GET, HEAD, POST".to_owned(),
            headers: Fields::Requested,
            expose: None,
            credentials: false,
            max_age: None,
        }
    }

    /// Any origin (`Access-Control-Allow-Origin: *`), without credentials: a page anywhere may
    /// read what it could fetch without cookies.
    pub fn any_origin() -> Cors {
        Cors::with(Origins::Any)
    }

    /// These origins only (`https://app.example`: scheme, host and port, as browsers send
    /// `Origin`; compared without regard to case, a trailing `/` ignored).
    pub fn origins<S: Into<String>>(origins: impl IntoIterator<Item = S>) -> Cors {
        let list = origins
            .into_iter()
            .map(|o| o.into().trim_end_matches('/').to_owned())
            .collect();
        Cors::with(Origins::List(list))
    }

    /// The methods a preflight allows. Default: `GET`, `HEAD`, `POST`.
    pub fn methods(mut self, methods: &[&str]) -> Cors {
        self.methods = methods.join(", ");
        self
    }

    /// The request fields a preflight allows. Default: whichever it asks for.
    pub fn headers(mut self, fields: &[&str]) -> Cors {
        self.headers = Fields::List(fields.join(", "));
        self
    }

    /// Response fields a page may read beyond the safelisted ones
    /// (`Access-Control-Expose-Headers`). Default: none.
    pub fn expose_headers(mut self, fields: &[&str]) -> Cors {
        self.expose = Some(fields.join(", "));
        self
    }

    /// Whether calls may carry credentials (cookies, HTTP authentication):
    /// `Access-Control-Allow-Credentials: true`. Default: no.
    ///
    /// # Panics
    ///
    /// On [`Cors::any_origin`]: any site could then read what its visitors' cookies open
    /// (the standard forbids `*` with credentials for that reason). List the origins.
    pub fn credentials(mut self, allowed: bool) -> Cors {
        assert!(
            !(allowed && matches!(self.origins, Origins::Any)),
            "Cors: credentials from any origin would let any site read your users' data; list the origins"
        );
        self.credentials = allowed;
        self
    }

    /// How long a browser may cache a preflight's answer (`Access-Control-Max-Age`). Default:
    /// not said (browsers use 5 s).
    pub fn max_age(mut self, age: Duration) -> Cors {
        self.max_age = Some(age.as_secs());
        self
    }

    /// The `Access-Control-Allow-Origin` value for `origin`, if it is allowed.
    fn allow(&self, origin: &str) -> Option<HeaderText> {
        match &self.origins {
            Origins::Any => Some(HeaderText::Borrowed("*")),
            Origins::List(list) => list
                .iter()
                .any(|o| o.eq_ignore_ascii_case(origin))
                .then(|| HeaderText::Owned(origin.to_owned())),
        }
    }

    /// True when the answer depends on the request's `Origin`: every response then says so
    /// (`Vary: Origin`), marked or not, so that a cache keeps them apart.
    fn varies(&self) -> bool {
        matches!(self.origins, Origins::List(_))
    }

    /// `Vary: Origin` where the answer depends on it.
    fn vary(&self, response: Response) -> Response {
        match self.varies() {
            true => response.with_added_header("vary", "Origin"),
            false => response,
        }
    }

    /// The fields every allowed response carries.
    fn decorate(&self, response: Response, allowed: HeaderText) -> Response {
        let mut response = response.with_header("access-control-allow-origin", allowed);
        if self.credentials {
            response = response.with_header("access-control-allow-credentials", "true");
        }
        self.vary(response)
    }

    /// The answer to a preflight from an allowed origin.
    fn preflight(&self, req: &Request<'_>, allowed: HeaderText) -> Response {
        let mut response =
            Response::new(204).with_header("access-control-allow-methods", self.methods.clone());
        let fields = match &self.headers {
            Fields::Requested => req.header("access-control-request-headers"),
            Fields::List(list) => Some(list.as_str()),
        };
        if let Some(fields) = fields {
            response = response.with_header("access-control-allow-headers", fields.to_owned());
        }
        if let Some(age) = self.max_age {
            response = response.with_header("access-control-max-age", age.to_string());
        }
        self.decorate(response, allowed).with_added_header(
            "vary",
            "Access-Control-Request-Method, Access-Control-Request-Headers",
        )
    }
}

impl Layer for Cors {
    fn call(&self, req: &mut Request<'_>, next: Next<'_>) -> Response {
        let Some(origin) = req.header("origin") else {
            return self.vary(next.run(req));
        };
        let allowed = self.allow(origin);
        let preflight =
            req.method() == "OPTIONS" && req.header("access-control-request-method").is_some();
        match (preflight, allowed) {
            (true, Some(allowed)) => self.preflight(req, allowed),
            (true, None) => self.vary(Response::new(403)),
            (false, Some(allowed)) => {
                let response = next.run(req);
                let response = match &self.expose {
                    Some(expose) => {
                        response.with_header("access-control-expose-headers", expose.clone())
                    }
                    None => response,
                };
                self.decorate(response, allowed)
            }
            (false, None) => self.vary(next.run(req)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::HandlerExt;
    use crate::testing::TestRequest;
    use crate::{Router, handler_fn};

    fn api(cors: Cors) -> impl crate::Handler {
        Router::new()
            .get("/items", |_| Response::text("[]"))
            .layer(cors)
    }

    fn preflight(origin: &str) -> TestRequest {
        TestRequest::new("OPTIONS", "/items")
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "POST")
            .header("Access-Control-Request-Headers", "content-type, x-token")
    }

    #[test]
    fn any_origin_answers_preflights_and_marks_responses() {
        let app = api(Cors::any_origin().max_age(Duration::from_secs(60)));
        let r = preflight("https://a.example").call(&app);
        assert_eq!(r.status(), 204);
        assert_eq!(r.header("access-control-allow-origin"), Some("*"));
        assert_eq!(
            r.header("access-control-allow-methods"),
            Some("GET, HEAD, POST")
        );
        assert_eq!(
            r.header("access-control-allow-headers"),
            Some("content-type, x-token")
        );
        assert_eq!(r.header("access-control-max-age"), Some("60"));
        let r = TestRequest::get("/items")
            .header("Origin", "https://a.example")
            .call(&app);
        assert_eq!(r.status(), 200);
        assert_eq!(r.header("access-control-allow-origin"), Some("*"));
        assert_eq!(r.header("vary"), None);
        // Not a browser's cross-origin call: unchanged.
        let r = TestRequest::get("/items").call(&app);
        assert_eq!(r.header("access-control-allow-origin"), None);
    }

    #[test]
    fn listed_origins_with_credentials_echo_the_origin_and_vary() {
        let app = api(Cors::origins(["https://app.example"])
            .credentials(true)
            .headers(&["content-type"])
            .expose_headers(&["x-total"]));
        let r = preflight("https://APP.example").call(&app);
        assert_eq!(r.status(), 204);
        assert_eq!(
            r.header("access-control-allow-origin"),
            Some("https://APP.example")
        );
        assert_eq!(r.header("access-control-allow-credentials"), Some("true"));
        assert_eq!(
            r.header("access-control-allow-headers"),
            Some("content-type")
        );
        let r = TestRequest::get("/items")
            .header("Origin", "https://app.example")
            .call(&app);
        assert_eq!(
            r.header("access-control-allow-origin"),
            Some("https://app.example")
        );
        assert_eq!(r.header("access-control-expose-headers"), Some("x-total"));
        assert_eq!(r.header("vary"), Some("Origin"));
        // Another origin: a preflight is refused, a call passes unmarked.
        assert_eq!(preflight("https://evil.example").call(&app).status(), 403);
        let r = TestRequest::get("/items")
            .header("Origin", "https://evil.example")
            .call(&app);
        assert_eq!(
            (r.status(), r.header("access-control-allow-origin")),
            (200, None)
        );
    }

    #[test]
    #[should_panic(expected = "list the origins")]
    fn any_origin_with_credentials_is_refused() {
        let _ = Cors::any_origin().credentials(true);
    }

    #[test]
    fn listed_origins_vary_every_response() {
        let app = handler_fn(|_| Response::new(204)).layer(Cors::origins(["https://b.example/"]));
        let r = TestRequest::get("/").call(&app);
        assert_eq!(
            (r.header("vary"), r.header("access-control-allow-origin")),
            (Some("Origin"), None)
        );
        let r = TestRequest::get("/")
            .header("Origin", "https://b.example")
            .call(&app);
        assert_eq!(
            r.header("access-control-allow-origin"),
            Some("https://b.example")
        );
    }
}
