//! The `app` example end to end, on every engine configuration: the JSON API with route
//! parameters, `HEAD` and `405` with `Allow`, JSON in and out and its refusals (400, 415, 422),
//! static files with `ETag`/`304` and no way out of the folder, changes announced on a WebSocket
//! and an event stream, and a graceful exit 0 within a second of SIGINT or SIGTERM with the
//! request under way answered.
#![cfg(all(feature = "server", feature = "json"))]
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;
mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use child::ChildServer;
use rustix::process::{Pid, Signal, kill_process};
use serde_json::{Value, json};
use support::{Client, Raw, connect};
use tungstenite::{Message, WebSocket};

/// A folder to serve, and a secret beside it; removed on drop.
struct Site(PathBuf);

impl Site {
    fn new(tag: &str) -> Site {
        let base = std::env::temp_dir().join(format!("twinhttp-app-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(base.join("public/docs")).expect("mkdir");
        std::fs::write(base.join("public/index.html"), "<h1>app</h1>").expect("write");
        std::fs::write(base.join("public/docs/a b.txt"), "spaced").expect("write");
        std::fs::write(base.join("secret.txt"), "TOP SECRET").expect("write");
        Site(base)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start(site: &Site, flags: &[&str]) -> ChildServer {
    let mut cmd = Command::new(child::example_for_test("app"));
    cmd.args(["--addr", "127.0.0.1:0", "--static"])
        .arg(site.0.join("public"))
        .args(flags);
    ChildServer::spawn(cmd)
}

fn request(c: &mut Client, method: &str, target: &str, fields: &str, body: &str) -> Raw {
    c.roundtrip(
        format!(
            "{method} {target} HTTP/1.1\r\nHost: t\r\n{fields}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}

fn json_of(r: &Raw) -> Value {
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    serde_json::from_slice(&r.body).expect("a JSON body")
}

const JSON: &str = "Content-Type: application/json\r\n";

fn websocket(server: &ChildServer) -> WebSocket<TcpStream> {
    let url = format!("ws://{}/ws", server.addr);
    let mut ws = tungstenite::client(url, connect(server.addr))
        .expect("handshake")
        .0;
    // The greeting comes once this socket is registered: no change after it is missed.
    assert_eq!(next_json(&mut ws), json!({"listening": true}));
    ws
}

fn next_json(ws: &mut WebSocket<TcpStream>) -> Value {
    loop {
        match ws.read().expect("message") {
            Message::Text(t) => return serde_json::from_str(t.as_str()).expect("JSON text"),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("expected text, got {other:?}"),
        }
    }
}

/// An event stream, its head read (the stream is registered before the head is sent).
fn events(server: &ChildServer) -> BufReader<TcpStream> {
    events_with(server, "")
}

/// [`events`] with these header fields.
fn events_with(server: &ChildServer, fields: &str) -> BufReader<TcpStream> {
    let mut s = connect(server.addr);
    s.write_all(format!("GET /events HTTP/1.1\r\nHost: t\r\n{fields}\r\n").as_bytes())
        .expect("send");
    let mut r = BufReader::new(s);
    let mut head = String::new();
    while !head.ends_with("\r\n\r\n") {
        assert!(r.read_line(&mut head).expect("head") > 0, "{head}");
    }
    assert!(head.contains("200"), "{head}");
    r
}

/// The next event's id and JSON data (chunk-size lines skipped).
fn next_event(r: &mut BufReader<TcpStream>) -> (String, Value) {
    let (mut id, mut data) = (None, None);
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).expect("line") > 0, "stream ended");
        if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("data: ") {
            data = Some(serde_json::from_str(v.trim()).expect("JSON data"));
        } else if line == "\n" {
            if let (Some(id), Some(data)) = (id.take(), data.take()) {
                return (id, data);
            }
        }
    }
}

fn api_and_announcements(flags: &[&str]) {
    let site = Site::new(&flags.join(""));
    let server = start(&site, flags);
    let mut ws = websocket(&server);
    let mut stream = events(&server);
    let mut c = Client::new(server.addr);

    let r = request(&mut c, "GET", "/api/items", "", "");
    assert_eq!((r.status, json_of(&r)), (200, json!([])), "{flags:?}");
    let r = request(&mut c, "POST", "/api/items", JSON, r#"{"name": "first"}"#);
    assert_eq!(r.status, 201, "{flags:?}");
    assert_eq!(json_of(&r), json!({"id": 1, "name": "first"}));
    assert_eq!(r.header("location"), Some("/api/items/1"));
    let created = json!({"change": "created", "item": {"id": 1, "name": "first"}});
    assert_eq!(next_json(&mut ws), created, "{flags:?}");
    assert_eq!(
        next_event(&mut stream),
        ("1".to_owned(), created),
        "{flags:?}"
    );

    let r = request(&mut c, "POST", "/api/items", JSON, r#"{"name": "second"}"#);
    assert_eq!(json_of(&r)["id"], 2);
    let created = json!({"change": "created", "item": {"id": 2, "name": "second"}});
    assert_eq!(next_json(&mut ws), created);
    assert_eq!(next_event(&mut stream), ("2".to_owned(), created.clone()));
    // A stream that reconnects after the first change gets the one it missed, then the next
    // (a user's trial found the ids sent and never resumed from).
    let mut again = events_with(&server, "Last-Event-ID: 1\r\n");
    assert_eq!(
        next_event(&mut again),
        ("2".to_owned(), created),
        "{flags:?}"
    );
    let r = request(&mut c, "GET", "/api/items/2", "", "");
    assert_eq!(json_of(&r), json!({"id": 2, "name": "second"}));
    let r = request(&mut c, "GET", "/api/items", "", "");
    assert_eq!(json_of(&r).as_array().map(Vec::len), Some(2));
    for missing in ["/api/items/99", "/api/items/x"] {
        let r = request(&mut c, "GET", missing, "", "");
        assert_eq!(r.status, 404, "{missing}");
        assert_eq!(json_of(&r), json!({"error": "no such item"}));
    }

    // HEAD by the GET route, without a body; 405 with Allow for a method no route has.
    c.send(b"HEAD /api/items HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response(true).expect("HEAD response");
    assert_eq!(r.status, 200);
    assert!(r.header("content-length").is_some_and(|n| n != "0"));
    let r = request(&mut c, "PUT", "/api/items", JSON, "{}");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD, POST"));

    // Bad JSON: refused with the right status, and the connection kept.
    for (fields, body, status) in [
        (JSON, r#"{"name": "#, 400),
        (JSON, "not json", 400),
        (JSON, r#"{"name": 5}"#, 422),
        (JSON, r#"{"title": "x"}"#, 422),
        ("Content-Type: text/plain\r\n", r#"{"name": "x"}"#, 415),
        ("", r#"{"name": "x"}"#, 415),
    ] {
        let r = request(&mut c, "POST", "/api/items", fields, body);
        assert_eq!(r.status, status, "{flags:?}: {fields:?} {body}");
    }

    let r = request(&mut c, "DELETE", "/api/items/1", "", "");
    assert_eq!(r.status, 204);
    let deleted = json!({"change": "deleted", "id": 1});
    assert_eq!(next_json(&mut ws), deleted);
    assert_eq!(next_event(&mut stream), ("3".to_owned(), deleted.clone()));
    // The stream that caught up goes on with what comes next.
    assert_eq!(
        next_event(&mut again),
        ("3".to_owned(), deleted),
        "{flags:?}"
    );
    assert_eq!(
        request(&mut c, "DELETE", "/api/items/1", "", "").status,
        404
    );
    let r = request(&mut c, "GET", "/api/items", "", "");
    assert_eq!(json_of(&r), json!([{"id": 2, "name": "second"}]));
}

fn static_files(flags: &[&str]) {
    let site = Site::new(&format!("static{}", flags.join("")));
    let server = start(&site, flags);
    let mut c = Client::new(server.addr);
    let r = request(&mut c, "GET", "/static/docs/a%20b.txt", "", "");
    assert_eq!((r.status, r.text().as_str()), (200, "spaced"), "{flags:?}");
    let etag = r.header("etag").expect("ETag").to_owned();
    let r = request(
        &mut c,
        "GET",
        "/static/docs/a%20b.txt",
        &format!("If-None-Match: {etag}\r\n"),
        "",
    );
    assert_eq!(r.status, 304);
    assert_eq!(
        request(&mut c, "GET", "/static/", "", "").text(),
        "<h1>app</h1>"
    );
    for out in [
        "/static/../secret.txt",
        "/static/%2e%2e/secret.txt",
        "/static//etc/passwd",
    ] {
        let r = request(&mut c, "GET", out, "", "");
        assert_eq!(r.status, 404, "{flags:?}: {out}");
        assert!(!r.text().contains("SECRET"));
    }
}

fn graceful_exit(signal: Signal, flags: &[&str]) {
    let site = Site::new(&format!("exit{signal:?}{}", flags.join("")));
    let mut server = start(&site, flags);
    let mut ws = websocket(&server);
    let mut c = Client::new(server.addr);
    // A request under way: its `100 Continue` shows the server holds it; its body follows the
    // signal.
    let body = r#"{"name": "late"}"#;
    c.send(
        format!(
            "POST /api/items HTTP/1.1\r\nHost: t\r\n{JSON}Content-Length: {}\r\nExpect: 100-continue\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    assert_eq!(c.read_response(false).expect("100 Continue").status, 100);
    kill_process(Pid::from_child(&server.child), signal).expect("signal");
    let signalled = Instant::now();
    c.send(body.as_bytes());
    let r = c.response();
    assert_eq!(
        r.status, 201,
        "{flags:?}: the request under way is answered"
    );
    assert!(c.is_closed(), "{flags:?}: then its connection closes");
    // The WebSocket is closed with 1001 (going away); the client answers, as browsers do.
    let close = loop {
        match ws.read() {
            Ok(Message::Close(frame)) => break frame,
            Ok(_) => {}
            Err(e) => panic!("{flags:?}: no close frame: {e}"),
        }
    };
    assert_eq!(close.map(|f| u16::from(f.code)), Some(1001), "{flags:?}");
    let _ = ws.flush();
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(1),
            "{flags:?}: still running 1 s after {signal:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{flags:?}: {status:?}");
}

/// The layers around the routes: CORS on `/api` only, a request id on every response, a form
/// as well as JSON to create an item, and (feature `compression`) JSON and static files
/// compressed for a client that accepts it.
fn layers(flags: &[&str]) {
    let site = Site::new(&format!("layers{}", flags.join("")));
    let big = "static text that compresses well. ".repeat(200);
    std::fs::write(site.0.join("public/big.txt"), &big).expect("write");
    let server = start(&site, flags);
    let mut c = Client::new(server.addr);
    let preflight = "Origin: https://elsewhere.example\r\nAccess-Control-Request-Method: POST\r\n";
    let r = request(&mut c, "OPTIONS", "/api/items", preflight, "");
    assert_eq!(r.status, 204, "{flags:?}");
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    // Every method the API routes, DELETE too (a user's trial found it missing: a browser
    // would block the call).
    assert_eq!(
        r.header("access-control-allow-methods"),
        Some("GET, HEAD, POST, DELETE"),
        "{flags:?}"
    );
    let r = request(
        &mut c,
        "GET",
        "/",
        "Origin: https://elsewhere.example\r\n",
        "",
    );
    assert_eq!(
        (r.status, r.header("access-control-allow-origin")),
        (200, None)
    );
    assert!(r.header("x-request-id").is_some_and(|id| !id.is_empty()));
    let r = request(&mut c, "GET", "/api/items", "X-Request-Id: trace-1\r\n", "");
    assert_eq!(r.header("x-request-id"), Some("trace-1"), "{flags:?}");
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    let r = request(&mut c, "POST", "/api/items", form, "name=from+a+form");
    assert_eq!(r.status, 201, "{flags:?}");
    assert_eq!(json_of(&r)["name"], json!("from a form"));
    let r = request(&mut c, "POST", "/api/items", form, "nope=1");
    assert_eq!(r.status, 422, "{flags:?}");
    #[cfg(feature = "compression")]
    {
        use std::io::Read;
        for n in 0..40 {
            let item = format!("{{\"name\": \"item number {n}\"}}");
            assert_eq!(
                request(&mut c, "POST", "/api/items", JSON, &item).status,
                201
            );
        }
        let plain = request(&mut c, "GET", "/api/items", "", "");
        assert_eq!(plain.header("content-encoding"), None);
        assert!(plain.body.len() > 1024);
        let r = request(&mut c, "GET", "/api/items", "Accept-Encoding: gzip\r\n", "");
        assert_eq!(r.header("content-encoding"), Some("gzip"), "{flags:?}");
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        let mut json = Vec::new();
        flate2::read::GzDecoder::new(&r.body[..])
            .read_to_end(&mut json)
            .expect("gzip");
        assert_eq!(json, plain.body, "{flags:?}");
        let r = request(
            &mut c,
            "GET",
            "/static/big.txt",
            "Accept-Encoding: br\r\n",
            "",
        );
        assert_eq!(r.header("content-encoding"), Some("br"), "{flags:?}");
        let mut text = Vec::new();
        brotli::Decompressor::new(&r.body[..], 4096)
            .read_to_end(&mut text)
            .expect("brotli");
        assert_eq!(text, big.as_bytes(), "{flags:?}");
    }
}

/// An upload as a browser sends it: each part's name, file name and size (feature multipart).
#[cfg(feature = "multipart")]
fn upload(flags: &[&str]) {
    let site = Site::new(&format!("upload{}", flags.join("")));
    let server = start(&site, flags);
    let mut c = Client::new(server.addr);
    let boundary = "----WebKitFormBoundaryx8zXxJ1Jm4Hk2rYz";
    let file = vec![7u8; 100_000];
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nholiday\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"a.png\"\r\n\
         Content-Type: image/png\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let head = format!(
        "POST /api/upload HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    let mut raw = head.into_bytes();
    raw.extend_from_slice(&body);
    let r = c.roundtrip(&raw);
    assert_eq!(r.status, 200, "{flags:?}: {}", r.text());
    assert_eq!(
        json_of(&r),
        json!([
            {"name": "title", "file_name": null, "bytes": 7},
            {"name": "photo", "file_name": "a.png", "bytes": 100_000}
        ]),
        "{flags:?}"
    );
    let r = request(&mut c, "POST", "/api/upload", JSON, "{}");
    assert_eq!(r.status, 415, "{flags:?}");
}

#[cfg(feature = "multipart")]
#[test]
fn upload_on_every_engine() {
    for flags in child::EVERY_CONFIGURATION {
        upload(flags);
    }
}

/// curl as a user runs it against the app: `--compressed` decodes what the layer compressed,
/// `-F` uploads a file. Needs curl: `.ci/run` installs it and runs this.
#[cfg(all(feature = "compression", feature = "multipart"))]
#[test]
#[ignore = "needs curl: .ci/run runs it"]
fn curl_compressed_and_form_upload() {
    for flags in child::EVERY_CONFIGURATION {
        let site = Site::new(&format!("curl{}", flags.join("")));
        let big = "text that compresses. ".repeat(500);
        std::fs::write(site.0.join("public/big.txt"), &big).expect("write");
        let upload = site.0.join("upload.bin");
        std::fs::write(&upload, vec![1u8; 50_000]).expect("write");
        let server = start(&site, flags);
        let base = format!("http://{}", server.addr);
        let out = Command::new("curl")
            .args([
                "-sS",
                "--compressed",
                "-D",
                "-",
                &format!("{base}/static/big.txt"),
            ])
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.to_ascii_lowercase().contains("content-encoding:"),
            "{flags:?}: {text}"
        );
        assert!(text.ends_with(&big), "{flags:?}: decoded by curl");
        let out = Command::new("curl")
            .args(["-sS", "-F", "title=holiday", "-F"])
            .arg(format!("photo=@{}", upload.display()))
            .arg(format!("{base}/api/upload"))
            .output()
            .expect("curl");
        let got: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(
            got,
            json!([
                {"name": "title", "file_name": null, "bytes": 7},
                {"name": "photo", "file_name": "upload.bin", "bytes": 50_000}
            ]),
            "{flags:?}"
        );
    }
}

#[test]
fn layers_on_every_engine() {
    for flags in child::EVERY_CONFIGURATION {
        layers(flags);
    }
}

#[test]
fn api_and_announcements_on_every_engine() {
    for flags in child::EVERY_CONFIGURATION {
        api_and_announcements(flags);
    }
}

#[test]
fn static_files_on_every_engine() {
    for flags in child::EVERY_CONFIGURATION {
        static_files(flags);
    }
}

#[test]
fn sigterm_and_sigint_exit_gracefully_within_a_second() {
    for flags in child::EVERY_CONFIGURATION {
        graceful_exit(Signal::TERM, flags);
        graceful_exit(Signal::INT, flags);
    }
}
