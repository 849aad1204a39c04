//! VCL features beyond the basics, end to end: restart limits, buffered fetches, purges from
//! vcl_hit/vcl_miss and the other Varnish variables Shellac gives behaviour to.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common;
use common::vcl::start_vcl;
use common::{Origin, Reply, Shellac, get, get_with, request};

/// An address nothing listens on: a port bound without listening, so connecting to it is
/// refused. The returned socket holds the port for as long as the test keeps it: a port bound
/// and released could be taken by another test of this binary meanwhile (it was, once).
fn dead_addr() -> (tokio::net::TcpSocket, SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    (socket, addr)
}

/// Regression (issue 21, varnishtest c00028): a vcl_synth that always restarts, after a
/// fetch that vcl_backend_error abandons, looped forever. Past max_restarts vcl_synth runs
/// once more and its response is delivered whatever it returns.
#[tokio::test]
async fn a_synth_that_always_restarts_stops_at_max_restarts() {
    let vcl = r#"vcl 4.1;
backend bad { ${origin0} }
sub vcl_backend_error { return (abandon); }
sub vcl_synth {
    set resp.http.restarts = req.restarts;
    return (restart);
}
"#;
    let (_held, dead) = dead_addr();
    let shellac = start_vcl("synth-restart", vcl, &[dead]).await;
    let r = tokio::time::timeout(Duration::from_secs(20), get(shellac.addr, "/"))
        .await
        .expect("answers instead of restarting forever");
    assert_eq!(r.status, 503);
    assert_eq!(r.header("restarts"), Some("5"));
    // The same without a backend: vcl_recv answers, vcl_synth restarts.
    let vcl = r#"vcl 4.1;
backend none none;
sub vcl_recv { return (synth(404)); }
sub vcl_synth {
    set resp.http.restarts = req.restarts;
    return (restart);
}
"#;
    let other = start_vcl("recv-synth-restart", vcl, &[]).await;
    let r = tokio::time::timeout(Duration::from_secs(20), get(other.addr, "/"))
        .await
        .expect("answers instead of restarting forever");
    assert_eq!(r.status, 503);
    assert_eq!(r.header("restarts"), Some("5"));
    shellac.stop().await;
    other.stop().await;
}

/// An origin that answers HTTP/1.0-style, the body ended by closing the connection: `/stall`
/// sends the head and `abc`, then nothing for 10 s; any other path sends `hello world` in two
/// writes and closes.
async fn eof_origin() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head);
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\nCache-Control: max-age=60\r\n\r\n")
                    .await;
                if text.contains(" /stall ") {
                    let _ = s.write_all(b"abc").await;
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    return;
                }
                let _ = s.write_all(b"hello ").await;
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = s.write_all(b"world").await;
            });
        }
    });
    addr
}

/// `beresp.do_stream = false` reads the whole body before the response goes out: a body that
/// stalls past between_bytes_timeout is a 503 (not a truncated 200), a body framed by the
/// connection's end gets its Content-Length. 2.x files buffer by default, as Varnish did.
#[tokio::test]
async fn do_stream_false_buffers_the_body_before_delivery() {
    let origin = eof_origin().await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_fetch { set bereq.between_bytes_timeout = 300ms; }
sub vcl_backend_response {
    set beresp.do_stream = false;
    set beresp.http.x-do-stream = beresp.do_stream;
}
"#;
    let shellac = start_vcl("do-stream", vcl, &[origin]).await;
    let r = get(shellac.addr, "/stall").await;
    assert_eq!(r.status, 503, "{}", r.text());
    let r = get(shellac.addr, "/ok").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello world");
    assert_eq!(r.header("content-length"), Some("11"));
    assert_eq!(r.header("x-do-stream"), Some("false"));
    // Stored whole: the second request is a hit with the same body.
    let r = get(shellac.addr, "/ok").await;
    assert_eq!(r.text(), "hello world");
    shellac.stop().await;

    let vcl = r#"
backend b { ${origin0} }
sub vcl_miss { set bereq.between_bytes_timeout = 0.3s; }
sub vcl_fetch { set beresp.http.x-do-stream = beresp.do_stream; }
"#;
    let legacy = start_vcl("do-stream-21", vcl, &[origin]).await;
    let r = get(legacy.addr, "/stall").await;
    assert_eq!(r.status, 503, "{}", r.text());
    let r = get(legacy.addr, "/ok2").await;
    assert_eq!(r.text(), "hello world");
    assert_eq!(r.header("content-length"), Some("11"));
    assert_eq!(r.header("x-do-stream"), Some("false"));
    legacy.stop().await;
}

