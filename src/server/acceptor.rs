//! The accept loop: one thread, a non-blocking listener in a poller, connections handed to the
//! worker queue. It survives descriptor exhaustion (back off, keep serving) and refuses
//! connections over the limit with a 503.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use polling::{Event, Events, Poller};

use super::Control;
use super::worker::Job;
use crate::net::sys::Registered;
use crate::net::{AcceptError, classify_accept_error, prepare};

/// The listener's key in the acceptor's poller.
const LISTENER: usize = 0;

/// First and longest pause after running out of descriptors.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The answer for a connection over [`super::Builder::max_connections`].
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 19\r\nConnection: close\r\nRetry-After: 1\r\n\r\nService Unavailable";

pub(crate) struct Acceptor {
    listener: Registered<TcpListener>,
    poller: Arc<Poller>,
    queue: Sender<Job>,
    control: Arc<Control>,
    max_connections: usize,
}

impl Acceptor {
    pub(crate) fn new(
        listener: TcpListener,
        queue: Sender<Job>,
        control: Arc<Control>,
        max_connections: usize,
    ) -> std::io::Result<Self> {
        let poller = Arc::new(Poller::new()?);
        let listener = Registered::new(poller.clone(), listener, Event::readable(LISTENER))?;
        Ok(Acceptor {
            listener,
            poller,
            queue,
            control,
            max_connections,
        })
    }

    /// The poller to `notify()` to wake the loop for shutdown.
    pub(crate) fn waker(&self) -> Arc<Poller> {
        self.poller.clone()
    }

    pub(crate) fn run(self) {
        let mut events = Events::new();
        let mut backoff = BACKOFF_MIN;
        loop {
            events.clear();
            if let Err(e) = self.poller.wait(&mut events, None) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    log::error!("acceptor poll failed: {e}");
                    std::thread::sleep(backoff);
                }
            }
            if self.control.shutting_down.load(Ordering::Acquire) {
                return;
            }
            loop {
                match self.listener.get().accept() {
                    Ok((stream, peer)) => {
                        backoff = BACKOFF_MIN;
                        self.admit(stream, peer);
                    }
                    Err(e) => match classify_accept_error(&e) {
                        AcceptError::Drained => break,
                        AcceptError::Transient => {}
                        AcceptError::Exhausted => {
                            log::warn!("accept: {e}; pausing {backoff:?}");
                            std::thread::sleep(backoff);
                            backoff = (backoff * 2).min(BACKOFF_MAX);
                            break;
                        }
                    },
                }
                if self.control.shutting_down.load(Ordering::Acquire) {
                    return;
                }
            }
            if let Err(e) = self.listener.rearm(Event::readable(LISTENER)) {
                log::error!("acceptor re-arm failed: {e}");
                std::thread::sleep(backoff);
            }
        }
    }

    fn admit(&self, stream: TcpStream, peer: SocketAddr) {
        if prepare(&stream).is_err() {
            return;
        }
        let open = self.control.open.fetch_add(1, Ordering::AcqRel);
        let guard = OpenGuard(self.control.clone());
        if open >= self.max_connections {
            refuse(stream);
            return;
        }
        let job = Job::new(stream, peer, guard, Instant::now());
        // Blocks while the queue is full: backpressure into the kernel's accept backlog.
        drop(self.queue.send(job));
    }
}

/// Answers 503 without waiting: the socket is fresh, so the small write fits its buffer. What the
/// client already sent is read first so the close does not turn into a reset.
fn refuse(stream: TcpStream) {
    let mut scratch = [0u8; 4096];
    let _ = crate::net::io::read_now(&stream, &mut scratch);
    let _ = std::io::Write::write(&mut &stream, BUSY);
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

/// Counts a connection as open for as long as it lives.
#[derive(Debug)]
pub(crate) struct OpenGuard(Arc<Control>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}
