//! `ServeDir` over real sockets on every engine configuration: files found by their decoded
//! names, index files and the folder redirect, content types, `ETag` with `If-None-Match` and
//! `If-Range`, and every way out of the folder answered `404` without a byte of what lies
//! outside, on a connection that stays open.
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use support::{Client, Engine, start};
use twinhttp::{Handler, Response, Router, ServeDir};

const SECRET: &str = "TOP SECRET";

/// A folder tree in the temp dir, removed on drop:
///
/// ```text
/// base/outside/secret.txt            TOP SECRET
/// base/public/index.html, hello.html, "a b.txt", café.txt, style.css, app.js, pic.svg,
///             data.json, mod.wasm, .secret, docs/index.html, empty/,
///             link-in -> hello.html, link-out -> ../outside/secret.txt, dir-out -> ../outside,
///             fifo (a named pipe)
/// ```
struct Tree(PathBuf);

impl Tree {
    fn new() -> Tree {
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir().join(format!(
            "twinhttp-static-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let public = base.join("public");
        fs::create_dir_all(public.join("docs")).expect("mkdir");
        fs::create_dir_all(public.join("empty")).expect("mkdir");
        fs::create_dir_all(base.join("outside")).expect("mkdir");
        fs::write(base.join("outside/secret.txt"), SECRET).expect("write");
        for (name, body) in [
            ("index.html", "root index"),
            ("hello.html", "<h1>hello</h1>"),
            ("a b.txt", "spaced"),
            ("caf\u{e9}.txt", "accented"),
            ("style.css", "body{}"),
            ("app.js", "let a;"),
            ("pic.svg", "<svg/>"),
            ("data.json", "{}"),
            ("mod.wasm", "\0asm"),
            (".secret", SECRET),
            ("docs/index.html", "docs index"),
        ] {
            fs::write(public.join(name), body).expect("write");
        }
        std::os::unix::fs::symlink("hello.html", public.join("link-in")).expect("link");
        std::os::unix::fs::symlink("../outside/secret.txt", public.join("link-out")).expect("link");
        std::os::unix::fs::symlink("../outside", public.join("dir-out")).expect("link");
        // Opening a FIFO waits for a writer: a server that tried would hang a thread.
        let made = std::process::Command::new("mkfifo")
            .arg(public.join("fifo"))
            .status()
            .expect("mkfifo");
        assert!(made.success());
        Tree(base)
    }

    fn public(&self) -> PathBuf {
        self.0.join("public")
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn serve(engine: Engine, root: &Path) -> support::TestServer {
    let files = ServeDir::new(root).expect("serve dir").prefix("/static");
    start(engine, files)
}

fn get(c: &mut Client, target: &str, extra: &str) -> support::Raw {
    c.roundtrip(format!("GET {target} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").as_bytes())
}

fn files_found_by_decoded_names(engine: Engine) {
    let tree = Tree::new();
    let srv = serve(engine, &tree.public());
    let mut c = Client::new(srv.addr);
    for (target, body) in [
        ("/static/hello.html", "<h1>hello</h1>"),
        ("/static/hello%2Ehtml", "<h1>hello</h1>"),
        ("/static/a%20b.txt", "spaced"),
        ("/static/caf%C3%A9.txt", "accented"),
        ("/static/link-in", "<h1>hello</h1>"),
        ("/static/", "root index"),
        ("/static/docs/", "docs index"),
        ("/static/docs%2F", "docs index"),
    ] {
        let r = get(&mut c, target, "");
        assert_eq!((r.status, r.text().as_str()), (200, body), "{target}");
        assert!(r.header("etag").is_some(), "{target}: no ETag");
        assert!(r.header("last-modified").is_some(), "{target}");
    }
    for (target, ty) in [
        ("/static/hello.html", "text/html; charset=utf-8"),
        ("/static/style.css", "text/css; charset=utf-8"),
        ("/static/app.js", "text/javascript; charset=utf-8"),
        ("/static/pic.svg", "image/svg+xml"),
        ("/static/data.json", "application/json"),
        ("/static/mod.wasm", "application/wasm"),
    ] {
        assert_eq!(get(&mut c, target, "").header("content-type"), Some(ty));
    }
    // A folder without its `/`: to the folder, query kept; the prefix alone likewise.
    for (target, location) in [
        ("/static/docs", "/static/docs/"),
        ("/static/docs?x=1", "/static/docs/?x=1"),
        ("/static", "/static/"),
    ] {
        let r = get(&mut c, target, "");
        assert_eq!(r.status, 301, "{target}");
        assert_eq!(r.header("location"), Some(location), "{target}");
    }
    c.send(b"HEAD /static/hello.html HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response(true).expect("HEAD response");
    assert_eq!((r.status, r.header("content-length")), (200, Some("14")));
    let r =
        c.roundtrip(b"POST /static/hello.html HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    assert_eq!((r.status, r.header("allow")), (405, Some("GET, HEAD")));
    // Still the same connection.
    assert_eq!(get(&mut c, "/static/hello.html", "").status, 200);
}

fn no_way_out_of_the_folder(engine: Engine) {
    let tree = Tree::new();
    let srv = serve(engine, &tree.public());
    let mut c = Client::new(srv.addr);
    for target in [
        "/static//etc/passwd",
        "/static/../outside/secret.txt",
        "/static/../../../../../../etc/passwd",
        "/static/docs/../../outside/secret.txt",
        "/static/%2e%2e/outside/secret.txt",
        "/static/%2E%2E%2Foutside%2Fsecret.txt",
        "/static/..%2foutside%2fsecret.txt",
        "/static/docs/..%2F..%2Foutside/secret.txt",
        "/static/%2Fetc%2Fpasswd",
        "/static/./hello.html",
        "/static/%5C..%5Coutside%5Csecret.txt",
        "/static/link-out",
        "/static/dir-out/secret.txt",
        "/static/hello.html%00.txt",
        "/static/%00",
        "/static/.secret",
        "/static/%2esecret",
        "/static/empty/",
        "/static/fifo",
        "/static/no-such-file",
        "/staticx/hello.html",
        "/other/hello.html",
    ] {
        let r = get(&mut c, target, "");
        assert_eq!(r.status, 404, "{target}");
        assert!(!r.text().contains(SECRET), "{target} leaked the secret");
    }
    let r = get(&mut c, "/static/%zz", "");
    assert_eq!(r.status, 400);
    let r = get(&mut c, "/static/%FF", "");
    assert_eq!(r.status, 400, "not UTF-8 once decoded");
    // Every refusal kept the connection.
    assert_eq!(get(&mut c, "/static/hello.html", "").status, 200);
}

fn etags_and_conditions(engine: Engine) {
    let tree = Tree::new();
    let srv = serve(engine, &tree.public());
    let mut c = Client::new(srv.addr);
    let first = get(&mut c, "/static/hello.html", "");
    let etag = first.header("etag").expect("etag").to_owned();
    let lm = first.header("last-modified").expect("lm").to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong tag: {etag}"
    );
    for inm in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
        "*".to_owned(),
    ] {
        let r = get(
            &mut c,
            "/static/hello.html",
            &format!("If-None-Match: {inm}\r\n"),
        );
        assert_eq!(r.status, 304, "If-None-Match: {inm}");
        assert_eq!(r.header("etag"), Some(etag.as_str()));
        assert_eq!(r.header("last-modified"), Some(lm.as_str()));
        // The validators only: nothing that describes bytes not sent.
        assert_eq!(r.header("content-type"), None);
        assert_eq!(r.header("accept-ranges"), None);
        assert!(r.body.is_empty());
    }
    // A tag that does not match wins over a date that would: If-None-Match decides.
    let r = get(
        &mut c,
        "/static/hello.html",
        &format!("If-None-Match: \"other\"\r\nIf-Modified-Since: {lm}\r\n"),
    );
    assert_eq!((r.status, r.text().as_str()), (200, "<h1>hello</h1>"));
    // If-Range by tag: the range for the same tag (strong), the whole file for a weak one.
    let r = get(
        &mut c,
        "/static/hello.html",
        &format!("Range: bytes=1-2\r\nIf-Range: {etag}\r\n"),
    );
    assert_eq!((r.status, r.text().as_str()), (206, "h1"));
    let r = get(
        &mut c,
        "/static/hello.html",
        &format!("Range: bytes=1-2\r\nIf-Range: W/{etag}\r\n"),
    );
    assert_eq!(r.status, 200);
    // The file rewritten: a new tag, and the old one no longer answers 304.
    fs::write(tree.public().join("hello.html"), "<h1>changed!</h1>").expect("rewrite");
    let r = get(
        &mut c,
        "/static/hello.html",
        &format!("If-None-Match: {etag}\r\n"),
    );
    assert_eq!((r.status, r.text().as_str()), (200, "<h1>changed!</h1>"));
    assert_ne!(r.header("etag"), Some(etag.as_str()));
}

/// Behind the compression layer, a `304` carries the `ETag` and `Vary` its `200` would have
/// (RFC 9110 §15.4.5): the weak tag for a file that is compressed (the 200's), however the 304
/// came (If-None-Match with that tag, or If-Modified-Since alone), the strong one for a file too
/// small to be; and an `If-Range` with the weak tag fails (strong comparison, RFC 9110
/// §13.1.5): the whole body, compressed, not identity bytes to splice into gzip.
#[cfg(feature = "compression")]
fn compressed_files_keep_their_validators_in_304s(engine: Engine) {
    use twinhttp::layer::{Compression, HandlerExt};
    let tree = Tree::new();
    fs::write(
        tree.public().join("big.txt"),
        "compressible text\n".repeat(300),
    )
    .expect("write");
    let files = ServeDir::new(tree.public())
        .expect("serve dir")
        .prefix("/static")
        .layer(Compression::new().gzip_only());
    let srv = start(engine, files);
    let mut c = Client::new(srv.addr);
    let gzip = "Accept-Encoding: gzip\r\n";
    let first = get(&mut c, "/static/big.txt", gzip);
    assert_eq!(first.status, 200);
    assert_eq!(first.header("content-encoding"), Some("gzip"));
    assert_eq!(first.header("vary"), Some("Accept-Encoding"));
    let tag = first.header("etag").expect("etag").to_owned();
    assert!(tag.starts_with("W/\""), "weak tag: {tag}");
    let lm = first.header("last-modified").expect("lm").to_owned();
    for condition in [
        format!("If-None-Match: {tag}\r\n"),
        format!("If-Modified-Since: {lm}\r\n"),
    ] {
        let r = get(&mut c, "/static/big.txt", &format!("{gzip}{condition}"));
        assert_eq!(r.status, 304, "{condition}");
        assert_eq!(r.header("etag"), Some(tag.as_str()), "{condition}");
        assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{condition}");
        assert_eq!(r.header("content-encoding"), None, "{condition}");
        assert_eq!(r.header("content-type"), None, "{condition}");
    }
    // If-Range with the weak tag: the whole body, compressed.
    let r = get(
        &mut c,
        "/static/big.txt",
        &format!("{gzip}Range: bytes=0-9\r\nIf-Range: {tag}\r\n"),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("content-range"), None);
    // Without gzip, the file's own strong tag, in the 200 and the 304 alike.
    let plain = get(&mut c, "/static/big.txt", "");
    let strong = plain.header("etag").expect("etag").to_owned();
    assert_eq!(strong, tag["W/".len()..]);
    let r = get(
        &mut c,
        "/static/big.txt",
        &format!("If-None-Match: {strong}\r\n"),
    );
    assert_eq!((r.status, r.header("etag")), (304, Some(strong.as_str())));
    // Too small to compress: the strong tag in both, and both vary.
    let small = get(&mut c, "/static/hello.html", gzip);
    assert_eq!(small.header("content-encoding"), None);
    let small_tag = small.header("etag").expect("etag").to_owned();
    assert!(small_tag.starts_with('"'), "strong tag: {small_tag}");
    let r = get(
        &mut c,
        "/static/hello.html",
        &format!("{gzip}If-None-Match: {small_tag}\r\n"),
    );
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some(small_tag.as_str()));
    assert_eq!(r.header("vary"), small.header("vary"));

    // A precompressed copy: its 200 goes through the layer as it is, strong tag and all, and so
    // does its 304 (the layer does not weaken the tag of a 200 it never compressed).
    fs::write(tree.public().join("app.js"), "let x = 1;\n".repeat(300)).expect("write");
    // (As large as a body the layer would compress: the 304's length is the copy's.)
    let gz = "a gzip copy\n".repeat(300);
    fs::write(tree.public().join("app.js.gz"), &gz).expect("write copy");
    let copy = get(&mut c, "/static/app.js", gzip);
    assert_eq!(copy.status, 200);
    assert_eq!(copy.header("content-encoding"), Some("gzip"));
    assert_eq!(copy.text(), gz);
    let copy_tag = copy.header("etag").expect("etag").to_owned();
    assert!(copy_tag.starts_with('"'), "strong tag: {copy_tag}");
    let r = get(
        &mut c,
        "/static/app.js",
        &format!("{gzip}If-None-Match: {copy_tag}\r\n"),
    );
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some(copy_tag.as_str()), "the 200's tag");
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
}

#[cfg(feature = "compression")]
mod compression {
    use super::*;
    engine_tests!(compressed_files_keep_their_validators_in_304s);
}

/// As the docs show it: the folder as a router's fallback.
fn behind_a_router(engine: Engine) {
    let tree = Tree::new();
    // A prefix given without its leading `/` means the same.
    let files = ServeDir::new(tree.public()).expect("dir").prefix("static/");
    let app = Router::new()
        .get("/", |_| Response::text("home"))
        .post("/form", |_| Response::text("posted"))
        .fallback(move |req| files.handle(req));
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    assert_eq!(get(&mut c, "/", "").text(), "home");
    assert_eq!(get(&mut c, "/static/", "").text(), "root index");
    assert_eq!(get(&mut c, "/static/docs/", "").text(), "docs index");
    let r = get(&mut c, "/static", "");
    assert_eq!((r.status, r.header("location")), (301, Some("/static/")));
    assert_eq!(
        get(&mut c, "/static/..%2foutside%2fsecret.txt", "").status,
        404
    );
    assert_eq!(get(&mut c, "/elsewhere", "").status, 404);
    c.send(b"HEAD /static/a%20b.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response(true).expect("HEAD response");
    assert_eq!((r.status, r.header("content-length")), (200, Some("6")));
    let r = c.roundtrip(b"DELETE /static/hello.html HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, r.header("allow")), (405, Some("GET, HEAD")));
    assert_eq!(
        get(&mut c, "/form", "").status,
        405,
        "the router's own routes still decide"
    );
}

/// A file swapped, again and again, with a link leading out of the folder while requests come:
/// never served (on Linux the kernel checks the path in the call that opens the file; elsewhere
/// the documented window between the check and the open remains, and this test is Linux's).
#[cfg(target_os = "linux")]
fn a_link_swapped_in_never_leads_out(engine: Engine) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::time::{Duration, Instant};
    let tree = Tree::new();
    let public = tree.public();
    fs::write(public.join("race"), "harmless").expect("write");
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, swaps, public) = (Arc::clone(&stop), Arc::clone(&swaps), public.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::write(public.join("race.tmp"), "harmless");
                let _ = fs::rename(public.join("race.tmp"), public.join("race"));
                let _ =
                    std::os::unix::fs::symlink("../outside/secret.txt", public.join("race.lnk"));
                let _ = fs::rename(public.join("race.lnk"), public.join("race"));
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let srv = serve(engine, &public);
    let mut c = Client::new(srv.addr);
    let started = Instant::now();
    let (mut served, mut refused) = (0, 0);
    // At least 1.5 s, and on until the race was run both ways (a loaded machine may starve the
    // swapper for a while), at most 30 s.
    let run = |served: u64, refused: u64| {
        swaps.load(Ordering::Relaxed) > 100 && served > 0 && refused > 0
    };
    while started.elapsed() < Duration::from_millis(1500)
        || (!run(served, refused) && started.elapsed() < Duration::from_secs(30))
    {
        let r = get(&mut c, "/static/race", "");
        assert!(!r.text().contains(SECRET), "the outside file was served");
        match r.status {
            200 => served += 1,
            _ => refused += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().expect("swapper");
    // Both states were seen: the race was run, not missed.
    assert!(
        run(served, refused),
        "{} swaps, {served} served, {refused} refused",
        swaps.load(Ordering::Relaxed)
    );
}

/// An `If-Range` date within the second the file was changed in is not a strong validator
/// (RFC 9110 §13.1.5): the whole file, not a range that could splice two versions.
fn if_range_by_a_recent_date_sends_the_whole_file(engine: Engine) {
    let tree = Tree::new();
    let srv = serve(engine, &tree.public());
    let mut c = Client::new(srv.addr);
    // Written just now (Tree::new): its date is weak.
    let lm = get(&mut c, "/static/hello.html", "")
        .header("last-modified")
        .expect("lm")
        .to_owned();
    let r = get(
        &mut c,
        "/static/hello.html",
        &format!("Range: bytes=1-2\r\nIf-Range: {lm}\r\n"),
    );
    assert_eq!((r.status, r.text().as_str()), (200, "<h1>hello</h1>"));
}

fn hidden_names_when_allowed(engine: Engine) {
    let tree = Tree::new();
    let files = ServeDir::new(tree.public())
        .expect("dir")
        .hidden(true)
        .index(None);
    let srv = start(engine, files);
    let mut c = Client::new(srv.addr);
    assert_eq!(get(&mut c, "/.secret", "").text(), SECRET);
    // No index file: folders are 404, never listed.
    assert_eq!(get(&mut c, "/docs/", "").status, 404);
    assert_eq!(get(&mut c, "/", "").status, 404);
    assert_eq!(get(&mut c, "/../outside/secret.txt", "").status, 404);
}

#[test]
fn a_missing_or_plain_file_root_is_an_error() {
    let tree = Tree::new();
    assert!(ServeDir::new(tree.0.join("no-such-folder")).is_err());
    assert!(ServeDir::new(tree.public().join("hello.html")).is_err());
    let dir = ServeDir::new(tree.public()).expect("dir");
    assert!(dir.root().is_absolute());
}

engine_tests!(
    files_found_by_decoded_names,
    no_way_out_of_the_folder,
    etags_and_conditions,
    behind_a_router,
    hidden_names_when_allowed,
    if_range_by_a_recent_date_sends_the_whole_file,
);

#[cfg(target_os = "linux")]
mod races {
    use super::*;
    engine_tests!(a_link_swapped_in_never_leads_out);
}
