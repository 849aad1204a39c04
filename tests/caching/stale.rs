//! Serving stale: grace / stale-while-revalidate (RFC 5861 §3), stale-if-error (RFC 5861 §4),
//! keep when the backend is unreachable (RFC 9111 §4.2.4), and the RFC default of never
//! serving stale otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::*;
use shellac::config::units::Dur;

fn counting(
    reply: impl Fn(usize) -> Reply + Send + Sync + 'static,
) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    let n = Arc::new(AtomicUsize::new(0));
    move |_| reply(n.fetch_add(1, Ordering::SeqCst))
}

/// RFC 5861 §3: within stale-while-revalidate the stale copy is delivered at once and one
/// background fetch refreshes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_while_revalidate_delivers_at_once_and_refreshes() {
    // The refreshed copy lives longer: with `max-age=1` it could itself go stale before the
    // last request (its age starts at up to a second, the origin's `Date` having whole seconds)
    // and be refreshed again — a flake seen under a loaded test run.
    let origin = Origin::start(counting(|i| {
        let cc = if i == 0 { "max-age=1" } else { "max-age=60" };
        Reply::ok(&format!("v{i}"))
            .cc(&format!("{cc}, stale-while-revalidate=30"))
            .delay(Duration::from_millis(if i == 0 { 0 } else { 300 }))
    }))
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    assert_eq!(get(shellac.addr, "/").await.text(), "v0");
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // Three quick requests: all get the stale copy immediately, one refresh is made.
    for _ in 0..3 {
        let r = get(shellac.addr, "/").await;
        assert_eq!(r.text(), "v0");
        assert!(
            r.cache_status().contains("detail=stale-while-revalidate"),
            "{}",
            r.cache_status()
        );
    }
    for _ in 0..50 {
        if get(shellac.addr, "/").await.text() == "v1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get(shellac.addr, "/").await.text(), "v1");
    assert_eq!(origin.count(), 2, "exactly one background refresh");
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_refresh"], 1);
    assert!(stats["cache_grace_hit"] >= 3);
    shellac.stop().await;
}

/// RFC 9111 §4.2.4: without permission (no grace, no stale-while-revalidate) a stale object is
/// never delivered while the backend answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_stale_without_permission() {
    let origin = Origin::start(counting(|i| Reply::ok(&format!("v{i}")).cc("max-age=1"))).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(get(shellac.addr, "/").await.text(), "v1");
    shellac.stop().await;
}

/// `cache.grace` gives every object a stale-while-revalidate window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_grace() {
    let origin = Origin::start(counting(|i| Reply::ok(&format!("v{i}")).cc("max-age=1"))).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.cache.grace = Dur(Duration::from_secs(60))
    })
    .await;
    get(shellac.addr, "/").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(get(shellac.addr, "/").await.text(), "v0");
    shellac.stop().await;
}

