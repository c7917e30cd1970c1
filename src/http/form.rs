//! Form bodies: `application/x-www-form-urlencoded`, as a browser posts an HTML form, read
//! whole within the body limit and decoded by the `form_urlencoded` crate (as the query is).

use std::fmt;
use std::io;

use crate::Response;
use crate::http::request::Request;

/// A form's fields, in the order sent, decoded (`+` is a space, `%XX` escapes decoded, bytes
/// that are not UTF-8 replaced, as browsers do): what [`Request::read_form`] returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Form {
    fields: Vec<(String, String)>,
}

impl Form {
    /// The value of the first field named `name` (case-sensitive).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of the fields named `name`, in order (checkboxes, multiple selects).
    pub fn all<'f>(&'f self, name: &'f str) -> impl Iterator<Item = &'f str> {
        self.fields
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every field, names and values, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// The fields, owned.
    pub fn into_fields(self) -> Vec<(String, String)> {
        self.fields
    }
}

/// Why a form body was refused: its `Content-Type` (415), or its body could not be read (413
/// over the body limit, 400 badly framed, 408 too slow). Decoding itself never fails.
pub struct FormError {
    failure: Failure,
}

enum Failure {
    ContentType,
    Body(io::Error),
}

impl FormError {
    /// The status code to answer with.
    pub fn status(&self) -> u16 {
        match &self.failure {
            Failure::ContentType => 415,
            Failure::Body(e) => crate::error::body_status(e),
        }
    }
}

impl fmt::Display for FormError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.failure {
            Failure::ContentType => {
                f.write_str("the request's Content-Type is not application/x-www-form-urlencoded")
            }
            Failure::Body(e) => write!(f, "the request body could not be read: {e}"),
        }
    }
}

impl fmt::Debug for FormError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FormError")
            .field("status", &self.status())
            .field("message", &self.to_string())
            .finish()
    }
}

impl std::error::Error for FormError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.failure {
            Failure::ContentType => None,
            Failure::Body(e) => Some(e),
        }
    }
}

/// The answer to a request whose form was refused: the status of [`FormError::status`] and a
/// `text/plain` body saying what was wrong.
impl From<FormError> for Response {
    fn from(err: FormError) -> Response {
        Response::text(format!("{err}\n")).with_status(err.status())
    }
}

/// True for `application/x-www-form-urlencoded`, parameters allowed.
fn is_form(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/x-www-form-urlencoded")
}

impl Request<'_> {
    /// Reads the body, whole and within [`Limits::max_body_bytes`](crate::Limits), as an
    /// `application/x-www-form-urlencoded` form (a browser's `POST` of an HTML form).
    ///
    /// # Errors
    ///
    /// A `Content-Type` that is not exactly one form type (415), or a body that could not be
    /// read (413, 400, 408); `FormError` converts into the response.
    ///
    /// ```
    /// use twinhttp::{Request, Response};
    ///
    /// fn sign_up(req: &mut Request<'_>) -> Response {
    ///     let form = match req.read_form() {
    ///         Ok(form) => form,
    ///         Err(e) => return e.into(), // 415, or 413/400/408 for the body
    ///     };
    ///     match form.get("email") {
    ///         Some(email) if email.contains('@') => Response::text(format!("welcome, {email}")),
    ///         _ => Response::new(422),
    ///     }
    /// }
    /// # let _ = sign_up;
    /// ```
    pub fn read_form(&mut self) -> Result<Form, FormError> {
        let mut types = self.header_all("content-type");
        match (types.next(), types.next()) {
            (Some(one), None) if is_form(one) => {}
            _ => {
                return Err(FormError {
                    failure: Failure::ContentType,
                });
            }
        }
        let body = self.read_body().map_err(|e| FormError {
            failure: Failure::Body(e),
        })?;
        let fields = form_urlencoded::parse(&body)
            .map(|(n, v)| (n.into_owned(), v.into_owned()))
            .collect();
        Ok(Form { fields })
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::TestRequest;
    use crate::{Limits, Response, handler_fn};

    fn echo() -> impl crate::Handler {
        handler_fn(|req| match req.read_form() {
            Ok(form) => Response::text(
                form.iter()
                    .map(|(n, v)| format!("{n}={v}"))
                    .collect::<Vec<_>>()
                    .join("|"),
            ),
            Err(e) => e.into(),
        })
    }

    #[test]
    fn a_form_is_decoded_in_order() {
        let response = TestRequest::post("/")
            .header(
                "Content-Type",
                "application/x-www-form-urlencoded; charset=UTF-8",
            )
            .body("name=Ada+Lovelace&tag=a%26b&tag=c&empty=&flag")
            .call(&echo());
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.text().expect("a body"),
            "name=Ada Lovelace|tag=a&b|tag=c|empty=|flag="
        );
    }

    #[test]
    fn another_content_type_is_415_and_a_body_over_the_limit_413() {
        let json = TestRequest::post("/")
            .header("Content-Type", "application/json")
            .body("{}")
            .call(&echo());
        assert_eq!(json.status(), 415);
        let none = TestRequest::post("/").body("a=1").call(&echo());
        assert_eq!(none.status(), 415);
        let two = TestRequest::post("/")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Content-Type", "text/plain")
            .body("a=1")
            .call(&echo());
        assert_eq!(two.status(), 415);
        let small = Limits {
            max_body_bytes: 4,
            ..Limits::default()
        };
        let big = TestRequest::post("/")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("a=123456")
            .limits(small)
            .call(&echo());
        assert_eq!(big.status(), 413);
    }
}
