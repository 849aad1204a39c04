//! Hot reload: a good config is swapped in (cache, connections and counters survive, requests
//! in flight finish on the old one), a bad one is rejected with every error and the old one
//! keeps serving; listeners come and go; no request fails while reloading under load.

#[path = "../common/mod.rs"]
mod common;

mod deep_vcl;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use tokio::sync::Notify;

/// A config file for an origin on `port`; `server_extra` goes into `[server]`, `extra` after it.
fn config(port: u16, server_extra: &str, extra: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n{server_extra}\n{extra}\n\n[[backend]]\nname = \"app\"\nhost = \"127.0.0.1\"\nport = {port}\n"
    )
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn named(name: &'static str) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    move |_| Reply::ok(name).cc("max-age=600")
}

struct Setup {
    dir: PathBuf,
    file: PathBuf,
    a: Origin,
    b: Origin,
}

async fn setup(name: &str) -> Setup {
    let dir = temp_dir(name);
    let file = dir.join("shellac.toml");
    let a = Origin::start(named("A")).await;
    let b = Origin::start(named("B")).await;
    write(&file, &config(a.addr.port(), "", ""));
    Setup { dir, file, a, b }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_swaps_backends_and_keeps_cache_connections_and_counters() {
    let s = setup("reload-good").await;
    let shellac = Shellac::start_reloadable(&s.file).await;
    let mut conn = Conn::open(shellac.addr).await;
    assert_eq!(conn.send("GET", "/x", &[], b"").await.text(), "A");

    write(&s.file, &config(s.b.addr.port(), "", ""));
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["generation"], 2);
    let changes = v["changes"].to_string();
    assert!(changes.contains("backend app: new"), "{changes}");

    // The same client connection carries on; the cached object survived; new misses go to B.
    let hit = conn.send("GET", "/x", &[], b"").await;
    assert_eq!(hit.text(), "A");
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    assert_eq!(conn.send("GET", "/y", &[], b"").await.text(), "B");
    let stats = shellac.stats().await;
    assert_eq!(stats["client_req"], 3, "counters survive");
    assert_eq!(stats["n_object"], 2);
    assert_eq!(s.a.count(), 1);
    assert_eq!(s.b.count(), 1);
    shellac.stop().await;
    std::fs::remove_dir_all(&s.dir).ok();
}

/// A connection answered by fast hits (which keep the configuration they ran under between
/// hits) follows a reload at its next request: here the new configuration turns fast hits off,
/// and the next hit on the same connection takes the full path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_of_fast_hits_follows_a_reload() {
    let s = setup("reload-fast-hits").await;
    let shellac = Shellac::start_reloadable(&s.file).await;
    let mut conn = Conn::open(shellac.addr).await;
    assert_eq!(conn.send("GET", "/x", &[], b"").await.text(), "A");
    for _ in 0..2 {
        assert!(
            conn.send("GET", "/x", &[], b"")
                .await
                .cache_status()
                .contains("hit")
        );
    }
    assert_eq!(shellac.stat("cache_hit_fast").await, 2);
    write(&s.file, &config(s.a.addr.port(), "fast_hits = false", ""));
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    let hit = conn.send("GET", "/x", &[], b"").await;
    assert_eq!(hit.text(), "A");
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    let stats = shellac.stats().await;
    assert_eq!(
        stats["cache_hit_fast"], 2,
        "the hit after the reload took the full path"
    );
    assert_eq!(stats["cache_hit"], 3);
    assert_eq!(s.a.count(), 1);
    shellac.stop().await;
    std::fs::remove_dir_all(&s.dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_backends_keep_their_pool() {
    let s = setup("reload-pool").await;
    let shellac = Shellac::start_reloadable(&s.file).await;
    get(shellac.addr, "/1").await;
    // Same backend, another cache setting.
    write(
        &s.file,
        &config(s.a.addr.port(), "", "[cache]\nheuristic_percent = 5\n"),
    );
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["changes"],
        serde_json::json!(["cache.heuristic_percent: 10 → 5"]),
        "{v}"
    );
    get(shellac.addr, "/2").await;
    let stats = shellac.stats().await;
    assert_eq!(stats["backend_conn"], 1, "the pooled connection was reused");
    assert_eq!(stats["backend_reuse"], 1);
    shellac.stop().await;
    std::fs::remove_dir_all(&s.dir).ok();
}

