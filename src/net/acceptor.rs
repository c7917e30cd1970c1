//! Accepting connections, one way for both engines: [`Admission::accept`] takes one connection
//! from a listener, admits it under the open-connection limit (a 503 over it), wraps it (TLS),
//! and triages errors, backing off after descriptor exhaustion. The server engine (and the
//! reactor's acceptor-thread mode) runs it in [`Acceptor::run`], a loop on its own thread that
//! sleeps out a back-off; a reactor loop with its own listener runs it in its event loop, which
//! pauses the listener instead of sleeping.

use std::sync::Arc;
use std::time::Duration;

use polling::{Event, Events, Poller};

use crate::engine::{Control, OpenGuard, wait_events};
use crate::http::date::DateLine;
use crate::net::sys::Registered;
use crate::net::transport::{Address, Listener, Stream, Wrap};
use crate::net::{AcceptError, classify_accept_error};

/// The listener's key in the acceptor's poller.
const LISTENER: usize = 0;

/// First and longest pause after running out of descriptors.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What one accept came to.
pub(crate) enum Accepted {
    /// A connection admitted and ready to serve.
    Conn(Stream, Address, OpenGuard),
    /// A connection came and was dealt with here (over the limit: refused; TLS set-up failed),
    /// or one failed on its own: accept again.
    Handled,
    /// No connection is pending.
    Drained,
    /// Out of descriptors (or buffers): stop accepting for this long, and keep serving.
    Pause(Duration),
}

/// Admission of accepted connections: the limit, the wrap, the back-off.
pub(crate) struct Admission {
    control: Arc<Control>,
    max_connections: usize,
    wrap: Wrap,
    backoff: Duration,
    /// For the `Date` of the 503 a connection over the limit gets.
    date: DateLine,
}

impl Admission {
    pub(crate) fn new(control: Arc<Control>, max_connections: usize, wrap: Wrap) -> Self {
        Admission {
            control,
            max_connections,
            wrap,
            backoff: BACKOFF_MIN,
            date: DateLine::new(),
        }
    }

    /// Accepts one connection from `listener` (non-blocking; TCP with `TCP_NODELAY`).
    pub(crate) fn accept(&mut self, listener: &Listener) -> Accepted {
        match listener.accept() {
            Ok((stream, peer)) => {
                self.backoff = BACKOFF_MIN;
                let Some(open) = self.control.admit(self.max_connections) else {
                    self.wrap.refuse(stream, &mut self.date);
                    return Accepted::Handled;
                };
                match self.wrap.serve(stream) {
                    Some(stream) => Accepted::Conn(stream, peer, open),
                    None => Accepted::Handled,
                }
            }
            Err(e) => match classify_accept_error(&e) {
                AcceptError::Drained => Accepted::Drained,
                AcceptError::Transient => Accepted::Handled,
                AcceptError::Exhausted => {
                    let pause = self.backoff;
                    log::warn!("accept: {e}; pausing accepts for {pause:?}");
                    self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                    Accepted::Pause(pause)
                }
            },
        }
    }
}

/// An accept loop on its own thread, delivering each admitted connection to a closure (the
/// server's parker or worker queue, or the reactor's loops round-robin).
pub(crate) struct Acceptor {
    listener: Registered<Listener>,
    poller: Arc<Poller>,
    control: Arc<Control>,
    admission: Admission,
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
            admission: Admission::new(control.clone(), max_connections, wrap),
            control,
        })
    }

    /// The poller to `notify()` to wake the loop for shutdown.
    pub(crate) fn waker(&self) -> Arc<Poller> {
        self.poller.clone()
    }

    /// Accepts until shutdown, handing each admitted connection (non-blocking; TCP with
    /// `TCP_NODELAY`) to `deliver`, which may block (backpressure into the kernel's accept
    /// backlog).
    pub(crate) fn run(mut self, mut deliver: impl FnMut(Stream, Address, OpenGuard)) {
        let mut events = Events::new();
        loop {
            wait_events(&self.poller, &mut events, None, "acceptor");
            if self.control.is_shutting_down() {
                return;
            }
            loop {
                match self.admission.accept(self.listener.get()) {
                    Accepted::Conn(stream, peer, open) => deliver(stream, peer, open),
                    Accepted::Handled => {}
                    Accepted::Drained => break,
                    Accepted::Pause(pause) => {
                        // This thread does nothing else: sleep the pause out.
                        std::thread::sleep(pause);
                        break;
                    }
                }
                if self.control.is_shutting_down() {
                    return;
                }
            }
        }
    }
}
