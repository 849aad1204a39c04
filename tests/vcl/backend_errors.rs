//! vcl_backend_error end to end: `return (error(...))`, refused connections, retries past
//! `max_retries`, and the made object that is stored as Varnish inserts it.

use crate::common;
use common::vcl::start_vcl;
use common::{Origin, Reply, Shellac, get, raw, refused_port};

/// Shellac on a VCL 4.1 with backend `b` (an origin answering `x`, returned) and backend
/// `gone` (a port nothing listens on: every connection refused), then `subs`.
async fn start_with_gone(name: &str, subs: &str) -> (Origin, Shellac) {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let gone = std::net::SocketAddr::from(([127, 0, 0, 1], refused_port()));
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
    let refused = refused_port();
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

/// vcl_backend_error's object after `return (error(...))` of vcl_backend_fetch — before any
/// backend is asked — is stored like the others when `beresp.ttl` + `grace` + `keep` is
/// above zero and the fetch is no pass: the second request is a hit on it. One with no
/// lifetime, and a pass's, are made again each time. None is a failed fetch.
#[tokio::test]
async fn a_backend_error_object_after_return_error_in_vcl_backend_fetch_is_stored() {
    let origin = Origin::start(|_| Reply::ok("from the origin")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url == "/pass") { return (pass); }
}
sub vcl_backend_fetch {
    return (error(410, "Gone Here"));
}
sub vcl_backend_error {
    if (bereq.url != "/short") { set beresp.ttl = 1m; }
    set beresp.http.made = beresp.status + " " + beresp.reason;
    synthetic("made for " + bereq.url);
    return (deliver);
}
"#;
    let shellac = start_vcl("bereq-error-stored", vcl, &[origin.addr]).await;
    let ask = |path: &str| {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let addr = shellac.addr;
        async move { raw(addr, req.as_bytes()).await }
    };
    // (path, hits after its two requests)
    for (path, hits) in [("/gone", 1), ("/short", 1), ("/pass", 1)] {
        for round in 0..2 {
            let text = ask(path).await;
            assert!(
                text.starts_with("HTTP/1.1 410 Gone Here\r\n"),
                "{path} {round}: {text}"
            );
            assert!(
                text.contains("\r\nmade: 410 Gone Here\r\n"),
                "{path}: {text}"
            );
            assert!(
                text.ends_with(&format!("made for {path}")),
                "{path}: {text}"
            );
        }
        assert_eq!(shellac.stat("cache_hit").await, hits, "{path}");
    }
    assert_eq!(origin.count(), 0);
    assert_eq!(shellac.stat("fetch_failed").await, 0);
    shellac.stop().await;
}
