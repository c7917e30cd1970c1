//! The crate's one public error type.

use std::fmt;
use std::io;

use crate::http::parse::ParseError;

/// An error from twinhttp: a bad request, an I/O failure, a timeout or a failed shutdown.
///
/// Opaque on purpose: ask it with [`Error::kind`] or the `is_*` predicates.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    io: Option<io::Error>,
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
        Error { kind, io: None }
    }

    // The streamed body reader is the server engine's (and the core benches').
    #[cfg_attr(
        not(any(feature = "server", feature = "bench-internals", test)),
        allow(dead_code)
    )]
    pub(crate) fn parse(err: ParseError) -> Self {
        match err {
            ParseError::BodyTooLarge => Error::new(ErrorKind::BodyTooLarge),
            _ => Error::new(ErrorKind::BadRequest),
        }
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

    /// Wraps this error in an [`io::Error`] of the matching [`io::ErrorKind`], for `Read` impls.
    #[cfg_attr(
        not(any(feature = "server", feature = "bench-internals", test)),
        allow(dead_code)
    )]
    pub(crate) fn into_io(self) -> io::Error {
        if let Some(e) = self.io {
            return e;
        }
        let kind = match self.kind {
            ErrorKind::TimedOut | ErrorKind::ShutdownTimedOut => io::ErrorKind::TimedOut,
            ErrorKind::ConnectionClosed => io::ErrorKind::UnexpectedEof,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, self)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Error {
                kind: ErrorKind::TimedOut,
                io: Some(e),
            },
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => Error {
                kind: ErrorKind::ConnectionClosed,
                io: Some(e),
            },
            _ => Error {
                kind: ErrorKind::Io,
                io: Some(e),
            },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ErrorKind::Io => "I/O error",
            ErrorKind::BadRequest => "bad request",
            ErrorKind::BodyTooLarge => "request body too large",
            ErrorKind::ConnectionClosed => "connection closed by peer",
            ErrorKind::TimedOut => "timed out",
            ErrorKind::ShutdownTimedOut => "graceful shutdown timed out",
        };
        match &self.io {
            Some(e) => write!(f, "{what}: {e}"),
            None => f.write_str(what),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io.as_ref().map(|e| e as _)
    }
}
