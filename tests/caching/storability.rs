//! Storability rules (RFC 9111) and the memory tier's size bound: refusals not stored,
//! `Authorization` reuse as the response allows, POST passed, the stored Vary variant chosen,
//! eviction under a small size limit, objects over `max_object_size` streamed uncached.

use std::time::Duration;

use crate::common::*;
use shellac::config::units::Size;

use super::freshness::twice;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_not_stored() {
    for (cc, cookie, detail) in [
        ("no-store, max-age=60", false, "no-store"),
        ("private, max-age=60", false, "private"),
        ("no-cache, max-age=60", false, "no-cache"),
        ("max-age=60", true, "set-cookie"),
    ] {
        let (n, status) = twice(
            move || {
                let r = Reply::ok("x").cc(cc);
                if cookie {
                    r.header("set-cookie", "session=1")
                } else {
                    r
                }
            },
            |_| {},
        )
        .await;
        assert_eq!(n, 2, "{cc} cookie={cookie}");
        assert!(status.contains(detail), "{status}");
    }
}

/// Issue 23 (RFC 9111 §3.5): requests with Authorization are looked up. A response to one is
/// stored only if it says `public`, `s-maxage` or `must-revalidate`, and only such a stored
/// response answers them; anything else goes to the origin, is not stored, and does not
/// disturb what anonymous clients get.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_reuse_follows_the_response() {
    let origin = Origin::start(|s| {
        let who = if s.headers.contains_key("authorization") {
            "user"
        } else {
            "anonymous"
        };
        let cc = match s.path.as_str() {
            "/public" => "public, max-age=60",
            "/shared" => "s-maxage=60",
            "/revalidate" => "max-age=60, must-revalidate",
            _ => "max-age=60",
        };
        Reply::ok(&format!("{} for {who}", s.path)).cc(cc)
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let auth = [("authorization", "Bearer x")];
    for path in ["/public", "/shared", "/revalidate"] {
        let first = get_with(shellac.addr, path, &auth).await;
        assert!(
            first.cache_status().contains("stored"),
            "{path}: {}",
            first.cache_status()
        );
        let again = get_with(shellac.addr, path, &auth).await;
        assert!(again.cache_status().contains("hit"), "{path}");
        // The origin said the authorised answer may be shared.
        let anonymous = get(shellac.addr, path).await;
        assert_eq!(anonymous.text(), format!("{path} for user"));
        assert_eq!(origin.count_path(path), 1, "{path}");
    }
    // max-age alone: never stored for an authorised request, never served to one.
    let a = get_with(shellac.addr, "/page", &auth).await;
    assert_eq!(a.cache_status(), "shellac; fwd=miss; detail=authorization");
    get_with(shellac.addr, "/page", &auth).await;
    assert_eq!(origin.count_path("/page"), 2);
    let anonymous = get(shellac.addr, "/page").await;
    assert_eq!(
        anonymous.text(),
        "/page for anonymous",
        "an authorised answer is not shared"
    );
    assert!(
        get(shellac.addr, "/page")
            .await
            .cache_status()
            .contains("hit")
    );
    let a = get_with(shellac.addr, "/page", &auth).await;
    assert_eq!(
        a.text(),
        "/page for user",
        "the anonymous copy is not reused for it"
    );
    assert!(
        get(shellac.addr, "/page")
            .await
            .cache_status()
            .contains("hit"),
        "and it stays cached (no hit-for-miss)"
    );
    assert_eq!(origin.count_path("/page"), 4);
    assert_eq!(shellac.stat("pass_reason_authorization").await, 3);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_is_passed_not_cached() {
    let origin = Origin::start(|_| Reply::ok("posted").cc("max-age=60")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let r = request(shellac.addr, "POST", "/form", &[], b"a=1").await;
    assert_eq!(r.cache_status(), "shellac; fwd=method; detail=method");
    assert_eq!(origin.last().body_len, 3);
    request(shellac.addr, "POST", "/form", &[], b"a=1").await;
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_selects_the_stored_variant() {
    let origin = Origin::start(|s| {
        let lang = s
            .headers
            .get("accept-language")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        Reply::ok(&format!("lang={lang}"))
            .cc("max-age=60")
            .header("vary", "Accept-Language")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get_with(shellac.addr, "/", &[("accept-language", "fr")]).await;
    let fr = get_with(shellac.addr, "/", &[("accept-language", "fr")]).await;
    assert_eq!(fr.text(), "lang=fr");
    assert!(fr.cache_status().contains("hit"));
    let de = get_with(shellac.addr, "/", &[("accept-language", "de")]).await;
    assert_eq!(de.text(), "lang=de", "never the other variant");
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_under_a_small_size_limit() {
    let origin = Origin::start(|_| Reply::ok(&"y".repeat(20_000)).cc("max-age=600")).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.cache.memory_size = Size(256 * 1024);
        c.cache.max_object_size = Size(64 * 1024);
    })
    .await;
    for i in 0..100 {
        assert_eq!(
            get(shellac.addr, &format!("/obj{i}")).await.body.len(),
            20_000
        );
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_insert"], 100);
    assert!(
        stats["cache_bytes"] <= 256 * 1024,
        "bytes {}",
        stats["cache_bytes"]
    );
    assert!(stats["n_object"] <= 12, "objects {}", stats["n_object"]);
    assert_eq!(stats["n_lru_nuked"] + stats["n_object"], 100, "{stats:?}");
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_over_max_object_size_stream_uncached() {
    let origin = Origin::start(|_| Reply::ok(&"z".repeat(100_000)).cc("max-age=600")).await;
    let shellac = Shellac::start(origin.addr, |c| c.cache.max_object_size = Size(64 * 1024)).await;
    let r = get(shellac.addr, "/big").await;
    assert_eq!(r.body.len(), 100_000);
    assert!(
        r.cache_status().contains("detail=too-large"),
        "{}",
        r.cache_status()
    );
    get(shellac.addr, "/big").await;
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}