/// vmod_purge as its manual shows it: PURGE looks the URL up, vcl_hit / vcl_miss call
/// `purge.hard()` (or `purge.soft()`) and answer with the number of objects purged.
#[tokio::test]
async fn the_purge_vmod_purges_from_vcl_hit_and_vcl_miss() {
    let origin =
        Origin::start(|seen| Reply::ok(&format!("v {}", seen.path)).cc("max-age=600")).await;
    let vcl = r#"vcl 4.1;
import purge;
backend b { ${origin0} }
sub vcl_recv {
    if (req.method == "PURGE") { return (hash); }
}
sub my_purge {
    if (req.http.soft) {
        set req.http.purged = purge.soft(grace = 0s, keep = 0s);
    } else {
        set req.http.purged = purge.hard();
    }
    return (synth(200));
}
sub vcl_hit { if (req.method == "PURGE") { call my_purge; } }
sub vcl_miss { if (req.method == "PURGE") { call my_purge; } }
sub vcl_synth { set resp.http.purged = req.http.purged; }
"#;
    let shellac = start_vcl("purge-vmod", vcl, &[origin.addr]).await;
    get(shellac.addr, "/a").await;
    get(shellac.addr, "/a").await;
    assert_eq!(origin.count_path("/a"), 1);
    let r = request(shellac.addr, "PURGE", "/a", &[], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("purged"), Some("1"));
    // Nothing left to purge: vcl_miss runs it, 0.
    let r = request(shellac.addr, "PURGE", "/a", &[], b"").await;
    assert_eq!(r.header("purged"), Some("0"));
    get(shellac.addr, "/a").await;
    assert_eq!(origin.count_path("/a"), 2);
    // Soft, with no grace or keep left: the next request fetches anew.
    let r = request(shellac.addr, "PURGE", "/a", &[("soft", "1")], b"").await;
    assert_eq!(r.header("purged"), Some("1"));
    get(shellac.addr, "/a").await;
    assert_eq!(origin.count_path("/a"), 3);
    shellac.stop().await;
}

/// An origin whose answers are numbered `v1`, `v2`, ... in the order it gets the requests,
/// each with `Cache-Control: cc`.
async fn versioned_origin(cc: &'static str) -> Origin {
    let n = std::sync::atomic::AtomicUsize::new(0);
    Origin::start(move |_| {
        let v = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        Reply::ok(&format!("v{v}")).cc(cc)
    })
    .await
}

/// Regression (varnishtest c00037): `req.hash_always_miss` fetched anew only when the lookup
/// found nothing between the lookup and joining the fetch; the leader's second look found
/// the stored object and answered with it.
#[tokio::test]
async fn hash_always_miss_fetches_even_when_the_object_is_stored() {
    let origin = versioned_origin("max-age=600").await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.http.x-missit) { set req.hash_always_miss = true; }
}
"#;
    let shellac = start_vcl("always-miss", vcl, &[origin.addr]).await;
    get(shellac.addr, "/").await;
    assert_eq!(get(shellac.addr, "/").await.text(), "v1");
    assert_eq!(origin.count(), 1);
    let r = get_with(shellac.addr, "/", &[("x-missit", "1")]).await;
    assert_eq!(r.text(), "v2");
    assert_eq!(origin.count(), 2);
    // The refreshed copy replaced the old one at once (varnishtest c00037's last request).
    assert_eq!(get(shellac.addr, "/").await.text(), "v2");
    shellac.stop().await;
}

