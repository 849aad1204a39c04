//! VCL end to end: real origins, the real proxy running a VCL file.

mod common;

use common::vcl::{start_vcl, start_vcl_with, with_origins};
use common::{Origin, Reply, Resp, Shellac, free_port, get, get_with, raw, request};

#[tokio::test]
async fn a_4x_vcl_edits_requests_and_responses_and_caches() {
    let origin = Origin::start(|seen| {
        Reply::ok(&format!("hello {}", seen.path))
            .cc("max-age=60")
            .header(
                "x-saw-foo",
                seen.headers
                    .get("x-foo")
                    .map_or("", |v| v.to_str().unwrap()),
            )
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    set req.http.x-foo = "bar";
    if (req.url ~ "^/nocache") { return (pass); }
}
sub vcl_deliver {
    if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; }
    unset resp.http.x-saw-foo;
    set resp.http.x-restarts = req.restarts;
}
"#;
    let shellac = start_vcl("basic", vcl, &[origin.addr]).await;
    let r = get(shellac.addr, "/a").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello /a");
    assert_eq!(r.header("x-cache"), Some("MISS"));
    assert_eq!(r.header("x-saw-foo"), None);
    assert_eq!(r.header("x-restarts"), Some("0"));
    assert_eq!(origin.last().headers.get("x-foo").unwrap(), "bar");
    let r = get(shellac.addr, "/a").await;
    assert_eq!(r.header("x-cache"), Some("HIT"), "{:?}", r.headers);
    assert_eq!(origin.count(), 1);
    get(shellac.addr, "/nocache").await;
    get(shellac.addr, "/nocache").await;
    assert_eq!(origin.count_path("/nocache"), 2);
    // The built-in VCL passes requests with cookies.
    get_with(shellac.addr, "/c", &[("cookie", "a=1")]).await;
    get_with(shellac.addr, "/c", &[("cookie", "a=1")]).await;
    assert_eq!(origin.count_path("/c"), 2);
    // And POST.
    request(shellac.addr, "POST", "/a", &[], b"x").await;
    assert_eq!(origin.count_path("/a"), 2);
    shellac.stop().await;
}

/// Varnish 2.0-era operators: two backends with probes behind a random director, and a
/// failed response (any status but 200/302) restarted on the other backend.
#[tokio::test]
async fn a_21_vcl_restarts_a_failed_response_on_the_next_backend() {
    let bad = Origin::start(|_| Reply::ok("broken").status(503)).await;
    let good = Origin::start(|_| Reply::ok("good").cc("max-age=60")).await;
    let vcl = r#"
backend bad { ${origin0} }
backend good { ${origin1} }
director pool round-robin {
    { .backend = bad; }
    { .backend = good; }
}
sub vcl_recv {
    if (req.restarts == 0) {
        set req.backend = bad;
    } else {
        set req.backend = pool;
    }
    set req.http.X-Try = req.restarts;
    lookup;
}
sub vcl_fetch {
    if (beresp.status != 200 && beresp.status != 302) {
        restart;
    }
    set beresp.http.X-Backend = beresp.backend.name;
}
sub vcl_deliver {
    set resp.http.X-Restarts = req.restarts;
}
"#;
    let shellac = start_vcl("restarts", vcl, &[bad.addr, good.addr]).await;
    let r = get(shellac.addr, "/page").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "good");
    assert!(bad.count() >= 1);
    assert_eq!(r.header("x-backend"), Some("good"));
    let restarts: u32 = r.header("x-restarts").unwrap().parse().unwrap();
    assert!((1..=4).contains(&restarts), "{restarts}");
    // The second request is a hit: the good answer was stored.
    let r = get(shellac.addr, "/page").await;
    assert_eq!(r.text(), "good");
    assert_eq!(good.count_path("/page"), 1);
    shellac.stop().await;
}

/// `error` / `synth` answers with the VCL's own page; the built-in page otherwise.
#[tokio::test]
async fn synthetic_responses_in_both_dialects() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let v4 = r#"vcl 4.0;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url == "/teapot") { return (synth(418, "I am a teapot")); }
    if (req.url == "/plain") { return (synth(404)); }
}
sub vcl_synth {
    if (resp.status == 418) {
        set resp.http.Content-Type = "text/plain";
        synthetic("short and stout " + req.url);
        return (deliver);
    }
}
"#;
    let shellac = start_vcl("synth4", v4, &[origin.addr]).await;
    let r = get(shellac.addr, "/teapot").await;
    assert_eq!(r.status, 418);
    assert_eq!(r.text(), "short and stout /teapot");
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let r = get(shellac.addr, "/plain").await;
    assert_eq!(r.status, 404);
    assert!(
        r.text().contains("<h1>Error 404 Not Found</h1>"),
        "{}",
        r.text()
    );
    assert_eq!(origin.count(), 0);
    shellac.stop().await;

    let v2 = r#"
backend b { ${origin0} }
acl office { "10.0.0.0"/8; }
sub vcl_recv {
    if (req.url ~ "^/admin" && !client.ip ~ office) {
        error 403 "Forbidden";
    }
}
sub vcl_error {
    set obj.http.Content-Type = "text/plain";
    synthetic "Go away (" obj.status ")";
    deliver;
}
"#;
    let shellac = start_vcl("synth2", v2, &[origin.addr]).await;
    let r = get(shellac.addr, "/admin/x").await;
    assert_eq!(r.status, 403);
    assert_eq!(r.text(), "Go away (403)");
    assert_eq!(origin.count(), 0);
    shellac.stop().await;
}

/// Shellac on a VCL 4.1 with backend `b` (an origin answering `x`, returned) and backend
/// `gone` (a port nothing listens on: every connection refused), then `subs`.
async fn start_with_gone(name: &str, subs: &str) -> (Origin, Shellac) {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let gone = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let vcl =
        format!("vcl 4.1;\nbackend b {{ ${{origin0}} }}\nbackend gone {{ ${{origin1}} }}\n{subs}");
    let shellac = start_vcl(name, &vcl, &[origin.addr, gone]).await;
    (origin, shellac)
}

/// Regression (Varnish's c00066): a response made by vcl_synth or vcl_backend_error has its
/// `Date` before the subroutine runs, as Varnish sets it (VCL reads it, and the response's
/// records carry it), not only when the connection writes the response.
#[tokio::test]
async fn varnish_c00066_synth_and_backend_error_have_date_before_vcl_runs() {
    let subs = r#"
sub vcl_recv {
    if (req.url == "/synth") { return (synth(200, "Synth test")); }
    if (req.url == "/error") { set req.backend_hint = gone; return (pass); }
}
sub vcl_synth { set resp.http.x-date = resp.http.date; }
sub vcl_backend_error { set beresp.http.x-date = beresp.http.date; }
"#;
    let (_origin, shellac) = start_with_gone("c00066", subs).await;
    for (path, status) in [("/synth", 200), ("/error", 503)] {
        let r = get(shellac.addr, path).await;
        assert_eq!(r.status, status, "{path}");
        let date = r.header("x-date").unwrap_or_default().to_string();
        assert!(httpdate::parse_http_date(&date).is_ok(), "{path}: {date:?}");
    }
    shellac.stop().await;
}

