//! The crate's one public error type.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// An error from twinhttp: a bad request, an I/O failure, a timeout or a failed shutdown.
///
/// Opaque on purpose: ask it with [`Error::kind`] or the `is_*` predicates. Its `Display` is a
/// sentence that names what failed, and on what, when the error has that context:
///
/// ```text
/// cannot bind 127.0.0.1:8080: Address already in use (os error 98)
/// cannot open the folder public: No such file or directory (os error 2)
/// ```
///
/// The operating system's error, when there is one, is also its
/// [`source`](std::error::Error::source).
///
/// # Examples
///
/// ```no_run
/// use twinhttp::{ErrorKind, Response, handler_fn, reactor::Reactor};
///
/// match Reactor::builder().serve("127.0.0.1:8080", handler_fn(|_| Response::text("hi"))) {
///     Ok(reactor) => reactor.shutdown(std::time::Duration::from_secs(5))?,
///     Err(e) if e.kind() == ErrorKind::Io => eprintln!("{e}"), // cannot bind 127.0.0.1:8080: ...
///     Err(e) => return Err(e),
/// }
/// # Ok::<(), twinhttp::Error>(())
/// ```
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    io: Option<io::Error>,
    /// What was being done when it failed, and on what (boxed: most errors have none, and an
    /// `Error` stays two words and a tag).
    context: Option<Box<Context>>,
}

/// What an [`Error`] was doing when it failed, for its `Display`.
#[derive(Debug)]
enum Context {
    /// Binding a listener: the address (or the Unix socket's path) as text.
    Bind(String),
    /// An operation on a file or folder, as a verb phrase ("open the folder"), and its path.
    Path { action: &'static str, path: PathBuf },
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Context::Bind(addr) => write!(f, "cannot bind {addr}"),
            Context::Path { action, path } => write!(f, "cannot {action} {}", path.display()),
        }
    }
}

/// What went wrong, as returned by [`Error::kind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An operating-system I/O error; [`std::error::Error::source`] has it.
    Io,
    /// The peer sent bytes that are not valid HTTP/1.1, or that exceed a [`crate::Limits`] value.
    /// [`Error::status`] gives the status code the server answers with.
    BadRequest,
    /// A request body was larger than [`crate::Limits::max_body_bytes`].
    BodyTooLarge,
    /// The peer closed the connection before a message was complete.
    ConnectionClosed,
    /// A deadline passed: header read, idle, body read or write.
    TimedOut,
    /// A graceful shutdown did not finish within its deadline.
    ShutdownTimedOut,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind) -> Self {
        Error {
            kind,
            io: None,
            context: None,
        }
    }

    /// Binding `addr` (a socket address, or a Unix socket's path, as text) failed with `e`.
    pub(crate) fn bind(addr: impl fmt::Display, e: io::Error) -> Self {
        Error::from(e).with_context(Context::Bind(addr.to_string()))
    }

    /// `action` (a verb phrase: "open the folder") on `path` failed with `e`.
    pub(crate) fn path(action: &'static str, path: &Path, e: io::Error) -> Self {
        Error::from(e).with_context(Context::Path {
            action,
            path: path.to_path_buf(),
        })
    }

    fn with_context(mut self, context: Context) -> Self {
        self.context = Some(Box::new(context));
        self
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The status code the server answers a request with when this error ends it, if any.
    pub fn status(&self) -> Option<u16> {
        match self.kind {
            ErrorKind::BadRequest => Some(400),
            ErrorKind::BodyTooLarge => Some(413),
            ErrorKind::TimedOut => Some(408),
            _ => None,
        }
    }

    /// True for an operating-system I/O error.
    pub fn is_io(&self) -> bool {
        self.kind == ErrorKind::Io
    }

    /// True when the peer sent bytes that are not valid HTTP or exceed a limit.
    pub fn is_bad_request(&self) -> bool {
        matches!(self.kind, ErrorKind::BadRequest | ErrorKind::BodyTooLarge)
    }

    /// True when a deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self.kind, ErrorKind::TimedOut | ErrorKind::ShutdownTimedOut)
    }

    /// True when the peer went away before a message was complete.
    pub fn is_closed(&self) -> bool {
        self.kind == ErrorKind::ConnectionClosed
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Error {
                kind: ErrorKind::TimedOut,
                io: Some(e),
                context: None,
            },
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => Error {
                kind: ErrorKind::ConnectionClosed,
                io: Some(e),
                context: None,
            },
            _ => Error {
                kind: ErrorKind::Io,
                io: Some(e),
                context: None,
            },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ErrorKind::Io => "I/O failed",
            ErrorKind::BadRequest => "the request is malformed or over a limit",
            ErrorKind::BodyTooLarge => "the request body is over the limit",
            ErrorKind::ConnectionClosed => "the peer closed the connection",
            ErrorKind::TimedOut => "timed out",
            ErrorKind::ShutdownTimedOut => "the graceful shutdown did not finish in time",
        };
        // "cannot bind 127.0.0.1:8080: Address already in use (os error 98)": what was being
        // done and on what, then the operating system's words (or the kind's, without them).
        match (&self.context, &self.io) {
            (Some(context), Some(e)) => write!(f, "{context}: {e}"),
            (Some(context), None) => write!(f, "{context}: {what}"),
            (None, Some(e)) => write!(f, "{what}: {e}"),
            (None, None) => f.write_str(what),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io.as_ref().map(|e| e as _)
    }
}

/// The status the server answers a body read error with: that of the [`Error`] inside it (413,
/// 400), 408 for a timeout, else 400.
pub(crate) fn body_status(e: &io::Error) -> u16 {
    let inner = e.get_ref().and_then(|e| e.downcast_ref::<Error>());
    match inner.and_then(Error::status) {
        Some(status) => status,
        None if e.kind() == io::ErrorKind::TimedOut => 408,
        None => 400,
    }
}
