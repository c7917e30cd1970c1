//! What the end-to-end benches share: each engine configuration started in-process on loopback.

use std::net::SocketAddr;
use std::time::Duration;

use twinhttp::Handler;
use twinhttp::reactor::{Dispatch, Reactor};

/// Runs `bench` against `handler` served by each engine configuration in turn (reactor inline,
/// reactor pool, and with the `server` feature the thread-pool server), each shut down after.
pub fn each_engine<H: Handler + Copy>(handler: H, mut bench: impl FnMut(&str, SocketAddr)) {
    for (name, dispatch) in [
        ("reactor_inline", Dispatch::Inline),
        ("reactor_pool", Dispatch::Pool(2)),
    ] {
        let r = Reactor::builder()
            .loops(1)
            .dispatch(dispatch)
            .serve("127.0.0.1:0", handler)
            .expect("reactor");
        bench(name, r.local_addr());
        let _ = r.shutdown(Duration::from_secs(5));
    }
    #[cfg(feature = "server")]
    {
        let s = twinhttp::server::Server::builder()
            .workers(2)
            .serve("127.0.0.1:0", handler)
            .expect("server");
        bench("server", s.local_addr());
        let _ = s.shutdown(Duration::from_secs(5));
    }
}
