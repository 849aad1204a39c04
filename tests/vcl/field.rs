//! Constructs that configurations from the field use and Shellac once refused, each run end to
//! end with Varnish's meaning: Varnish 3.0's `purge;`, a weighted `directors.hash()`,
//! `std.getenv()`. (The check-time side — where each is refused — is in check_field.rs.)

use crate::common;

use common::vcl::start_vcl;
use common::{Origin, Reply, get_with, request};

/// Varnish 3.0's `purge;` in vcl_hit / vcl_miss expires every variant of the request's object
/// (vcc's `VRT_purge(0, 0)`) and the subroutine goes on to its `error`: the purge guide's
/// `PURGE` method, as WordPress and the Varnish book wrote it for 3.0.
#[tokio::test]
async fn varnish3_purge_statement_removes_every_variant() {
    let origin = Origin::start(|seen| {
        let lang = seen
            .headers
            .get("accept-language")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_string();
        Reply::ok(&format!("page in {lang}"))
            .cc("max-age=3600")
            .header("vary", "accept-language")
    })
    .await;
    let vcl = r#"backend b { ${origin0} }
acl purgers { "127.0.0.1"; }
sub vcl_recv {
    if (req.request == "PURGE") {
        if (!client.ip ~ purgers) {
            error 405 "Not allowed.";
        }
        return (lookup);
    }
}
sub vcl_hit {
    if (req.request == "PURGE") {
        purge;
        error 200 "Purged.";
    }
}
sub vcl_miss {
    if (req.request == "PURGE") {
        purge;
        error 404 "Not in cache.";
    }
}
sub vcl_deliver {
    if (obj.hits > 0) { set resp.http.x-cache = "HIT"; } else { set resp.http.x-cache = "MISS"; }
}
"#;
    let shellac = start_vcl("purge-30", vcl, &[origin.addr]).await;
    for lang in ["en", "fi"] {
        let r = get_with(shellac.addr, "/post", &[("accept-language", lang)]).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("x-cache"), Some("MISS"));
        let r = get_with(shellac.addr, "/post", &[("accept-language", lang)]).await;
        assert_eq!(r.header("x-cache"), Some("HIT"), "{lang} is cached");
    }
    assert_eq!(origin.count(), 2);

    // The PURGE request looks up the `en` variant: a hit, whose `purge;` takes both.
    let r = request(
        shellac.addr,
        "PURGE",
        "/post",
        &[("accept-language", "en")],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(
        String::from_utf8_lossy(&r.body).contains("Purged."),
        "{:?}",
        r.body
    );
    assert_eq!(origin.count(), 2, "a purge does not fetch");
    for lang in ["fi", "en"] {
        let r = get_with(shellac.addr, "/post", &[("accept-language", lang)]).await;
        assert_eq!(r.header("x-cache"), Some("MISS"), "{lang} was purged");
        assert_eq!(String::from_utf8_lossy(&r.body), format!("page in {lang}"));
    }
    assert_eq!(origin.count(), 4);

    // Nothing stored under the key: vcl_miss's `purge;` finds nothing and its error answers.
    let r = request(shellac.addr, "PURGE", "/never", &[], b"").await;
    assert_eq!(r.status, 404);
    assert_eq!(origin.count(), 4);
    shellac.stop().await;
}

