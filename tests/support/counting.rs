//! A counting allocator for the tests that measure what the server allocates: each such test
//! binary installs it (`#[global_allocator] static GLOBAL: Counting = Counting;`) and holds its
//! only test, so nothing else allocates meanwhile. It counts allocations and the bytes live.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Forwards to the system allocator, counting.
pub struct Counting;

/// Allocations (a `realloc` counts as one).
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Bytes allocated and not yet freed.
static LIVE: AtomicI64 = AtomicI64::new(0);

/// Allocations so far.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Bytes allocated and not freed.
pub fn live_bytes() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

fn grew(by: usize) {
    LIVE.fetch_add(i64::try_from(by).unwrap_or(i64::MAX), Ordering::Relaxed);
}

fn shrank(by: usize) {
    LIVE.fetch_sub(i64::try_from(by).unwrap_or(i64::MAX), Ordering::Relaxed);
}

// SAFETY: every call forwards to the system allocator unchanged; the counters are atomics.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        grew(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        grew(new_size);
        shrank(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
