//! hyper 1 (HTTP/1.1) over tokio-rustls on tokio's multi-thread runtime (a worker per core): the
//! usual async Rust HTTPS server. `hyper_rustls_hello PORT CERT_PEM KEY_PEM`.
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

async fn hello(_req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut rsp = Response::new(Full::new(Bytes::from_static(b"Hello, World!")));
    rsp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(rsp)
}

fn config(
    cert: &str,
    key: &str,
) -> Result<rustls::ServerConfig, Box<dyn std::error::Error + Send + Sync>> {
    let certs = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [port, cert, key] = &args[..] else {
        return Err("usage: hyper_rustls_hello PORT CERT_PEM KEY_PEM".into());
    };
    let acceptor = TlsAcceptor::from(Arc::new(config(cert, key)?));
    let addr = SocketAddr::from(([127, 0, 0, 1], port.parse()?));
    let listener = TcpListener::bind(addr).await?;
    // Said once it listens: the benches connect when they read this line.
    eprintln!(
        "hyper + tokio-rustls listening on https://{}",
        listener.local_addr()?
    );
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("accept: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service_fn(hello))
                .await;
        });
    }
}
