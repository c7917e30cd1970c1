//! The fuzz target's corpus, replayed on stable in `cargo test`: every input in
//! `fuzz/corpus/exchange/` (seeds from the integration tests' requests, and what libFuzzer kept)
//! runs through the same harness as `fuzz/fuzz_targets/exchange.rs`, invariants included.
use std::path::Path;

#[test]
fn the_committed_corpus_passes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/exchange");
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .expect("fuzz/corpus/exchange")
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    inputs.sort();
    assert!(
        inputs.len() >= 100,
        "the corpus has {} inputs",
        inputs.len()
    );
    for path in &inputs {
        let data = std::fs::read(path).expect("a corpus file");
        let run = std::panic::catch_unwind(|| twinhttp::fuzz::exchange(&data));
        assert!(run.is_ok(), "{} breaks an invariant", path.display());
    }
}

/// The harness is not a test that cannot fail: a response the core would frame wrongly, or a
/// response too many, is caught.
#[test]
#[should_panic(expected = "an unasked 100 Continue")]
fn the_checker_catches_an_unasked_interim_response() {
    twinhttp::fuzz::check_output(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        &[(200, false)],
    );
}

#[test]
#[should_panic(expected = "bytes after the last response")]
fn the_checker_catches_a_response_too_many() {
    twinhttp::fuzz::check_output(
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        &[(200, false)],
    );
}

#[test]
#[should_panic(expected = "said close, yet more responses followed")]
fn the_checker_catches_a_response_after_close() {
    twinhttp::fuzz::check_output(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        &[(200, false), (200, false)],
    );
}
