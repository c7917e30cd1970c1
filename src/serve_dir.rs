//! [`ServeDir`]: a folder served safely, as a [`Handler`].

use std::borrow::Cow;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::{Handler, Request, Response};

/// A [`Handler`] that serves the files under one folder.
///
/// The request's path, minus a [`prefix`](ServeDir::prefix), is percent-decoded and looked up
/// under the folder; the file is answered as [`Response::file`] answers (ranges, `ETag` with
/// `If-None-Match`, `Last-Modified` with `If-Modified-Since`, a content type from the
/// extension, `405` for methods other than `GET` and `HEAD`).
///
/// What it refuses, with `404 Not Found` (it does not tell what exists outside the folder):
///
/// - a path that is not under the prefix;
/// - an absolute path once the prefix is taken off (`/static//etc/passwd`), a `..` or `.`
///   segment, sent plainly or encoded (`%2e%2e`, `..%2f`), a NUL (`%00`), a backslash;
/// - a name starting with `.` (`.git`, `.env`), unless [`hidden`](ServeDir::hidden) allows
///   them;
/// - a symbolic link that resolves outside the folder (links inside it are followed);
/// - a folder without its index file (folders are never listed), and anything that is not a
///   regular file (a FIFO, a device, a socket).
///
/// A path with a malformed `%` escape or that is not UTF-8 once decoded gets `400`. A folder
/// asked for without its trailing `/` gets `301` to the path with it (so that the index page's
/// relative links resolve), and with it, the folder's [`index`](ServeDir::index) file
/// (`index.html`).
///
/// The folder is resolved once, when the `ServeDir` is made; each request's file is resolved
/// (`canonicalize`) and checked to be inside it before it is opened. Someone who can write into
/// the folder can still race a link between the check and the open: serve folders that only
/// you write to.
///
/// # Examples
///
/// Alone, on every path under `/static/`:
///
/// ```no_run
/// use twinhttp::{ServeDir, reactor::Reactor};
///
/// let files = ServeDir::new("public")?.prefix("/static");
/// let reactor = Reactor::builder().serve("127.0.0.1:8080", files)?;
/// # reactor.shutdown(std::time::Duration::from_secs(1))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// In a [`Router`](crate::Router), beside other routes (`HEAD` is answered too):
///
/// ```no_run
/// use twinhttp::{Handler, Response, Router, ServeDir};
///
/// let files = ServeDir::new("public")?.prefix("/static");
/// let app = Router::new()
///     .get("/", |_| Response::text("home"))
///     .get("/static/{*path}", move |req| files.handle(req));
/// # let _ = app;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ServeDir {
    /// Absolute and canonical: every file served is checked to be under it.
    root: PathBuf,
    prefix: String,
    index: Option<String>,
    hidden: Hidden,
}

/// Whether names starting with `.` are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hidden {
    Refused,
    Served,
}

