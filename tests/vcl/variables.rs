//! Varnish variables with Varnish's values, end to end: `Age`, `param.uncacheable_ttl`,
//! `req.proto`, `req.grace`, a pass's `beresp.ttl`, `obj.ttl`, `obj.hits`, `X-Varnish`,
//! `X-Forwarded-For`, `req.hash_always_miss`, and lifetimes past what a clock can add.

use crate::common;
use crate::get_once;
use common::vcl::{start_vcl, start_vcl_with};
use common::{Origin, Reply, Resp, Shellac, get, get_with};

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

/// Regression (trunk c00075): a request passed because of a hit-for-pass object (VCL's
/// `return (pass(DURATION))`) reads `req.is_hitpass` and `bereq.is_hitpass` true; the fetch
/// that made the object, and a hit-for-miss, read it false (they read false in Shellac
/// before: the flag was never set).
#[tokio::test]
async fn varnish_c00075_a_hit_for_pass_reads_is_hitpass() {
    let origin = Origin::start(|_| Reply::ok("x").cc("no-cache")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    set beresp.http.be-hitmiss = bereq.is_hitmiss;
    set beresp.http.be-hitpass = bereq.is_hitpass;
    if (bereq.url == "/hfp") { return (pass(10m)); }
}
sub vcl_deliver {
    set resp.http.is-hitmiss = req.is_hitmiss;
    set resp.http.is-hitpass = req.is_hitpass;
}
"#;
    let shellac = start_vcl("c00075", vcl, &[origin.addr]).await;
    let flags = |r: &Resp| {
        [
            r.header("is-hitmiss").unwrap_or("-").to_string(),
            r.header("is-hitpass").unwrap_or("-").to_string(),
            r.header("be-hitmiss").unwrap_or("-").to_string(),
            r.header("be-hitpass").unwrap_or("-").to_string(),
        ]
    };
    let f = |m: &str, p: &str| [m, p, m, p].map(String::from);
    assert_eq!(flags(&get(shellac.addr, "/hfm").await), f("false", "false"));
    assert_eq!(flags(&get(shellac.addr, "/hfm").await), f("true", "false"));
    assert_eq!(flags(&get(shellac.addr, "/hfp").await), f("false", "false"));
    assert_eq!(flags(&get(shellac.addr, "/hfp").await), f("false", "true"));
    assert_eq!(origin.count(), 4);
    assert_eq!(shellac.stat("cache_hitpass").await, 1);
    shellac.stop().await;
}

/// Regression (trunk b00002): a 4.x pass reads no lifetime in vcl_backend_response, as in
/// Varnish since 5.0: `beresp.ttl` is 0 less the `Age` (trunk keeps the `Age`, in
/// `beresp.age`), `beresp.grace` and `beresp.keep` 0, whatever `Cache-Control` says; a miss
/// reads the response's. A 2.x program's pass reads the response's TTL, as Varnish 2.1's did.
/// Shellac read the response's lifetimes on a 4.x pass before.
#[tokio::test]
async fn varnish_b00002_a_pass_reads_no_lifetime_but_its_age() {
    let origin = Origin::start(|_| {
        Reply::ok("x")
            .cc("max-age=120, stale-while-revalidate=30")
            .header("age", "7")
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { if (req.url == "/pass") { return (pass); } }
sub vcl_backend_response {
    set beresp.http.x-ttl = beresp.ttl;
    set beresp.http.x-grace = beresp.grace;
    set beresp.http.x-keep = beresp.keep;
    set beresp.http.x-age = beresp.age;
    set beresp.http.x-uncacheable = bereq.uncacheable;
}
"#;
    let shellac = start_vcl_with("b00002", vcl, &[origin.addr], |c| {
        c.cache.keep = shellac::config::units::Dur(std::time::Duration::from_secs(5));
    })
    .await;
    let read = |r: &Resp| {
        ["x-ttl", "x-grace", "x-keep", "x-age", "x-uncacheable"]
            .map(|f| r.header(f).unwrap_or("-").to_string())
    };
    let pass = get(shellac.addr, "/pass").await;
    assert_eq!(pass.status, 200);
    assert_eq!(read(&pass), ["-7.000", "0.000", "0.000", "7.000", "true"]);
    let miss = get(shellac.addr, "/miss").await;
    assert_eq!(
        read(&miss),
        ["113.000", "30.000", "5.000", "7.000", "false"]
    );
    assert_eq!(origin.count(), 2);
    assert_eq!(shellac.stat("cache_pass").await, 1);
    assert_eq!(shellac.stat("n_object").await, 1, "the miss only");
    shellac.stop().await;

    let legacy = r#"backend b { ${origin0} }
sub vcl_recv { pass; }
sub vcl_fetch { set beresp.http.x-ttl = beresp.ttl; }
"#;
    let shellac = start_vcl("b00002-2", legacy, &[origin.addr]).await;
    let r = get(shellac.addr, "/").await;
    assert_eq!(r.header("x-ttl"), Some("113.000"));
    assert_eq!(shellac.stat("cache_pass").await, 1);
    assert_eq!(shellac.stat("n_object").await, 0);
    assert_eq!(origin.count(), 3);
    shellac.stop().await;
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