/// Regression (issue 21, varnishtest b00016): a reload that changes only a backend's weight
/// keeps its pool (the weight is the directors'), and the director picks by the new weight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weight_change_keeps_the_pool() {
    let s = setup("reload-weight").await;
    let director = |w: u32| {
        format!(
            "[[director]]\nname = \"d\"\ntype = \"random\"\nbackends = [\"app\", \"other\"]\n\n\
             [[backend]]\nname = \"other\"\nhost = \"127.0.0.1\"\nport = {}\nweight = 1\n\n\
             [routing]\ndefault = \"d\"\n",
            s.b.addr.port()
        ) + &format!(
            "\n[[backend]]\nname = \"app\"\nhost = \"127.0.0.1\"\nport = {}\nweight = {w}\n",
            s.a.addr.port()
        )
    };
    let text = |w: u32| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n{}",
            director(w)
        )
    };
    write(&s.file, &text(1));
    let shellac = Shellac::start_reloadable(&s.file).await;
    // Both backends get a pooled connection.
    for i in 0..40 {
        get(shellac.addr, &format!("/w{i}")).await;
        if s.a.count() > 0 && s.b.count() > 0 {
            break;
        }
    }
    assert!(s.a.count() > 0 && s.b.count() > 0);
    let conns = shellac.stat("backend_conn").await;
    write(&s.file, &text(1000));
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    let changes = v["changes"].to_string();
    assert!(!changes.contains("backend app: new"), "{changes}");
    let before = s.a.count();
    for i in 0..20 {
        get(shellac.addr, &format!("/x{i}")).await;
    }
    assert!(s.a.count() - before >= 15, "the new weight decides");
    assert_eq!(shellac.stat("backend_conn").await, conns, "pools kept");
    shellac.stop().await;
    std::fs::remove_dir_all(&s.dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_config_is_rejected_with_every_error_and_the_old_one_runs_on() {
    let s = setup("reload-bad").await;
    let shellac = Shellac::start_reloadable(&s.file).await;
    assert_eq!(get(shellac.addr, "/x").await.text(), "A");

    write(
        &s.file,
        &config(
            s.b.addr.port(),
            "idle_timout = \"5s\"",
            "[cache]\nmemory_size = \"lots\"\n",
        ),
    );
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["ok"], false);
    assert_eq!(v["generation"], 1);
    let errors: Vec<String> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect();
    let file = s.file.display().to_string();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with(&format!("{file}:4:1: `server.idle_timout`: unknown key")),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with(&format!("{file}:6:15: `cache.memory_size`:")),
        "{errors:?}"
    );

    // Valid, but changes a setting fixed at start: rejected too, naming the running value.
    write(
        &s.file,
        &config(s.b.addr.port(), "", "[cache]\nmemory_size = \"64MiB\"\n"),
    );
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 400, "{v}");
    let errors = v["errors"].to_string();
    assert!(
        errors.contains(
            "`cache.memory_size`: changing it needs a restart (running with \\\"256MiB\\\", file says \\\"64MiB\\\")"
        ),
        "{errors}"
    );

    // Still the old configuration: a new URL goes to A.
    assert_eq!(get(shellac.addr, "/new").await.text(), "A");
    assert_eq!(s.b.count(), 0);
    shellac.stop().await;
    std::fs::remove_dir_all(&s.dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_request_finishes_on_the_old_config() {
    let dir = temp_dir("reload-inflight");
    let file = dir.join("shellac.toml");
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let a = Origin::start(move |_| {
        Reply::ok("").cc("no-store").body(ReplyBody::Gated {
            first: b"old-".to_vec(),
            gate: g.clone(),
            rest: b"config".to_vec(),
        })
    })
    .await;
    let b = Origin::start(named("B")).await;
    write(&file, &config(a.addr.port(), "", ""));
    let shellac = Shellac::start_reloadable(&file).await;

    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn.send_head("GET", "/slow", &[], b"").await;
    assert_eq!(resp.status(), 200);
    write(&file, &config(b.addr.port(), "", ""));
    assert_eq!(shellac.reload().await.0, 200);
    assert_eq!(get(shellac.addr, "/slow").await.text(), "B");
    gate.notify_one();
    use http_body_util::BodyExt;
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"old-config");
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_under_load_fail_no_request() {
    let s = setup("reload-load").await;
    let shellac = Shellac::start_reloadable(&s.file).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..4 {
        let (addr, stop) = (shellac.addr, stop.clone());
        clients.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await;
            let mut statuses = Vec::new();
            for i in 0..2000 {
                if stop.load(Ordering::Relaxed) && i > 20 {
                    break;
                }
                // Half hits, half new URLs (misses to whichever backend is current).
                let path = if i % 2 == 0 {
                    "/hot".to_string()
                } else {
                    format!("/c{c}/{i}")
                };
                statuses.push(conn.send("GET", &path, &[], b"").await.status);
            }
            statuses
        }));
    }
    for i in 0..10 {
        let port = if i % 2 == 0 {
            s.b.addr.port()
        } else {
            s.a.addr.port()
        };
        write(&s.file, &config(port, "", ""));
        let (status, v) = shellac.reload().await;
        assert_eq!(status, 200, "{v}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for c in clients {
        let statuses = c.await.unwrap();
        total += statuses.len();
        assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    }
    assert!(total >= 80, "{total}");
    assert_eq!(shellac.stat("client_req").await, total as u64);
    shellac.stop().await;
    std::fs::remove_dir_all(&s.dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_are_added_and_removed_without_dropping_connections() {
    let s = setup("reload-listen").await;
    let shellac = Shellac::start_reloadable(&s.file).await;
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let extra = free.local_addr().unwrap();
    drop(free);
    let with_extra = config(s.a.addr.port(), "", "").replace(
        "listen = [\"127.0.0.1:0\"]",
        &format!("listen = [\"127.0.0.1:0\", \"{extra}\"]"),
    );
    write(&s.file, &with_extra);
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert!(
        v["changes"]
            .to_string()
            .contains(&format!("listening on {extra}")),
        "{v}"
    );
    assert!(shellac.listening().contains(&extra));
    let mut kept = Conn::open(extra).await;
    assert_eq!(kept.send("GET", "/x", &[], b"").await.text(), "A");

    write(&s.file, &config(s.a.addr.port(), "", ""));
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert!(
        v["changes"].to_string().contains("no longer listening"),
        "{v}"
    );
    // No new connections on the removed address (the accept task is gone; bounded wait for
    // the socket to close)...
    let mut refused = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(extra).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "{extra} still accepts");
    // ...but the connection accepted on it before carries on.
    assert_eq!(kept.send("GET", "/x", &[], b"").await.text(), "A");
    assert_eq!(get(shellac.addr, "/x").await.text(), "A");
    shellac.stop().await;
    std::fs::remove_dir_all(&s.dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_turns_the_access_log_on_and_changes_its_format() {
    let s = setup("reload-log").await;
    let shellac = Shellac::start_reloadable(&s.file).await;
    get(shellac.addr, "/before").await;
    let log = s.dir.join("access.log");
    let section = format!(
        "[log]\naccess_log = \"{}\"\nformat = \"%U %{{cache}}x\"\n",
        log.display()
    );
    write(&s.file, &config(s.a.addr.port(), "", &section));
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    get(shellac.addr, "/after").await;
    assert_eq!(wait_lines(&log, 1).await, vec!["/after miss"]);
    let section = section.replace("%U %{cache}x", "%s %U");
    write(&s.file, &config(s.a.addr.port(), "", &section));
    assert_eq!(shellac.reload().await.0, 200);
    get(shellac.addr, "/after").await;
    assert_eq!(wait_lines(&log, 2).await, vec!["/after miss", "200 /after"]);
    shellac.stop().await;
    std::fs::remove_dir_all(&s.dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_token_is_required_when_set() {
    let origin = Origin::start(named("A")).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.admin_token = Some("s3cret-token".into());
    })
    .await;
    let denied = get(shellac.admin, "/stats").await;
    assert_eq!(denied.status, 401);
    let wrong = get_with(shellac.admin, "/stats", &[("authorization", "Bearer nope")]).await;
    assert_eq!(wrong.status, 401);
    let ok = get_with(
        shellac.admin,
        "/stats",
        &[("authorization", "Bearer s3cret-token")],
    )
    .await;
    assert_eq!(ok.status, 200);
    // Programmatic start: nothing to reload.
    let resp = request(
        shellac.admin,
        "POST",
        "/reload",
        &[("authorization", "Bearer s3cret-token")],
        b"",
    )
    .await;
    assert_eq!(resp.status, 400);
    assert!(resp.text().contains("nothing to reload"), "{}", resp.text());
    // The harness's own stop does not need the admin listener.
    shellac.stop().await;
}

/// Issue 23 #4: every changed setting is reported (`max_restarts` and `trusted_proxies` gave
/// `"changes": []`); #15: a restart-only size is compared exactly (a change smaller than the
/// rounded display was neither applied nor refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_reports_every_change_and_compares_exactly() {
    let s = setup("reload-diff").await;
    let director = "[[director]]\nname = \"web\"\ntype = \"fallback\"\nbackends = [\"app\"]\n";
    write(&s.file, &config(s.a.addr.port(), "", director));
    let shellac = Shellac::start_reloadable(&s.file).await;
    write(
        &s.file,
        &config(
            s.a.addr.port(),
            "trusted_proxies = [\"10.0.0.0/8\"]\nmax_connections = 500",
            &format!("{director}max_restarts = 2\n"),
        ),
    );
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["changes"],
        serde_json::json!([
            "director[web].max_restarts: 4 → 2",
            "server.max_connections: 10000 → 500",
            "server.trusted_proxies: [] → [\"10.0.0.0/8\"]",
        ]),
        "{v}"
    );
    // One byte more memory: refused, with both exact values.
    write(
        &s.file,
        &config(
            s.a.addr.port(),
            "trusted_proxies = [\"10.0.0.0/8\"]\nmax_connections = 500",
            &format!("{director}max_restarts = 2\n[cache]\nmemory_size = 268435457\n"),
        ),
    );
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(
        v["errors"],
        serde_json::json!([
            "`cache.memory_size`: changing it needs a restart (running with \"256MiB\", file says \"268435457B\")"
        ]),
        "{v}"
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&s.dir).ok();
}
