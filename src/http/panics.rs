//! Handler panics counted by the core: a handle for handler code that runs outside a request
//! (a streamed body, a switch, a WebSocket handler), and dropping such code with a panic in its
//! `Drop` caught. The engines' live counters hold one and pass it in.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// Handler panics: a handle for handler code that runs outside a request, on whichever thread
/// (a WebSocket's callbacks, a streamed body's pieces and its `Drop`), to count its own.
#[derive(Clone, Debug, Default)]
pub(crate) struct Panics(Arc<AtomicU64>);

impl Panics {
    /// A handler panicked.
    pub(crate) fn count(&self) {
        self.0.fetch_add(1, Relaxed);
    }

    /// The panics counted so far.
    pub(crate) fn counted(&self) -> u64 {
        self.0.load(Relaxed)
    }

    /// Drops `value`, which holds handler code (a body's reader, a switch's callback, a
    /// WebSocket handler), with a panic in its `Drop` caught, logged and counted: the thread
    /// that drops it goes on.
    pub(crate) fn drop_caught<T>(&self, value: T) {
        if panics_when_dropped(value) {
            self.count();
            log::error!("handler code panicked when dropped");
        }
    }
}

/// Drops `value` with a panic in its `Drop` caught: whether there was one.
pub(crate) fn panics_when_dropped<T>(value: T) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(value))).is_err()
}