/// A `req.hash_always_miss` refresh whose response has no freshness left (`beresp.ttl = 0s`)
/// is delivered but does not replace the stored copy (varnishtest b00035); one with
/// freshness does (above).
#[tokio::test]
async fn hash_always_miss_with_no_ttl_keeps_the_stored_copy() {
    let origin = versioned_origin("max-age=600").await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.http.x-missit) { set req.hash_always_miss = true; }
}
sub vcl_backend_response {
    if (bereq.http.x-missit) { set beresp.ttl = 0s; }
    set beresp.grace = 10s;
}
"#;
    let shellac = start_vcl("always-miss-ttl0", vcl, &[origin.addr]).await;
    assert_eq!(get(shellac.addr, "/").await.text(), "v1");
    let r = get_with(shellac.addr, "/", &[("x-missit", "1")]).await;
    assert_eq!(r.text(), "v2");
    assert_eq!(get(shellac.addr, "/").await.text(), "v1");
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// The built-in VCL is split as in Varnish 7: a VCL's `vcl_req_cookie` / `vcl_beresp_*` run
/// before the built-in ones, and a bare `return;` skips the built-in rule.
#[tokio::test]
async fn split_builtin_subroutines_can_be_overridden() {
    let origin = Origin::start(|seen| {
        let r = Reply::ok("x").cc("max-age=600");
        if seen.path == "/set-cookie" {
            r.header("set-cookie", "a=1")
        } else {
            r
        }
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_req_cookie { return; }
sub vcl_beresp_cookie {
    if (bereq.url == "/set-cookie") { return; }
}
"#;
    let shellac = start_vcl("split-builtin", vcl, &[origin.addr]).await;
    // A Cookie no longer passes the request.
    get_with(shellac.addr, "/c", &[("cookie", "a=1")]).await;
    get_with(shellac.addr, "/c", &[("cookie", "b=2")]).await;
    assert_eq!(origin.count_path("/c"), 1);
    // Authorization still does (vcl_req_authorization is the built-in one).
    get_with(shellac.addr, "/auth", &[("authorization", "x")]).await;
    get_with(shellac.addr, "/auth", &[("authorization", "x")]).await;
    assert_eq!(origin.count_path("/auth"), 2);
    // A Set-Cookie response is stored for this URL only.
    get(shellac.addr, "/set-cookie").await;
    get(shellac.addr, "/set-cookie").await;
    assert_eq!(origin.count_path("/set-cookie"), 1);
    shellac.stop().await;
}

/// Varnish 2.x's grace (varnishtest 2.1.5/v00023): a stale copy within grace answers only
/// while a fetch of it is in progress or the backend is sick; otherwise it is fetched anew.
/// 4.x serves it and refreshes it in the background.
#[tokio::test]
async fn grace_in_2x_files_waits_for_a_reason() {
    let origin = versioned_origin("max-age=60").await;
    let vcl = r#"
backend b { ${origin0} }
sub vcl_fetch {
    set beresp.ttl = 0s;
    set beresp.grace = 1h;
}
"#;
    let shellac = start_vcl("grace-2x", vcl, &[origin.addr]).await;
    assert_eq!(get(shellac.addr, "/").await.text(), "v1");
    // Stale at once, within grace, the backend healthy and idle: fetched anew.
    assert_eq!(get(shellac.addr, "/").await.text(), "v2");
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// `req.hash_ignore_vary`: the lookup takes the variant stored last, whatever the request's
/// `Vary` fields (varnishtest c00107: crawlers get any variant).
#[tokio::test]
async fn hash_ignore_vary_takes_the_newest_variant() {
    let origin = Origin::start(|seen| {
        let cookie = seen
            .headers
            .get("cookie")
            .map_or("none", |v| v.to_str().unwrap_or("?"));
        Reply::ok(cookie).cc("max-age=600").header("vary", "cookie")
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { set req.hash_ignore_vary = req.http.user-agent ~ "bot"; }
sub vcl_req_cookie { return; }
"#;
    let shellac = start_vcl("ignore-vary", vcl, &[origin.addr]).await;
    assert_eq!(
        get_with(shellac.addr, "/", &[("cookie", "a")]).await.text(),
        "a"
    );
    assert_eq!(
        get_with(shellac.addr, "/", &[("cookie", "b")]).await.text(),
        "b"
    );
    let bot = get_with(shellac.addr, "/", &[("user-agent", "googlebot")]).await;
    assert_eq!(bot.text(), "b");
    assert_eq!(origin.count(), 2);
    // Others still get their own variant.
    assert_eq!(
        get_with(shellac.addr, "/", &[("cookie", "a")]).await.text(),
        "a"
    );
    assert_eq!(get(shellac.addr, "/").await.text(), "none");
    assert_eq!(origin.count(), 3);
    shellac.stop().await;
}

/// Regression: a failed VCL subroutine counted its response twice in `synth_resp` (Varnish's
/// `s_synth`, one per vcl_synth): once when the subroutine failed, again when vcl_synth's 503
/// went out.
#[tokio::test]
async fn a_vcl_failure_is_one_synthetic_response() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url == "/fail") { return (fail); }
    if (req.url == "/synth") { return (synth(404)); }
}
sub vcl_miss { if (req.url == "/miss-fail") { return (fail); } }
"#;
    let shellac = start_vcl("fail-synth", vcl, &[origin.addr]).await;
    assert_eq!(get(shellac.addr, "/fail").await.status, 503);
    assert_eq!(shellac.stat("synth_resp").await, 1);
    assert_eq!(get(shellac.addr, "/synth").await.status, 404);
    assert_eq!(shellac.stat("synth_resp").await, 2);
    assert_eq!(get(shellac.addr, "/miss-fail").await.status, 503);
    assert_eq!(shellac.stat("synth_resp").await, 3);
    assert_eq!(origin.count(), 0);
    shellac.stop().await;
}

/// An origin answering `v1`, `v2`, ... per path, cacheable (`max-age=60`), its first answer
/// for each path marked `x-first` (the hit-for-pass tests' VCL acts on that one).
async fn first_marked_origin() -> Origin {
    let asked = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    Origin::start(move |seen| {
        let mut asked = asked.lock().unwrap();
        let n = asked.entry(seen.path.clone()).or_insert(0);
        *n += 1;
        let reply = Reply::ok(&format!("v{n}")).cc("max-age=60");
        if *n == 1 {
            reply.header("x-first", "1")
        } else {
            reply
        }
    })
    .await
}

/// Three requests for `path` on a hit-for-pass URL: the first answer (`v1`) is not stored,
/// the next two are fetched again (`v2`, `v3`) through vcl_pass (`x-passed: yes`).
async fn passed_after_the_first(shellac: &Shellac, origin: &Origin, path: &str) {
    for (round, body, passed) in [
        (1, "v1", None),
        (2, "v2", Some("yes")),
        (3, "v3", Some("yes")),
    ] {
        let r = get(shellac.addr, path).await;
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, body),
            "{path} round {round}"
        );
        assert_eq!(r.header("x-passed"), passed, "{path} round {round}");
    }
    assert_eq!(origin.count_path(path), 3, "{path}");
}

