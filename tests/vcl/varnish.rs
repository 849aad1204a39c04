//! Issue 32, "VCL as Varnish runs it": constructs of field VCL files that Varnish accepts, each
//! accepted here with the meaning Shellac gives it, and the errors' words where a file is wrong.

use crate::common;

use shellac::vcl::ErrorKind;

use common::compile::{errors, ok};
use common::vcl::start_vcl;
use common::{Origin, Reply, get};

fn has(src: &str, want: &str) {
    let all: Vec<String> = errors(src).iter().map(|e| e.to_string()).collect();
    assert!(
        all.iter().any(|m| m.contains(want)),
        "no error containing {want:?} in {all:?}"
    );
}

const B4: &str = "vcl 4.1;\nbackend b { .host = \"127.0.0.1\"; }\n";

#[test]
fn acl_entry_with_the_mask_inside_the_quotes() {
    let p = ok(&format!(
        "{B4}acl purge {{ \"172.16.0.0/16\"; !\"172.16.5.0/24\"; (\"10.0.0.0/8\"); \"::1/128\"; }}\n\
         sub vcl_recv {{ if (client.ip ~ purge) {{ return (pass); }} }}"
    ));
    let acl = &p.acls[0];
    let ip = |s: &str| s.parse().unwrap();
    assert!(acl.contains(ip("172.16.200.1")));
    assert!(!acl.contains(ip("172.16.5.1")), "the negated /24");
    assert!(!acl.contains(ip("172.17.0.1")));
    assert!(acl.contains(ip("10.200.0.1")));
    assert!(acl.contains(ip("::1")));
    // Varnish's words for the two ways it is wrong.
    let bad = |entry: &str| {
        format!(
            "{B4}acl a {{ {entry}; }}\nsub vcl_recv {{ if (client.ip ~ a) {{ return (pass); }} }}"
        )
    };
    has(&bad("\"10.0.1.0/1bc\""), ".../mask is not numeric.");
    has(&bad("\"10.0.1.0/22\" / 22"), "/mask only allowed once");
    has(&bad("\"10.0.1.0/33\""), "Too wide mask (/33)");
}

/// PCRE's `[[3-9]`: a literal `[` in a class (the regex crate reads a nested class).
#[test]
fn pcre_literal_bracket_in_a_class() {
    ok(&format!(
        "{B4}sub vcl_recv {{ if (req.url ~ \"^/[[3-9]\") {{ return (pass); }} }}"
    ));
}

/// Look-ahead, look-behind and back-references (Varnish is PCRE2) run on the backtracking
/// engine; a pathological pattern fails its match past `[vcl] match_limit` — the request is
/// answered and the counter `vcl_match_limit` says so — and `!~` is then true, as in Varnish.
#[tokio::test]
async fn pcre_look_around_and_back_references_run_with_a_match_limit() {
    let origin = Origin::start(|_| Reply::ok("o").cc("max-age=60")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url ~ "^/[[3-9]") { return (synth(201, "bracket")); }
    if (req.url ~ "^/(?!admin)x/") { return (synth(202, "look-ahead")); }
    if (req.url ~ "(?<=\.)png$") { return (synth(203, "look-behind")); }
    if (req.url ~ "^/(\w+)/\1$") { return (synth(204, "back-reference")); }
    if (req.url ~ "^/((?=a)a+)+$") { return (synth(205, "never")); }
    if (req.url !~ "^/((?=a)a+)+$") {
        set req.http.x-rewritten = regsuball(req.url, "((?=a)a+)+$", "b");
        return (synth(206, req.http.x-rewritten));
    }
}
"#;
    let shellac = start_vcl("pcre", vcl, &[origin.addr]).await;
    assert_eq!(get(shellac.addr, "/[a").await.status, 201);
    assert_eq!(get(shellac.addr, "/7a").await.status, 201);
    assert_eq!(get(shellac.addr, "/x/1").await.status, 202);
    assert_eq!(get(shellac.addr, "/a.png").await.status, 203);
    assert_eq!(get(shellac.addr, "/ab/ab").await.status, 204);
    assert_eq!(shellac.stat("vcl_match_limit").await, 0);
    let path = format!("/{}!", "a".repeat(64));
    let r = get(shellac.addr, &path).await;
    assert_eq!(r.status, 206, "the failed match is no match: `!~` is true");
    // regsuball past the limit leaves its subject as it was (the reason vcl_synth shows).
    assert!(r.text().contains(&path), "{}", r.text());
    // Three matches ran past the limit: `~`, `!~` and regsuball.
    assert_eq!(shellac.stat("vcl_match_limit").await, 3);
    shellac.stop().await;
    origin.stop();
}

