//! A connection a handler took over after `101 Switching Protocols` (the generic upgrade): what
//! the handler's callback gets. A leaf beside the transport seam: the core carries the callback
//! without knowing the engine that runs it.

use std::any::Any;
use std::fmt;
use std::io::{self, Read, Write};

use crate::transport::{Stream, Transport};

/// A connection handed over after `101 Switching Protocols` (see
/// [`Response::upgrade`](crate::Response::upgrade)): its blocking [`Transport`] (a TCP or Unix
/// socket), with any bytes the client sent after the upgrade request read first.
pub struct Upgraded {
    stream: Stream,
    leftover: Vec<u8>,
    pos: usize,
}

impl Upgraded {
    pub(crate) fn new(mut stream: Stream, leftover: Vec<u8>) -> io::Result<Upgraded> {
        stream.set_nonblocking(false)?;
        Ok(Upgraded {
            stream,
            leftover,
            pos: 0,
        })
    }

    /// The transport and the bytes already read from it but not yet consumed. The transport is
    /// a `Box<dyn Transport>`; to get the socket type back, upcast it to `Box<dyn Any>` and
    /// downcast (`std::net::TcpStream`, `std::os::unix::net::UnixStream`).
    pub fn into_parts(self) -> (Box<dyn Transport>, Vec<u8>) {
        let mut rest = self.leftover;
        rest.drain(..self.pos);
        (self.stream, rest)
    }

    /// The transport as the type it is (a [`TcpStream`](std::net::TcpStream), a
    /// [`UnixStream`](std::os::unix::net::UnixStream)), blocking, with the bytes already read
    /// from it but not yet consumed; `Err(self)` when it is another transport.
    pub fn into_stream<T: Transport>(self) -> Result<(T, Vec<u8>), Upgraded> {
        let any: &dyn Any = &*self.stream;
        if !any.is::<T>() {
            return Err(self);
        }
        let (stream, rest) = self.into_parts();
        let any: Box<dyn Any> = stream;
        match any.downcast::<T>() {
            Ok(t) => Ok((*t, rest)),
            // Checked above: a `T`.
            Err(_) => unreachable!("the transport was checked to be a T"),
        }
    }

    /// The transport (reading from it directly skips any buffered bytes).
    pub fn stream(&self) -> &dyn Transport {
        &*self.stream
    }
}

impl fmt::Debug for Upgraded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upgraded")
            .field("buffered", &(self.leftover.len() - self.pos))
            .finish_non_exhaustive()
    }
}

impl Read for Upgraded {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos < self.leftover.len() {
            let n = buf.len().min(self.leftover.len() - self.pos);
            buf[..n].copy_from_slice(&self.leftover[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        self.stream.read(buf)
    }
}

impl Write for Upgraded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}