/// `return (pass(DURATION))` of vcl_backend_response (Varnish 5.1+, trunk c00098's VCL): the
/// response is delivered, not stored, and the URL is hit-for-pass that long — its requests
/// run vcl_pass and are passed even when the backend answers cacheably again, where a
/// hit-for-miss (`beresp.uncacheable`) stores that answer. `cache_hitpass` counts them.
#[tokio::test]
async fn return_pass_with_a_duration_makes_the_url_hit_for_pass() {
    let origin = first_marked_origin().await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_pass { set req.http.x-passed = "yes"; }
sub vcl_backend_response {
    if (beresp.http.x-first && bereq.url == "/hfp") { return (pass(1m)); }
    if (beresp.http.x-first) { set beresp.uncacheable = true; set beresp.ttl = 1m; }
}
sub vcl_deliver { if (req.http.x-passed) { set resp.http.x-passed = "yes"; } }
"#;
    let shellac = start_vcl("pass-duration", vcl, &[origin.addr]).await;
    passed_after_the_first(&shellac, &origin, "/hfp").await;
    assert_eq!(shellac.stat("cache_hitpass").await, 2);
    assert_eq!(shellac.stat("cache_hit").await, 0);
    // A hit-for-miss stores the next cacheable answer: the third request is a hit.
    for (round, body) in [(1, "v1"), (2, "v2"), (3, "v2")] {
        let r = get(shellac.addr, "/hfm").await;
        assert_eq!(r.text(), body, "round {round}");
        assert_eq!(r.header("x-passed"), None, "round {round}");
    }
    assert_eq!(origin.count_path("/hfm"), 2);
    assert_eq!(shellac.stat("cache_hitpass").await, 2);
    assert_eq!(shellac.stat("cache_hitmiss").await, 1);
    assert_eq!(shellac.stat("cache_hit").await, 1);
    shellac.stop().await;
}

/// Varnish 2.1's `pass` and 3.0's `hit_for_pass` in vcl_fetch make a hit-for-pass object for
/// the response's TTL (2.1.5 c00014): later requests run vcl_pass and are passed, even when
/// the backend answers cacheably again (`cache_hitpass`); a 4.x `return (pass)` there is a
/// hit-for-miss (the next cacheable answer is stored).
#[tokio::test]
async fn a_2x_pass_in_vcl_fetch_makes_the_url_hit_for_pass() {
    let origin = first_marked_origin().await;
    let vcl = r#"
backend b { ${origin0} }
sub vcl_pass { set req.http.x-passed = "yes"; }
sub vcl_fetch {
    if (beresp.http.x-first && req.url == "/21") { return (pass); }
    if (beresp.http.x-first) { return (hit_for_pass); }
}
sub vcl_deliver { if (req.http.x-passed) { set resp.http.x-passed = "yes"; } }
"#;
    let shellac = start_vcl("pass-2x", vcl, &[origin.addr]).await;
    for path in ["/21", "/30"] {
        passed_after_the_first(&shellac, &origin, path).await;
    }
    assert_eq!(shellac.stat("cache_hitpass").await, 4);
    assert_eq!(shellac.stat("cache_hit").await, 0);
    shellac.stop().await;
    // 4.x: hit-for-miss.
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response { if (beresp.http.x-first) { return (pass); } }
"#;
    let shellac = start_vcl("pass-4x", vcl, &[origin.addr]).await;
    for (round, body) in [(1, "v1"), (2, "v2"), (3, "v2")] {
        assert_eq!(get(shellac.addr, "/41").await.text(), body, "round {round}");
    }
    assert_eq!(shellac.stat("cache_hitpass").await, 0);
    assert_eq!(shellac.stat("cache_hit").await, 1);
    shellac.stop().await;
}
