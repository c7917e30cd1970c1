//! Handler panics counted by the core: a handle for handler code that runs outside a request
//! (a streamed body, a switch, a WebSocket handler), and dropping such code with a panic in its
//! `Drop` caught. The engines' live counters hold one and pass it in.

use std::panic::AssertUnwindSafe;
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
    catch(|| drop(value)).is_err()
}

/// Handler code panicked (the panic was caught).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Panicked;

/// Runs `f`, handler code, with a panic in it caught. The panic's payload is the handler's too
/// (a value `std::panic::panic_any` carried): it is dropped caught, and one whose own `Drop`
/// panics again is forgotten (its bytes leaked) rather than unwound through the thread that
/// caught the first panic.
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Panicked> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        if let Err(again) = std::panic::catch_unwind(AssertUnwindSafe(|| drop(payload))) {
            std::mem::forget(again);
        }
        Panicked
    })
}

#[cfg(test)]
mod tests {
    use super::{Panicked, Panics, catch};

    /// A panic's payload whose own `Drop` panics.
    struct Bomb;

    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("a panic's payload panics when dropped");
        }
    }

    #[test]
    fn a_panic_whose_payload_panics_when_dropped_is_caught() {
        assert_eq!(
            catch(|| std::panic::panic_any(Bomb)),
            Err::<(), _>(Panicked)
        );
        let panics = Panics::default();
        panics.drop_caught(Bomb);
        assert_eq!(panics.counted(), 1);
        assert_eq!(catch(|| 7), Ok(7));
    }
}
