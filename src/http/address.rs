//! The peer's address, as the core knows it: the request's `peer()`, the access log's first
//! field. Engines fill it in from what they accepted.

use std::fmt;
use std::path::{Path, PathBuf};

/// A peer's or a listener's address: TCP or a Unix domain socket.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Address {
    /// An IP address and port.
    Tcp(std::net::SocketAddr),
    /// A Unix domain socket: its path, or `None` for an unnamed socket (a client's, as a rule).
    Unix(Option<PathBuf>),
}

impl Address {
    /// The TCP address, if it is one.
    pub fn tcp(&self) -> Option<std::net::SocketAddr> {
        match self {
            Address::Tcp(a) => Some(*a),
            Address::Unix(_) => None,
        }
    }

    /// The Unix socket's path, if it is one with a name.
    pub fn unix_path(&self) -> Option<&Path> {
        match self {
            Address::Unix(p) => p.as_deref(),
            Address::Tcp(_) => None,
        }
    }

    pub(crate) fn of_unix(addr: &std::os::unix::net::SocketAddr) -> Address {
        Address::Unix(addr.as_pathname().map(Path::to_path_buf))
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Tcp(a) => a.fmt(f),
            Address::Unix(Some(p)) => write!(f, "unix:{}", p.display()),
            Address::Unix(None) => f.write_str("unix:(unnamed)"),
        }
    }
}

impl From<std::net::SocketAddr> for Address {
    fn from(a: std::net::SocketAddr) -> Self {
        Address::Tcp(a)
    }
}