/// What neither engine runs is refused as unsupported, with the pattern.
#[test]
fn pcre_branch_reset_is_refused_as_unsupported() {
    let e = errors(&format!(
        "{B4}sub vcl_recv {{ if (req.url ~ \"^(?|(a)|(b))$\") {{ return (pass); }} }}"
    ));
    assert_eq!(e[0].kind, ErrorKind::Unsupported, "{e:?}");
    assert!(e[0].message.contains("Regexp \"^(?|(a)|(b))$\""), "{e:?}");
}

/// Varnish 2.1/3.0 let `vcl_error` read and set `obj.ttl`, `obj.grace` (3.0 `obj.keep`) and
/// read `obj.lastuse` (2.0 also `obj.cacheable`): accepted, on a response that is never stored
/// (in Varnish neither), so they read 0 and what is set changes nothing.
#[tokio::test]
async fn obj_ttl_and_the_other_obj_variables_in_vcl_error() {
    let origin = Origin::start(|_| Reply::ok("o")).await;
    let vcl = r#"backend b { ${origin0} }
sub vcl_recv { error 403 "No"; }
sub vcl_error {
    set obj.ttl = 0s;
    set obj.grace = 10s;
    set obj.keep = 1m;
    set obj.http.x-ttl = obj.ttl;
    set obj.http.x-lastuse = obj.lastuse;
    deliver;
}
"#;
    let shellac = start_vcl("obj-in-error", vcl, &[origin.addr]).await;
    let r = get(shellac.addr, "/").await;
    assert_eq!(r.status, 403);
    assert_eq!(r.header("x-ttl"), Some("0.000"));
    assert_eq!(r.header("x-lastuse"), Some("0.000"));
    assert_eq!(origin.count(), 0);
    shellac.stop().await;
    origin.stop();
    // 2.0 (a vcl_fetch that sets `obj.*`) also has `obj.cacheable` there.
    ok("backend b { .host = \"127.0.0.1\"; }\n\
        sub vcl_fetch { set obj.ttl = 1m; }\n\
        sub vcl_error { set obj.cacheable = false; set obj.ttl = 1s; }");
}

/// `return (fetch)` in vcl_hit is 4.0's and 4.1's `miss` (valid until Varnish 5.0): the
/// object is fetched again.
#[tokio::test]
async fn return_fetch_in_vcl_hit_under_vcl_4() {
    let origin = Origin::start(|_| Reply::ok("o").cc("max-age=60")).await;
    for version in ["4.0", "4.1"] {
        let vcl = format!(
            "vcl {version};\nbackend b {{ ${{origin0}} }}\n\
             sub vcl_hit {{ if (req.http.x-refresh) {{ return (fetch); }} }}\n"
        );
        let shellac = start_vcl("hit-fetch", &vcl, &[origin.addr]).await;
        let before = origin.count();
        assert_eq!(get(shellac.addr, "/").await.status, 200);
        assert_eq!(get(shellac.addr, "/").await.status, 200);
        assert_eq!(origin.count(), before + 1, "the second is a hit");
        let r = common::get_with(shellac.addr, "/", &[("x-refresh", "1")]).await;
        assert_eq!(r.status, 200);
        assert_eq!(origin.count(), before + 2, "{version}: fetched again");
        shellac.stop().await;
    }
    origin.stop();
}

