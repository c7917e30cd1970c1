//! A real HTTP client (ureq) against each engine.
mod support;
use std::io::Read;

use support::{Engine, app, start};

fn real_client_round_trips(engine: Engine) {
    let srv = start(engine, app);
    let base = format!("http://{}", srv.addr);
    let agent = ureq::Agent::new_with_defaults();
    for _ in 0..3 {
        let mut r = agent.get(&format!("{base}/")).call().expect("GET /");
        assert_eq!(r.status(), 200);
        assert_eq!(
            r.body_mut().read_to_string().expect("body"),
            "Hello, World!"
        );
    }
    let payload = vec![7u8; 100_000];
    let mut r = agent
        .post(&format!("{base}/echo"))
        .send(&payload[..])
        .expect("POST /echo");
    let mut got = Vec::new();
    r.body_mut()
        .as_reader()
        .read_to_end(&mut got)
        .expect("echo body");
    assert_eq!(got, payload);
    let mut r = agent
        .get(&format!("{base}/stream"))
        .call()
        .expect("GET /stream");
    assert_eq!(
        r.body_mut().read_to_string().expect("stream"),
        "part1;part2;part3;"
    );
    let err = agent.get(&format!("{base}/missing")).call();
    assert!(matches!(err, Err(ureq::Error::StatusCode(404))), "{err:?}");
}

engine_tests!(real_client_round_trips);