/// Regression (Varnish's v00062, b00038, c00061): `return (error(STATUS, REASON))` of
/// vcl_backend_fetch / vcl_backend_response goes to vcl_backend_error with that status and
/// reason (not to vcl_synth), and is not a failed fetch; a backend that refuses the connection
/// is one (`fetch_failed`, once per retry of vcl_backend_error).
#[tokio::test]
async fn varnish_v00062_return_error_runs_vcl_backend_error_and_fetch_failed_counts() {
    let subs = r#"
sub vcl_recv {
    if (req.url == "/gone") { set req.backend_hint = gone; }
    return (pass);
}
sub vcl_backend_fetch {
    if (bereq.url == "/fetch") { return (error(403, "No cookies")); }
}
sub vcl_backend_response {
    if (bereq.url == "/response") { return (error(410)); }
}
sub vcl_backend_error {
    set beresp.http.error = "visited";
    if (bereq.url == "/gone" && bereq.retries < 2) { return (retry); }
}
"#;
    let (_origin, shellac) = start_with_gone("v00062", subs).await;
    for (path, status, reason) in [
        ("/fetch", 403, "No cookies"),
        ("/response", 410, "Gone"),
        ("/gone", 503, "Backend fetch failed"),
    ] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let text = raw(shellac.addr, req.as_bytes()).await;
        let head = text.to_ascii_lowercase();
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status} {reason}\r\n")),
            "{path}: {text}"
        );
        assert!(head.contains("\r\nerror: visited\r\n"), "{path}: {text}");
    }
    assert_eq!(
        shellac.stat("fetch_failed").await,
        3,
        "the first try and two retries"
    );
    shellac.stop().await;
}

/// Regression (Varnish's c00091, cache_fetch.c): a `return (retry)` of vcl_backend_response
/// past `max_retries` (4) goes to vcl_backend_error on a `503 Backend fetch failed` (which
/// may change it), not to vcl_synth; `bereq.retries` there counts the refused retry too.
#[tokio::test]
async fn too_many_retries_from_vcl_backend_response_runs_vcl_backend_error() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { return (pass); }
sub vcl_backend_response { return (retry); }
sub vcl_backend_error {
    set beresp.http.error = "visited " + beresp.status + " " + bereq.retries;
    if (bereq.url == "/teapot") { set beresp.status = 418; }
}
sub vcl_synth { set resp.http.synth = "visited"; }
"#;
    let shellac = start_vcl("too-many-retries", vcl, &[origin.addr]).await;
    for (path, status, reason) in [
        ("/", 503, "503 Backend fetch failed"),
        ("/teapot", 418, "418 "),
    ] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let text = raw(shellac.addr, req.as_bytes()).await;
        let head = text.to_ascii_lowercase();
        assert!(
            text.starts_with(&format!("HTTP/1.1 {reason}")),
            "{path} ({status}): {text}"
        );
        assert!(
            head.contains("\r\nerror: visited 503 5\r\n"),
            "{path}: {text}"
        );
        assert!(
            !head.contains("\r\nsynth:"),
            "{path}: not vcl_synth: {text}"
        );
        assert_eq!(
            origin.count_path(path),
            5,
            "{path}: the first fetch and 4 retries"
        );
    }
    assert_eq!(shellac.stat("synth_resp").await, 0);
    shellac.stop().await;
}

/// Regression (Varnish's v00050): VCL keeps a status above 999 (up to 65535: the digits
/// above the last three are VCL's own signalling) and the wire gets its last three digits;
/// setting a status resets the reason to that status's own (http_SetStatus); a status that
/// is negative, above 65535 or whose last three digits are below 100 fails the subroutine.
#[tokio::test]
async fn varnish_v00050_wide_statuses_stay_in_vcl_and_go_out_modulo_1000() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url == "/synth") { return (synth(22301, "Hamburg")); }
    return (pass);
}
sub vcl_backend_response {
    set beresp.status = beresp.status + 1000;
    set beresp.http.wide = beresp.status;
    set beresp.http.reason = beresp.reason;
}
sub vcl_deliver {
    if (req.url == "/deliver") {
        set resp.status = 40404;
        set resp.http.wide = resp.status;
    }
    if (req.http.small) { set resp.status = 99; }
    if (req.http.huge) { set resp.status = 65536; }
    if (req.http.negative) { set resp.status = -200; }
}
sub vcl_synth {
    if (resp.reason == "VCL failed") { return (deliver); }
    set resp.http.synth = resp.status + " " + resp.reason;
    set resp.status = 22302;
    set resp.reason = "Wrong Postcode";
    set resp.http.residual = resp.status % 10000;
}
"#;
    let shellac = start_vcl("v00050", vcl, &[origin.addr]).await;
    // Path, request fields, the status line sent, fields the response must carry.
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str, &'a [&'a str]);
    let cases: [Case; 6] = [
        ("/a", &[], "200 OK", &["wide: 1200", "reason: OK"]),
        ("/deliver", &[], "404 Not Found", &["wide: 40404"]),
        (
            "/synth",
            &[],
            "302 Wrong Postcode",
            &["synth: 22301 Hamburg", "residual: 2302"],
        ),
        ("/a", &[("small", "1")], "503 VCL failed", &[]),
        ("/a", &[("huge", "1")], "503 VCL failed", &[]),
        ("/a", &[("negative", "1")], "503 VCL failed", &[]),
    ];
    for (path, fields, line, want) in cases {
        let extra: String = fields
            .iter()
            .map(|(k, v)| format!("{k}: {v}\r\n"))
            .collect();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n");
        let text = raw(shellac.addr, req.as_bytes()).await;
        let head = text.to_ascii_lowercase();
        assert!(
            text.starts_with(&format!("HTTP/1.1 {line}\r\n")),
            "{path} {fields:?}: {text}"
        );
        for w in want {
            let w = w.to_ascii_lowercase();
            assert!(
                head.contains(&format!("\r\n{w}\r\n")),
                "{path}: {w}: {text}"
            );
        }
    }
    shellac.stop().await;
}

/// Regression (trunk v00050): under VCL a backend's 998 is taken (Varnish takes any three
/// digits; without VCL it stays a 502: tests/hardening/responses.rs); a `return (retry)`
/// runs vcl_backend_fetch again and goes to the `bereq.backend` vcl_backend_response set;
/// vcl_backend_error's object with a `beresp.ttl` is stored, with its wide status and its
/// reason, which its hits send and whose VCL sees them (`obj.status` 1200, `resp.status`
/// 1200); and a request hashing another URL's inputs finds that URL's object.
#[tokio::test]
async fn varnish_v00050_a_998_retried_into_a_stored_backend_error_object() {
    let origin = Origin::start(|seen| match seen.path.as_str() {
        "/c" => Reply::ok("").status(998),
        _ => Reply::ok("a").cc("max-age=60"),
    })
    .await;
    let refused = free_port();
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
backend sick { .host = "127.0.0.1"; .port = "REFUSED"; }
sub vcl_backend_fetch {
    if (bereq.retries == 0) { set bereq.backend = b; }
}
sub vcl_backend_response {
    set beresp.status = beresp.status + 1000;
    if (beresp.status == 1998) {
        set bereq.backend = sick;
        return (retry);
    }
}
sub vcl_backend_error {
    if (beresp.status != 503) { return (abandon); }
    set beresp.status = 1200;
    set beresp.reason = "OK from v_b_e";
    set beresp.ttl = 1m;
}
sub vcl_hash {
    if (req.url == "/alias") { hash_data("/c"); } else { hash_data(req.url); }
    return (lookup);
}
sub vcl_hit {
    set req.http.obj = obj.status + " " + obj.reason;
}
sub vcl_deliver {
    set resp.http.wide = resp.status;
    if (req.http.obj) { set resp.http.obj = req.http.obj; }
}
"#
    .replace("REFUSED", &refused.to_string());
    let shellac = start_vcl("v00050-store", &vcl, &[origin.addr]).await;
    let ask = |path: &str| {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let addr = shellac.addr;
        async move { raw(addr, req.as_bytes()).await.to_ascii_lowercase() }
    };
    // The miss: 998, retried on the refused backend, vcl_backend_error's object stored.
    let miss = ask("/c").await;
    assert!(miss.starts_with("http/1.1 200 ok from v_b_e\r\n"), "{miss}");
    assert!(miss.contains("\r\nwide: 1200\r\n"), "{miss}");
    assert!(!miss.contains("shellac-status"), "{miss}");
    assert_eq!(shellac.stat("fetch_failed").await, 1);
    // Its hits: the stored status line, the wide status in VCL, no second fetch.
    for path in ["/c", "/alias"] {
        let hit = ask(path).await;
        assert!(
            hit.starts_with("http/1.1 200 ok from v_b_e\r\n"),
            "{path}: {hit}"
        );
        assert!(hit.contains("\r\nwide: 1200\r\n"), "{path}: {hit}");
        assert!(
            hit.contains("\r\nobj: 1200 ok from v_b_e\r\n"),
            "{path}: {hit}"
        );
        assert!(!hit.contains("shellac-status"), "{path}: {hit}");
    }
    assert_eq!(origin.count_path("/c"), 1);
    assert_eq!(origin.count_path("/alias"), 0);
    assert_eq!(shellac.stat("cache_hit").await, 2);
    assert_eq!(shellac.stat("fetch_failed").await, 1);
    // A wide status of a fetched response is stored too: its hit's VCL sees 1200.
    for _ in 0..2 {
        let a = ask("/a").await;
        assert!(a.starts_with("http/1.1 200 ok\r\n"), "{a}");
        assert!(a.contains("\r\nwide: 1200\r\n"), "{a}");
    }
    assert_eq!(origin.count_path("/a"), 1);
    shellac.stop().await;
}

