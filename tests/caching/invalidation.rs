//! Invalidation: PURGE (all variants, soft), bans (lazy and swept), surrogate keys, and
//! invalidation after unsafe methods (RFC 9111 §4.4).

use std::time::Duration;

use crate::common::*;
use shellac::config::invalidation::Network;
use shellac::config::units::Dur;

fn counting_origin() -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    move |s| {
        if s.method == "POST" {
            return Reply::ok("done")
                .status(201)
                .header("location", "/articles/7")
                .header("content-location", "http://other.example/x");
        }
        let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let tags = if s.path.starts_with("/products") {
            "product-1 catalog"
        } else {
            "news"
        };
        Reply::ok(&format!("{} #{i}", s.path))
            .cc("max-age=600")
            .header("surrogate-key", tags)
    }
}

async fn admin_post(shellac: &Shellac, path: &str, body: &str) -> Resp {
    request(shellac.admin, "POST", path, &[], body.as_bytes()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_from_allowed_networks() {
    let origin = Origin::start(counting_origin()).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/a").await;
    let r = request(shellac.addr, "PURGE", "/a", &[], b"").await;
    assert_eq!(r.status, 200);
    assert!(r.text().contains("purged 1 object"), "{}", r.text());
    assert!(
        get(shellac.addr, "/a")
            .await
            .cache_status()
            .contains("fwd=miss")
    );
    assert_eq!(
        request(shellac.addr, "PURGE", "/never", &[], b"")
            .await
            .status,
        404
    );
    shellac.stop().await;

    let shellac = Shellac::start(origin.addr, |c| {
        c.invalidation.purge_from = vec![Network::parse("10.0.0.0/8").unwrap()]
    })
    .await;
    get(shellac.addr, "/b").await;
    assert_eq!(
        request(shellac.addr, "PURGE", "/b", &[], b"").await.status,
        405
    );
    assert!(get(shellac.addr, "/b").await.cache_status().contains("hit"));
    assert_eq!(shellac.stat("purge_denied").await, 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soft_purge_keeps_serving_within_grace() {
    let origin = Origin::start(counting_origin()).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.cache.grace = Dur(Duration::from_secs(60))
    })
    .await;
    assert_eq!(get(shellac.addr, "/s").await.text(), "/s #0");
    let r = request(shellac.addr, "PURGE", "/s", &[("soft-purge", "1")], b"").await;
    assert_eq!(r.status, 200);
    let stale = get(shellac.addr, "/s").await;
    assert_eq!(stale.text(), "/s #0");
    assert!(
        stale.cache_status().contains("stale-while-revalidate"),
        "{}",
        stale.cache_status()
    );
    for _ in 0..50 {
        if get(shellac.addr, "/s").await.text() == "/s #1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        get(shellac.addr, "/s").await.text(),
        "/s #1",
        "refreshed in the background"
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bans_apply_lazily_and_the_sweeper_retires_them() {
    let origin = Origin::start(counting_origin()).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.invalidation.ban_sweep_interval = Dur(Duration::from_millis(200))
    })
    .await;
    for p in ["/news/1", "/news/2", "/sport/1"] {
        get(shellac.addr, p).await;
    }
    let r = admin_post(&shellac, "/ban", "req.url ~ ^/news/").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        get(shellac.addr, "/news/1")
            .await
            .cache_status()
            .contains("fwd=miss"),
        "banned at lookup"
    );
    assert!(
        get(shellac.addr, "/sport/1")
            .await
            .cache_status()
            .contains("hit"),
        "not matched"
    );
    // The new /news/1 was stored after the ban: not affected.
    assert!(
        get(shellac.addr, "/news/1")
            .await
            .cache_status()
            .contains("hit")
    );
    // The sweeper removes /news/2 without a lookup, then retires the ban.
    for _ in 0..100 {
        if shellac.stat("ban_retired").await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stats = shellac.stats().await;
    assert_eq!(stats["ban_retired"], 1);
    assert_eq!(stats["ban_objects"], 2, "{stats:?}");
    let bans: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/bans").await.body).unwrap();
    assert_eq!(bans["bans"].as_array().unwrap().len(), 0);

    let bad = admin_post(&shellac, "/ban", "req.nope ~ x").await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.text().contains("Unknown or unsupported field") && bad.text().contains("req.nope"),
        "{}",
        bad.text()
    );
    shellac.stop().await;
}

/// Regression (issue 21, varnishtest c00133 / 2.1.5 c00021): a ban on a request field
/// (`req.http.NAME`) is evaluated against the request looking the object up, as in Varnish —
/// on the fast-hit path too (it declines, the full path checks) — and the sweeper, which has
/// no request, neither applies nor retires it while older objects remain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_on_a_request_field_applies_to_the_looking_up_request() {
    let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let origin = Origin::start(move |s| {
        let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let v = s
            .headers
            .get("version")
            .map_or("-", |v| v.to_str().unwrap_or("?"));
        Reply::ok(&format!("{v} #{i}"))
            .cc("max-age=600")
            .header("vary", "version")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.invalidation.ban_sweep_interval = Dur(Duration::from_millis(100))
    })
    .await;
    let fetch = |v: &'static str| {
        let addr = shellac.addr;
        async move { get_with(addr, "/", &[("version", v)]).await.text() }
    };
    assert_eq!(fetch("a").await, "a #0");
    assert_eq!(fetch("b").await, "b #1");
    assert_eq!(fetch("a").await, "a #0", "a hit");
    let r = admin_post(&shellac, "/ban", "req.http.version == a").await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Sweeps run meanwhile: they cannot tell, so the ban stays and variant b stays stored.
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(shellac.stat("ban_retired").await, 0);
    assert_eq!(fetch("b").await, "b #1", "the ban does not match version b");
    assert_eq!(
        fetch("a").await,
        "a #2",
        "banned for the request with version a"
    );
    assert_eq!(fetch("a").await, "a #2", "stored after the ban: a hit");
    assert_eq!(shellac.stat("ban_objects").await, 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn surrogate_keys_purge_every_tagged_object() {
    let origin = Origin::start(counting_origin()).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    for p in ["/products/1", "/products/2", "/news/1"] {
        let r = get(shellac.addr, p).await;
        assert_eq!(
            r.header("surrogate-key"),
            None,
            "tags are not sent to clients"
        );
    }
    let r = request(
        shellac.addr,
        "PURGE",
        "/",
        &[("surrogate-key", "catalog")],
        b"",
    )
    .await;
    assert!(r.text().contains("purged 2 objects"), "{}", r.text());
    assert!(
        get(shellac.addr, "/products/1")
            .await
            .cache_status()
            .contains("fwd=miss")
    );
    assert!(
        get(shellac.addr, "/news/1")
            .await
            .cache_status()
            .contains("hit")
    );
    let r = admin_post(&shellac, "/purge/tags", "news").await;
    assert_eq!(r.status, 200);
    assert!(
        get(shellac.addr, "/news/1")
            .await
            .cache_status()
            .contains("fwd=miss")
    );
    shellac.stop().await;
}

/// RFC 9111 §4.4: a successful unsafe request invalidates the target URI and the
/// Location / Content-Location URIs with the same host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_methods_invalidate_target_and_location() {
    let origin = Origin::start(counting_origin()).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/articles").await;
    get(shellac.addr, "/articles/7").await;
    let r = request(shellac.addr, "POST", "/articles", &[], b"title=x").await;
    assert_eq!(r.status, 201);
    assert!(
        get(shellac.addr, "/articles")
            .await
            .cache_status()
            .contains("fwd=miss")
    );
    assert!(
        get(shellac.addr, "/articles/7")
            .await
            .cache_status()
            .contains("fwd=miss")
    );
    assert_eq!(shellac.stat("cache_invalidated").await, 2);
    shellac.stop().await;
}

