//! Revalidation of stale objects with the backend (RFC 9111 §4.3) and header refresh on 304
//! (RFC 9111 §3.2, §4.3.4).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::*;

/// RFC 9111 §4.3.1: a stale object with an ETag is revalidated with If-None-Match; a 304
/// refreshes its headers and freshness and the stored body is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_object_is_revalidated_and_refreshed_by_304() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let origin = Origin::start(move |s| {
        let i = n2.fetch_add(1, Ordering::SeqCst);
        if s.headers
            .get("if-none-match")
            .is_some_and(|v| v == "\"v1\"")
        {
            return Reply::ok("")
                .status(304)
                .cc("max-age=60")
                .header("etag", "\"v1\"")
                .header("x-refreshed", &i.to_string());
        }
        Reply::ok("the body")
            .cc("max-age=1")
            .header("etag", "\"v1\"")
            .header("x-refreshed", "no")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    assert_eq!(get(shellac.addr, "/").await.text(), "the body");
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let r = get(shellac.addr, "/").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "the body", "body kept from the stored response");
    assert_eq!(
        r.header("x-refreshed"),
        Some("1"),
        "headers updated from the 304 (§3.2)"
    );
    assert_eq!(r.header("cache-control"), Some("max-age=60"));
    assert_eq!(
        r.cache_status(),
        "shellac; fwd=stale; fwd-status=304; stored"
    );
    assert_eq!(origin.last().headers["if-none-match"], "\"v1\"");

    let hit = get(shellac.addr, "/").await;
    assert!(
        hit_ttl_near(hit.cache_status(), 60, 10),
        "{}",
        hit.cache_status()
    );
    assert_eq!(hit.text(), "the body");
    assert_eq!(origin.count(), 2);
    assert_eq!(shellac.stat("cache_revalidated").await, 1);
    shellac.stop().await;
}

/// RFC 9111 §4.3.1: Last-Modified is used as If-Modified-Since when there is no ETag; a 200
/// answer replaces the object (§4.3.3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_modified_revalidation_and_replacement() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let origin = Origin::start(move |_| {
        let i = n2.fetch_add(1, Ordering::SeqCst);
        Reply::ok(&format!("version {i}"))
            .cc("max-age=1")
            .header("last-modified", "Sat, 21 Nov 2026 10:00:00 GMT")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    assert_eq!(get(shellac.addr, "/").await.text(), "version 0");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(get(shellac.addr, "/").await.text(), "version 1");
    assert_eq!(
        origin.last().headers["if-modified-since"],
        "Sat, 21 Nov 2026 10:00:00 GMT"
    );
    assert!(get(shellac.addr, "/").await.cache_status().contains("hit"));
    shellac.stop().await;
}

/// Client conditionals are not forwarded on a cache fill (the cache needs the full response):
/// Shellac answers them on the response it fetched (issue 32: a 304 here, where the origin's
/// 200 used to be delivered), and from the stored object afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_conditionals_are_not_forwarded_on_a_fill() {
    let origin = Origin::start(|_| Reply::ok("x").cc("max-age=60").header("etag", "\"e\"")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let r = get_with(shellac.addr, "/", &[("if-none-match", "\"e\"")]).await;
    assert_eq!(r.status, 304);
    assert!(!origin.last().headers.contains_key("if-none-match"));
    assert_eq!(
        get_with(shellac.addr, "/", &[("if-none-match", "\"e\"")])
            .await
            .status,
        304
    );
    shellac.stop().await;
}

