//! Connections that leave the engine for a thread of their own after a generic upgrade (both
//! engines).

use std::sync::Arc;

use crate::engine::{Control, OpenGuard, Runs};
use crate::http::panics::catch;
use crate::stats::Panics;
use crate::transport::Stream;
use crate::upgraded::Upgraded;

/// Hands an upgraded connection to a new thread running the generic callback with a blocking
/// socket. The thread counts as the connection (`open`) and as a detached thread until it ends.
pub(crate) fn detach(
    control: &Arc<Control>,
    stream: Stream,
    leftover: Vec<u8>,
    then: Box<dyn FnOnce(Upgraded) + Send>,
    mut open: OpenGuard,
) {
    open.set(crate::stats::Activity::Upgraded);
    let callback = Callback {
        then,
        panics: control.counters.panics().clone(),
    };
    let shutdown = control.shutdown_signal.clone();
    let spawned = control.spawn_detached("twinhttp-upgraded", Runs::Upgraded, move || {
        let _open = open;
        match Upgraded::new(stream, leftover, shutdown) {
            Ok(up) => callback.run(up),
            // The callback is dropped unrun, caught.
            Err(e) => log::debug!("upgrade: {e}"),
        }
    });
    // The callback is dropped unrun with the thread's closure, caught, on this thread.
    if let Err(e) = spawned {
        log::error!("cannot start a connection thread: {e}; closing it");
    }
}

/// An upgraded connection's callback, handler code, on its way to its thread: run there with a
/// panic in it caught (it ends the thread and its connection), or dropped unrun with a panic in
/// its `Drop` caught (no thread could be started: dropped where the spawn failed, on an event
/// loop or a worker); either is counted with the handlers' panics.
struct Callback {
    then: Box<dyn FnOnce(Upgraded) + Send>,
    panics: Panics,
}

impl Callback {
    fn run(mut self, up: Upgraded) {
        let then = self.take();
        let ran = catch(move || then(up));
        if ran.is_err() {
            self.panics.count();
            log::error!("an upgraded connection's callback panicked; closing it");
        }
    }

    /// The callback, a no-op left in its place (a `Box` of it allocates nothing).
    fn take(&mut self) -> Box<dyn FnOnce(Upgraded) + Send> {
        std::mem::replace(&mut self.then, Box::new(|_| {}))
    }
}

impl Drop for Callback {
    fn drop(&mut self) {
        let then = self.take();
        self.panics.drop_caught(then);
    }
}
