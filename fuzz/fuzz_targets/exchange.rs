//! Whole exchanges through the core, in arbitrary splits, clock steps and handler outcomes,
//! with the invariants of `twinhttp::fuzz` checked (see its docs for the input's layout).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| twinhttp::fuzz::exchange(data));