impl ServeDir {
    /// Serves the folder at `root`, from the request path's start (no prefix), with
    /// `index.html` as folders' index file.
    ///
    /// # Errors
    ///
    /// When `root` does not exist or is not a folder.
    pub fn new(root: impl AsRef<Path>) -> io::Result<ServeDir> {
        let root = root.as_ref().canonicalize()?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a folder", root.display()),
            ));
        }
        Ok(ServeDir {
            root,
            prefix: String::new(),
            index: Some("index.html".to_owned()),
            hidden: Hidden::Refused,
        })
    }

    /// The path prefix the folder is served under, such as `/static`: `/static/app.js` is the
    /// folder's `app.js`, and a path not under it gets `404`. Matched as the client sent it
    /// (encoded); a trailing `/` is ignored.
    pub fn prefix(mut self, prefix: &str) -> ServeDir {
        prefix.trim_end_matches('/').clone_into(&mut self.prefix);
        self
    }

    /// The file a folder's path (one ending in `/`) serves, `index.html` by default; `None`
    /// answers such paths `404`.
    pub fn index(mut self, name: Option<&str>) -> ServeDir {
        self.index = name.map(str::to_owned);
        self
    }

    /// Whether names starting with `.` are served (`false` by default: `.git`, `.env` and
    /// their like get `404`).
    pub fn hidden(mut self, serve: bool) -> ServeDir {
        self.hidden = if serve {
            Hidden::Served
        } else {
            Hidden::Refused
        };
        self
    }

    /// The folder, absolute and canonical.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Serves `relative`, a path already decoded and taken off its prefix (`"css/app.css"`,
    /// `""` or `"docs/"` for folders), as the answer to `req`: for a handler that finds the
    /// file's name itself, such as from a route's parameter. The same checks as
    /// [`handle`](Handler::handle) apply.
    pub fn serve(&self, req: &Request<'_>, relative: &str) -> Response {
        match self.resolve(relative) {
            Lookup::File(path) => Response::file(req, path),
            Lookup::Folder => self.redirect_to_folder(req),
            Lookup::Refused => Response::new(404),
        }
    }

    /// Where `relative` leads, checked at each step.
    fn resolve(&self, relative: &str) -> Lookup {
        let folder_path = relative.is_empty() || relative.ends_with('/');
        let wanted = match &self.index {
            Some(index) if folder_path => Cow::Owned(format!("{relative}{index}")),
            None if folder_path => return Lookup::Refused,
            _ => Cow::Borrowed(relative),
        };
        if !self.plain(&wanted) {
            return Lookup::Refused;
        }
        let Ok(real) = self.root.join(wanted.as_ref()).canonicalize() else {
            return Lookup::Refused;
        };
        if !real.starts_with(&self.root) {
            return Lookup::Refused;
        }
        // Regular files only: opening a FIFO would wait for a writer, a device is no file.
        match std::fs::metadata(&real).map(|m| m.file_type()) {
            Ok(t) if t.is_dir() && !folder_path => Lookup::Folder,
            Ok(t) if t.is_file() => Lookup::File(real),
            _ => Lookup::Refused,
        }
    }

    /// Plain names only: no root, no `..` or `.`, no empty segment, no NUL or backslash, and
    /// no hidden name unless allowed.
    fn plain(&self, relative: &str) -> bool {
        if relative.contains(['\0', '\\']) {
            return false;
        }
        // Each segment by hand (`Path::components` drops a `.` inside a path), then the path
        // as the platform reads it: only plain names.
        let segments_plain = relative.split('/').all(|segment| match segment {
            "" | "." | ".." => false,
            name => self.hidden == Hidden::Served || !name.starts_with('.'),
        });
        segments_plain
            && Path::new(relative)
                .components()
                .all(|c| matches!(c, Component::Normal(_)))
    }

    /// `301` to the request's path with a `/` added (its query kept).
    fn redirect_to_folder(&self, req: &Request<'_>) -> Response {
        let location = match req.query() {
            Some(q) => format!("{}/?{q}", req.path()),
            None => format!("{}/", req.path()),
        };
        Response::new(301).with_header("Location", location)
    }
}

/// What a request's path leads to.
enum Lookup {
    /// A file inside the folder, its canonical path.
    File(PathBuf),
    /// A folder asked for without its trailing `/`.
    Folder,
    /// Outside, hidden, malformed or missing: `404`.
    Refused,
}

impl Handler for ServeDir {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        let Some(rest) = req.path().strip_prefix(self.prefix.as_str()) else {
            return Response::new(404);
        };
        // The prefix ends at a segment's end: `/static` does not serve `/staticfoo`.
        let Some(rest) = rest.strip_prefix('/') else {
            return match rest.is_empty() {
                true => self.redirect_to_folder(req),
                false => Response::new(404),
            };
        };
        match crate::http::percent::decode(rest) {
            Ok(relative) => self.serve(req, &relative),
            Err(e) => Response::new(e.status().unwrap_or(400)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names() {
        let dir = ServeDir::new(std::env::temp_dir()).expect("temp dir");
        for ok in ["a", "a/b.txt", "a b", "caf\u{e9}.html", "x..y", "a/b../c"] {
            assert!(dir.plain(ok), "{ok:?} refused");
        }
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            "./a",
            "a/./b",
            "a//b",
            "a\0b",
            "a\\..\\b",
            ".env",
            "a/.git/config",
            "..",
        ] {
            assert!(!dir.plain(bad), "{bad:?} allowed");
        }
        assert!(dir.clone().hidden(true).plain(".well-known/x"));
        assert!(!dir.hidden(true).plain("../x"));
    }
}
