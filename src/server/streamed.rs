//! A request body a handler reads as it arrives ([`crate::streaming`]): the worker that runs the
//! handler reads it from the connection through its driver, and waits on the socket (up to the
//! body's minimum-rate deadline) when nothing has come. Such a handler holds its worker for as
//! long as its client sends: the cost its opt-in accepts.

use std::io::{self, ErrorKind, Read};
use std::time::Instant;

use crate::http::driver::{BodyRead, Driver};
use crate::net::io::{self as net, Interrupt};
use crate::net::transport::Stream;

/// The body of the request being served on this worker, read from its connection.
pub(crate) struct Streamed<'a> {
    pub(crate) driver: &'a mut Driver,
    pub(crate) stream: &'a mut Stream,
}

impl Read for Streamed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.driver.read_body(self.stream, buf, Instant::now()) {
                BodyRead::Data(n) => return Ok(n),
                BodyRead::End => return Ok(0),
                BodyRead::Failed(kind) => return Err(kind.into()),
                // A request under way is not interrupted by shutdown: its deadline ends it.
                BodyRead::Wait { write, until } => {
                    match net::wait(&*self.stream, write, until, None) {
                        Ok(()) | Err(Interrupt::Cancelled) => {}
                        Err(Interrupt::TimedOut) => {
                            self.driver.body_timed_out();
                            return Err(ErrorKind::TimedOut.into());
                        }
                    }
                }
            }
        }
    }
}
