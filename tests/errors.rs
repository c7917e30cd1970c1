//! Errors name what failed: a taken port names its address on every engine, a taken Unix socket
//! its path, `ServeDir::new` and the TLS PEM loader the path they could not read, and a handler's
//! panic is logged with the request's method and path. This binary installs its own logger (one
//! per process) that keeps the crate's error lines.
mod support;

use std::io::ErrorKind;
use std::net::TcpListener;

use support::{Client, Engine, start};
use twinhttp::reactor::{Accept, Reactor};
use twinhttp::{Error, Request, Response, ServeDir};

/// The operating system's error under `err`, which an error with context still carries.
fn io_kind(err: &Error) -> Option<ErrorKind> {
    std::error::Error::source(err)
        .and_then(|e| e.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind)
}

/// `err` reads `{prefix}: {the operating system's words}` and is the I/O error `kind`.
fn assert_names(err: &Error, prefix: &str, kind: ErrorKind) {
    let shown = err.to_string();
    let os = std::error::Error::source(err).map(ToString::to_string);
    assert_eq!(
        Some(shown.as_str()),
        os.map(|os| format!("{prefix}: {os}")).as_deref(),
        "{err:?}"
    );
    assert!(err.is_io(), "{err:?}");
    assert_eq!(io_kind(err), Some(kind), "{err:?}");
}

fn hello(_: &mut Request<'_>) -> Response {
    Response::text("hi")
}

#[test]
fn a_taken_port_names_its_address_on_every_engine() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let want = format!("cannot bind {addr}");
    #[cfg_attr(not(feature = "server"), allow(unused_mut))]
    let mut errors = vec![
        (
            "reactor, reuseport",
            Reactor::builder().loops(2).serve(addr, hello).err(),
        ),
        (
            "reactor, acceptor thread",
            Reactor::builder()
                .accept(Accept::Thread)
                .serve(addr, hello)
                .err(),
        ),
    ];
    #[cfg(feature = "server")]
    errors.push((
        "server",
        twinhttp::server::Server::builder().serve(addr, hello).err(),
    ));
    for (engine, err) in errors {
        let err = err.unwrap_or_else(|| panic!("{engine}: bound a taken port"));
        assert_names(&err, &want, ErrorKind::AddrInUse);
        // The whole sentence, as a user sees it on Linux.
        assert!(
            err.to_string()
                .starts_with(&format!("{want}: Address already in use")),
            "{engine}: {err}"
        );
    }
}

#[test]
fn a_taken_unix_socket_names_its_path() {
    let dir = std::env::temp_dir().join(format!("twinhttp-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let path = dir.join("taken.sock");
    let _ = std::fs::remove_file(&path);
    let _live = std::os::unix::net::UnixListener::bind(&path).expect("bind");
    let want = format!("cannot bind {}", path.display());
    let err = Reactor::builder().serve_unix(&path, hello).err();
    assert_names(&err.expect("reactor"), &want, ErrorKind::AddrInUse);
    #[cfg(feature = "server")]
    {
        let err = twinhttp::server::Server::builder()
            .serve_unix(&path, hello)
            .err();
        assert_names(&err.expect("server"), &want, ErrorKind::AddrInUse);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_dir_on_a_missing_folder_names_it() {
    let err = ServeDir::new("no/such/folder").expect_err("no folder");
    assert_names(
        &err,
        "cannot open the folder no/such/folder",
        ErrorKind::NotFound,
    );
    assert_eq!(
        err.to_string(),
        "cannot open the folder no/such/folder: No such file or directory (os error 2)"
    );
    let file = std::env::current_exe().expect("this test's own file");
    let err = ServeDir::new(&file).expect_err("a file is not a folder");
    assert!(
        err.to_string()
            .starts_with(&format!("cannot open the folder {}: ", file.display())),
        "{err}"
    );
}

#[cfg(feature = "tls")]
#[test]
fn tls_pem_errors_name_the_file() {
    let cert = std::path::Path::new("no/such/cert.pem");
    let key = std::path::Path::new("no/such/key.pem");
    let err = twinhttp::tls::config_from_pem(cert, key).expect_err("no certificate");
    assert_names(
        &err,
        "cannot read the TLS certificate no/such/cert.pem",
        ErrorKind::NotFound,
    );
    // A file that holds no PEM at all, as the certificate.
    let dir = std::env::temp_dir().join(format!("twinhttp-pem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let not_pem = dir.join("cert.pem");
    std::fs::write(&not_pem, "not a certificate\n").expect("write");
    let err = twinhttp::tls::config_from_pem(&not_pem, key).expect_err("not a certificate");
    assert_eq!(
        err.to_string(),
        format!(
            "cannot read the TLS certificate {}: no certificate in the file",
            not_pem.display()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn install() {
    support::logs::capture(log::Level::Error, "twinhttp");
}

fn panics(req: &mut Request<'_>) -> Response {
    if req.path().starts_with("/boom") {
        panic!("this handler panics on purpose");
    }
    Response::text("fine")
}

/// The panic is logged before its 500 is written, so once the client has the 500 the line is
/// there: it names the method and the path (without the query).
fn a_panic_is_logged_with_method_and_path(engine: Engine) {
    install();
    let srv = start(engine, panics);
    let path = format!("/boom/{engine:?}");
    let r =
        Client::new(srv.addr).request(&format!("POST {path}?secret=1"), "Content-Length: 0\r\n");
    assert_eq!(r.status, 500);
    let want = format!("handler panicked on POST {path}; answering 500");
    let lines = support::logs::lines();
    assert_eq!(
        lines.iter().filter(|l| **l == want).count(),
        1,
        "{want:?} in {lines:#?}"
    );
}

engine_tests!(a_panic_is_logged_with_method_and_path);
