//! What each site has of its own — rules, backend, cache settings, rewrites before the cache
//! key, a VCL file, a share of the cache — and a reload that adds, changes and removes sites
//! while a client connection stays open.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_site_has_its_own_rules_backend_and_cache_settings() {
    let a = named("a").await;
    let b = named("b").await;
    let text = format!(
        r#"{SERVER}{}{}
[[rule]]
name = "admin-closed"
path = '^/admin'
synth = {{ status = 403, body = "global rule" }}

[[site]]
name = "own-rules"
server_name = "own.test"
backend = "b"
[[site.rule]]
path = '^/live'
pass = true
[[site]]
name = "inherits"
server_name = "inherit.test"
[[site]]
name = "nocache"
server_name = "nocache.test"
cache = false
[[site]]
name = "graceful"
server_name = "grace.test"
grace = "10m"
"#,
        backend("a", &a),
        backend("b", &b)
    );
    let dir = temp_dir("sites-rules");
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let addr = shellac.addr;
    // A site with its own rules: not the global ones; its own backend.
    assert_eq!(
        get_host(addr, "own.test", "/admin").await.text(),
        "b /admin"
    );
    get_host(addr, "own.test", "/live").await;
    let live = get_host(addr, "own.test", "/live").await;
    assert!(
        !live.cache_status().contains("hit"),
        "{}",
        live.cache_status()
    );
    assert_eq!(b.count_path("/live"), 2, "its own rule passes /live");
    // A site without rules: the global ones; the default backend.
    let r = get_host(addr, "inherit.test", "/admin").await;
    assert_eq!((r.status, r.text().as_str()), (403, "global rule"));
    assert_eq!(get_host(addr, "inherit.test", "/p").await.text(), "a /p");
    // `cache = false`: every request goes to the backend.
    get_host(addr, "nocache.test", "/n").await;
    let r = get_host(addr, "nocache.test", "/n").await;
    assert!(
        r.cache_status().contains("detail=site"),
        "{}",
        r.cache_status()
    );
    assert_eq!(a.count_path("/n"), 2);
    // A site's `grace` replaces `cache.grace` (0 here) for what it stores: the object is
    // usable 10 minutes past its lifetime, another site's not at all.
    for (host, grace) in [("grace.test", 600), ("inherit.test", 0)] {
        assert_eq!(get_host(addr, host, "/g").await.status, 200);
        let v: serde_json::Value = serde_json::from_slice(
            &get(shellac.admin, &format!("/cache?url=/g&host={host}"))
                .await
                .body,
        )
        .unwrap();
        let copy = &v["variants"][0]["copies"][0];
        let (ttl, left) = (
            copy["ttl_left_seconds"]
                .as_i64()
                .unwrap_or_else(|| panic!("{v}")),
            copy["grace_left_seconds"]
                .as_i64()
                .unwrap_or_else(|| panic!("{v}")),
        );
        // Whole seconds, each rounded on its own.
        assert!(
            (grace - 1..=grace + 1).contains(&(left - ttl)),
            "{host}: {v}"
        );
    }
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewrites_run_before_the_cache_key() {
    let a = named("a").await;
    let text = format!(
        r#"[server]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
[routing]
rewrite = ['rewrite "^/external/([0-9]+)/?" /external.php?vid=$1 last;', '^/stop/(.*)$ /old/$1 break', '^/old/(.*)$ /new/$1 permanent', '^/chain/(.*)$ /old/$1 last', '^/moved$ https://elsewhere.test/ redirect', '^/tag/café/(.*)$ /t.php?n=$1']
{}
[[site]]
name = "loops"
server_name = "loop.test"
rewrite = ['^/(.*)$ /$1 last']
[[site]]
name = "plain"
default = true
"#,
        backend("a", &a)
    );
    let dir = temp_dir("sites-rewrite");
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let addr = shellac.addr;
    let mut conn = Conn::open(addr).await;
    let r = conn.send("GET", "/external/42/", &[], b"").await;
    assert_eq!(r.text(), "a /external.php?vid=42");
    // The rewritten URL is the key: another spelling of it is a hit.
    let r = conn.send("GET", "/external/42", &[], b"").await;
    assert_eq!(r.text(), "a /external.php?vid=42");
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(a.count(), 1);
    let r = conn.send("GET", "/old/page?x=1", &[], b"").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/new/page?x=1"));
    let r = conn.send("GET", "/moved", &[], b"").await;
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("https://elsewhere.test/"));
    // `break` stops the list: the `permanent` line after it is not run.
    let r = conn.send("GET", "/stop/p", &[], b"").await;
    assert_eq!((r.status, r.text().as_str()), (200, "a /old/p"));
    // `last` starts the list again: the `permanent` line before it now matches.
    let r = conn.send("GET", "/chain/p?y=2", &[], b"").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/new/p?y=2"));
    // The path is matched decoded, as nginx's `$uri` (`é` whatever case the client wrote its
    // escapes in, `%41` is `A`); the capture goes back escaped: a space is `%20` again.
    let r = conn.send("GET", "/tag/caf%c3%a9/%41b%20c", &[], b"").await;
    assert_eq!(r.text(), "a /t.php?n=Ab%20c");
    // A site's own rewrites replace the global ones; `last` looping is a clear 500.
    let r = get_host(addr, "loop.test", "/x").await;
    assert_eq!(r.status, 500);
    assert!(
        r.cache_status().contains("rewrite-cycle"),
        "{}",
        r.cache_status()
    );
    let stats = shellac.stats().await;
    assert_eq!(stats["rewrite"], 4);
    assert_eq!(stats["rewrite_redirect"], 3);
    assert_eq!(stats["rewrite_cycle"], 1);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_adds_changes_and_removes_sites_while_a_connection_stays_open() {
    let a = named("a").await;
    let b = named("b").await;
    let base = format!("{SERVER}{}{}", backend("a", &a), backend("b", &b));
    let site_a = "[[site]]\nname = \"a\"\nserver_name = \"a.test\"\nbackend = \"a\"\n";
    let site_b = "[[site]]\nname = \"b\"\nserver_name = \"b.test\"\nbackend = \"b\"\n";
    let dir = temp_dir("sites-reload");
    let file = dir.join("shellac.toml");
    write(&file, &format!("{base}{site_a}"));
    let shellac = Shellac::start_reloadable(&file).await;
    let mut conn = Conn::open(shellac.addr).await;
    assert_eq!(
        conn.send("GET", "/p", &[("host", "a.test")], b"")
            .await
            .text(),
        "a /p"
    );
    assert_eq!(
        conn.send("GET", "/p", &[("host", "b.test")], b"")
            .await
            .status,
        421
    );

    write(&file, &format!("{base}{site_a}{site_b}"));
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert!(v["changes"].to_string().contains("site[b]"), "{v}");
    assert_eq!(
        conn.send("GET", "/p", &[("host", "b.test")], b"")
            .await
            .text(),
        "b /p"
    );
    let hit = conn.send("GET", "/p", &[("host", "a.test")], b"").await;
    assert!(hit.cache_status().contains("hit"), "the cache survives");

    write(&file, &format!("{base}{site_b}"));
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        conn.send("GET", "/p", &[("host", "a.test")], b"")
            .await
            .status,
        421
    );
    assert_eq!(
        conn.send("GET", "/p", &[("host", "b.test")], b"")
            .await
            .text(),
        "b /p"
    );
    assert_eq!(a.count(), 1);
    assert_eq!(b.count(), 1);

    // A site changed: another name and another backend. Its new misses go to the new
    // backend; what it stored before is still a hit, on the same connection.
    let changed = site_b
        .replace("\"b.test\"", "[\"b.test\", \"c.test\"]")
        .replace("backend = \"b\"", "backend = \"a\"");
    write(&file, &format!("{base}{changed}"));
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert!(v["changes"].to_string().contains("site[b]"), "{v}");
    assert_eq!(
        conn.send("GET", "/q", &[("host", "c.test")], b"")
            .await
            .text(),
        "a /q"
    );
    let hit = conn.send("GET", "/p", &[("host", "b.test")], b"").await;
    assert_eq!(hit.text(), "b /p");
    assert!(hit.cache_status().contains("hit"), "the cache survives");
    assert_eq!((a.count(), b.count()), (2, 1));
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// `[[site]] vcl`: each site runs its own VCL program (chosen per request once the site is),
/// another site its rules; hits of a VCL site still run its program; a reload compiles the
/// files again, and one that does not compile is named file:line while the running
/// configuration stays; two files declaring one backend name are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_site_runs_its_own_vcl_file() {
    let a = named("a").await;
    let b = named("b").await;
    let g = named("g").await;
    let dir = temp_dir("sites-vcl");
    let vcl_a = format!(
        "vcl 4.1;\nbackend oa {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\nsub vcl_deliver {{\n    set resp.http.x-vcl = \"a\";\n    set resp.http.x-hit = obj.hits;\n}}\n",
        a.addr.port()
    );
    let vcl_b = |tag: &str| {
        format!(
            "vcl 4.1;\nbackend ob {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\nsub vcl_recv {{\n    if (req.url ~ \"^/private\") {{\n        return (synth(403));\n    }}\n}}\nsub vcl_deliver {{\n    set resp.http.x-vcl = \"{tag}\";\n}}\n",
            b.addr.port()
        )
    };
    write(&dir.join("a.vcl"), &vcl_a);
    write(&dir.join("b.vcl"), &vcl_b("b"));
    let text = format!(
        "{SERVER}{}[[site]]\nname = \"a\"\nserver_name = \"a.test\"\nvcl = \"a.vcl\"\n[[site]]\nname = \"b\"\nserver_name = \"b.test\"\nvcl = \"b.vcl\"\n[[site]]\nname = \"rules\"\ndefault = true\n",
        backend("g", &g)
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let r = get_host(shellac.addr, "a.test", "/p").await;
    assert_eq!((r.text(), r.header("x-vcl")), ("a /p".into(), Some("a")));
    let r = get_host(shellac.addr, "a.test", "/p").await;
    assert_eq!(
        r.header("x-vcl"),
        Some("a"),
        "a hit runs the site's vcl_deliver"
    );
    assert_eq!(r.header("x-hit"), Some("1"));
    let r = get_host(shellac.addr, "b.test", "/p").await;
    assert_eq!((r.text(), r.header("x-vcl")), ("b /p".into(), Some("b")));
    assert_eq!(
        get_host(shellac.addr, "b.test", "/private").await.status,
        403
    );
    assert_eq!(
        get_host(shellac.addr, "a.test", "/private").await.status,
        200
    );
    let r = get_host(shellac.addr, "other.test", "/p").await;
    assert_eq!((r.text(), r.header("x-vcl")), ("g /p".into(), None));
    // A reload compiles the site's file again.
    write(&dir.join("b.vcl"), &vcl_b("b2"));
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    let r = get_host(shellac.addr, "b.test", "/q").await;
    assert_eq!(r.header("x-vcl"), Some("b2"));
    // An error is named file:line; the running configuration stays.
    write(
        &dir.join("b.vcl"),
        &vcl_b("b3").replace("return (synth(403));", "return (nonsense);"),
    );
    let (status, v) = shellac.reload().await;
    assert_ne!(status, 200, "{v}");
    let b_vcl = dir.join("b.vcl").display().to_string();
    assert!(v.to_string().contains(&format!("{b_vcl}:5:")), "{v}");
    assert_eq!(
        get_host(shellac.addr, "b.test", "/r").await.header("x-vcl"),
        Some("b2")
    );
    // One name space for backends.
    write(
        &dir.join("b.vcl"),
        &vcl_b("b")
            .replace("backend ob", "backend oa")
            .replace("= ob", "= oa"),
    );
    let (status, v) = shellac.reload().await;
    assert_ne!(status, 200, "{v}");
    assert!(v.to_string().contains("`oa` is declared already"), "{v}");
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// The value of the `/metrics` line that starts with `series` (and a space).
fn metric(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_filling_its_cache_share_evicts_its_own_objects_not_another_sites() {
    // 8 KiB bodies: each object is charged ~9 KB, so a 64 KiB share holds about seven.
    let body: &'static str = Box::leak("x".repeat(8192).into_boxed_str());
    let origin = Origin::start(move |_| Reply::ok(body).cc("max-age=600")).await;
    let text = format!(
        "{SERVER}{}[[site]]\nname = \"quiet\"\nserver_name = \"quiet.test\"\n\
         [[site]]\nname = \"greedy\"\nserver_name = \"greedy.test\"\ncache_share = \"64KiB\"\n",
        backend("o", &origin)
    );
    let dir = temp_dir("sites-share");
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let addr = shellac.addr;
    for i in 0..5 {
        assert_eq!(
            get_host(addr, "quiet.test", &format!("/q{i}")).await.status,
            200
        );
    }
    // The greedy site stores 40 objects, about five times its share.
    for i in 0..40 {
        assert_eq!(
            get_host(addr, "greedy.test", &format!("/g{i}"))
                .await
                .status,
            200
        );
    }
    let metrics = get(shellac.admin, "/metrics").await.text();
    let greedy = metric(&metrics, "shellac_site_cache_bytes{site=\"greedy\"}");
    assert!(greedy > 0 && greedy <= 64 << 10, "{metrics}");
    assert_eq!(
        metric(&metrics, "shellac_site_cache_share_bytes{site=\"greedy\"}"),
        64 << 10
    );
    assert!(
        metric(
            &metrics,
            "shellac_site_cache_share_evictions_total{site=\"greedy\"}"
        ) >= 30,
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "shellac_site_cache_share_evictions_total{site=\"quiet\"}"
        ),
        0
    );
    assert!(metric(&metrics, "shellac_site_cache_bytes{site=\"quiet\"}") >= 5 * 8192);
    // The quiet site's objects are all still there: hits, the origin asked once each.
    for i in 0..5 {
        let path = format!("/q{i}");
        let r = get_host(addr, "quiet.test", &path).await;
        assert!(
            r.cache_status().contains("hit"),
            "{path}: {}",
            r.cache_status()
        );
        assert_eq!(origin.count_path(&path), 1, "{path}");
    }
    // The greedy site's first objects were its own to evict: fetched again.
    let r = get_host(addr, "greedy.test", "/g0").await;
    assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(origin.count_path("/g0"), 2);
    // GET /sites says the same.
    let sites: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/sites").await.body).unwrap();
    let greedy = sites
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "greedy"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(greedy["cache_share"], 64 << 10, "{sites}");
    assert!(
        greedy["cache_share_evictions"].as_u64() >= Some(30),
        "{sites}"
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}