/// vmod_directors' `hash.add_backend(b, w)` (the "URL hash" load-balancing guides): keys
/// spread in proportion to the weights, a key always to the same backend. The origins say
/// who answered; every request is passed, so each one is a backend choice.
#[tokio::test]
async fn a_weighted_hash_director_spreads_urls_by_weight() {
    let light = Origin::start(|_| Reply::ok("light")).await;
    let heavy = Origin::start(|_| Reply::ok("heavy")).await;
    let vcl = r#"vcl 4.1;
import directors;
backend light { ${origin0} }
backend heavy { ${origin1} }
sub vcl_init {
    new by_url = directors.hash();
    by_url.add_backend(light, 1);
    by_url.add_backend(heavy, 3);
}
sub vcl_recv {
    set req.backend_hint = by_url.backend(req.url);
    return (pass);
}
"#;
    let shellac = start_vcl("hash-weights", vcl, &[light.addr, heavy.addr]).await;
    let mut first = Vec::new();
    for i in 0..200 {
        let r = get_with(shellac.addr, &format!("/item/{i}"), &[]).await;
        assert_eq!(r.status, 200);
        first.push(r.body.clone());
    }
    let (l, h) = (light.count(), heavy.count());
    assert_eq!(l + h, 200);
    // 1:3 is 50 : 150; the hashing is fixed, so this is the same every run.
    assert!((30..=70).contains(&l), "light {l}, heavy {h}");
    for (i, body) in first.iter().enumerate().take(40) {
        let r = get_with(shellac.addr, &format!("/item/{i}"), &[]).await;
        assert_eq!(&r.body, body, "/item/{i} goes where it went");
    }
    shellac.stop().await;
}

