//! File responses over real sockets on every engine configuration: whole files (sendfile on the
//! thread-pool engine), single ranges, 416, conditional requests, HEAD, missing files, and
//! keep-alive after each.
mod support;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use support::{Client, Engine, start};
use twinhttp::{Request, Response};

/// A file of `len` patterned bytes in the temp dir, removed on drop.
struct TempFile(PathBuf, Vec<u8>);

impl TempFile {
    fn new(len: usize) -> TempFile {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "twinhttp-file-{}-{}.bin",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).expect("write temp file");
        TempFile(path, bytes)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn serve(engine: Engine, file: &TempFile) -> support::TestServer {
    let path = file.0.clone();
    let dir = std::env::temp_dir();
    start(engine, move |req: &mut Request<'_>| match req.path() {
        "/file" => Response::file(req, &path),
        "/missing" => Response::file(req, dir.join("twinhttp-no-such-file")),
        "/dir" => Response::file(req, &dir),
        _ => Response::new(404),
    })
}

fn get(c: &mut Client, path: &str, extra: &str) -> support::Raw {
    c.roundtrip(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").as_bytes())
}

fn whole_file_head_and_keep_alive(engine: Engine) {
    let file = TempFile::new(3 * 1024 * 1024 + 17);
    let srv = serve(engine, &file);
    let mut c = Client::new(srv.addr);
    for _ in 0..2 {
        let r = get(&mut c, "/file", "");
        assert_eq!(r.status, 200);
        assert_eq!(
            r.header("content-length"),
            Some(file.1.len().to_string().as_str())
        );
        assert_eq!(r.header("accept-ranges"), Some("bytes"));
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        assert!(r.header("last-modified").is_some());
        assert!(r.body == file.1, "body differs");
    }
    c.send(b"HEAD /file HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response(true).expect("HEAD response");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-length"),
        Some(file.1.len().to_string().as_str())
    );
    // No body followed the HEAD response: the next exchange parses.
    assert_eq!(get(&mut c, "/file", "Range: bytes=0-0\r\n").status, 206);
}

fn ranges(engine: Engine) {
    let file = TempFile::new(1000);
    let srv = serve(engine, &file);
    let mut c = Client::new(srv.addr);
    let r = get(&mut c, "/file", "Range: bytes=10-19\r\n");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 10-19/1000"));
    assert_eq!(r.body, &file.1[10..20]);
    let r = get(&mut c, "/file", "Range: bytes=-5\r\n");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 995-999/1000"));
    assert_eq!(r.body, &file.1[995..]);
    let r = get(&mut c, "/file", "Range: bytes=990-\r\n");
    assert_eq!(r.body, &file.1[990..]);
    // A first position past the end, however many digits it has (past u64::MAX too: it went
    // whole, 200, before a user's trial found it).
    for first in ["1000", "99999999999999999999999"] {
        let r = get(&mut c, "/file", &format!("Range: bytes={first}-\r\n"));
        assert_eq!(r.status, 416, "{first}");
        assert_eq!(r.header("content-range"), Some("bytes */1000"), "{first}");
    }
    let r = get(
        &mut c,
        "/file",
        "Range: bytes=990-99999999999999999999999\r\n",
    );
    assert_eq!(r.header("content-range"), Some("bytes 990-999/1000"));
    // Several ranges, or a malformed one: the whole file.
    // Two `Range` fields, one value that is no range (RFC 9110 §5.3): likewise.
    for h in [
        "Range: bytes=0-1,5-6\r\n",
        "Range: bytes=x-y\r\n",
        "Range: bytes=20-5\r\n",
        "Range: bytes=0-1\r\nRange: bytes=2-3\r\n",
    ] {
        let r = get(&mut c, "/file", h);
        assert_eq!((r.status, r.body.len()), (200, 1000), "{h}");
    }
    // HEAD: range handling is defined for GET only (RFC 9110 §14.2), so the head of the 200.
    for range in ["bytes=0-1", "bytes=5000-"] {
        c.send(format!("HEAD /file HTTP/1.1\r\nHost: t\r\nRange: {range}\r\n\r\n").as_bytes());
        let r = c.read_response(true).expect("HEAD response");
        assert_eq!(r.status, 200, "{range}");
        assert_eq!(r.header("content-length"), Some("1000"), "{range}");
        assert_eq!(r.header("content-range"), None, "{range}");
    }
    // If-Range that does not match Last-Modified: the whole file.
    let r = get(
        &mut c,
        "/file",
        "Range: bytes=0-1\r\nIf-Range: Mon, 01 Jan 1990 00:00:00 GMT\r\n",
    );
    assert_eq!(r.status, 200);
}

