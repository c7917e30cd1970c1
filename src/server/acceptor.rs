//! The accept loop: one thread, a non-blocking listener in a poller, connections handed to the
//! worker queue. It survives descriptor exhaustion (back off, keep serving) and refuses
//! connections over the limit with a 503.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use polling::{Event, Events, Poller};

use super::worker::Job;
use crate::engine::{Control, wait_events};
use crate::net::sys::Registered;
use crate::net::{AcceptError, classify_accept_error, prepare, refuse};

/// The listener's key in the acceptor's poller.
const LISTENER: usize = 0;

/// First and longest pause after running out of descriptors.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

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
            wait_events(&self.poller, &mut events, None, "acceptor");
            if self.control.is_shutting_down() {
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
                if self.control.is_shutting_down() {
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
        let Some(guard) = self.control.admit(self.max_connections) else {
            refuse(&stream);
            return;
        };
        let job = Job::new(stream, peer, guard, Instant::now());
        // Blocks while the queue is full: backpressure into the kernel's accept backlog.
        drop(self.queue.send(job));
    }
}