/// `std.getenv(name)` reads Shellac's environment at the call, as getenv(3) in varnishd;
/// a variable that is not there (or a name none can have) is unset. The proxy runs in this
/// process, so PATH is what the test sees.
#[tokio::test]
async fn std_getenv_reads_the_environment() {
    let origin = Origin::start(|_| Reply::ok("unused")).await;
    let vcl = r#"vcl 4.1;
import std;
backend b { ${origin0} }
sub vcl_recv {
    if (std.getenv(req.http.name)) {
        return (synth(200, "set"));
    }
    return (synth(404, "unset"));
}
sub vcl_synth {
    set resp.http.value = std.getenv(req.http.name);
    set resp.http.home-or = std.getenv("SHELLAC_TEST_NEVER_SET") + "-";
}
"#;
    let shellac = start_vcl("getenv", vcl, &[origin.addr]).await;
    let path = std::env::var("PATH").expect("tests run with a PATH");
    let r = get_with(shellac.addr, "/", &[("name", "PATH")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("value"), Some(path.as_str()));
    assert_eq!(
        r.header("home-or"),
        Some("-"),
        "an unset variable reads empty"
    );
    for name in ["SHELLAC_TEST_NEVER_SET", "PA=TH", ""] {
        let r = get_with(shellac.addr, "/", &[("name", name)]).await;
        assert_eq!(r.status, 404, "{name:?}");
        // A 4.x header set from an unset value is set, empty, as in Varnish.
        assert_eq!(r.header("value"), Some(""), "{name:?}");
    }
    assert_eq!(origin.count(), 0);
    shellac.stop().await;
}

/// vmod_xkey as the Magento and training VCLs use it: the backend tags its pages (here the
/// program copies `X-Tags` into `xkey` with `,all` added, commas and spaces both separate),
/// `xkey.purge()` removes every object with one of the keys and says how many,
/// `xkey.softpurge()` makes the fresh ones stale (served within grace while refreshed).
#[tokio::test]
async fn xkey_purges_and_softpurges_by_key() {
    let origin = Origin::start(|seen| {
        let tags = match seen.path.as_str() {
            "/p1" => "product-1 category-9",
            "/p2" => "product-2 category-9",
            _ => "product-3",
        };
        Reply::ok(&format!("page {}", seen.path))
            .cc("max-age=3600")
            .header("x-tags", tags)
    })
    .await;
    let vcl = r#"vcl 4.1;
import xkey;
backend b { ${origin0} }
acl purgers { "127.0.0.1"; }
sub vcl_recv {
    if (req.method == "PURGE" || req.method == "SOFTPURGE") {
        if (client.ip !~ purgers) {
            return (synth(405));
        }
        if (req.method == "PURGE") {
            set req.http.n-gone = xkey.purge(req.http.key);
        } else {
            set req.http.n-gone = xkey.softpurge(req.http.key);
        }
        return (synth(200, "Invalidated " + req.http.n-gone));
    }
}
sub vcl_backend_response {
    set beresp.http.xkey = beresp.http.x-tags + ",all";
    set beresp.grace = 1h;
}
sub vcl_deliver {
    if (obj.hits > 0) { set resp.http.x-cache = "HIT"; } else { set resp.http.x-cache = "MISS"; }
    set resp.http.x-fresh = obj.ttl > 0s;
}
"#;
    let shellac = start_vcl("xkey", vcl, &[origin.addr]).await;
    let fill = |paths: &'static [&'static str]| async move {
        for p in paths {
            get_with(shellac.addr, p, &[]).await;
        }
    };
    fill(&["/p1", "/p2", "/p3"]).await;
    assert_eq!(origin.count(), 3);
    let hit = |p: &'static str| async move { get_with(shellac.addr, p, &[]).await };
    assert_eq!(hit("/p3").await.header("x-cache"), Some("HIT"));

    // One key, space- and comma-separated lists alike.
    let r = request(shellac.addr, "PURGE", "/", &[("key", "product-1")], b"").await;
    assert_eq!(r.status, 200);
    assert!(
        String::from_utf8_lossy(&r.body).contains("Invalidated 1"),
        "{:?}",
        r.body
    );
    assert_eq!(hit("/p1").await.header("x-cache"), Some("MISS"));
    assert_eq!(hit("/p2").await.header("x-cache"), Some("HIT"));
    assert_eq!(origin.count(), 4);
    let r = request(
        shellac.addr,
        "PURGE",
        "/",
        &[("key", "nothing, category-9")],
        b"",
    )
    .await;
    assert!(
        String::from_utf8_lossy(&r.body).contains("Invalidated 2"),
        "{:?}",
        r.body
    );
    assert_eq!(
        hit("/p3").await.header("x-cache"),
        Some("HIT"),
        "not tagged category-9"
    );

    // Soft: the fresh ones (all three, through the key the program added) become stale,
    // still delivered within grace; a second soft purge finds none fresh.
    fill(&["/p1", "/p2"]).await;
    let before = origin.count();
    let r = request(shellac.addr, "SOFTPURGE", "/", &[("key", "all")], b"").await;
    assert!(
        String::from_utf8_lossy(&r.body).contains("Invalidated 3"),
        "{:?}",
        r.body
    );
    let r = request(shellac.addr, "SOFTPURGE", "/", &[("key", "all")], b"").await;
    assert!(
        String::from_utf8_lossy(&r.body).contains("Invalidated 0"),
        "{:?}",
        r.body
    );
    let r = hit("/p3").await;
    assert_eq!(r.header("x-cache"), Some("HIT"));
    assert_eq!(r.header("x-fresh"), Some("false"), "stale, from grace");
    assert_eq!(String::from_utf8_lossy(&r.body), "page /p3");
    for _ in 0..100 {
        if origin.count() > before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        origin.count(),
        before + 1,
        "the grace hit refreshed /p3 in the background"
    );
    shellac.stop().await;
}

