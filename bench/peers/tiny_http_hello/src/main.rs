//! tiny_http 0.12: blocking, a thread per connection inside and `THREADS` handler threads (4)
//! calling `recv()`. `tiny_http_hello PORT`.
use std::sync::Arc;

use peer_routes::{Route, env_number, spin};
use tiny_http::{Header, Response, Server};

fn main() {
    let port = peer_routes::port();
    let threads = env_number("THREADS", 4);
    let server = Arc::new(Server::http(("127.0.0.1", port)).expect("bind"));
    eprintln!("tiny_http listening on 127.0.0.1:{port} with {threads} handler threads");
    let content_type =
        Header::from_bytes(&b"Content-Type"[..], &b"text/plain"[..]).expect("a valid header");
    let handlers: Vec<_> = (0..threads)
        .map(|_| {
            let (server, content_type) = (server.clone(), content_type.clone());
            std::thread::spawn(move || {
                while let Ok(request) = server.recv() {
                    let route = Route::of(request.url());
                    match route {
                        Route::Cpu(d) => spin(d),
                        Route::Sleep(d) => std::thread::sleep(d),
                        Route::Hello | Route::NotFound => {}
                    }
                    let status = if route == Route::NotFound { 404 } else { 200 };
                    let response = Response::from_string(route.body())
                        .with_status_code(status)
                        .with_header(content_type.clone());
                    let _ = request.respond(response);
                }
            })
        })
        .collect();
    for handler in handlers {
        let _ = handler.join();
    }
}