/// vcl_backend_error's object made after a backend answered is stored too, as Varnish
/// inserts it: after `return (error(...))` of vcl_backend_response and after a retry past
/// `max_retries`. The second request of each is a hit on it, the origin asked no more; a pass
/// never stores it.
#[tokio::test]
async fn a_backend_error_object_after_return_error_or_too_many_retries_is_stored() {
    let origin = Origin::start(|_| Reply::ok("from the origin")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url == "/pass") { return (pass); }
}
sub vcl_backend_response {
    if (bereq.url == "/retry") { return (retry); }
    return (error(418, "Made Here"));
}
sub vcl_backend_error {
    set beresp.ttl = 1m;
    set beresp.http.made = beresp.status + " " + beresp.reason;
    synthetic("made for " + bereq.url);
    return (deliver);
}
"#;
    let shellac = start_vcl("beresp-error-stored", vcl, &[origin.addr]).await;
    let ask = |path: &str| {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let addr = shellac.addr;
        async move { raw(addr, req.as_bytes()).await }
    };
    let cases = [
        (
            "/error",
            "HTTP/1.1 418 Made Here\r\n",
            "made: 418 Made Here",
            1,
        ),
        // max_retries 4: five fetches, then vcl_backend_error on its 503.
        (
            "/retry",
            "HTTP/1.1 503 Backend fetch failed\r\n",
            "made: 503 Backend fetch failed",
            5,
        ),
    ];
    for (path, line, made, fetches) in cases {
        for round in 0..2 {
            let text = ask(path).await;
            assert!(text.starts_with(line), "{path} {round}: {text}");
            assert!(text.contains(&format!("\r\n{made}\r\n")), "{path}: {text}");
            assert!(
                text.ends_with(&format!("made for {path}")),
                "{path}: {text}"
            );
            assert!(!text.contains("from the origin"), "{path}: {text}");
        }
        assert_eq!(origin.count_path(path), fetches, "{path}");
    }
    assert_eq!(shellac.stat("cache_hit").await, 2);
    // A pass's object is delivered, never stored.
    for _ in 0..2 {
        let text = ask("/pass").await;
        assert!(text.starts_with("HTTP/1.1 418 Made Here\r\n"), "{text}");
    }
    assert_eq!(origin.count_path("/pass"), 2);
    assert_eq!(shellac.stat("cache_hit").await, 2);
    shellac.stop().await;
}

/// Shellac's own stored fields (`shellac-status`, `shellac-identity`, `shellac-esi`,
/// `shellac-source`) are not VCL's: `obj.http.*`, `beresp.http.*` and `resp.http.*` read
/// none of them, setting one fails the subroutine (no VCL forges an object's status line),
/// and an `unset` leaves the stored one in place.
#[tokio::test]
async fn vcl_neither_sees_nor_forges_shellacs_own_stored_fields() {
    let origin = Origin::start(|_| Reply::ok("body").cc("max-age=60")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    set beresp.reason = "Own";
    unset beresp.http.shellac-status;
    if (bereq.http.forge) { set beresp.http.shellac-status = "200 Forged"; }
}
sub vcl_hit {
    set req.http.obj-status = "[" + obj.http.shellac-status + "]";
}
sub vcl_deliver {
    set resp.http.obj-status = req.http.obj-status;
    set resp.http.resp-status = "[" + resp.http.shellac-status + "]";
    if (req.http.forge-resp) { set resp.http.shellac-identity = "gzip"; }
}
"#;
    let shellac = start_vcl("own-fields-hidden", vcl, &[origin.addr]).await;
    let ask = |path: &'static str, extra: &'static str| {
        let addr = shellac.addr;
        async move {
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n");
            raw(addr, req.as_bytes()).await
        }
    };
    let miss = ask("/a", "").await;
    assert!(miss.starts_with("HTTP/1.1 200 Own\r\n"), "{miss}");
    // The hit: the stored reason is sent (the unset left the field), VCL read none of it.
    let hit = ask("/a", "").await;
    assert!(hit.starts_with("HTTP/1.1 200 Own\r\n"), "{hit}");
    assert!(hit.contains("\r\nobj-status: []\r\n"), "{hit}");
    assert!(hit.contains("\r\nresp-status: []\r\n"), "{hit}");
    assert!(
        !hit.to_ascii_lowercase().contains("shellac-status"),
        "{hit}"
    );
    assert_eq!(shellac.stat("cache_hit").await, 1);
    // Setting one fails the subroutine: nothing forged is stored or sent.
    let forged = ask("/b", "forge: 1\r\n").await;
    assert!(forged.starts_with("HTTP/1.1 503 "), "{forged}");
    assert!(!forged.contains("Forged"), "{forged}");
    let forged = ask("/a", "forge-resp: 1\r\n").await;
    assert!(forged.starts_with("HTTP/1.1 503 "), "{forged}");
    assert!(
        !forged.to_ascii_lowercase().contains("shellac-identity"),
        "{forged}"
    );
    shellac.stop().await;
}

