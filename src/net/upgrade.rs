//! Connections that leave the engine for a thread of their own after a generic upgrade (both
//! engines).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use crate::engine::{Control, OpenGuard};

/// A connection handed over after `101 Switching Protocols` (see [`Response::upgrade`](crate::Response::upgrade)): a
/// blocking socket, with any bytes the client sent after the upgrade request read first.
#[derive(Debug)]
pub struct Upgraded {
    stream: TcpStream,
    leftover: Vec<u8>,
    pos: usize,
}

impl Upgraded {
    pub(crate) fn new(stream: TcpStream, leftover: Vec<u8>) -> io::Result<Upgraded> {
        stream.set_nonblocking(false)?;
        Ok(Upgraded {
            stream,
            leftover,
            pos: 0,
        })
    }

    /// The socket and the bytes already read from it but not yet consumed.
    pub fn into_parts(self) -> (TcpStream, Vec<u8>) {
        let mut rest = self.leftover;
        rest.drain(..self.pos);
        (self.stream, rest)
    }

    /// The socket (reading from it directly skips any buffered bytes).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
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

/// Hands an upgraded connection to a new thread running the generic callback with a blocking
/// socket. The thread counts as the connection (`open`) and as a detached thread until it ends.
pub(crate) fn detach(
    control: &Arc<Control>,
    stream: TcpStream,
    leftover: Vec<u8>,
    then: Box<dyn FnOnce(Upgraded) + Send>,
    open: OpenGuard,
) {
    let spawned = control.spawn_detached("twinhttp-upgraded", move || {
        let _open = open;
        match Upgraded::new(stream, leftover) {
            Ok(up) => then(up),
            Err(e) => log::debug!("upgrade: {e}"),
        }
    });
    if let Err(e) = spawned {
        log::error!("cannot start a connection thread: {e}; closing it");
    }
}
