//! Connections that leave the engine for a thread of their own after a generic upgrade (both
//! engines).

use std::sync::Arc;

use crate::engine::{Control, OpenGuard, Runs};
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
    let spawned = control.spawn_detached("twinhttp-upgraded", Runs::Upgraded, move || {
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
