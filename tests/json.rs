//! JSON bodies over real sockets on every engine configuration (feature `json`): a value in and
//! out, with Content-Length and chunked; 415 for a Content-Type that is not JSON, 400 for
//! malformed or truncated JSON, 422 for JSON of the wrong shape, 413 over the body limit, 500
//! for a value that does not serialize; and the connection kept after each refusal whose
//! framing is intact.
mod support;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use support::{Client, Config, Engine, Raw, start, start_with};
use twinhttp::{Limits, Response, Router};

#[derive(Deserialize)]
struct NewItem {
    name: String,
    count: u32,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Item {
    id: u64,
    name: String,
    count: u32,
    tags: Vec<String>,
}

fn app() -> Router {
    Router::new()
        .post("/items", |req| {
            let new: NewItem = match req.read_json() {
                Ok(v) => v,
                Err(e) => return e.into(),
            };
            let item = Item {
                id: 7,
                name: new.name,
                count: new.count,
                tags: new.tags,
            };
            Response::json(&item).with_status(201)
        })
        .get("/items/7", |_| {
            Response::json(&Item {
                id: 7,
                name: "ünïcode \"quoted\"".into(),
                count: 1,
                tags: vec![],
            })
        })
        // JSON object keys are strings: a map keyed by pairs does not serialize.
        .get("/broken", |_| {
            Response::json(&BTreeMap::from([((1, 2), 3)]))
        })
}

fn post(c: &mut Client, content_type: &str, body: &str) -> Raw {
    c.roundtrip(
        format!(
            "POST /items HTTP/1.1\r\nHost: t\r\n{content_type}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}

const JSON: &str = "Content-Type: application/json\r\n";

fn item(r: &Raw) -> Item {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

fn json_in_and_out(engine: Engine) {
    let srv = start(engine, app());
    let mut c = Client::new(srv.addr);
    let r = post(&mut c, JSON, r#"{"name":"bolt","count":3,"tags":["m4"]}"#);
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        item(&r),
        Item {
            id: 7,
            name: "bolt".into(),
            count: 3,
            tags: vec!["m4".into()]
        }
    );
    // Parameters and a +json subtype, on the same connection.
    let r = post(
        &mut c,
        "Content-Type: Application/JSON; charset=utf-8\r\n",
        r#"{"name":"nut","count":0}"#,
    );
    assert_eq!((r.status, item(&r).name.as_str()), (201, "nut"));
    let r = post(
        &mut c,
        "Content-Type: application/merge-patch+json\r\n",
        r#"{"name":"x","count":1}"#,
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let r = c.request("GET /items/7", "");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        r#"{"id":7,"name":"ünïcode \"quoted\"","count":1,"tags":[]}"#
    );
    assert_eq!(
        r.header("content-length"),
        Some(r.body.len().to_string().as_str())
    );
}

fn chunked_json_bodies(engine: Engine) {
    let srv = start(engine, app());
    let mut c = Client::new(srv.addr);
    // The value split across chunks, mid-token.
    let r = c.roundtrip(
        b"POST /items HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\n{\"nam\r\n9\r\ne\":\"chunk\r\nC\r\ned\",\"count\":\r\n2\r\n42\r\n1\r\n}\r\n0\r\n\r\n",
    );
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!((item(&r).name.as_str(), item(&r).count), ("chunked", 42));
    // Chunked and truncated JSON: a well-framed body that ends mid-value is a 400, and the
    // connection goes on.
    let r = c.roundtrip(
        b"POST /items HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
          6\r\n{\"name\r\n0\r\n\r\n",
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(!r.closes());
    let r = c.request("GET /items/7", "");
    assert_eq!(r.status, 200);
}

fn refusals_keep_the_connection(engine: Engine) {
    let srv = start(engine, app());
    let mut c = Client::new(srv.addr);
    let body = r#"{"name":"bolt","count":3}"#;
    let cases: &[(&str, &str, u16, &str)] = &[
        // No Content-Type, or one that is not JSON: 415, the body left unread (and drained).
        (
            "",
            body,
            415,
            "the request's Content-Type is not application/json",
        ),
        (
            "Content-Type: text/plain\r\n",
            body,
            415,
            "the request's Content-Type is not application/json",
        ),
        (
            "Content-Type: application/x-www-form-urlencoded\r\n",
            "name=bolt&count=3",
            415,
            "the request's Content-Type is not application/json",
        ),
        // Malformed and truncated: 400.
        (JSON, r#"{"name":"bolt",}"#, 400, "malformed JSON: "),
        (JSON, r#"{"name":"bolt","count":3"#, 400, "malformed JSON: "),
        (JSON, "", 400, "malformed JSON: "),
        (
            JSON,
            r#"{"name":"a","count":1} trailing"#,
            400,
            "malformed JSON: ",
        ),
        // Valid JSON of the wrong shape: 422.
        (
            JSON,
            r#"{"name":"bolt","count":"3"}"#,
            422,
            "JSON of the wrong shape: invalid type: string \"3\", expected u32",
        ),
        (
            JSON,
            r#"{"name":"bolt"}"#,
            422,
            "JSON of the wrong shape: missing field `count`",
        ),
        (
            JSON,
            r#"{"name":"bolt","count":-1}"#,
            422,
            "JSON of the wrong shape: invalid value",
        ),
        (JSON, "[1]", 422, "JSON of the wrong shape: "),
    ];
    for (content_type, body, status, text) in cases {
        let r = post(&mut c, content_type, body);
        assert_eq!(r.status, *status, "{content_type}{body}: {}", r.text());
        assert!(r.text().starts_with(text), "{body}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
        assert_eq!(
            r.header("accept"),
            (*status == 415).then_some("application/json")
        );
        assert!(!r.closes(), "{body}");
        // The same connection still serves.
        let ok = post(&mut c, JSON, r#"{"name":"next","count":1}"#);
        assert_eq!((ok.status, item(&ok).name.as_str()), (201, "next"));
    }
}

fn over_the_body_limit_is_413(engine: Engine) {
    let mut limits = Limits::default();
    limits.max_body_bytes = 64;
    let cfg = Config {
        limits,
        ..Config::default()
    };
    let srv = start_with(engine, cfg, app());
    let big = format!(r#"{{"name":"{}","count":1}}"#, "x".repeat(100));
    // Declared too large: refused from the head, whatever the handler would do.
    let mut c = Client::new(srv.addr);
    let r = post(&mut c, JSON, &big);
    assert_eq!(r.status, 413);
    assert!(r.closes());
    // Chunked: found too large as it arrives, while the handler reads it.
    let mut c = Client::new(srv.addr);
    let r = c.roundtrip(
        format!(
            "POST /items HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:X}\r\n{big}\r\n0\r\n\r\n",
            big.len()
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 413);
    assert!(r.closes());
    // Within the limit on the same server: accepted.
    let mut c = Client::new(srv.addr);
    let r = post(&mut c, JSON, r#"{"name":"small","count":1}"#);
    assert_eq!(r.status, 201);
}

fn a_value_that_does_not_serialize_is_500(engine: Engine) {
    let srv = start(engine, app());
    let mut c = Client::new(srv.addr);
    let r = c.request("GET /broken", "");
    assert_eq!(r.status, 500);
    assert!(r.body.is_empty());
    // A handler's 500 is an answer like any other: the connection goes on.
    assert!(!r.closes());
    assert_eq!(c.request("GET /items/7", "").status, 200);
}

engine_tests!(
    json_in_and_out,
    chunked_json_bodies,
    refusals_keep_the_connection,
    over_the_body_limit_is_413,
    a_value_that_does_not_serialize_is_500,
);