/// RFC 9110 §14.1.1: a suffix range with a non-zero length is satisfiable even on an empty
/// file, whose whole (empty) representation is then the answer: a `200`, not a `416`; a range
/// with a first position is not (`0-0` of nothing). Range units compare case-insensitively
/// (RFC 9110 §14.1).
fn empty_file_and_range_unit_case(engine: Engine) {
    let empty = TempFile::new(0);
    let file = TempFile::new(1000);
    let (empty_path, path) = (empty.0.clone(), file.0.clone());
    let srv = start(engine, move |req: &mut Request<'_>| match req.path() {
        "/empty" => Response::file(req, &empty_path),
        _ => Response::file(req, &path),
    });
    let mut c = Client::new(srv.addr);
    let r = get(&mut c, "/empty", "Range: bytes=-5\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("0"));
    assert_eq!(r.header("content-range"), None);
    assert!(r.body.is_empty());
    let r = get(&mut c, "/empty", "Range: bytes=0-0\r\n");
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */0"));
    let r = get(&mut c, "/empty", "Range: bytes=-0\r\n");
    assert_eq!(r.status, 416);
    for unit in ["BYTES", "Bytes", "bYtEs"] {
        let r = get(&mut c, "/file", &format!("Range: {unit}=0-1\r\n"));
        assert_eq!(r.status, 206, "{unit}");
        assert_eq!(r.header("content-range"), Some("bytes 0-1/1000"), "{unit}");
        assert_eq!(r.body, &file.1[..2], "{unit}");
    }
}

fn conditional_requests(engine: Engine) {
    let file = TempFile::new(100);
    // Changed a while ago: its date is a strong validator, which If-Range needs.
    let ago = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
    std::fs::File::options()
        .write(true)
        .open(&file.0)
        .and_then(|f| f.set_modified(ago))
        .expect("set the file's date");
    let srv = serve(engine, &file);
    let mut c = Client::new(srv.addr);
    let lm = get(&mut c, "/file", "")
        .header("last-modified")
        .expect("lm")
        .to_owned();
    let r = get(&mut c, "/file", &format!("If-Modified-Since: {lm}\r\n"));
    assert_eq!(r.status, 304);
    assert!(r.header("content-length").is_none());
    let r = get(
        &mut c,
        "/file",
        "If-Modified-Since: Mon, 01 Jan 1990 00:00:00 GMT\r\n",
    );
    assert_eq!((r.status, r.body.len()), (200, 100));
    let r = get(&mut c, "/file", "If-Modified-Since: not a date\r\n");
    assert_eq!(r.status, 200);
    let r = get(
        &mut c,
        "/file",
        &format!("Range: bytes=1-2\r\nIf-Range: {lm}\r\n"),
    );
    assert_eq!(r.status, 206);
    // If-Match and If-Unmodified-Since (RFC 9110 §13.1.1, §13.1.4): 412 when they fail,
    // evaluated before If-None-Match and If-Modified-Since.
    let etag = get(&mut c, "/file", "")
        .header("etag")
        .expect("etag")
        .to_owned();
    let status = |c: &mut Client, extra: &str| get(c, "/file", extra).status;
    for (extra, want) in [
        (format!("If-Match: {etag}\r\n"), 200),
        (format!("If-Match: \"other\", {etag}\r\n"), 200),
        ("If-Match: *\r\n".to_owned(), 200),
        ("If-Match: \"other\"\r\n".to_owned(), 412),
        (format!("If-Match: W/{etag}\r\n"), 412),
        (format!("If-Unmodified-Since: {lm}\r\n"), 200),
        (
            "If-Unmodified-Since: Mon, 01 Jan 1990 00:00:00 GMT\r\n".to_owned(),
            412,
        ),
        ("If-Unmodified-Since: not a date\r\n".to_owned(), 200),
        // If-Match decides when present: If-Unmodified-Since is then not looked at.
        (
            format!("If-Match: {etag}\r\nIf-Unmodified-Since: Mon, 01 Jan 1990 00:00:00 GMT\r\n"),
            200,
        ),
        (
            format!("If-Match: \"other\"\r\nIf-None-Match: {etag}\r\n"),
            412,
        ),
        (
            format!("If-Match: {etag}\r\nIf-None-Match: {etag}\r\n"),
            304,
        ),
    ] {
        assert_eq!(status(&mut c, &extra), want, "{extra}");
    }
}

