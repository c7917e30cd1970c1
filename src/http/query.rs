//! The query string as decoded name–value pairs (`application/x-www-form-urlencoded`, as
//! browsers send forms with `GET`), through the `form_urlencoded` crate.

use std::borrow::Cow;

use crate::http::request::Request;

impl<'a> Request<'a> {
    /// The query's name–value pairs, in order, decoded as a browser encodes a form:
    /// `+` is a space and `%XX` escapes are decoded (`?q=rust+web&tag=a%20b&tag=c` gives
    /// `("q", "rust web")`, `("tag", "a b")`, `("tag", "c")`). Repeated names come once each.
    /// A pair without `=` has an empty value; empty pairs (`&&`) are skipped. Borrowed from the
    /// request where nothing needed decoding.
    ///
    /// Decoding never fails, as in browsers (the WHATWG URL standard): a `%` that does not start
    /// a `%XX` escape stays as it is, and bytes that are not UTF-8 once decoded become U+FFFD
    /// (`�`). [`Request::query`] has the query as sent.
    ///
    /// # Examples
    ///
    /// ```
    /// use twinhttp::{Request, Response};
    ///
    /// fn search(req: &mut Request<'_>) -> Response {
    ///     let tags: Vec<_> = req.query_pairs().filter(|(k, _)| k == "tag").map(|(_, v)| v).collect();
    ///     let q = req.query_param("q").unwrap_or_default();
    ///     // The values are the request's own data: the body can be read while they are held.
    ///     let _body = req.read_body();
    ///     Response::text(format!("{q} in {tags:?}"))
    /// }
    /// # let _ = search;
    /// ```
    pub fn query_pairs(&self) -> impl Iterator<Item = (Cow<'a, str>, Cow<'a, str>)> + use<'a> {
        let query: &'a str = self.query().unwrap_or("");
        form_urlencoded::parse(query.as_bytes())
    }

    /// The decoded value of the first query pair with this decoded name (case-sensitive), as
    /// [`Request::query_pairs`] decodes it: `?page=2` gives `Some("2")`, `?page` gives
    /// `Some("")`, no such name gives `None`. For every value of a repeated name, filter
    /// [`Request::query_pairs`].
    ///
    /// ```
    /// use twinhttp::{Request, Response};
    ///
    /// fn list(req: &mut Request<'_>) -> Response {
    ///     match req.query_param("page").map(|p| p.parse::<u32>()) {
    ///         None => Response::text("page 1"),
    ///         Some(Ok(n)) => Response::text(format!("page {n}")),
    ///         Some(Err(_)) => Response::new(400),
    ///     }
    /// }
    /// # let _ = list;
    /// ```
    pub fn query_param(&self, name: &str) -> Option<Cow<'a, str>> {
        self.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use crate::http::request::Request;
    use crate::http::request_head::RequestHead;

    fn head(target: &str) -> RequestHead {
        RequestHead::parsed(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
    }

    #[test]
    fn pairs_are_decoded_in_order() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("/", &[]),
            ("/?", &[]),
            ("/?a=1", &[("a", "1")]),
            (
                "/?q=rust+web&tag=a%20b&tag=c",
                &[("q", "rust web"), ("tag", "a b"), ("tag", "c")],
            ),
            ("/?flag&x=", &[("flag", ""), ("x", "")]),
            ("/?a=1&&b=2&", &[("a", "1"), ("b", "2")]),
            ("/?a=b=c", &[("a", "b=c")]),
            ("/?caf%C3%A9=%E2%9C%93", &[("café", "✓")]),
            ("/?k%2Bey=1%2B1", &[("k+ey", "1+1")]),
            // Lenient as browsers are: a stray % stays, bytes that are not UTF-8 become U+FFFD.
            ("/?p=100%&q=%zz", &[("p", "100%"), ("q", "%zz")]),
            ("/?bad=%FF", &[("bad", "\u{FFFD}")]),
            ("http://example.com/x?a=1", &[("a", "1")]),
        ];
        for (target, want) in cases {
            let head = head(target);
            let mut body: &[u8] = b"";
            let req = Request::new(&head, &mut body, None);
            let got: Vec<(String, String)> = req
                .query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            let want: Vec<(String, String)> = want
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            assert_eq!(got, want, "{target}");
        }
    }

    #[test]
    fn first_value_of_a_name() {
        let head = head("/?tag=a&page=2&tag=b&empty");
        let mut body: &[u8] = b"";
        let req = Request::new(&head, &mut body, None);
        assert_eq!(req.query_param("tag").as_deref(), Some("a"));
        assert_eq!(req.query_param("page").as_deref(), Some("2"));
        assert_eq!(req.query_param("empty").as_deref(), Some(""));
        assert_eq!(req.query_param("Page"), None);
        assert_eq!(req.query_param("missing"), None);
    }
}
