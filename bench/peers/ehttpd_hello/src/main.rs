//! ehttpd 0.14 (`server` feature): blocking, a thread pool that grows on demand up to
//! `WORKERS_MAX` (2048, as ehttpd's own examples use); each keep-alive connection holds a worker
//! while it waits in `read`. `ehttpd_hello PORT`.
use ehttpd::Server;
use ehttpd::http::Response;
use peer_routes::{Route, env_number, spin};

fn main() {
    let port = peer_routes::port();
    let workers_max = env_number("WORKERS_MAX", 2048);
    eprintln!("ehttpd listening on 127.0.0.1:{port} (workers_max={workers_max})");
    let server = Server::with_request_response(workers_max, |req| {
        let route = Route::of(std::str::from_utf8(&req.target).unwrap_or(""));
        let mut response = match route {
            Route::NotFound => Response::new_404_notfound(),
            _ => Response::new_200_ok(),
        };
        match route {
            Route::Cpu(d) => spin(d),
            Route::Sleep(d) => std::thread::sleep(d),
            Route::Hello | Route::NotFound => {}
        }
        response.set_content_type("text/plain");
        response.set_body_data(route.body().as_bytes());
        response
    });
    let Err(e) = server.accept(("127.0.0.1", port));
    panic!("ehttpd stopped accepting: {e}");
}
