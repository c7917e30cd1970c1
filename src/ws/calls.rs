//! The WebSocket handler's callbacks: those due ([`Call`]), and a batch of them with the handler
//! ([`Calls`]), run where the engine runs handler code (inline, or on a pool worker and back).

use tungstenite::Bytes;
use tungstenite::protocol::CloseFrame;

use super::{WsHandler, WsMessage, WsSender};
use crate::http::panics::{catch, panics_when_dropped};
use crate::http::session::Work;
use crate::stats::Panics;

/// A callback due.
pub(crate) enum Call {
    Open,
    Message(WsMessage),
    Ping(Bytes),
    Pong(Bytes),
    Close(Option<CloseFrame>),
}

/// The connection's handler, and where its panics are counted: with the connection, or with its
/// callbacks on a pool worker.
pub(crate) struct Callee {
    handler: Box<dyn WsHandler>,
    panics: Panics,
    counted: Counted,
}

/// Whether a panic of the handler's was counted: one a handler, as one a response body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Counted {
    Nothing,
    Panic,
}

impl Callee {
    pub(crate) fn new(handler: Box<dyn WsHandler>, panics: Panics) -> Self {
        Callee {
            handler,
            panics,
            counted: Counted::Nothing,
        }
    }

    /// A callback panicked: counted.
    fn panicked(&mut self) {
        self.panics.count();
        self.counted = Counted::Panic;
    }
}

/// The handler is handler code to its `Drop`: wherever the connection ends (its event loop, a
/// pool worker with its last callbacks, its own thread), a panic there is caught and counted,
/// as one in a callback is (not again after one: its `Drop` may panic on the state the first
/// panic left).
impl Drop for Callee {
    fn drop(&mut self) {
        let handler = std::mem::replace(&mut self.handler, Box::new(Dropped));
        match self.counted {
            Counted::Nothing => self.panics.drop_caught(handler),
            Counted::Panic => {
                if panics_when_dropped(handler) {
                    log::error!("websocket handler panicked again when dropped");
                }
            }
        }
    }
}

/// What a [`Callee`] holds once its handler was dropped (a `Box` of it allocates nothing).
struct Dropped;

impl WsHandler for Dropped {
    fn on_message(&mut self, _: &WsSender, _: WsMessage) {}
}

/// Callbacks on their way to a pool worker and back.
pub(crate) struct Calls {
    pub(crate) handler: Callee,
    pub(crate) sender: WsSender,
    pub(crate) calls: Vec<Call>,
    pub(crate) handler_is: HandlerIs,
    /// The connection's [`Left`]: what came due after the batch left, if the connection went
    /// before it was back.
    pub(crate) left: Left,
}

/// Callbacks that came due while the handler was on a pool worker, left there by a connection
/// that went before the worker's batch came back (the close frame the server sent, a message
/// read before it): the batch runs them in its last call ([`Work::close_due`]).
pub(crate) type Left = std::sync::Arc<std::sync::Mutex<Vec<Call>>>;

/// Where the handler stands, for what may still run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandlerIs {
    Live,
    /// `on_close` ran: nothing more is due.
    Closed,
    /// A callback panicked: nothing more runs, and the connection closes with 1011.
    Panicked,
}

impl Work for Calls {
    /// True when `on_close` has not run yet: the connection went while the callbacks were on a
    /// worker. Queues it (with no frame) for [`Calls::run`].
    fn close_due(&mut self) -> bool {
        if self.handler_is != HandlerIs::Live {
            return false;
        }
        let left = match self.left.lock() {
            Ok(mut left) => std::mem::take(&mut *left),
            Err(_) => Vec::new(),
        };
        let closes = left.iter().any(|call| matches!(call, Call::Close(_)));
        self.calls.extend(left);
        if !closes {
            self.calls.push(Call::Close(None));
        }
        true
    }

    /// Runs the callbacks in order. A panic is logged, counted and stops the rest.
    fn run(&mut self) {
        for call in self.calls.drain(..) {
            if self.handler_is == HandlerIs::Panicked {
                break;
            }
            if matches!(call, Call::Close(_)) {
                self.handler_is = HandlerIs::Closed;
            }
            let h = &mut self.handler.handler;
            let ws = &self.sender;
            let ran = catch(|| match call {
                Call::Open => h.on_open(ws),
                Call::Message(m) => h.on_message(ws, m),
                Call::Ping(p) => h.on_ping(ws, &p),
                Call::Pong(p) => h.on_pong(ws, &p),
                Call::Close(f) => h.on_close(f),
            });
            if ran.is_err() {
                log::error!("websocket handler panicked; closing with 1011");
                self.handler.panicked();
                self.handler_is = HandlerIs::Panicked;
            }
        }
    }
}