/// A file without a `vcl 4.x;` line is read as VCL 2.1/3.0; when it uses 4.x-only names the
/// errors say so, and what to add.
#[test]
fn a_file_without_a_vcl_line_using_4x_names_says_add_vcl_41() {
    let src = "backend b { .host = \"127.0.0.1\"; }\n\
               sub vcl_recv {\n    if (req.method == \"PURGE\") {\n        return (synth(200, \"Purged\"));\n    }\n}\n\
               sub vcl_backend_response { set beresp.ttl = 1m; }\n";
    let hint = "this file has no `vcl 4.1;` line, so it is read as VCL 2.1/3.0 — add `vcl 4.1;`";
    let all = errors(src);
    assert_eq!(all.len(), 3, "{all:?}");
    for (e, what) in all
        .iter()
        .zip(["'req.method'", "\"synth\"", "'vcl_backend_response'"])
    {
        assert!(e.message.contains(hint) && e.message.contains(what), "{e}");
    }
    // A 2.x name in a 4.x file keeps the plain message.
    has(
        &format!("{B4}sub vcl_recv {{ if (req.request == \"GET\") {{ return (pass); }} }}"),
        "Only available in VCL 2.0, 2.1/3.0, this file is VCL 4.1",
    );
}

/// VCL errors show the source line and a caret under the token, as varnishd does.
#[test]
fn vcl_errors_show_the_source_line_and_a_caret() {
    let e = errors(&format!(
        "{B4}sub vcl_recv {{\n\tif (req.nope == \"x\") {{ return (pass); }}\n}}\n"
    ));
    assert_eq!(
        e[0].with_excerpt(),
        "t.vcl:4:6: Symbol not found: 'req.nope'\n\tif (req.nope == \"x\") { return (pass); }\n\t    ^~~~~~~~"
    );
    // A syntax error too, and through the configuration's error (what `shellac check` prints).
    let e = errors(&format!("{B4}sub vcl_recv {{ set req.url = ; }}\n"));
    let shown = shellac::vcl::attach::error(e[0].clone()).to_string();
    assert!(
        shown.ends_with("\nsub vcl_recv { set req.url = ; }\n                             ^"),
        "{shown}"
    );
}

