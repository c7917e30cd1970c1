//! Path parameters: what a [`Router`](crate::Router) matched, read from the request.

use std::borrow::Cow;

use crate::http::percent;
use crate::{Error, Request};

impl<'a> Request<'a> {
    /// The value of the path parameter `name` of the route a [`Router`](crate::Router) matched,
    /// as sent (not percent-decoded: `/files/a%20b` matched by `/files/{name}` gives `"a%20b"`;
    /// see [`Request::param_decoded`]). `None` when there is no such parameter, or when no router
    /// matched the request.
    ///
    /// A `{name}` parameter matches one segment, up to the next `/` (a `%2F` does not end it), a
    /// `{*name}` catch-all the rest of the path.
    ///
    /// # Examples
    ///
    /// ```
    /// use twinhttp::{Response, Router};
    ///
    /// let app = Router::new().put("/users/{id}", |req| {
    ///     // The request's own data: held while the body is read.
    ///     let id = req.param("id").unwrap_or_default();
    ///     match req.read_body() {
    ///         Ok(body) => Response::text(format!("user {id}: {} bytes", body.len())),
    ///         Err(_) => Response::new(400),
    ///     }
    /// });
    /// # let _ = app;
    /// ```
    pub fn param(&self, name: &str) -> Option<&'a str> {
        self.route_params()?.get(name)
    }

    /// The value of the path parameter `name`, percent-decoded as [`Request::path_decoded`]
    /// decodes (`%2F` becomes `/`, so a decoded `{name}` may hold one). `None` when there is no
    /// such parameter.
    ///
    /// # Errors
    ///
    /// `Some(Err(_))`, of kind [`ErrorKind::BadRequest`](crate::ErrorKind::BadRequest), for a `%`
    /// that does not start a `%XX` escape, or bytes that are not UTF-8 once decoded.
    ///
    /// ```
    /// use twinhttp::{Response, Router};
    ///
    /// let app = Router::new().get("/files/{*path}", |req| match req.param_decoded("path") {
    ///     Some(Ok(path)) => Response::text(format!("file {path}")),
    ///     Some(Err(_)) => Response::new(400),
    ///     None => Response::new(404),
    /// });
    /// # let _ = app;
    /// ```
    pub fn param_decoded(&self, name: &str) -> Option<Result<Cow<'a, str>, Error>> {
        self.param(name).map(percent::decode)
    }

    /// Every path parameter of the matched route, names and values as sent, in the route's
    /// order; none when no router matched the request.
    pub fn params(&self) -> impl Iterator<Item = (&'a str, &'a str)> + use<'a> {
        self.route_params().into_iter().flat_map(|p| p.iter())
    }
}