/// Issue 23 (RFC 9111 §5.2.2.4): a `no-cache` response with a validator is stored and
/// revalidated on every use: each request sends If-None-Match, a 304 answers it with the
/// stored body (never a fast hit), a 200 replaces it, and with the origin gone nothing stale is
/// served (504). Without a validator it is not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cache_is_stored_and_revalidated_on_every_use() {
    let version = Arc::new(AtomicUsize::new(1));
    let v = version.clone();
    let origin = Origin::start(move |s| {
        let etag = format!("\"v{}\"", v.load(Ordering::SeqCst));
        if s.headers.get("if-none-match").is_some_and(|h| *h == etag) {
            return Reply::ok("")
                .status(304)
                .cc("no-cache")
                .header("etag", &etag);
        }
        Reply::ok(&format!("body {etag}"))
            .cc("no-cache, max-age=600")
            .header("etag", &etag)
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| c.server.fast_hits = true).await;
    let first = get(shellac.addr, "/doc").await;
    assert_eq!(first.cache_status(), "shellac; fwd=miss; stored");
    for i in 0..3 {
        let r = get(shellac.addr, "/doc").await;
        assert_eq!(r.text(), "body \"v1\"");
        assert_eq!(
            r.cache_status(),
            "shellac; fwd=stale; fwd-status=304; stored",
            "use {i}"
        );
        assert_eq!(origin.last().headers["if-none-match"], "\"v1\"");
    }
    assert_eq!(origin.count(), 4, "every use went to the origin");
    assert_eq!(shellac.stat("cache_hit_fast").await, 0);
    version.store(2, Ordering::SeqCst);
    let changed = get(shellac.addr, "/doc").await;
    assert_eq!(changed.text(), "body \"v2\"");
    assert!(
        get(shellac.addr, "/doc")
            .await
            .cache_status()
            .contains("fwd-status=304"),
        "the new version is stored"
    );
    // Not servable stale: with the origin gone the answer is an error, not the stored body.
    origin.stop();
    let down = get(shellac.addr, "/doc").await;
    assert_eq!(down.status, 504, "{}", down.text());
    shellac.stop().await;

    let origin = Origin::start(|_| Reply::ok("no validator").cc("no-cache")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/plain").await;
    let r = get(shellac.addr, "/plain").await;
    assert_eq!(r.cache_status(), "shellac; fwd=miss; detail=no-cache");
    shellac.stop().await;
}

/// Issue 23, refresh-ahead (`cache.refresh_ahead`): a fresh object requested within the window
/// before its expiry is delivered from the cache at once and refreshed in the background
/// (revalidated with its ETag), so it never goes stale for its readers. Here the window is the
/// whole lifetime, so the first hit starts it. Off by default: nothing is refreshed early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_ahead_refreshes_a_fresh_object_in_the_background() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let origin = Origin::start(move |s| {
        let i = n2.fetch_add(1, Ordering::SeqCst);
        if s.headers
            .get("if-none-match")
            .is_some_and(|v| v == "\"v0\"")
        {
            return Reply::ok("")
                .status(304)
                .cc("max-age=3600")
                .header("etag", "\"v0\"")
                .header("x-refreshed", &i.to_string());
        }
        Reply::ok("the body")
            .cc("max-age=3600")
            .header("etag", "\"v0\"")
    })
    .await;
    let off = Shellac::start(origin.addr, |_| {}).await;
    get(off.addr, "/").await;
    assert!(get(off.addr, "/").await.cache_status().contains("hit"));
    assert_eq!(origin.count(), 1, "off by default");
    assert_eq!(off.stat("cache_refresh_ahead").await, 0);
    off.stop().await;

    let shellac = Shellac::start(origin.addr, |c| {
        c.cache.refresh_ahead =
            shellac::config::units::RefreshAhead::Before(Duration::from_secs(3600));
    })
    .await;
    let first = get(shellac.addr, "/").await;
    assert!(
        first.cache_status().contains("stored"),
        "{}",
        first.cache_status()
    );
    let hit = get(shellac.addr, "/").await;
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    assert_eq!(hit.text(), "the body");
    let mut refreshed = None;
    for _ in 0..100 {
        let r = get(shellac.addr, "/").await;
        if r.header("x-refreshed").is_some() {
            refreshed = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refreshed = refreshed.expect("the object was refreshed in the background");
    assert!(
        refreshed.cache_status().contains("hit"),
        "{}",
        refreshed.cache_status()
    );
    assert_eq!(refreshed.text(), "the body");
    assert_eq!(origin.last().headers["if-none-match"], "\"v0\"");
    assert!(shellac.stat("cache_refresh_ahead").await >= 1);
    assert_eq!(
        shellac.stat("cache_miss").await,
        1,
        "never a miss after the first"
    );
    shellac.stop().await;
}