/// Under VCL a passed unsafe request does not evict the cached URL (Varnish never changes the
/// cache on a pass or pipe: only the VCL's purges and bans do), so a VCL purge ACL cannot be
/// bypassed by POSTing, nor by a `PURGE` the VCL does not handle (piped). The setting turns
/// RFC 9111 §4.4 invalidation on under VCL; `[[rule]]`s keep it by default.
#[tokio::test]
async fn a_passed_unsafe_request_does_not_invalidate_under_vcl() {
    let origin = Origin::start(|_| Reply::ok("page").cc("max-age=60")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
acl purgers { "10.9.9.9"; }
sub vcl_recv {
    if (req.method == "PURGE") {
        if (client.ip ~ purgers) { return (purge); }
        return (pipe);
    }
}
"#;
    let shellac = start_vcl("no-invalidation", vcl, &[origin.addr]).await;
    assert_eq!(get(shellac.addr, "/page").await.status, 200);
    assert_eq!(origin.count(), 1);
    for (i, method) in ["POST", "DELETE", "PURGE"].into_iter().enumerate() {
        let r = common::request(shellac.addr, method, "/page", &[], b"x").await;
        assert_eq!(r.status, 200, "{method} reaches the origin");
        assert_eq!(get(shellac.addr, "/page").await.status, 200);
        assert_eq!(origin.count(), 2 + i, "{method}: the page is still a hit");
    }
    assert_eq!(shellac.stat("cache_invalidated").await, 0);
    shellac.stop().await;
    // `unsafe_requests_invalidate = true`: RFC 9111's invalidation under VCL too.
    let shellac = common::vcl::start_vcl_with("invalidation-on", vcl, &[origin.addr], |c| {
        c.invalidation.unsafe_requests_invalidate = Some(true);
    })
    .await;
    let before = origin.count();
    assert_eq!(get(shellac.addr, "/page").await.status, 200);
    let r = common::request(shellac.addr, "POST", "/page", &[], b"x").await;
    assert_eq!(r.status, 200);
    assert_eq!(shellac.stat("cache_invalidated").await, 1);
    assert_eq!(get(shellac.addr, "/page").await.status, 200);
    assert_eq!(origin.count(), before + 3, "fetched again after the POST");
    shellac.stop().await;
    origin.stop();
}

/// Varnish's `backend.set_health NAME sick|healthy|auto` as an admin feature: `POST
/// /backends/NAME/health` and `shellac backend NAME sick`; a sick backend takes no requests
/// until `auto` (or `healthy`) gives it back.
#[tokio::test]
async fn backend_set_health_from_the_admin_listener_and_the_cli() {
    let origin = Origin::start(|_| Reply::ok("o")).await;
    let vcl = "vcl 4.1;\nbackend web { ${origin0} }\n";
    let shellac = start_vcl("set-health", vcl, &[origin.addr]).await;
    let admin = shellac.admin.to_string();
    // The CLI blocks: run on a blocking thread, so the proxy's runtime goes on answering.
    let cli = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let admin = admin.clone();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_shellac"))
                .args(&args)
                .args(["--admin", &admin])
                .output()
                .expect("runs")
        })
    };
    assert_eq!(get(shellac.addr, "/1").await.status, 200);
    let out = cli(&["backend", "web", "sick"]).await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        get(shellac.addr, "/2").await.status,
        503,
        "a sick backend takes nothing"
    );
    let listed = common::request(shellac.admin, "GET", "/backends", &[], b"").await;
    assert!(
        listed.text().contains("\"admin_health\": \"sick\""),
        "{}",
        listed.text()
    );
    // The admin route itself; `auto` gives it back to its (absent) probe: healthy.
    let r = common::request(shellac.admin, "POST", "/backends/we*/health", &[], b"auto").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(get(shellac.addr, "/3").await.status, 200);
    let r = common::request(shellac.admin, "POST", "/backends/nope/health", &[], b"sick").await;
    assert_eq!(r.status, 404);
    let r = common::request(shellac.admin, "POST", "/backends/web/health", &[], b"down").await;
    assert_eq!(r.status, 400);
    let out = cli(&["backend", "nope", "sick"]).await.unwrap();
    assert!(!out.status.success());
    shellac.stop().await;
    origin.stop();
}

/// A 2009 operator's WordPress VCL (BRIEF.md item 5) sets `obj.prefetch = -30s;` in vcl_fetch
/// (Varnish 2.0): accepted — it was refused — and given meaning through refresh-ahead: the
/// object is refreshed in the background when requested within 30 s of its expiry (revalidated
/// with its ETag), with `cache.refresh_ahead` off. An object with an hour left is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn obj_prefetch_in_vcl_fetch_refreshes_ahead_of_expiry() {
    let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let n2 = n.clone();
    let origin = Origin::start(move |s| {
        let i = n2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if s.headers
            .get("if-none-match")
            .is_some_and(|v| v == "\"v0\"")
        {
            return Reply::ok("")
                .status(304)
                .header("etag", "\"v0\"")
                .header("x-refreshed", &i.to_string());
        }
        Reply::ok("the body")
            .cc("max-age=60")
            .header("etag", "\"v0\"")
    })
    .await;
    // 2.0: a vcl_fetch that sets obj.* (no beresp.*). 30.5 s of freshness: within 30 s of
    // expiry half a second after the fetch.
    let vcl = r#"backend default { ${origin0} }