/// Issue 23: every successful unsafe request invalidates, extension methods included — not
/// only the methods Shellac knows by name. Safe methods (OPTIONS) and failed requests do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_methods_invalidate_too() {
    let origin = Origin::start(|s| match s.method.as_str() {
        "GET" => Reply::ok(&format!("{} v", s.path)).cc("max-age=600"),
        "BREW" => Reply::ok("no").status(418),
        _ => Reply::ok("done"),
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let hit = |path: &'static str| {
        let addr = shellac.addr;
        async move { get(addr, path).await.cache_status().contains("hit") }
    };
    for path in ["/m", "/o", "/b"] {
        get(shellac.addr, path).await;
        assert!(hit(path).await, "{path} cached");
    }
    for (method, path) in [("M-SEARCH", "/m"), ("MKCOL", "/m"), ("LINK", "/m")] {
        let r = request(shellac.addr, method, path, &[], b"").await;
        assert_eq!(r.status, 200, "{method}");
        assert!(
            r.cache_status().contains("fwd=method"),
            "{method}: {}",
            r.cache_status()
        );
        assert!(!hit(path).await, "{method} invalidated {path}");
        assert!(hit(path).await, "stored again");
    }
    // Safe: OPTIONS changes nothing. An error (418) changed nothing either.
    request(shellac.addr, "OPTIONS", "/o", &[], b"").await;
    assert!(hit("/o").await, "OPTIONS is safe");
    request(shellac.addr, "BREW", "/b", &[], b"").await;
    assert!(
        hit("/b").await,
        "a failed unsafe request invalidates nothing"
    );
    assert_eq!(shellac.stat("cache_invalidated").await, 3);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_ban_and_purge() {
    let origin = Origin::start(counting_origin()).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/news/9").await;
    get(shellac.addr, "/sport/9").await;
    let admin = shellac.admin.to_string();
    let bin = env!("CARGO_BIN_EXE_shellac");
    let out = std::process::Command::new(bin)
        .args(["ban", "--admin", &admin, "req.url ~ ^/news/"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        get(shellac.addr, "/news/9")
            .await
            .cache_status()
            .contains("fwd=miss")
    );
    let url = "http://test.example/sport/9".to_string();
    let out = std::process::Command::new(bin)
        .args(["purge", "--admin", &admin, &url])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\"purged\": 1"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = std::process::Command::new(bin)
        .args(["ban", "--admin", &admin, "req.url"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Expected comparison operator."));
    shellac.stop().await;
}