fn missing_files_and_methods(engine: Engine) {
    let file = TempFile::new(10);
    let srv = serve(engine, &file);
    let mut c = Client::new(srv.addr);
    assert_eq!(get(&mut c, "/missing", "").status, 404);
    assert_eq!(get(&mut c, "/dir", "").status, 404);
    let r = c.roundtrip(b"DELETE /file HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 405);
    assert_eq!(get(&mut c, "/file", "").body, file.1);
}

/// The pattern `Response::file`'s docs give for serving a folder from request paths (kept in
/// step with them): a plain name inside the folder is served, decoded; an absolute path, `..`
/// (raw or percent-encoded), NUL and a symbolic link out of the folder are not.
fn documented_static_pattern_refuses_escapes(engine: Engine) {
    use std::path::{Component, Path};
    static N: AtomicUsize = AtomicUsize::new(0);
    let base = std::env::temp_dir().join(format!(
        "twinhttp-static-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let (root, outside) = (base.join("public"), base.join("outside"));
    std::fs::create_dir_all(&root).expect("the folder");
    std::fs::create_dir_all(&outside).expect("a folder beside it");
    std::fs::write(root.join("hello.txt"), "hello").expect("a file");
    std::fs::write(outside.join("secret.txt"), "secret").expect("a file outside");
    std::os::unix::fs::symlink(&outside, root.join("out")).expect("a link out");
    let root = root.canonicalize().expect("canonical");
    let served = root.clone();
    let srv = start(engine, move |req: &mut Request<'_>| {
        let Ok(path) = req.path_decoded() else {
            return Response::new(400);
        };
        let Some(rest) = path.strip_prefix("/static/") else {
            return Response::new(404);
        };
        let relative = Path::new(rest);
        let plain = relative
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
        if !plain || rest.contains('\0') {
            return Response::new(404);
        }
        match served.join(relative).canonicalize() {
            Ok(real) if real.starts_with(&served) => Response::file(req, real),
            _ => Response::new(404),
        }
    });
    let mut c = Client::new(srv.addr);
    assert_eq!(get(&mut c, "/static/hello.txt", "").text(), "hello");
    assert_eq!(get(&mut c, "/static/hello%2Etxt", "").text(), "hello");
    for attack in [
        "/static//etc/passwd",
        "/static/../../../../etc/passwd",
        "/static/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/static/out/secret.txt",
        "/static/hello.txt%00",
        "/static/./hello.txt",
    ] {
        let r = get(&mut c, attack, "");
        assert_eq!(r.status, 404, "{attack}: {}", r.text());
    }
    assert_eq!(get(&mut c, "/static/%zz", "").status, 400);
    let _ = std::fs::remove_dir_all(&base);
}

engine_tests!(
    documented_static_pattern_refuses_escapes,
    whole_file_head_and_keep_alive,
    ranges,
    empty_file_and_range_unit_case,
    conditional_requests,
    missing_files_and_methods,
);
