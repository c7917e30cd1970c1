//! [`ServeDir`]: a folder served safely, as a [`Handler`].

use std::borrow::Cow;
use std::fs::{File, Metadata};
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::{Error, Handler, Request, Response};

/// A [`Handler`] that serves the files under one folder.
///
/// The request's path, minus a [`prefix`](ServeDir::prefix), is percent-decoded and looked up
/// under the folder; a regular file is answered as [`Response::file`] answers (ranges, `ETag`
/// with `If-None-Match`, `Last-Modified` with `If-Modified-Since`, a content type from the
/// name asked for, `405` for methods other than `GET` and `HEAD`).
///
/// What it refuses, with `404 Not Found` (it does not tell what exists outside the folder):
///
/// - a path that is not under the prefix;
/// - an absolute path once the prefix is taken off (`/static//etc/passwd`), a `..` or `.`
///   segment, sent plainly or encoded (`%2e%2e`, `..%2f`), a NUL (`%00`), a backslash, an
///   empty segment;
/// - a name starting with `.` (`.git`, `.env`), unless [`hidden`](ServeDir::hidden) allows
///   them;
/// - a symbolic link leading outside the folder;
/// - a folder without its index file (folders are never listed), and anything that is not a
///   regular file (a FIFO, a device, a socket).
///
/// A path with a malformed `%` escape or that is not UTF-8 once decoded gets `400`. A folder
/// asked for without its trailing `/` gets `301` to the path with it (so that the index page's
/// relative links resolve), and with it, the folder's [`index`](ServeDir::index) file
/// (`index.html`).
///
/// # Symbolic links
///
/// The folder is opened once, when the `ServeDir` is made. On Linux each file is opened with
/// `openat2(2)` and `RESOLVE_BENEATH` from the folder's descriptor: the kernel refuses every
/// step out of the folder in the same call that opens the file, so a link swapped in while a
/// request is under way cannot lead out. Links that stay inside, written relative, are followed;
/// absolute links are refused. On other systems (and on Linux before 5.6) the file's path is
/// resolved and checked to be inside the folder, then opened: someone who can write into the
/// folder could swap a link in between, so there serve folders only you write to.
///
/// A link's target is the folder owner's choice: the dotfile rule applies to the names a
/// request sends, so a link `settings.txt -> .env` serves `.env`'s bytes.
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
/// # Ok::<(), twinhttp::Error>(())
/// ```
///
/// Behind a [`Router`](crate::Router)'s routes, as its fallback: `/static`, `/static/` and
/// everything under it go to the folder, and a path under no route and not under `/static`
/// gets the folder's `404`. (A route `/static/{*path}` would not match `/static/` itself: a
/// catch-all takes at least one character.)
///
/// ```no_run
/// use twinhttp::{Handler, Response, Router, ServeDir};
///
/// let files = ServeDir::new("public")?.prefix("/static");
/// let app = Router::new()
///     .get("/", |_| Response::text("home"))
///     .fallback(move |req| files.handle(req));
/// # let _ = app;
/// # Ok::<(), twinhttp::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ServeDir {
    /// Absolute and canonical: every file served is checked to be under it.
    root: PathBuf,
    /// The folder, open: files are opened beneath it (`openat2`, Linux only).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    root_fd: std::sync::Arc<std::os::fd::OwnedFd>,
    prefix: String,
    index: Option<String>,
    hidden: Hidden,
    /// Whether `file.br`, `file.zst` and `file.gz` beside `file` are served for it.
    #[cfg(feature = "compression")]
    precompressed: bool,
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
    /// An [`Io`](crate::ErrorKind::Io) error when `root` does not exist, is not a folder or
    /// cannot be opened; its message names the path (`cannot open the folder public: No such
    /// file or directory (os error 2)`).
    pub fn new(root: impl AsRef<Path>) -> Result<ServeDir, Error> {
        use rustix::fs::{Mode, OFlags};
        let given = root.as_ref();
        let failed = |e: io::Error| Error::path("open the folder", given, e);
        let root = given.canonicalize().map_err(failed)?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        // Opened on every system, which checks that `root` is a folder this process can read;
        // kept where files are opened beneath it.
        let root_fd = rustix::fs::open(&root, flags, Mode::empty())
            .map_err(|e| failed(io::Error::from(e)))?;
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        drop(root_fd);
        Ok(ServeDir {
            root,
            #[cfg(any(target_os = "linux", target_os = "android"))]
            root_fd: std::sync::Arc::new(root_fd),
            prefix: String::new(),
            index: Some("index.html".to_owned()),
            hidden: Hidden::Refused,
            #[cfg(feature = "compression")]
            precompressed: true,
        })
    }

    /// Whether a file's precompressed copies beside it (`app.js.br`, `app.js.zst`,
    /// `app.js.gz`) are served for it to clients that accept their coding, the one they like
    /// best (`Accept-Encoding` q-values; `br`, `zstd`, `gzip` where alike), with its
    /// `Content-Encoding` (not on a `304`, which carries validators only), the original's
    /// content type, its own validators, and `Vary: Accept-Encoding` on every file's answer. Each accepted coding costs a lookup
    /// until a copy is found. Default: yes.
    #[cfg(feature = "compression")]
    #[cfg_attr(docsrs, doc(cfg(feature = "compression")))]
    pub fn precompressed(mut self, serve: bool) -> ServeDir {
        self.precompressed = serve;
        self
    }

    /// The path prefix the folder is served under, such as `/static`: `/static/app.js` is the
    /// folder's `app.js`, and a path not under it gets `404`. Matched as the client sent it
    /// (encoded); a missing leading `/` is added, a trailing one ignored.
    pub fn prefix(mut self, prefix: &str) -> ServeDir {
        let prefix = prefix.trim_matches('/');
        self.prefix = if prefix.is_empty() {
            String::new()
        } else {
            format!("/{prefix}")
        };
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
            Lookup::File(file, meta, name) => self.file(req, file, &meta, &name),
            Lookup::Folder => self.redirect_to_folder(req),
            Lookup::Refused => Response::new(404),
        }
    }

    /// The answer from the file at `name`, open, or from its precompressed copy.
    #[cfg(not(feature = "compression"))]
    fn file(&self, req: &Request<'_>, file: File, meta: &Metadata, name: &Path) -> Response {
        Response::file_opened(req, file, meta, name)
    }

    /// The answer from the file at `name`, open, or from its precompressed copy: of the
    /// codings the client accepts, best liked first (the server's order where alike), the
    /// first that has a copy. Only `GET` and `HEAD` look for one; every answer varies by
    /// `Accept-Encoding`.
    #[cfg(feature = "compression")]
    fn file(&self, req: &Request<'_>, file: File, meta: &Metadata, name: &Path) -> Response {
        use crate::layer::encoder::{Coding, quality};
        let reads = req.method() == "GET" || req.method() == "HEAD";
        if !self.precompressed || !reads {
            return Response::file_opened(req, file, meta, name);
        }
        let mut accepted: Vec<(Coding, f32)> = Coding::ALL
            .iter()
            .map(|&c| (c, quality(req.header_all("accept-encoding"), c)))
            .filter(|&(_, q)| q > 0.0)
            .collect();
        // Stable: alike codings keep the server's order.
        accepted.sort_by(|a, b| b.1.total_cmp(&a.1));
        let copy = accepted.into_iter().find_map(|(coding, _)| {
            let copy = format!("{}{}", name.display(), coding.suffix());
            match self.resolve(&copy) {
                Lookup::File(file, meta, _) => Some((coding, file, meta)),
                Lookup::Folder | Lookup::Refused => None,
            }
        });
        let response = match copy {
            Some((coding, file, meta)) => {
                let r = Response::file_opened(req, file, &meta, name);
                // A 304 carries no representation metadata beyond its validators (RFC 9110
                // §15.4.5): a cache that freshens its stored response with this one's fields
                // would label a stored copy of another coding. It keeps the copy's strong tag,
                // as its 200 does: a compression layer is told not to weaken it.
                match r.status() {
                    200 | 206 => r.with_header("Content-Encoding", coding.token()),
                    304 => r.stands_for_coding(coding.token()),
                    _ => r,
                }
            }
            None => Response::file_opened(req, file, meta, name),
        };
        response.with_added_header("Vary", "Accept-Encoding")
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
        let Ok(file) = self.open_beneath(&wanted) else {
            return Lookup::Refused;
        };
        // What was opened is what is checked and served: no path is looked up twice.
        match file.metadata() {
            Ok(meta) if meta.is_dir() && !folder_path => Lookup::Folder,
            Ok(meta) if meta.is_file() => Lookup::File(file, meta, PathBuf::from(wanted.as_ref())),
            // A FIFO, a device, a socket: nothing to send (opened without waiting on a writer).
            _ => Lookup::Refused,
        }
    }

    /// Opens `relative` under the folder, never outside it. On Linux, `openat2(2)` with
    /// `RESOLVE_BENEATH` walks the path from the folder's descriptor and refuses any step out
    /// of it (`..`, an absolute link, a link leading out), all in the one call, so a link swapped
    /// in during the request changes nothing. Elsewhere, or on a kernel without `openat2`
    /// (before 5.6, or a seccomp filter), the path is resolved, checked to be under the folder,
    /// then opened: a link swapped in between the two would be followed.
    fn open_beneath(&self, relative: &str) -> io::Result<File> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use rustix::fs::ResolveFlags;
            let how = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
            match rustix::fs::openat2(&*self.root_fd, relative, flags, Mode::empty(), how) {
                Ok(fd) => return Ok(File::from(fd)),
                // No openat2 (before 5.6), or refused by a seccomp filter (some container
                // profiles answer EPERM rather than ENOSYS): resolve and check instead.
                Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let real = self.root.join(relative).canonicalize()?;
        if !real.starts_with(&self.root) {
            return Err(io::ErrorKind::NotFound.into());
        }
        Ok(File::from(rustix::fs::open(&real, flags, Mode::empty())?))
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
// Returned once per request and used at once, never stored: its size costs nothing.
#[allow(clippy::large_enum_variant)]
enum Lookup {
    /// A regular file inside the folder, open, and the name it was asked by (its type).
    File(File, Metadata, PathBuf),
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
            return if rest.is_empty() {
                self.redirect_to_folder(req)
            } else {
                Response::new(404)
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

    #[cfg(feature = "compression")]
    #[test]
    fn precompressed_copies_are_served_to_clients_that_accept_them() {
        use crate::testing::TestRequest;
        let dir = tempfile::tempdir().expect("a folder");
        std::fs::write(dir.path().join("app.js"), "plain").expect("write");
        std::fs::write(dir.path().join("app.js.br"), "brotli").expect("write");
        std::fs::write(dir.path().join("app.js.gz"), "gzipped").expect("write");
        std::fs::write(dir.path().join("lone.css"), "css").expect("write");
        let files = ServeDir::new(dir.path()).expect("the folder");
        let get = |path: &str, accept: &str| {
            TestRequest::get(path)
                .header("Accept-Encoding", accept)
                .call(&files)
        };
        for (accept, encoding, body) in [
            ("gzip, br", Some("br"), "brotli"),
            ("gzip;q=1, br;q=0.5", Some("gzip"), "gzipped"),
            ("zstd", None, "plain"),
            ("", None, "plain"),
        ] {
            let r = get("/app.js", accept);
            assert_eq!(r.header("content-encoding"), encoding, "{accept:?}");
            assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{accept:?}");
            assert_eq!(
                r.response().content_type(),
                Some("text/javascript; charset=utf-8"),
                "{accept:?}"
            );
            assert_eq!(r.text().expect("a body"), body, "{accept:?}");
        }
        // Revalidated: the copy's own tag answers 304, varying, with no coding.
        let br = get("/app.js", "br");
        let tag = br.header("etag").expect("a tag").to_owned();
        let r = TestRequest::get("/app.js")
            .header("Accept-Encoding", "br")
            .header("If-None-Match", &tag)
            .call(&files);
        assert_eq!(
            (r.status(), r.header("etag"), r.header("vary")),
            (304, Some(tag.as_str()), Some("Accept-Encoding"))
        );
        assert_eq!(r.header("content-encoding"), None);
        // A file without copies: as it is (varying all the same); with the copies off, the
        // original; a POST is refused without a coding.
        let r = get("/lone.css", "br");
        assert_eq!(
            (r.header("vary"), r.header("content-encoding")),
            (Some("Accept-Encoding"), None)
        );
        let post = TestRequest::post("/app.js")
            .header("Accept-Encoding", "br")
            .call(&files);
        assert_eq!(
            (post.status(), post.header("content-encoding")),
            (405, None)
        );
        let off = files.clone().precompressed(false);
        let r = TestRequest::get("/app.js")
            .header("Accept-Encoding", "br")
            .call(&off);
        assert_eq!(r.text().expect("a body"), "plain");
    }
}