/// A backend's own reason phrase (`200 Okay`) is `beresp.reason` in vcl_backend_response and
/// is stored with the object: its hit sends it (Varnish keeps `obj.reason`) and `obj.reason`
/// reads it; a canonical one stores nothing of its own.
#[tokio::test]
async fn a_backends_own_reason_phrase_is_beresp_reason_and_stored() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        // Two fetches at most (/okay and /ok), one connection each or reused: bounded.
        for _ in 0..2 {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                for _ in 0..4 {
                    let Ok(n) = conn.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&seen[..end]).to_string();
                        seen.drain(..end + 4);
                        let line = if head.starts_with("GET /okay") {
                            "200 Okay"
                        } else {
                            "200 OK"
                        };
                        let resp = format!(
                            "HTTP/1.1 {line}\r\nCache-Control: max-age=60\r\nContent-Length: 1\r\n\r\nx"
                        );
                        if conn.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response { set beresp.http.seen = beresp.reason; }
sub vcl_hit { set req.http.obj = obj.reason; }
sub vcl_deliver { if (req.http.obj) { set resp.http.obj = req.http.obj; } }
"#;
    let shellac = start_vcl("backend-reason", vcl, &[addr]).await;
    let ask = |path: &'static str| {
        let addr = shellac.addr;
        async move {
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            raw(addr, req.as_bytes()).await
        }
    };
    let miss = ask("/okay").await;
    assert!(miss.starts_with("HTTP/1.1 200 Okay\r\n"), "{miss}");
    assert!(miss.contains("\r\nseen: Okay\r\n"), "{miss}");
    let hit = ask("/okay").await;
    assert!(hit.starts_with("HTTP/1.1 200 Okay\r\n"), "{hit}");
    assert!(hit.contains("\r\nobj: Okay\r\n"), "{hit}");
    assert!(!hit.contains("shellac-status"), "{hit}");
    ask("/ok").await;
    let hit = ask("/ok").await;
    assert!(hit.starts_with("HTTP/1.1 200 OK\r\n"), "{hit}");
    assert!(hit.contains("\r\nobj: OK\r\n"), "{hit}");
    assert_eq!(shellac.stat("cache_hit").await, 2);
    shellac.stop().await;
    server.abort();
}