sub vcl_fetch {
    if (req.url ~ "^/short") {
        set obj.ttl = 30.5s;
    } else {
        set obj.ttl = 3600s;
    }
    set obj.prefetch = -30s;
    set obj.http.x-prefetch = obj.prefetch;
}
"#;
    let shellac = start_vcl("obj-prefetch", vcl, &[origin.addr]).await;
    // An hour left: hits, no refresh.
    let first = get(shellac.addr, "/long").await;
    assert!(
        first.cache_status().contains("stored"),
        "{} {:?}",
        first.cache_status(),
        first.status
    );
    let hit = get(shellac.addr, "/long").await;
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    assert_eq!(hit.header("x-prefetch"), Some("-30.000"));
    assert_eq!(origin.count_path("/long"), 1);

    assert!(
        get(shellac.addr, "/short")
            .await
            .cache_status()
            .contains("stored")
    );
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let mut refreshed = None;
    for _ in 0..100 {
        let r = get(shellac.addr, "/short").await;
        assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
        assert_eq!(r.text(), "the body");
        if r.header("x-refreshed").is_some() {
            refreshed = Some(r);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    refreshed.expect("the object was refreshed in the background");
    assert_eq!(origin.last().headers["if-none-match"], "\"v0\"");
    assert!(shellac.stat("cache_refresh_ahead").await >= 1);
    assert_eq!(
        shellac.stat("cache_miss").await,
        2,
        "never a miss after the first"
    );
    assert_eq!(origin.count_path("/long"), 1, "an hour left: not refreshed");
    shellac.stop().await;
    origin.stop();
}

/// vmod_vsthrottle (varnish-modules) was refused at the import: its functions run on the
/// proxy's rate-limit buckets — `limit` requests per `period` per key, a token bucket —
/// `is_denied` (counter `vsthrottle_denied`), `remaining`, `blocked` with a block time, and
/// `return_token`.
#[tokio::test]
async fn vsthrottle_is_denied_remaining_blocked_and_return_token() {
    let origin = Origin::start(|_| Reply::ok("o")).await;
    let vcl = r#"vcl 4.1;
import vsthrottle;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url == "/give-back") {
        vsthrottle.return_token("api:" + client.ip, 3, 1h);
        return (synth(200, "given"));
    }
    if (req.url == "/blocking") {
        if (vsthrottle.is_denied("b:" + client.ip, 1, 1h, 10m)) {
            set req.http.x-blocked = vsthrottle.blocked("b:" + client.ip, 1, 1h, 10m);
            return (synth(429, "Blocked"));
        }
        return (synth(200, "ok"));
    }
    if (vsthrottle.is_denied("api:" + client.ip, 3, 1h)) {
        return (synth(429, "Too Many Requests"));
    }
    set req.http.x-left = vsthrottle.remaining("api:" + client.ip, 3, 1h);
    return (pass);
}
sub vcl_deliver { set resp.http.x-left = req.http.x-left; }
sub vcl_synth { set resp.http.x-blocked = req.http.x-blocked; }
"#;
    let shellac = start_vcl("vsthrottle", vcl, &[origin.addr]).await;
    for left in ["2", "1", "0"] {
        let r = get(shellac.addr, "/").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("x-left"), Some(left));
    }
    assert_eq!(get(shellac.addr, "/").await.status, 429);
    assert_eq!(shellac.stat("vsthrottle_denied").await, 1);
    assert_eq!(get(shellac.addr, "/give-back").await.status, 200);
    assert_eq!(
        get(shellac.addr, "/").await.status,
        200,
        "the token given back"
    );
    assert_eq!(get(shellac.addr, "/").await.status, 429);
    assert_eq!(origin.count(), 4);

    assert_eq!(get(shellac.addr, "/blocking").await.status, 200);
    let r = get(shellac.addr, "/blocking").await;
    assert_eq!(r.status, 429);
    let blocked: f64 = r.header("x-blocked").unwrap_or("0").parse().unwrap_or(0.0);
    assert!(blocked > 590.0 && blocked <= 600.0, "{blocked}");
    shellac.stop().await;
    origin.stop();
}
