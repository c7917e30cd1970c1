//! Cookies read from the request's `Cookie` fields (RFC 6265 §5.4: `name=value; name2=value2`).
//!
//! No crate: reading is a split on `;` and `=`. The `cookie` crate is built for `Set-Cookie`
//! (attributes, expiry, signed and private jars) and brings the `time` crate with it.

use crate::http::request::Request;

/// The `name=value` pairs of one `Cookie` field value, in order. Tolerant as browsers are:
/// spaces and tabs around names and values are trimmed, a pair without `=` or with an empty
/// name is skipped, and a value in double quotes comes without them (RFC 6265 §4.1.1 allows
/// them; they are not part of the value).
fn pairs(field: &str) -> impl Iterator<Item = (&str, &str)> {
    field.split(';').filter_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        let name = name.trim_matches([' ', '\t']);
        if name.is_empty() {
            return None;
        }
        let value = value.trim_matches([' ', '\t']);
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        Some((name, value))
    })
}

impl<'a> Request<'a> {
    /// Every cookie the client sent, in order, from every `Cookie` field (a client sends one;
    /// an HTTP/2 hop may split it into several): `Cookie: a=1; b=2` gives `("a", "1")`,
    /// `("b", "2")`. Values are as sent, without surrounding double quotes and not
    /// percent-decoded (RFC 6265 gives cookie values no encoding; an application that encoded
    /// its values decodes them). A name sent twice comes twice. Fields that are not UTF-8 are
    /// skipped, and so are pairs without `=` or with an empty name.
    ///
    /// # Examples
    ///
    /// ```
    /// use twinhttp::{Request, Response};
    ///
    /// fn whoami(req: &mut Request<'_>) -> Response {
    ///     let theme = req.cookie("theme").unwrap_or("light");
    ///     let count = req.cookies().count();
    ///     // Held while the body is read: the cookies are the request's own data.
    ///     let _body = req.read_body();
    ///     Response::text(format!("{count} cookies, theme {theme}"))
    /// }
    /// # let _ = whoami;
    /// ```
    pub fn cookies(&self) -> impl Iterator<Item = (&'a str, &'a str)> + use<'a> {
        self.header_all("cookie").flat_map(pairs)
    }

    /// The value of the first cookie with this name (case-sensitive, as cookie names are), as
    /// [`Request::cookies`] reads it.
    pub fn cookie(&self, name: &str) -> Option<&'a str> {
        self.cookies().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::pairs;
    use crate::http::request::Request;
    use crate::http::request_head::RequestHead;

    #[test]
    fn one_field() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("", &[]),
            ("a=1", &[("a", "1")]),
            ("a=1; b=2", &[("a", "1"), ("b", "2")]),
            ("a=1;b=2", &[("a", "1"), ("b", "2")]),
            ("  a = 1 ;\tb=2\t; ", &[("a", "1"), ("b", "2")]),
            ("a=; b", &[("a", "")]),
            ("=x; b=2", &[("b", "2")]),
            ("q=\"quoted value\"", &[("q", "quoted value")]),
            ("q=\"", &[("q", "\"")]),
            ("t=a=b==", &[("t", "a=b==")]),
            ("a=1; a=2", &[("a", "1"), ("a", "2")]),
            ("enc=a%20b", &[("enc", "a%20b")]),
            (";;;", &[]),
        ];
        for (field, want) in cases {
            let got: Vec<(&str, &str)> = pairs(field).collect();
            assert_eq!(got, *want, "{field:?}");
        }
    }

    #[test]
    fn every_cookie_field() {
        let head = RequestHead::parsed(
            b"GET / HTTP/1.1\r\nHost: t\r\nCookie: a=1; b=2\r\nX: y\r\ncookie: c=3\r\nCookie: \xff=4\r\n\r\n",
        );
        let mut body: &[u8] = b"";
        let req = Request::new(&head, &mut body, None);
        let all: Vec<(&str, &str)> = req.cookies().collect();
        assert_eq!(all, [("a", "1"), ("b", "2"), ("c", "3")]);
        assert_eq!(req.cookie("c"), Some("3"));
        assert_eq!(req.cookie("A"), None);
    }
}
