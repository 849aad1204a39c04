//! `GET /cache` and `shellac inspect`: what is cached for a URL (variants, tiers, TTL left,
//! size, tags, validators), against the running proxy — memory only, and with a disk tier
//! after the object left memory. An inspection is never a hit: counters and tiers unchanged.

use crate::common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use serde_json::Value;
use shellac::config::units::Size;
use shellac::config::{Admission, DiskConfig};

const BIN: &str = env!("CARGO_BIN_EXE_shellac");

/// `GET /cache?QUERY` on the admin listener: (status, JSON).
async fn inspect(admin: SocketAddr, query: &str) -> (u16, Value) {
    let resp = get(admin, &format!("/cache?{query}")).await;
    let v = serde_json::from_slice(&resp.body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", resp.text()));
    (resp.status, v)
}

/// The counters an inspection must leave alone.
async fn hit_counters(shellac: &Shellac) -> Vec<(String, u64)> {
    let stats = shellac.stats().await;
    [
        "client_req",
        "cache_hit",
        "cache_hit_memory",
        "cache_hit_disk",
        "cache_miss",
        "cache_insert",
        "n_object",
        "disk_admit",
        "disk_reject",
    ]
    .iter()
    .map(|n| (n.to_string(), stats[*n]))
    .collect()
}

fn tiers(variant: &Value) -> Vec<&str> {
    variant["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect()
}

fn page(s: &Seen) -> Reply {
    Reply::ok(&format!("page {} ", s.path).repeat(200))
        .cc("max-age=100, stale-if-error=300")
        .header("etag", "\"v1\"")
        .header("last-modified", "Sun, 22 Nov 2026 03:00:00 GMT")
        .header("surrogate-key", "product-7 front")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_object_is_described_and_inspection_is_not_a_hit() {
    let origin = Origin::start(page).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let body_len = get(shellac.addr, "/p?x=1").await.body.len() as u64;

    let before = hit_counters(&shellac).await;
    let (status, v) = inspect(shellac.admin, "url=/p%3Fx%3D1&host=test.example").await;
    assert_eq!(status, 200, "{v}");
    // The same object, asked for by absolute URL (host case and default port normalised).
    let (status, same) = inspect(
        shellac.admin,
        "url=http%3A%2F%2FTEST.example%3A80%2Fp%3Fx%3D1",
    )
    .await;
    assert_eq!(status, 200, "{same}");
    assert_eq!(
        hit_counters(&shellac).await,
        before,
        "an inspection counts nothing"
    );

    assert_eq!(v["key"]["host"], "test.example");
    assert_eq!(v["key"]["path_and_query"], "/p?x=1");
    assert_eq!(v["vary"], serde_json::json!([]));
    assert_eq!(v["hit_for_miss"], false);
    let variants = v["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 1);
    assert_eq!(variants[0]["variant"], "0000000000000000");
    assert_eq!(tiers(&variants[0]), ["memory"]);
    let c = &variants[0]["copies"][0];
    assert_eq!(c["tier"], "memory");
    assert_eq!(c["status"], 200);
    assert_eq!(c["state"], "fresh");
    assert_eq!(c["body_bytes"], body_len);
    assert_eq!(c["body_in"], "memory");
    let header_bytes = c["header_bytes"].as_u64().unwrap();
    assert!(header_bytes > 0);
    assert_eq!(c["size_bytes"].as_u64().unwrap(), header_bytes + body_len);
    assert_eq!(c["ttl_seconds"], 100);
    let left = c["ttl_left_seconds"].as_u64().unwrap();
    assert!(left <= 100 && left + c["age_seconds"].as_u64().unwrap() <= 100);
    assert_eq!(
        c["grace_left_seconds"], c["ttl_left_seconds"],
        "no grace configured"
    );
    let sie = c["stale_if_error_left_seconds"].as_u64().unwrap();
    assert!(
        sie > left && sie <= 400,
        "stale-if-error=300 past the TTL: {sie}"
    );
    assert_eq!(c["tags"], serde_json::json!(["front", "product-7"]));
    assert_eq!(c["etag"], "\"v1\"");
    assert_eq!(c["last_modified"], "Sun, 22 Nov 2026 03:00:00 GMT");
    assert_eq!(c["banned"], false);
    assert_eq!(
        c["hit_in_memory"], false,
        "inspected, never requested again"
    );

    // A real request is a hit and is seen as one by the next inspection.
    assert!(
        get(shellac.addr, "/p?x=1")
            .await
            .cache_status()
            .contains("hit")
    );
    assert_eq!(shellac.stat("cache_hit").await, before[1].1 + 1);
    let (_, v) = inspect(shellac.admin, "url=/p%3Fx%3D1&host=test.example").await;
    assert_eq!(v["variants"][0]["copies"][0]["hit_in_memory"], true);
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_variant_is_listed_with_its_selection() {
    let origin = Origin::start(|s| {
        let lang = s
            .headers
            .get("accept-language")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_string();
        Reply::ok(&format!("hello in {lang}"))
            .cc("max-age=60")
            .header("vary", "Accept-Language")
            .header("xkey", &format!("lang-{lang}"))
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get_with(shellac.addr, "/v", &[("accept-language", "fr")]).await;
    get_with(shellac.addr, "/v", &[("accept-language", "de")]).await;

    let (status, v) = inspect(shellac.admin, "url=/v&host=test.example").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["vary"], serde_json::json!(["accept-language"]));
    let variants = v["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2, "{v}");
    for (variant, lang) in variants.iter().zip(["fr", "de"]) {
        assert_ne!(variant["variant"], "0000000000000000");
        assert_eq!(variant["selection"]["accept-language"], lang);
        assert_eq!(tiers(variant), ["memory"]);
        let c = &variant["copies"][0];
        assert_eq!(c["body_bytes"], format!("hello in {lang}").len());
        assert_eq!(c["tags"], serde_json::json!([format!("lang-{lang}")]));
    }
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_cached_is_404_and_bad_queries_are_400() {
    let origin = Origin::start(|s| {
        if s.path == "/private" {
            Reply::ok("mine").cc("private")
        } else {
            Reply::ok("x").cc("max-age=60")
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let (status, v) = inspect(shellac.admin, "url=/never&host=test.example").await;
    assert_eq!(status, 404);
    assert_eq!(v["error"], "not cached");
    assert_eq!(v["variants"], serde_json::json!([]));
    assert_eq!(v["key"]["url"], "test.example/never");

    // Uncacheable: nothing stored, but the URL is remembered as hit-for-miss.
    get(shellac.addr, "/private").await;
    let (status, v) = inspect(shellac.admin, "url=/private&host=test.example").await;
    assert_eq!(status, 404);
    assert_eq!(v["hit_for_miss"], true, "{v}");

    // Purged: gone.
    get(shellac.addr, "/gone").await;
    assert_eq!(
        inspect(shellac.admin, "url=/gone&host=test.example")
            .await
            .0,
        200
    );
    let r = request(
        shellac.admin,
        "POST",
        "/purge",
        &[],
        b"http://test.example/gone",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        inspect(shellac.admin, "url=/gone&host=test.example")
            .await
            .0,
        404
    );

    for bad in ["", "url=/p", "host=test.example", "url=ftp%3A%2F%2Fh%2Fp"] {
        let (status, v) = inspect(shellac.admin, bad).await;
        assert_eq!(status, 400, "{bad}: {v}");
        assert!(v["error"].is_string(), "{v}");
    }
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_copy_after_eviction_is_read_without_promotion() {
    let origin = Origin::start(page).await;
    let dir = TempDir::new("inspect-disk");
    let data = dir.path("cache.dat");
    // A 64 KiB memory tier: ~6 KiB objects are evicted after a few others.
    let shellac = Shellac::start(origin.addr, |c| {
        c.cache.memory_size = Size(64 << 10);
        c.cache.max_object_size = Size(32 << 10);
        c.storage.disk = Some(DiskConfig {
            path: data.clone(),
            size: Size(8 << 20),
            region_size: Size(1 << 20),
            admission: Admission::Always,
            on_open_error: Default::default(),
        });
    })
    .await;
    let body_len = get(shellac.addr, "/d").await.body.len() as u64;
    // Memory and disk (write-through), once the writer has indexed it.
    let mut v = Value::Null;
    for _ in 0..400 {
        v = inspect(shellac.admin, "url=/d&host=test.example").await.1;
        if tiers(&v["variants"][0]) == ["memory", "disk"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(tiers(&v["variants"][0]), ["memory", "disk"], "{v}");
    let disk_copy = &v["variants"][0]["copies"][1];
    assert_eq!(disk_copy["tier"], "disk");
    assert_eq!(disk_copy["body_bytes"], body_len);
    assert_eq!(disk_copy["tags"], serde_json::json!(["front", "product-7"]));
    assert_eq!(disk_copy["etag"], "\"v1\"");
    assert_eq!(disk_copy["ttl_seconds"], 100);

    // Push it out of memory with other objects (bounded). Each is requested twice: the
    // memory tier protects requested objects, so unrequested /d is the one to go.
    let mut evicted = false;
    for i in 0..200 {
        get(shellac.addr, &format!("/filler/{i}")).await;
        get(shellac.addr, &format!("/filler/{i}")).await;
        let (_, v) = inspect(shellac.admin, "url=/d&host=test.example").await;
        if tiers(&v["variants"][0]) == ["disk"] {
            evicted = true;
            break;
        }
    }
    assert!(evicted, "/d never left the memory tier");

    // Inspecting twice: still only on disk (not promoted), nothing counted. The disk
    // writer admits the last fillers in the background: wait until it is done (bounded),
    // or its `disk_admit` lands between the two readings (seen once on a loaded machine).
    let mut before = hit_counters(&shellac).await;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = hit_counters(&shellac).await;
        if now == before {
            break;
        }
        before = now;
    }
    for _ in 0..2 {
        let (status, v) = inspect(shellac.admin, "url=/d&host=test.example").await;
        assert_eq!(status, 200);
        assert_eq!(tiers(&v["variants"][0]), ["disk"], "{v}");
        let c = &v["variants"][0]["copies"][0];
        assert_eq!(c["status"], 200);
        assert_eq!(c["state"], "fresh");
        assert_eq!(c["body_bytes"], body_len);
        assert!(c["stale_if_error_left_seconds"].is_u64());
    }
    assert_eq!(hit_counters(&shellac).await, before);

    // A real request is a disk hit and promotes it: now in both tiers.
    let r = get(shellac.addr, "/d").await;
    assert!(
        r.cache_status().ends_with("detail=disk"),
        "{}",
        r.cache_status()
    );
    let (_, v) = inspect(shellac.admin, "url=/d&host=test.example").await;
    assert_eq!(tiers(&v["variants"][0]), ["memory", "disk"], "{v}");
    assert_eq!(origin.count_path("/d"), 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_is_required_and_the_cli_reads_through_it() {
    let origin = Origin::start(page).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.admin_token = Some("inspect-token".into());
    })
    .await;
    get(shellac.addr, "/c").await;
    let r = get(shellac.admin, "/cache?url=/c&host=test.example").await;
    assert_eq!(r.status, 401);
    let r = get_with(
        shellac.admin,
        "/cache?url=/c&host=test.example",
        &[("authorization", "Bearer inspect-token")],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());

    let admin = shellac.admin.to_string();
    let run = move |args: Vec<String>| common::binary::output(Command::new(BIN).args(&args));
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = vec!["inspect".into()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a.extend(["--admin".into(), admin.clone()]);
        a
    };
    let with_token = |extra: &[&str]| {
        let mut a = args(extra);
        a.extend(["--token".into(), "inspect-token".into()]);
        a
    };
    let (text, json, missing, denied) = tokio::task::spawn_blocking({
        let (a, b, c, d) = (
            with_token(&["http://test.example/c"]),
            with_token(&["/c", "--host", "test.example", "--json"]),
            with_token(&["http://test.example/nothing"]),
            args(&["http://test.example/c"]),
        );
        move || (run(a), run(b), run(c), run(d))
    })
    .await
    .unwrap();

    let (code, out, err) = text;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("test.example/c\n"), "{out}");
    assert!(out.contains("variant 0000000000000000"), "{out}");
    assert!(out.contains("  memory 200 fresh"), "{out}");
    assert!(out.contains("tags: front product-7"), "{out}");
    assert!(out.contains("etag: \"v1\""), "{out}");

    let (code, out, err) = json;
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).expect("--json prints JSON");
    assert_eq!(v["variants"][0]["copies"][0]["tier"], "memory");

    let (code, out, _) = missing;
    assert_eq!(code, 1, "nothing cached exits 1");
    assert!(out.contains("not cached"), "{out}");

    let (code, _, err) = denied;
    assert_eq!(code, 1);
    assert!(err.contains("token"), "{err}");
    shellac.stop().await;
}