/// RFC 5861 §4: stale-if-error lets the stale copy answer a 5xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_if_error_answers_a_5xx() {
    let broken = Arc::new(AtomicBool::new(false));
    let b = broken.clone();
    let origin = Origin::start(move |_| {
        if b.load(Ordering::SeqCst) {
            Reply::ok("oops").status(500)
        } else {
            Reply::ok("good").cc("max-age=1, stale-if-error=60")
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/").await;
    broken.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = get(shellac.addr, "/").await;
    assert_eq!((r.status, r.text().as_str()), (200, "good"));
    assert!(
        r.cache_status().contains("detail=stale-if-error"),
        "{}",
        r.cache_status()
    );

    // Without stale-if-error the 500 is delivered.
    let origin2 = Origin::start(counting(|i| {
        if i == 0 {
            Reply::ok("good").cc("max-age=1")
        } else {
            Reply::ok("oops").status(500)
        }
    }))
    .await;
    let shellac2 = Shellac::start(origin2.addr, |_| {}).await;
    get(shellac2.addr, "/").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(get(shellac2.addr, "/").await.status, 500);
    shellac.stop().await;
    shellac2.stop().await;
}

/// RFC 9111 §4.2.4 ("disconnected") and §5.2.2.2: an unreachable backend is answered with the
/// stale copy within `keep`, but never after must-revalidate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_backend_uses_stale_unless_must_revalidate() {
    let origin = Origin::start(|s| {
        if s.path == "/strict" {
            Reply::ok("strict").cc("max-age=1, must-revalidate")
        } else {
            Reply::ok("lenient").cc("max-age=1")
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| c.backends[0].passive_failures = 0).await;
    get(shellac.addr, "/lenient").await;
    get(shellac.addr, "/strict").await;
    origin.stop();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = get(shellac.addr, "/lenient").await;
    assert_eq!((r.status, r.text().as_str()), (200, "lenient"));
    assert!(
        r.cache_status()
            .contains("detail=stale-backend-connect-failed"),
        "{}",
        r.cache_status()
    );
    let r = get(shellac.addr, "/strict").await;
    assert_eq!(
        r.status, 504,
        "must-revalidate forbids serving stale; the error is 504 (§5.2.2.2)"
    );
    shellac.stop().await;
}

/// Request Cache-Control is ignored by default (documented), honoured when enabled
/// (RFC 9111 §5.2.1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_cache_control_setting() {
    let origin = Origin::start(counting(|i| {
        Reply::ok(&format!("v{i}"))
            .cc("max-age=60")
            .header("etag", "\"e\"")
    }))
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/").await;
    assert_eq!(
        get_with(shellac.addr, "/", &[("cache-control", "no-cache")])
            .await
            .text(),
        "v0",
        "ignored by default"
    );
    shellac.stop().await;

    let shellac = Shellac::start(origin.addr, |c| c.cache.request_cache_control = true).await;
    assert_eq!(get(shellac.addr, "/a").await.text(), "v1");
    // no-cache: validated with the backend (conditional, since the object has an ETag).
    get_with(shellac.addr, "/a", &[("cache-control", "no-cache")]).await;
    assert_eq!(origin.last().headers["if-none-match"], "\"e\"");
    // only-if-cached on an uncached URL: 504 (§5.2.1.7).
    assert_eq!(
        get_with(
            shellac.addr,
            "/never",
            &[("cache-control", "only-if-cached")]
        )
        .await
        .status,
        504
    );
    // min-fresh beyond what is left: not a hit.
    let before = origin.count();
    get_with(shellac.addr, "/b", &[]).await;
    get_with(shellac.addr, "/b", &[("cache-control", "min-fresh=3600")]).await;
    assert_eq!(origin.count(), before + 2);
    shellac.stop().await;
}

/// A background refresh is fetched and stored as the request that started it would have been:
/// with its rules' response phase (a `ttl` + `override_origin` rule storing a `no-store`
/// stylesheet), on the director a rule chose. It used to run with neither: the refreshed
/// stylesheet was not stored and went to the default backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_refresh_keeps_the_rules_of_its_request() {
    let default = Origin::start(|_| Reply::ok("default backend").cc("no-store")).await;
    let assets = Origin::start(counting(|i| {
        Reply::ok(&format!("css v{i}"))
            .cc("no-store")
            .header("content-type", "text/css")
    }))
    .await;
    let assets_addr = assets.addr;
    let shellac = Shellac::start(default.addr, move |c| {
        c.cache.grace = Dur(Duration::from_secs(60));
        let text = format!(
            "[[backend]]\nhost = \"h\"\n\n[[backend]]\nname = \"assets\"\nhost = \"{}\"\nport = {}\n\n\
             [[rule]]\npath = '\\.css$'\ndirector = \"assets\"\nttl = \"1s\"\noverride_origin = true\n",
            assets_addr.ip(),
            assets_addr.port()
        );
        let parsed = shellac::config::Config::parse(&text, "rules.toml").unwrap();
        c.backends.push(parsed.backends[1].clone());
        c.rules = parsed.rules;
    })
    .await;
    assert_eq!(get(shellac.addr, "/a.css").await.text(), "css v0");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let stale = get(shellac.addr, "/a.css").await;
    assert!(
        stale.cache_status().contains("stale-while-revalidate"),
        "{}",
        stale.cache_status()
    );
    // Only a stored refresh is ever delivered: the background fetch's own response goes to no
    // client.
    let mut stored = false;
    let mut last = String::new();
    let waited = std::time::Instant::now();
    while waited.elapsed() < Duration::from_secs(10) {
        let r = get(shellac.addr, "/a.css").await;
        if r.text() == "css v1" {
            stored = true;
            break;
        }
        last = format!("{} ({})", r.text(), r.cache_status());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        stored,
        "the refreshed stylesheet was stored: last {last}, {} asked of the assets origin",
        assets.count()
    );
    assert_eq!(
        default.count(),
        0,
        "the refresh went to the rule's director"
    );
    shellac.stop().await;
}
