//! A connection a handler took over after `101 Switching Protocols` (the generic upgrade): what
//! the handler's callback gets. A leaf beside the transport seam: the core carries the callback
//! without knowing the engine that runs it.

use std::any::Any;
use std::fmt;
use std::io::{self, Read, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::transport::{Stream, Transport};

/// A connection handed over after `101 Switching Protocols` (see
/// [`Response::upgrade`](crate::Response::upgrade)): its blocking [`Transport`] (a TCP or Unix
/// socket), with any bytes the client sent after the upgrade request read first.
pub struct Upgraded {
    stream: Stream,
    leftover: Vec<u8>,
    pos: usize,
    shutdown: ShutdownSignal,
}

impl Upgraded {
    pub(crate) fn new(
        mut stream: Stream,
        leftover: Vec<u8>,
        shutdown: ShutdownSignal,
    ) -> io::Result<Upgraded> {
        stream.set_nonblocking(false)?;
        Ok(Upgraded {
            stream,
            leftover,
            pos: 0,
            shutdown,
        })
    }

    /// Says when the server's shutdown begins. The shutdown does not interrupt an upgraded
    /// connection (the server does not know its protocol): the callback ends it when it learns
    /// of it, in its protocol's way, and `shutdown(grace)` waits for the callback up to its
    /// grace (an engine's own `wait` does not wait for it). A blocking WebSocket
    /// (`accept_blocking`) has it from its socket: `ws.get_ref().shutdown_signal()`. Take it before
    /// [`into_parts`](Self::into_parts) or [`into_stream`](Self::into_stream).
    pub fn shutdown_signal(&self) -> ShutdownSignal {
        self.shutdown.clone()
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

/// Whether the server's shutdown began, for code the shutdown does not interrupt (an
/// upgraded connection's callback): a handle to ask, or to wait on, from any thread.
#[derive(Clone, Debug)]
pub struct ShutdownSignal(Arc<Latch>);

/// A flag set once, and the threads waiting for it.
#[derive(Debug, Default)]
struct Latch {
    began: Mutex<bool>,
    set: Condvar,
}

impl ShutdownSignal {
    /// A signal of a server not shutting down (one per running engine).
    pub(crate) fn new() -> Self {
        ShutdownSignal(Arc::default())
    }

    /// The shutdown began: every waiter wakes.
    pub(crate) fn begin(&self) {
        *self.began_guard() = true;
        self.0.set.notify_all();
    }

    /// Whether the shutdown began.
    pub fn began(&self) -> bool {
        *self.began_guard()
    }

    /// Blocks until the shutdown begins.
    pub fn wait(&self) {
        let began = self.began_guard();
        let _began = self
            .0
            .set
            .wait_while(began, |began| !*began)
            .unwrap_or_else(|e| e.into_inner());
    }

    /// Blocks until the shutdown begins or `limit` passes: whether it began.
    pub fn wait_timeout(&self, limit: Duration) -> bool {
        let began = self.began_guard();
        let (began, _) = self
            .0
            .set
            .wait_timeout_while(began, limit, |began| !*began)
            .unwrap_or_else(|e| e.into_inner());
        *began
    }

    fn began_guard(&self) -> std::sync::MutexGuard<'_, bool> {
        // Nothing panics under this lock; a poisoned flag is still a flag.
        self.0.began.lock().unwrap_or_else(|e| e.into_inner())
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::ShutdownSignal;

    #[test]
    fn a_signal_wakes_its_waiters_once_the_shutdown_began() {
        let signal = ShutdownSignal::new();
        assert!(!signal.began());
        assert!(!signal.wait_timeout(Duration::from_millis(1)));
        let (waiting, waits) = std::sync::mpsc::channel();
        let waiter = {
            let signal = signal.clone();
            std::thread::spawn(move || {
                let _ = waiting.send(());
                let started = Instant::now();
                (
                    signal.wait_timeout(Duration::from_secs(60)),
                    started.elapsed(),
                )
            })
        };
        waits.recv().expect("the waiter runs");
        signal.begin();
        // Woken, not timed out: 60 s would be taken by a waiter the signal does not wake.
        match waiter.join() {
            Ok((began, took)) => assert!(began && took < Duration::from_secs(30), "{took:?}"),
            Err(_) => panic!("the waiter panicked"),
        }
        assert!(signal.began());
        signal.wait();
        assert!(signal.wait_timeout(Duration::MAX));
    }
}