/// A revalidated copy keeps the status line it was stored with: vcl_backend_response on the
/// 304 sees the stored wide status and reason (Varnish's beresp is the stored object then),
/// never Shellac's stored field, and the refreshed copy is sent with them.
#[tokio::test]
async fn a_revalidated_copy_keeps_its_wide_status_and_reason() {
    let origin = Origin::start(|seen| {
        if seen.headers.get("if-none-match").is_some() {
            Reply::ok("").status(304).header("etag", "\"v1\"")
        } else {
            Reply::ok("body").header("etag", "\"v1\"")
        }
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    if (!beresp.was_304) {
        set beresp.status = beresp.status + 1000;
        set beresp.reason = "Wide";
    }
    set beresp.http.seen = beresp.status + " " + beresp.reason;
    set beresp.http.leak = beresp.http.shellac-status;
    if (beresp.was_304) {
        set beresp.ttl = 60s;
    } else {
        set beresp.ttl = 1ms;
        set beresp.grace = 0s;
        set beresp.keep = 1m;
    }
}
sub vcl_deliver { set resp.http.wide = resp.status; }
"#;
    let shellac = start_vcl("revalidated-wide", vcl, &[origin.addr]).await;
    let ask = |_: ()| {
        let addr = shellac.addr;
        async move {
            raw(
                addr,
                b"GET /r HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .await
            .to_ascii_lowercase()
        }
    };
    let first = ask(()).await;
    assert!(first.starts_with("http/1.1 200 wide\r\n"), "{first}");
    assert!(first.contains("\r\nseen: 1200 wide\r\n"), "{first}");
    // Stale after 1 ms (kept 1 min): revalidated with the stored ETag, answered 304.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let second = ask(()).await;
    assert!(second.starts_with("http/1.1 200 wide\r\n"), "{second}");
    assert!(second.contains("\r\nseen: 1200 wide\r\n"), "{second}");
    assert!(second.contains("\r\nwide: 1200\r\n"), "{second}");
    assert!(
        second.contains("\r\nleak: \r\n") || !second.contains("\r\nleak:"),
        "{second}"
    );
    assert!(!second.contains("shellac-status"), "{second}");
    assert_eq!(origin.count(), 2);
    assert!(
        origin.last().headers.get("if-none-match").is_some(),
        "the second fetch revalidated"
    );
    shellac.stop().await;
}

/// Regression (trunk s00006): under VCL every delivery of an object carries `Age`, set
/// before vcl_deliver as Varnish sets it — a miss's and a pass's `0` when the origin sent
/// none, a hit's its age.
#[tokio::test]
async fn varnish_s00006_a_miss_and_a_pass_carry_age() {
    let origin = Origin::start(|_| Reply::ok("x").cc("max-age=60")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { if (req.url == "/pass") { return (pass); } }
sub vcl_deliver { set resp.http.seen-age = resp.http.age; }
"#;
    let shellac = start_vcl("s00006", vcl, &[origin.addr]).await;
    for path in ["/", "/", "/pass"] {
        let r = get(shellac.addr, path).await;
        let age = r
            .header("age")
            .unwrap_or_else(|| panic!("{path}: {:?}", r.headers));
        // 0 on the miss and the pass; the hit's is its age (0 unless the machine stalls).
        assert!(age.parse::<u64>().is_ok_and(|a| a < 30), "{path}: {age}");
        assert_eq!(r.header("seen-age"), Some(age), "{path}");
    }
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// Regression (trunk c00137): `param.uncacheable_ttl` reads `cache.hit_for_miss_ttl`, and
/// the built-in VCL's hit-for-miss (`vcl_beresp_hitmiss`) lasts that long, as Varnish 7's
/// builtin.vcl sets `beresp.ttl = param.uncacheable_ttl` (Shellac's had 120 s written in).
#[tokio::test]
async fn varnish_c00137_param_uncacheable_ttl_is_hit_for_miss_ttl() {
    let origin = Origin::start(|_| Reply::ok("x").cc("max-age=0")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { set req.http.seen = param.uncacheable_ttl; }
sub vcl_miss { set req.http.hitmiss = req.is_hitmiss; }
sub vcl_deliver {
    set resp.http.seen = req.http.seen;
    set resp.http.hitmiss = req.http.hitmiss;
}
"#;
    let shellac = start_vcl_with("c00137", vcl, &[origin.addr], |c| {
        c.cache.hit_for_miss_ttl = shellac::config::units::Dur(std::time::Duration::from_secs(7));
    })
    .await;
    let first = get(shellac.addr, "/").await;
    assert_eq!(first.header("seen"), Some("7.000"));
    assert_eq!(first.header("hitmiss"), Some("false"));
    // `max-age=0`: the built-in VCL made it a hit-for-miss for 7 s; the next is a hit-miss.
    let second = get(shellac.addr, "/").await;
    assert_eq!(second.header("hitmiss"), Some("true"));
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// Purging: 4.x `return (purge)` from an ACL, 2.x `set obj.ttl = 0s` in vcl_hit, and
/// `ban()`.
#[tokio::test]
async fn purge_and_ban_from_vcl() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path).cc("max-age=300")).await;
    let v4 = r#"vcl 4.1;
backend b { ${origin0} }
acl purgers { "127.0.0.1"; }
sub vcl_recv {
    if (req.method == "PURGE") {
        if (client.ip !~ purgers) { return (synth(405)); }
        return (purge);
    }
    if (req.method == "BAN") {
        ban("req.url ~ " + req.http.x-ban);
        return (synth(200, "Banned"));
    }
}
"#;
    let shellac = start_vcl("purge4", v4, &[origin.addr]).await;
    get(shellac.addr, "/p").await;
    get(shellac.addr, "/p").await;
    assert_eq!(origin.count_path("/p"), 1);
    let r = request(shellac.addr, "PURGE", "/p", &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    get(shellac.addr, "/p").await;
    assert_eq!(origin.count_path("/p"), 2, "purged");
    get(shellac.addr, "/news/1").await;
    get(shellac.addr, "/news/2").await;
    let r = request(shellac.addr, "BAN", "/", &[("x-ban", "^/news/")], b"").await;
    assert_eq!(r.status, 200);
    get(shellac.addr, "/news/1").await;
    get(shellac.addr, "/p").await;
    assert_eq!(origin.count_path("/news/1"), 2, "banned");
    assert_eq!(origin.count_path("/p"), 2, "not banned");
    shellac.stop().await;

    let v2 = r#"
backend b { ${origin0} }
sub vcl_recv {
    if (req.request == "PURGE") { lookup; }
}
sub vcl_hit {
    if (req.request == "PURGE") {
        set obj.ttl = 0s;
        error 200 "Purged.";
    }
}
sub vcl_miss {
    if (req.request == "PURGE") { error 404 "Not in cache."; }
}
"#;
    let shellac = start_vcl("purge2", v2, &[origin.addr]).await;
    get(shellac.addr, "/q").await;
    let r = request(shellac.addr, "PURGE", "/q", &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    get(shellac.addr, "/q").await;
    assert_eq!(origin.count_path("/q"), 2);
    let r = request(shellac.addr, "PURGE", "/never", &[], b"").await;
    assert_eq!(r.status, 404);
    shellac.stop().await;
}

/// Drupal-style cookies: analytics cookies stripped, pages with a session cookie passed,
/// the rest cached; and a TTL override for static files whatever the origin says.
#[tokio::test]
async fn drupal_style_cookie_handling() {
    let origin = Origin::start(|seen| {
        let reply = Reply::ok(&format!(
            "{} cookie={}",
            seen.path,
            seen.headers
                .get("cookie")
                .map_or("-", |v| v.to_str().unwrap())
        ));
        if seen.path.ends_with(".css") {
            reply.header("expires", "Thu, 01 Jan 1970 00:00:00 GMT")
        } else {
            reply.cc("max-age=60")
        }
    })
    .await;
    let vcl = r#"vcl 4.1;
import std;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url ~ "\.(css|js|png)$") {
        unset req.http.Cookie;
        return (hash);
    }
    if (req.http.Cookie) {
        set req.http.Cookie = ";" + req.http.Cookie;
        set req.http.Cookie = regsuball(req.http.Cookie, "; +", ";");
        set req.http.Cookie = regsuball(req.http.Cookie, ";(SESS[a-z0-9]+|NO_CACHE)=", "; \1=");
        set req.http.Cookie = regsuball(req.http.Cookie, ";[^ ][^;]*", "");
        set req.http.Cookie = regsuball(req.http.Cookie, "^[; ]+|[; ]+$", "");
        if (req.http.Cookie == "") {
            unset req.http.Cookie;
        } else {
            return (pass);
        }
    }
}
sub vcl_backend_response {
    if (bereq.url ~ "\.(css|js|png)$") {
        set beresp.ttl = 1h;
        set beresp.uncacheable = false;
        return (deliver);
    }
}
"#;
    let shellac = start_vcl("drupal", vcl, &[origin.addr]).await;
    let r = get_with(
        shellac.addr,
        "/node/1",
        &[("cookie", "_ga=GA1.2; has_js=1")],
    )
    .await;
    assert_eq!(r.text(), "/node/1 cookie=-", "analytics cookies stripped");
    get_with(shellac.addr, "/node/1", &[("cookie", "_ga=other")]).await;
    assert_eq!(origin.count_path("/node/1"), 1, "cached without cookies");
    let r = get_with(
        shellac.addr,
        "/node/1",
        &[("cookie", "_ga=x; SESSabc123=s1")],
    )
    .await;
    assert_eq!(
        r.text(),
        "/node/1 cookie=SESSabc123=s1",
        "session cookie kept: passed"
    );
    assert_eq!(origin.count_path("/node/1"), 2);
    get(shellac.addr, "/site.css").await;
    get_with(shellac.addr, "/site.css", &[("cookie", "SESSabc=1")]).await;
    assert_eq!(
        origin.count_path("/site.css"),
        1,
        "1h whatever the origin said"
    );
    shellac.stop().await;
}

/// `[vcl] file` in the TOML: the access log says which subroutine returned what, a reload
/// recompiles the file, and a VCL with errors keeps the running one.
#[tokio::test]
async fn config_file_log_and_reload() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path).cc("max-age=60")).await;
    let dir = common::temp_dir("vcl-reload");
    let vcl = |header: &str| {
        let text = format!(
            "vcl 4.1;\nbackend b {{ ${{origin0}} }}\n\
             sub vcl_deliver {{ set resp.http.x-version = \"{header}\"; }}\n"
        );
        with_origins(&text, &[origin.addr])
    };
    std::fs::write(dir.join("site.vcl"), vcl("one")).unwrap();
    let log = dir.join("access.log");
    let toml = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n[vcl]\nfile = \"site.vcl\"\n\n\
         [log]\naccess_log = \"{}\"\nformat = \"%U %{{vcl}}x\"\n",
        log.display()
    );
    let conf = dir.join("shellac.toml");
    std::fs::write(&conf, toml).unwrap();
    let shellac = Shellac::start_reloadable(&conf).await;
    let r = get(shellac.addr, "/x").await;
    assert_eq!(r.header("x-version"), Some("one"));
    get(shellac.addr, "/x").await;
    let lines = common::wait_lines(&log, 2).await;
    assert_eq!(
        lines[0],
        "/x recv:hash hash:lookup miss:fetch backend_fetch:fetch backend_response:deliver deliver:deliver"
    );
    assert_eq!(
        lines[1],
        "/x recv:hash hash:lookup hit:deliver deliver:deliver"
    );

    // A VCL with an error: the reload is refused with the error, the old program runs on.
    std::fs::write(
        dir.join("site.vcl"),
        "vcl 4.1;\nbackend b { .host = \"h\"; }\nsub vcl_recv { set beresp.ttl = 1s; }\n",
    )
    .unwrap();
    let (status, body) = shellac.reload().await;
    assert_ne!(status, 200);
    let text = body.to_string();
    assert!(
        text.contains("site.vcl:3:16") && text.contains("Not available in subroutine 'vcl_recv'"),
        "{text}"
    );
    assert_eq!(
        get(shellac.addr, "/x").await.header("x-version"),
        Some("one")
    );

    std::fs::write(dir.join("site.vcl"), vcl("two")).unwrap();
    let (status, body) = shellac.reload().await;
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("compiled (VCL 4.1)"), "{body}");
    assert_eq!(
        get(shellac.addr, "/x").await.header("x-version"),
        Some("two")
    );
    shellac.stop().await;
}