/// A string constant where an IP is expected is an IP constant, as vcc reads it: the
/// `std.ip(req.http.X-Real-IP, "0.0.0.0")` of configurations behind another proxy, whose
/// fallback is that address when the field is missing or not an address. (The field here is
/// `X-Client`: Shellac removes an untrusted client's `X-Real-IP`.)
#[tokio::test]
async fn a_string_constant_is_an_ip_where_one_is_expected() {
    let origin = Origin::start(|_| Reply::ok("page")).await;
    let vcl = r#"vcl 4.1;
import std;
backend b { ${origin0} }
acl purgers { "10.0.0.0"/8; }
sub vcl_recv {
    set req.http.x-ip = std.ip(req.http.X-Client, "0.0.0.0");
    if (req.method == "PURGE") {
        if (std.ip(req.http.X-Client, "192.0.2.1") !~ purgers) {
            return (synth(403, "Forbidden " + req.http.x-ip));
        }
        return (synth(200, "Allowed " + req.http.x-ip));
    }
}
sub vcl_deliver {
    set resp.http.x-ip = req.http.x-ip;
    set resp.http.x-port = std.port(std.ip(req.http.X-Client, "0.0.0.0"));
    set resp.http.x-port-p = std.port(std.ip(req.http.X-Client, "0.0.0.0", p = "8080"));
}
"#;
    let shellac = start_vcl("ip-constant", vcl, &[origin.addr]).await;
    let r = get_with(shellac.addr, "/", &[("x-client", "10.1.2.3")]).await;
    assert_eq!(r.header("x-ip"), Some("10.1.2.3"));
    // An address without a port takes `p`, "80" when left out (it was ignored: 0).
    assert_eq!(r.header("x-port"), Some("80"));
    assert_eq!(r.header("x-port-p"), Some("8080"));
    let r = get_with(shellac.addr, "/", &[("x-client", "10.1.2.3:81")]).await;
    assert_eq!(r.header("x-port-p"), Some("81"));
    let r = get_with(shellac.addr, "/", &[("x-client", "not an address")]).await;
    assert_eq!(r.header("x-ip"), Some("0.0.0.0"), "the constant fallback");
    let r = get_with(shellac.addr, "/", &[]).await;
    assert_eq!(r.header("x-ip"), Some("0.0.0.0"));
    let r = request(shellac.addr, "PURGE", "/", &[("x-client", "10.9.9.9")], b"").await;
    assert_eq!(r.status, 200);
    let r = request(shellac.addr, "PURGE", "/", &[], b"").await;
    assert_eq!(r.status, 403, "192.0.2.1 is not in the ACL");
    shellac.stop().await;
}

/// vmod_std's `round()` and the conversions Varnish 6.2 deprecated but 4.x/6.0 files still
/// call (`std.real2integer(std.random(1, 10), 0)` in training VCLs): rounding half away from
/// zero, the fallback for what is not finite or past ±(2^53 - 1).
#[tokio::test]
async fn std_conversions_of_varnish_6_0() {
    let origin = Origin::start(|_| Reply::ok("unused")).await;
    let vcl = r#"vcl 4.0;
import std;
backend b { ${origin0} }
sub vcl_recv { return (synth(200, std.real2integer(std.random(1, 10), 0))); }
sub vcl_synth {
    set resp.http.r2i = std.real2integer(2.5, 7) + " " + std.real2integer(-2.5, 7)
        + " " + std.real2integer(std.real("1e300", 0.0), 7) + " " + std.real2integer(std.real("9007199254740993", 0.0), 7);
    set resp.http.time = std.real2time(1140618699.00, now);
    set resp.http.t2i = std.time2integer(std.real2time(1140618699.4, now), 0);
    set resp.http.t2r = std.time2real(std.real2time(12.5, now), 0.0);
    set resp.http.round = std.round(2.5) + " " + std.round(-1.5);
    set resp.http.reason = resp.reason;
}
"#;
    let shellac = start_vcl("std-conversions", vcl, &[origin.addr]).await;
    let r = get_with(shellac.addr, "/", &[]).await;
    assert_eq!(r.status, 200);
    let n: i64 = r
        .header("reason")
        .and_then(|v| v.parse().ok())
        .expect("a number");
    assert!((1..=10).contains(&n), "{n}");
    assert_eq!(r.header("r2i"), Some("3 -3 7 7"));
    assert_eq!(r.header("time"), Some("Wed, 22 Feb 2006 14:31:39 GMT"));
    assert_eq!(r.header("t2i"), Some("1140618699"));
    assert_eq!(r.header("t2r"), Some("12.500"));
    assert_eq!(r.header("round"), Some("3.000 -2.000"));
    assert_eq!(origin.count(), 0);
    shellac.stop().await;
}
