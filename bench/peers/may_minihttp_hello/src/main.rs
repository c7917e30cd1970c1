//! may_minihttp on `may`'s stackful coroutines (a worker per core, 32 KiB stacks), the fastest
//! pipelining peer here. `may_minihttp_hello PORT`. `/sleep` parks the coroutine.
use std::io;

use may_minihttp::{HttpService, HttpServiceFactory, Request, Response};
use peer_routes::{Route, spin};

#[derive(Clone)]
struct Hello;

impl HttpService for Hello {
    fn call(&mut self, req: Request, rsp: &mut Response) -> io::Result<()> {
        let route = Route::of(req.path());
        match route {
            Route::Cpu(d) => spin(d),
            Route::Sleep(d) => may::coroutine::sleep(d),
            Route::NotFound => {
                rsp.status_code(404, "Not Found");
            }
            Route::Hello => {}
        }
        rsp.header("Content-Type: text/plain");
        rsp.body(route.body());
        Ok(())
    }
}

struct HelloFactory;

impl HttpServiceFactory for HelloFactory {
    type Service = Hello;
    fn new_service(&self, _: usize) -> Hello {
        Hello
    }
}

fn main() -> io::Result<()> {
    let port = peer_routes::port();
    eprintln!(
        "may_minihttp listening on 127.0.0.1:{port} (may workers={})",
        may::config().get_workers()
    );
    let server = HelloFactory.start(("127.0.0.1", port))?;
    server
        .join()
        .map_err(|_| io::Error::other("the server thread panicked"))
}