/// The binary: `shellac check site.vcl` reports every error; `shellac serve --vcl` runs it.
#[tokio::test]
async fn check_and_serve_a_vcl_file() {
    use common::binary::{BIN, Served};
    let dir = common::temp_dir("vcl-cli");
    let bad = dir.join("bad.vcl");
    std::fs::write(
        &bad,
        "vcl 4.1;\nbackend b { .host = \"127.0.0.1\"; }\nsub vcl_recv {\n  set beresp.ttl = 1s;\n  return (deliver);\n}\nimport geoip2;\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .arg("check")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.vcl:4:3: 'beresp.ttl'"), "{err}");
    assert!(
        err.contains("bad.vcl:5:3: Invalid return \"deliver\""),
        "{err}"
    );
    assert!(
        err.contains("bad.vcl:7:1: not supported: Shellac has no VMOD 'geoip2'"),
        "{err}"
    );
    assert!(err.contains("3 errors"), "{err}");

    // A configuration naming the bad file: `check` reports the VCL's errors too, and the
    // [[backend]] given beside it.
    let conf = dir.join("shellac.toml");
    std::fs::write(
        &conf,
        "[vcl]\nfile = \"bad.vcl\"\n\n[[backend]]\nhost = \"127.0.0.1\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["check", "--file-only"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[[backend]] cannot be given with [vcl] file"),
        "{err}"
    );
    std::fs::write(&conf, "[vcl]\nfile = \"bad.vcl\"\n").unwrap();
    let out = std::process::Command::new(BIN)
        .args(["check", "--file-only"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.vcl:4:3: 'beresp.ttl'"), "{err}");
    assert!(err.contains("3 errors"), "{err}");

    let origin = Origin::start(|_| Reply::ok("from origin").cc("max-age=60")).await;
    let good = dir.join("good.vcl");
    let text =
        "vcl 4.1;\nbackend b { ${origin0} }\nsub vcl_deliver { set resp.http.x-vcl = \"yes\"; }\n";
    std::fs::write(&good, with_origins(text, &[origin.addr])).unwrap();
    let out = std::process::Command::new(BIN)
        .arg("check")
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("VCL 4.1; backends: b → "));
    let served = Served::serve(&[
        "--vcl",
        good.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
    ]);
    let r = get(served.proxy, "/").await;
    assert_eq!(r.text(), "from origin");
    assert_eq!(r.header("x-vcl"), Some("yes"));
    served.stop();
}

/// Fast hits under VCL: taken when the program provably changes nothing about a hit (its
/// vcl_recv only decides), declined when it would (a vcl_deliver, a header set in vcl_recv).
#[tokio::test]
async fn fast_hits_only_when_the_program_leaves_hits_alone() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path).cc("max-age=60")).await;
    let deciding = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url ~ "^/admin" || req.http.Cookie ~ "logged_in") { return (pass); }
    if (req.method == "GET" && req.url ~ "\.css$") { return (hash); }
}
sub vcl_backend_response { set beresp.ttl = 1h; }
"#;
    let shellac = start_vcl("fast", deciding, &[origin.addr]).await;
    let full = get(shellac.addr, "/a.css").await;
    let fast = get(shellac.addr, "/a.css").await;
    assert_eq!(shellac.stat("cache_hit_fast").await, 1);
    let fields = |r: &Resp| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = r
            .headers
            .iter()
            .filter(|(k, _)| !["date", "age", "cache-status", "x-varnish"].contains(&k.as_str()))
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        fields(&full),
        fields(&fast),
        "the same fields as the full path"
    );
    assert_eq!(fast.body, full.body);
    // Each its own X-Varnish: session 1000, request 1001, its fetch 1002; the second
    // connection 1003, its request 1004, a hit on what 1002 fetched.
    assert_eq!(full.header("x-varnish"), Some("1001"));
    assert_eq!(fast.header("x-varnish"), Some("1004 1002"));
    // A request vcl_recv passes is never a fast hit.
    get_with(shellac.addr, "/a.css", &[("cookie", "logged_in=1")]).await;
    assert_eq!(origin.count_path("/a.css"), 2);
    assert_eq!(shellac.stat("cache_hit_fast").await, 1);
    shellac.stop().await;

    // A vcl_deliver that adds fields: fast hits carry them; one that removes a field the
    // object has: every hit takes the full path.
    let adding = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_deliver {
    if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; }
    unset resp.http.X-Powered-By;
    set resp.http.X-Frame-Options = "SAMEORIGIN";
}
"#;
    let shellac = start_vcl("fast-deliver", adding, &[origin.addr]).await;
    let miss = get(shellac.addr, "/b").await;
    assert_eq!(miss.header("x-cache"), Some("MISS"));
    let r = get(shellac.addr, "/b").await;
    assert_eq!(r.header("x-cache"), Some("HIT"));
    assert_eq!(r.header("x-frame-options"), Some("SAMEORIGIN"));
    assert_eq!(
        shellac.stat("cache_hit_fast").await,
        1,
        "added fields ride the fast path"
    );
    shellac.stop().await;
    let removing = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_deliver { unset resp.http.cache-control; }
"#;
    let shellac = start_vcl("fast-unset", removing, &[origin.addr]).await;
    get(shellac.addr, "/c").await;
    let r = get(shellac.addr, "/c").await;
    assert_eq!(r.header("cache-control"), None);
    assert_eq!(shellac.stat("cache_hit").await, 1);
    assert_eq!(
        shellac.stat("cache_hit_fast").await,
        0,
        "a removal takes the full path"
    );
    shellac.stop().await;
}

/// A VCL node running `vcl` (named `name`) in front of `origin`, for one `GET /`: its answer
/// (the node is stopped before it is returned).
async fn get_once(name: &str, vcl: &str, origin: &Origin) -> Resp {
    let shellac = start_vcl(name, vcl, &[origin.addr]).await;
    let r = get(shellac.addr, "/").await;
    shellac.stop().await;
    r
}

/// `set req.proto = "HTTP/1.2"` is HTTP/1.1, as the request parser reads a later HTTP/1 minor
/// version (RFC 9110 §2.5), not a failed vcl_recv (issue 21, varnishtest v00001); a status
/// VCL sets past 599 reaches the client as set.
#[tokio::test]
async fn a_later_http1_minor_version_in_req_proto_is_http11() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path)).await;
    let vcl = r#"vcl 4.0;
backend b { ${origin0} }
sub vcl_recv { set req.proto = "HTTP/1.2"; }
sub vcl_deliver {
    set resp.http.x-proto = req.proto;
    set resp.status = 904;
}
"#;
    let r = get_once("req-proto", vcl, &origin).await;
    assert_eq!(r.status, 904);
    assert_eq!(r.header("x-proto"), Some("HTTP/1.1"));
}

/// `req.grace` before VCL sets it: 2.x reads `cache.grace` (Varnish 2.1 starts it at
/// `default_grace`; varnishtest 2.1.5/b00030), 4.x reads -1 (unset).
#[tokio::test]
async fn unset_req_grace_reads_as_each_dialect_does() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path)).await;
    let legacy = r#"backend b { ${origin0} }
sub vcl_recv { pass; }
sub vcl_fetch { set beresp.http.x-fetched = "1"; }
sub vcl_deliver { set resp.http.x-grace = req.grace; }
"#;
    let r = get_once("req-grace-2", legacy, &origin).await;
    assert_eq!(r.header("x-grace"), Some("0.000"));
    let modern = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_deliver { set resp.http.x-grace = req.grace; }
"#;
    let r = get_once("req-grace-4", modern, &origin).await;
    assert_eq!(r.header("x-grace"), Some("-1.000"));
}

/// Varnish 2.x closes the connection after every vcl_error response (varnishtest
/// 2.1.5/b00017); 4.x's vcl_synth keeps it open.
#[tokio::test]
async fn a_2x_error_response_closes_the_connection() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path)).await;
    let legacy = r#"backend b { ${origin0} }
sub vcl_recv { error 888; }
sub vcl_fetch { set beresp.http.x-fetched = "1"; }
"#;
    let r = get_once("error-closes-2", legacy, &origin).await;
    assert_eq!(r.status, 888);
    assert_eq!(r.header("connection"), Some("close"));
    let modern = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { return (synth(404)); }
"#;
    let r = get_once("error-closes-4", modern, &origin).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.header("connection"), None);
}

