//! actix-web 4 with rustls (a worker per core by default): `actix_rustls_hello PORT CERT_PEM
//! KEY_PEM`.
use std::sync::Arc;

use actix_web::{App, HttpResponse, HttpServer, web};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

async fn hello() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain")
        .body("Hello, World!")
}

fn config(cert: &str, key: &str) -> Result<rustls::ServerConfig, Box<dyn std::error::Error>> {
    let certs = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    Ok(config)
}

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [port, cert, key] = &args[..] else {
        return Err("usage: actix_rustls_hello PORT CERT_PEM KEY_PEM".into());
    };
    let port: u16 = port.parse()?;
    // actix sets ALPN (h2, http/1.1) itself from the config it is given.
    let config = config(cert, key)?;
    // Keep-alive as long as twinhttp's idle timeout (actix closes after 5 s by default), so that
    // idle-connection benches hold the same connections on every server.
    let server = HttpServer::new(|| App::new().default_service(web::to(hello)))
        .keep_alive(std::time::Duration::from_secs(60))
        .bind_rustls_0_23(("127.0.0.1", port), config)?;
    // Said once it listens: the benches connect when they read this line.
    eprintln!("actix-web + rustls listening on https://127.0.0.1:{port}");
    server.run().await?;
    Ok(())
}
