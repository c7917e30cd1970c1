//! Connections that leave the engine for a thread of their own after a generic upgrade (both
//! engines).

use std::sync::Arc;

use crate::engine::{Control, OpenGuard, Runs};
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
    let panics = control.counters.panics().clone();
    let shutdown = control.shutdown_signal.clone();
    let spawned = control.spawn_detached("twinhttp-upgraded", Runs::Upgraded, move || {
        let _open = open;
        match Upgraded::new(stream, leftover, shutdown) {
            Ok(up) => run_caught(then, up, &panics),
            Err(e) => {
                log::debug!("upgrade: {e}");
                panics.drop_caught(then);
            }
        }
    });
    if let Err(e) = spawned {
        log::error!("cannot start a connection thread: {e}; closing it");
    }
}

/// Runs an upgraded connection's callback, handler code: a panic in it ends its thread, the
/// connection with it, and is counted with the handlers' panics.
fn run_caught(then: Box<dyn FnOnce(Upgraded) + Send>, up: Upgraded, panics: &Panics) {
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || then(up)));
    if ran.is_err() {
        panics.count();
        log::error!("an upgraded connection's callback panicked; closing it");
    }
}