/// On a miss, vcl_deliver's `obj.ttl` and `obj.grace` are what vcl_backend_response gave
/// the object just fetched (varnishtest s00008), not 0.
#[tokio::test]
async fn obj_lifetimes_on_a_miss_are_the_fetched_objects() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path)).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response { set beresp.ttl = 10s; set beresp.grace = 5s; }
sub vcl_deliver {
    set resp.http.x-ttl = obj.ttl;
    set resp.http.x-grace = obj.grace;
}
"#;
    let r = get_once("obj-ttl-miss", vcl, &origin).await;
    let ttl: f64 = r.header("x-ttl").unwrap().parse().unwrap();
    assert!((9.0..=10.0).contains(&ttl), "{ttl}");
    assert_eq!(r.header("x-grace"), Some("5.000"));
}

/// `obj.hits` counts hits per object as Varnish does (issue 21, varnishtest v00013): vcl_hit
/// already sees the hit it runs for, vcl_deliver reads 0 on a miss or a pass; fast hits count
/// too, and a vcl_deliver that only tests `obj.hits > 0` keeps its cached head.
#[tokio::test]
async fn obj_hits_counts_per_object() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path).cc("max-age=60")).await;
    let full = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { if (req.url == "/pass") { return (pass); } }
sub vcl_hit { set req.http.hit-hits = obj.hits; }
sub vcl_deliver {
    set resp.http.deliver-hits = obj.hits;
    if (req.http.hit-hits) { set resp.http.hit-hits = req.http.hit-hits; }
}
"#;
    let shellac = start_vcl("obj-hits-full", full, &[origin.addr]).await;
    let hits = |r: &Resp| {
        (
            r.header("deliver-hits").map(str::to_string),
            r.header("hit-hits").map(str::to_string),
        )
    };
    let some = |n: &str| Some(n.to_string());
    assert_eq!(hits(&get(shellac.addr, "/").await), (some("0"), None));
    assert_eq!(hits(&get(shellac.addr, "/").await), (some("1"), some("1")));
    assert_eq!(hits(&get(shellac.addr, "/foo").await), (some("0"), None));
    assert_eq!(hits(&get(shellac.addr, "/").await), (some("2"), some("2")));
    assert_eq!(hits(&get(shellac.addr, "/pass").await), (some("0"), None));
    assert_eq!(hits(&get(shellac.addr, "/pass").await), (some("0"), None));
    shellac.stop().await;

    // No vcl_hit: hits take the fast path, which counts them too.
    let fast = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_deliver {
    set resp.http.deliver-hits = obj.hits;
}
"#;
    let shellac = start_vcl("obj-hits-fast", fast, &[origin.addr]).await;
    for n in 0..4 {
        let r = get(shellac.addr, "/f").await;
        assert_eq!(r.header("deliver-hits"), Some(n.to_string().as_str()));
    }
    assert_eq!(shellac.stat("cache_hit_fast").await, 3);
    shellac.stop().await;
}

/// `X-Varnish` under VCL numbers transactions as Varnish does: in 4.x one counter for
/// sessions, requests, restarts and backend requests (the backend is told its request's id),
/// a hit names the fetch it came from; 2.x numbers client requests only. Without VCL there is
/// no such field.
#[tokio::test]
async fn x_varnish_numbers_transactions_as_varnish_does() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path).cc("max-age=60")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url == "/pass") { return (pass); }
    if (req.url == "/synth") { return (synth(404)); }
    if (req.url == "/restart" && req.restarts == 0) { return (restart); }
}
sub vcl_deliver { set resp.http.x-xid = req.xid; }
sub vcl_synth { set resp.http.x-xid = req.xid; }
"#;
    let shellac = start_vcl("xid", vcl, &[origin.addr]).await;
    let mut conn = common::Conn::open(shellac.addr).await;
    // Session 1000; request 1001 fetches with 1002.
    let r = conn.send("GET", "/a", &[], b"").await;
    assert_eq!(r.header("x-varnish"), Some("1001"));
    assert_eq!(r.header("x-xid"), Some("1001"));
    assert_eq!(origin.last().headers.get("x-varnish").unwrap(), "1002");
    // A hit on the same connection: 1003, fetched by 1002.
    let r = conn.send("GET", "/a", &[], b"").await;
    assert_eq!(r.header("x-varnish"), Some("1003 1002"));
    // A pass: 1004, its backend request 1005.
    let r = conn.send("GET", "/pass", &[], b"").await;
    assert_eq!(r.header("x-varnish"), Some("1004"));
    assert_eq!(origin.last().headers.get("x-varnish").unwrap(), "1005");
    // A generated response: 1006.
    let r = conn.send("GET", "/synth", &[], b"").await;
    assert_eq!((r.status, r.header("x-varnish")), (404, Some("1006")));
    assert_eq!(r.header("x-xid"), Some("1006"));
    // A restart is a new transaction: 1007 restarts as 1008, which fetches with 1009.
    let r = conn.send("GET", "/restart", &[], b"").await;
    assert_eq!(r.header("x-varnish"), Some("1008"));
    assert_eq!(origin.last().headers.get("x-varnish").unwrap(), "1009");
    // A new connection is a new session (1010): its hit is 1011.
    let r = get(shellac.addr, "/a").await;
    assert_eq!(r.header("x-varnish"), Some("1011 1002"));
    shellac.stop().await;

    // 2.x: client requests only, from 1001; a hit names the request that fetched.
    let legacy = r#"backend b { ${origin0} }
sub vcl_deliver { set resp.http.x-xid = req.xid; }
"#;
    let shellac = start_vcl("xid-2x", legacy, &[origin.addr]).await;
    let r = get(shellac.addr, "/b").await;
    assert_eq!(r.header("x-varnish"), Some("1001"));
    assert_eq!(r.header("x-xid"), Some("1001"));
    assert_eq!(origin.last().headers.get("x-varnish").unwrap(), "1001");
    let r = get(shellac.addr, "/b").await;
    assert_eq!(r.header("x-varnish"), Some("1002 1001"));
    shellac.stop().await;

    // Without VCL: none, and none to the backend.
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let r = get(shellac.addr, "/c").await;
    let r2 = get(shellac.addr, "/c").await;
    assert_eq!(
        (r.header("x-varnish"), r2.header("x-varnish")),
        (None, None)
    );
    assert!(origin.last().headers.get("x-varnish").is_none());
    shellac.stop().await;
}

/// Under VCL the client's `X-Forwarded-For` reaches the program, which appends the client
/// (4.x before vcl_recv, 2.x in its built-in vcl_recv) as Varnish does; without VCL an
/// untrusted client's is replaced.
#[tokio::test]
async fn forwarded_for_is_the_programs_under_vcl() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let xff = |o: &Origin| {
        o.last()
            .headers
            .get("x-forwarded-for")
            .map(|v| v.to_str().unwrap().to_string())
    };
    for (name, vcl) in [
        ("xff-4x", "vcl 4.1;\nbackend b { ${origin0} }\n"),
        ("xff-2x", "backend b { ${origin0} }\n"),
    ] {
        let shellac = start_vcl(name, vcl, &[origin.addr]).await;
        get(shellac.addr, "/1").await;
        assert_eq!(xff(&origin).as_deref(), Some("127.0.0.1"), "{name}");
        get_with(shellac.addr, "/2", &[("x-forwarded-for", "1.2.3.4")]).await;
        assert_eq!(
            xff(&origin).as_deref(),
            Some("1.2.3.4, 127.0.0.1"),
            "{name}"
        );
        shellac.stop().await;
    }
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get_with(shellac.addr, "/3", &[("x-forwarded-for", "1.2.3.4")]).await;
    assert_eq!(xff(&origin).as_deref(), Some("127.0.0.1"));
    shellac.stop().await;
}

