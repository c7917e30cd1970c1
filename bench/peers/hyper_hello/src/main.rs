//! hyper 1 (HTTP/1.1) on tokio's multi-thread runtime (a worker per core), with hyper's defaults:
//! the usual async Rust server. `hyper_hello PORT`.
//!
//! hyper's defaults leave Nagle on and `pipeline_flush` off, which stalls pipelined requests on
//! delayed ACKs (about 23k req/s here): `NODELAY=1` sets `TCP_NODELAY`, `PIPELINE_FLUSH=1` turns
//! on `pipeline_flush`; both off unless asked, so the tables show what a user gets.
use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use peer_routes::{Route, env_flag, spin};
use tokio::net::TcpListener;

async fn serve(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let route = Route::of(req.uri().path_and_query().map_or("/", |p| p.as_str()));
    match route {
        Route::Cpu(d) => spin(d),
        Route::Sleep(d) => tokio::time::sleep(d).await,
        Route::Hello | Route::NotFound => {}
    }
    let mut rsp = Response::new(Full::new(Bytes::from_static(route.body().as_bytes())));
    if route == Route::NotFound {
        *rsp.status_mut() = StatusCode::NOT_FOUND;
    }
    rsp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(rsp)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let addr = SocketAddr::from(([127, 0, 0, 1], peer_routes::port()));
    let listener = TcpListener::bind(addr).await?;
    let (nodelay, pipeline_flush) = (env_flag("NODELAY"), env_flag("PIPELINE_FLUSH"));
    eprintln!("hyper listening on {addr} (nodelay={nodelay}, pipeline_flush={pipeline_flush})");
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("accept: {e}");
                continue;
            }
        };
        if nodelay {
            let _ = stream.set_nodelay(true);
        }
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .pipeline_flush(pipeline_flush)
                .serve_connection(TokioIo::new(stream), service_fn(serve))
                .await;
        });
    }
}
