//! VCL constructs Shellac once refused as unsupported and now runs with Varnish's meaning,
//! end to end: `req.max_age`, ...

mod common;

use std::time::Duration;

use common::vcl::start_vcl;
use common::{Origin, Reply, get_with};

/// `req.max_age` (Varnish 8's name for `req.ttl`, varnishtest v00000): a positive value
/// below the object's TTL ends its freshness there, and its grace runs from then, as
/// Varnish's EXP_Ttl; zero or less (unset reads -1) changes nothing. The stored object is
/// 30 s old when it arrives (`Age: 30`), so no clock has to move.
#[tokio::test]
async fn req_max_age_caps_the_freshness_a_hit_may_have() {
    let origin = Origin::start(|_| Reply::ok("body").cc("max-age=60").header("age", "30")).await;
    let vcl = r#"vcl 4.1;
import std;
backend b { ${origin0} }
sub vcl_recv {
    if (req.http.max-age) {
        set req.max_age = std.duration(req.http.max-age, 0s);
    }
    if (req.http.grace) {
        set req.grace = std.duration(req.http.grace, 0s);
    }
    set req.http.x-max-age = req.max_age;
}
sub vcl_backend_response { set beresp.grace = 1h; }
sub vcl_deliver {
    set resp.http.x-max-age = req.http.x-max-age;
    set resp.http.x-hits = obj.hits;
}
"#;
    let shellac = start_vcl("req-max-age", vcl, &[origin.addr]).await;
    let first = get_with(shellac.addr, "/", &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("x-max-age"), Some("-1.000"), "unset reads -1");
    assert_eq!(origin.count(), 1);
    // Younger than the cap: a fresh hit.
    let r = get_with(shellac.addr, "/", &[("max-age", "40s")]).await;
    assert_eq!(r.header("x-max-age"), Some("40.000"));
    assert_eq!(r.header("x-hits"), Some("1"));
    assert!(!r.cache_status().contains("stale"), "{}", r.cache_status());
    // Zero is no cap (Varnish reads only a positive req.max_age).
    let r = get_with(shellac.addr, "/", &[("max-age", "0s")]).await;
    assert_eq!(r.header("x-hits"), Some("2"));
    assert!(!r.cache_status().contains("stale"), "{}", r.cache_status());
    assert_eq!(origin.count(), 1);
    // Older than the cap, with the request's grace cut to 0: a miss.
    let r = get_with(shellac.addr, "/", &[("max-age", "10s"), ("grace", "0s")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-hits"), Some("0"));
    assert_eq!(origin.count(), 2);
    // Older than the cap, within the object's grace counted from the cap: delivered stale
    // while a background fetch refreshes it.
    let r = get_with(shellac.addr, "/", &[("max-age", "10s")]).await;
    assert_eq!(r.status, 200);
    assert!(
        r.cache_status().contains("stale-while-revalidate"),
        "{}",
        r.cache_status()
    );
    for _ in 0..100 {
        if origin.count() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(origin.count(), 3, "the grace hit refreshed the object");
    shellac.stop().await;
}