/// `req.hash_always_miss` fetches anew even though the object is stored (the leader's second
/// look at the cache must not find it either), and the new copy replaces the old one — stored
/// before the response ends, even with an empty body (whose response ends at its head).
#[tokio::test]
async fn hash_always_miss_refetches_a_stored_object() {
    let origin = Origin::start(|_| Reply::ok("").cc("max-age=60")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { if (req.http.x-missit == "1") { set req.hash_always_miss = true; } }
"#;
    let shellac = start_vcl("always-miss", vcl, &[origin.addr]).await;
    get(shellac.addr, "/").await;
    get(shellac.addr, "/").await;
    assert_eq!(origin.count(), 1);
    let r = get_with(shellac.addr, "/", &[("x-missit", "1")]).await;
    assert_eq!(origin.count(), 2);
    assert_eq!(r.header("x-varnish"), Some("1006"), "a miss, not a hit");
    let r = get(shellac.addr, "/").await;
    assert_eq!(origin.count(), 2);
    assert_eq!(r.header("x-varnish"), Some("1009 1007"), "the new copy");
    shellac.stop().await;
}

/// The backend's health as the admin API reports it.
async fn healthy(shellac: &Shellac, name: &str) -> bool {
    let resp = request(shellac.admin, "GET", "/backends", &[], b"").await;
    let v: serde_json::Value = serde_json::from_slice(&resp.body).unwrap();
    v["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("no backend {name}: {v}"))["healthy"]
        .as_bool()
        .unwrap()
}

async fn wait_health(shellac: &Shellac, name: &str, want: bool) {
    for _ in 0..400 {
        if healthy(shellac, name).await == want {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!(
        "{name} never became {}",
        if want { "healthy" } else { "sick" }
    );
}

/// vmod_directors in vcl_init over backends with a shared probe: a sick backend is skipped,
/// a round-robin spreads over the healthy ones, `std.healthy()` and a hash director.
#[tokio::test]
async fn probes_and_vmod_directors() {
    let a = Origin::start(|seen| Reply::ok(&format!("a {}", seen.path))).await;
    let b = Origin::start(|seen| Reply::ok(&format!("b {}", seen.path))).await;
    let sick = Origin::start(|seen| {
        if seen.path == "/health" {
            Reply::ok("down").status(500)
        } else {
            Reply::ok("should not be asked")
        }
    })
    .await;
    let vcl = r#"vcl 4.1;
import directors;
import std;
probe health {
    .url = "/health";
    .interval = 50ms;
    .timeout = 1s;
    .window = 2;
    .threshold = 1;
    .initial = 0;
}
backend a { ${origin0} .probe = health; }
backend b { ${origin1} .probe = health; }
backend s { ${origin2} .probe = health; }
sub vcl_init {
    new rr = directors.round_robin();
    rr.add_backend(a);
    rr.add_backend(s);
    rr.add_backend(b);
    new h = directors.hash();
    h.add_backend(a);
    h.add_backend(b);
}
sub vcl_recv {
    if (req.url ~ "^/sticky") {
        set req.backend_hint = h.backend(req.http.x-user);
    } else {
        set req.backend_hint = rr.backend();
    }
    if (!std.healthy(req.backend_hint)) { return (synth(503, "nobody home")); }
    return (pass);
}
sub vcl_deliver { set resp.http.x-healthy-s = std.healthy(s); }
"#;
    let shellac = start_vcl("directors", vcl, &[a.addr, b.addr, sick.addr]).await;
    wait_health(&shellac, "a", true).await;
    wait_health(&shellac, "b", true).await;
    assert!(!healthy(&shellac, "s").await);
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..6 {
        let r = get(shellac.addr, &format!("/p{i}")).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("x-healthy-s"), Some("false"));
        seen.insert(r.text().split(' ').next().unwrap().to_string());
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["a", "b"],
        "both healthy ones, never s"
    );
    assert_eq!(sick.count_path("/p0") + sick.count_path("/p1"), 0);
    // The hash director sends one user to one backend.
    let first = get_with(shellac.addr, "/sticky", &[("x-user", "alice")])
        .await
        .text();
    for _ in 0..5 {
        let again = get_with(shellac.addr, "/sticky", &[("x-user", "alice")])
            .await
            .text();
        assert_eq!(again, first);
    }
    shellac.stop().await;
}

/// The 4.x WordPress-guide configuration (tests/vcl/wordpress-4.vcl) with its backends
/// pointed at two origins: logged-in users and wp-admin passed, cookies of anonymous
/// visitors stripped, static files cached, PURGE from the ACL, BAN by URL and host.
#[tokio::test]
async fn the_wordpress_guide_configuration() {
    let handler = |seen: &common::Seen| {
        let reply = Reply::ok(&format!(
            "{} cookie={}",
            seen.path,
            seen.headers
                .get("cookie")
                .map_or("-", |v| v.to_str().unwrap())
        ));
        if seen.path == "/healthcheck.php" {
            return reply;
        }
        reply.cc("max-age=300")
    };
    let a = Origin::start(handler).await;
    let b = Origin::start(handler).await;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vcl/wordpress-4.vcl"
    ))
    .unwrap()
    .replace(".host = \"10.0.0.11\"; .port = \"8080\";", "${origin0}")
    .replace(".host = \"10.0.0.12\"; .port = \"8080\";", "${origin1}");
    let shellac = start_vcl("wordpress", &text, &[a.addr, b.addr]).await;
    wait_health(&shellac, "web1", true).await;
    wait_health(&shellac, "web2", true).await;
    let total = |path: &str| a.count_path(path) + b.count_path(path);
    // Anonymous visitors with analytics cookies share one cached page, without the cookies.
    let r = get_with(
        shellac.addr,
        "/hello-world/",
        &[("cookie", "_ga=1; has_js=1")],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "/hello-world/ cookie=-");
    get(shellac.addr, "/hello-world/").await;
    assert_eq!(total("/hello-world/"), 1);
    // Logged-in users and the admin are passed, cookies and all.
    let r = get_with(
        shellac.addr,
        "/hello-world/",
        &[("cookie", "wordpress_logged_in_abc=u1")],
    )
    .await;
    assert_eq!(r.text(), "/hello-world/ cookie=wordpress_logged_in_abc=u1");
    get(shellac.addr, "/wp-admin/").await;
    get(shellac.addr, "/wp-admin/").await;
    assert_eq!(total("/wp-admin/"), 2);
    // PURGE from localhost (in the ACL).
    let r = request(shellac.addr, "PURGE", "/hello-world/", &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    get(shellac.addr, "/hello-world/").await;
    assert_eq!(total("/hello-world/"), 3);
    shellac.stop().await;
}

/// Regression: lifetimes and dates far past what a clock can add (`1000000000y`) count as
/// ten years and the year 9999: no overflow, no panic.
#[tokio::test]
async fn absurd_lifetimes_are_bounded() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path)).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    if (bereq.url == "/hfm") {
        set beresp.ttl = 1000000000y;
        set beresp.uncacheable = true;
    } else {
        set beresp.ttl = 999999999999.999y;
        set beresp.grace = 999999999999.999y;
    }
    set beresp.http.x-far = now + 999999999999.999y;
}
"#;
    let shellac = start_vcl("absurd", vcl, &[origin.addr]).await;
    let r = get(shellac.addr, "/hfm").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-far"), Some("Fri, 31 Dec 9999 23:59:59 GMT"));
    assert_eq!(get(shellac.addr, "/hfm").await.status, 200);
    assert_eq!(origin.count_path("/hfm"), 2, "hit-for-miss");
    get(shellac.addr, "/long").await;
    get(shellac.addr, "/long").await;
    assert_eq!(origin.count_path("/long"), 1, "stored, ten years");
    shellac.stop().await;
}
