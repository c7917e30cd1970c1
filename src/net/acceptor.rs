//! An accept loop on its own thread, shared by both engines: a non-blocking listener in a poller,
//! each admitted connection delivered to a closure (the server's worker queue, or the reactor's
//! loops round-robin). It survives descriptor exhaustion (back off, keep serving) and refuses
//! connections over the limit with a 503.

use std::sync::Arc;
use std::time::Duration;

use polling::{Event, Events, Poller};

use crate::engine::{Control, OpenGuard, wait_events};
use crate::net::sys::Registered;
use crate::net::transport::{Address, Listener, Stream, Wrap};
use crate::net::{AcceptError, classify_accept_error};

/// The listener's key in the acceptor's poller.
const LISTENER: usize = 0;

/// First and longest pause after running out of descriptors.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

pub(crate) struct Acceptor {
    listener: Registered<Listener>,
    poller: Arc<Poller>,
    control: Arc<Control>,
    max_connections: usize,
    wrap: Wrap,
}

impl Acceptor {
    pub(crate) fn new(
        listener: Listener,
        control: Arc<Control>,
        max_connections: usize,
        wrap: Wrap,
    ) -> std::io::Result<Self> {
        let poller = Arc::new(Poller::new()?);
        let listener = Registered::level(poller.clone(), listener, Event::readable(LISTENER))?;
        Ok(Acceptor {
            listener,
            poller,
            control,
            max_connections,
            wrap,
        })
    }

    /// The poller to `notify()` to wake the loop for shutdown.
    pub(crate) fn waker(&self) -> Arc<Poller> {
        self.poller.clone()
    }

    /// Accepts until shutdown, handing each admitted connection (non-blocking; TCP with
    /// `TCP_NODELAY`) to `deliver`, which may block (backpressure into the kernel's accept
    /// backlog).
    pub(crate) fn run(self, mut deliver: impl FnMut(Stream, Address, OpenGuard)) {
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
                        match self.control.admit(self.max_connections) {
                            Some(open) => {
                                if let Some(stream) = self.wrap.serve(stream) {
                                    deliver(stream, peer, open);
                                }
                            }
                            None => self.wrap.refuse(stream),
                        }
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
        }
    }
}
