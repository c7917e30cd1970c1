//! What a handler reads from the request, over real sockets on every engine configuration: the
//! query as decoded pairs (`+`, `%20`, repeated names), the path percent-decoded (a malformed
//! escape or bytes that are not UTF-8 answered 400 by the handler, never a panic), and cookies
//! from every `Cookie` field.
mod support;

use support::{Client, Engine, start};
use twinhttp::{Request, Response};

fn app(req: &mut Request<'_>) -> Response {
    match req.path() {
        "/query" => {
            let pairs: Vec<String> = req.query_pairs().map(|(k, v)| format!("{k}={v}")).collect();
            let first = req.query_param("a").unwrap_or_default();
            Response::text(format!("{} | a={first}", pairs.join("&")))
        }
        "/cookies" => {
            let all: Vec<String> = req.cookies().map(|(k, v)| format!("{k}={v}")).collect();
            let session = req.cookie("session").unwrap_or("-");
            Response::text(format!("{} | session={session}", all.join(";")))
        }
        _ => match req.path_decoded() {
            Ok(path) => Response::text(format!("path {path}")),
            Err(e) => Response::new(e.status().unwrap_or(400)),
        },
    }
}

fn query_pairs_are_decoded(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let cases: &[(&str, &str)] = &[
        ("/query", " | a="),
        ("/query?a=1+2&b=%20x%20&a=3", "a=1 2&b= x &a=3 | a=1 2"),
        (
            "/query?q=caf%C3%A9&flag&&empty=",
            "q=café&flag=&empty= | a=",
        ),
        ("/query?k%2By=1%2B1%3D2", "k+y=1+1=2 | a="),
        // Lenient as browsers: a stray % stays, bytes that are not UTF-8 become U+FFFD.
        (
            "/query?a=100%&b=%zz&c=%FF",
            "a=100%&b=%zz&c=\u{FFFD} | a=100%",
        ),
    ];
    for (target, want) in cases {
        let r = c.request(&format!("GET {target}"), "");
        assert_eq!((r.status, r.text().as_str()), (200, *want), "{target}");
    }
}

fn the_path_is_percent_decoded(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let cases: &[(&str, u16, &str)] = &[
        ("/plain", 200, "path /plain"),
        ("/caf%C3%A9/a%20b", 200, "path /café/a b"),
        ("/a+b", 200, "path /a+b"),
        // Documented: %2F decodes to '/' (split path() first to tell them apart).
        ("/a%2Fb", 200, "path /a/b"),
        ("/x?q=%zz", 200, "path /x"),
        ("http://example.com/abs%21", 200, "path /abs!"),
        ("/bad%zz", 400, ""),
        ("/bad%", 400, ""),
        ("/bad%4", 400, ""),
        ("/bad%FF", 400, ""),
        ("/bad%C3%28", 400, ""),
    ];
    for (target, status, body) in cases {
        let r = c.request(&format!("GET {target}"), "");
        assert_eq!((r.status, r.text().as_str()), (*status, *body), "{target}");
        assert!(!r.closes(), "{target}: the connection stays open");
    }
}

fn cookies_from_every_cookie_field(engine: Engine) {
    let srv = start(engine, app);
    let mut c = Client::new(srv.addr);
    let cases: &[(&str, &str)] = &[
        ("", " | session=-"),
        ("Cookie: session=abc\r\n", "session=abc | session=abc"),
        (
            "Cookie: theme=dark;  session=s1 ;lang=\"en\"\r\nX-Other: 1\r\ncookie: session=s2; a=b=c\r\n",
            "theme=dark;session=s1;lang=en;session=s2;a=b=c | session=s1",
        ),
        ("Cookie: novalue; =nameless; ok=1\r\n", "ok=1 | session=-"),
        ("Cookie: enc=a%20b\r\n", "enc=a%20b | session=-"),
    ];
    for (fields, want) in cases {
        let r = c.request("GET /cookies", fields);
        assert_eq!((r.status, r.text().as_str()), (200, *want), "{fields:?}");
    }
}

engine_tests!(
    query_pairs_are_decoded,
    the_path_is_percent_decoded,
    cookies_from_every_cookie_field,
);
