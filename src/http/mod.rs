//! The sans-I/O HTTP/1.1 core: bytes in, requests out; responses in, bytes out. No sockets,
//! threads or timers here; both engines drive it, so both behave the same by construction.

pub(crate) mod access;
pub(crate) mod address;
pub(crate) mod answer;
pub(crate) mod body;
pub(crate) mod budget;
pub(crate) mod buf;
pub(crate) mod conn;
pub(crate) mod cookie;
pub(crate) mod date;
pub(crate) mod driver;
pub(crate) mod due;
pub(crate) mod file;
pub(crate) mod form;
pub(crate) mod framing;
pub(crate) mod linger;
#[cfg(feature = "multipart")]
pub(crate) mod multipart;
pub(crate) mod origin;
pub(crate) mod panics;
pub(crate) mod parse;
pub(crate) mod percent;
pub(crate) mod pools;
pub(crate) mod query;
pub(crate) mod refusal;
pub(crate) mod request;
pub(crate) mod request_head;
pub(crate) mod response;
pub(crate) mod session;
pub(crate) mod session_driver;
pub(crate) mod spool;
pub(crate) mod status;
pub(crate) mod stream;
