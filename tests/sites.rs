//! Virtual hosts (`[[site]]`, issue 31) end to end, with real origins: a site is picked from
//! the listener and the Host with nginx's precedence, an unknown name without a default gets
//! 421, each site routes to its own backend under its own rules, rewrites run before the
//! cache key, and a reload adds, changes and removes sites while a client connection stays open;
//! `tls.rs`: sites behind `[[tls]]` listeners.

mod common;
#[path = "sites/tls.rs"]
mod tls;

use std::path::Path;

use common::*;

/// An origin answering its own name (and the path it was asked for), cacheable.
async fn named(name: &'static str) -> Origin {
    Origin::start(move |seen| Reply::ok(&format!("{name} {}", seen.path)).cc("max-age=600")).await
}

fn backend(name: &str, origin: &Origin) -> String {
    format!(
        "[[backend]]\nname = \"{name}\"\nhost = \"127.0.0.1\"\nport = {}\n",
        origin.addr.port()
    )
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

const SERVER: &str =
    "[server]\nlisten = [\"127.0.0.1:0\", \"127.0.0.2:0\"]\nadmin = \"127.0.0.1:0\"\n";

async fn get_host(addr: std::net::SocketAddr, host: &str, path: &str) -> Resp {
    get_with(addr, path, &[("host", host)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_names_pick_sites_with_nginx_precedence() {
    let origins = [
        named("exact").await,
        named("leading").await,
        named("trailing").await,
        named("regex").await,
        named("fallback").await,
        named("longer").await,
    ];
    let names = [
        "exact", "leading", "trailing", "regex", "fallback", "longer",
    ];
    let mut text = SERVER.to_string();
    for (n, o) in names.iter().zip(&origins) {
        text.push_str(&backend(n, o));
    }
    text.push_str(
        r#"
[[site]]
name = "regex"
server_name = '~^www\d+\.example\.org$'
backend = "regex"
[[site]]
name = "trailing"
server_name = "mail.*"
backend = "trailing"
[[site]]
name = "leading"
server_name = "*.example.org"
backend = "leading"
[[site]]
name = "longer"
server_name = "*.www.example.org"
backend = "longer"
[[site]]
name = "exact"
server_name = [".example.com", "www.example.org"]
backend = "exact"
[[site]]
name = "fallback"
default = true
backend = "fallback"
"#,
    );
    let dir = temp_dir("sites-precedence");
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let cases = [
        ("www.example.org", "exact"),
        ("WWW.Example.ORG:6081", "exact"),
        ("example.com", "exact"),
        ("a.example.com", "exact"),
        ("a.www.example.org", "longer"),
        ("www2.example.org", "leading"),
        ("mail.example.org", "leading"),
        ("mail.example.net", "trailing"),
        ("www7.example.org.", "leading"),
        ("nothing.test", "fallback"),
        ("example.org", "fallback"),
    ];
    for (host, site) in cases {
        let r = get_host(shellac.addr, host, "/p").await;
        assert_eq!(r.status, 200, "{host}");
        assert_eq!(r.text(), format!("{site} /p"), "{host}");
    }
    // The regex site is reached when no wildcard claims the name.
    let mut text2 = text.replace(
        "server_name = \"*.example.org\"",
        "server_name = \"*.example.net\"",
    );
    text2 = text2.replace(
        "server_name = \"*.www.example.org\"",
        "server_name = \"*.www.example.net\"",
    );
    write(&file, &text2);
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    let r = get_host(shellac.addr, "www3.example.org", "/p").await;
    assert_eq!(r.text(), "regex /p");
    // One cache, keys with the host: the same path on two sites is two objects, and a
    // second request is a hit (fast or not) on the right one.
    let mut conn = Conn::open(shellac.addr).await;
    let a = conn
        .send("GET", "/same", &[("host", "www.example.org")], b"")
        .await;
    let b = conn
        .send("GET", "/same", &[("host", "www3.example.org")], b"")
        .await;
    let a2 = conn
        .send("GET", "/same", &[("host", "www.example.org")], b"")
        .await;
    let b2 = conn
        .send("GET", "/same", &[("host", "www3.example.org")], b"")
        .await;
    assert_eq!(a.text(), "exact /same");
    assert_eq!(b.text(), "regex /same");
    assert_eq!(a2.text(), "exact /same");
    assert!(a2.cache_status().contains("hit"), "{}", a2.cache_status());
    assert_eq!(b2.text(), "regex /same");
    assert!(b2.cache_status().contains("hit"), "{}", b2.cache_status());
    assert_eq!(
        shellac.stat("cache_hit_fast").await,
        2,
        "hits on sites take the fast path"
    );
    let metrics = get(shellac.admin, "/metrics").await.text();
    assert!(
        metrics.contains("shellac_site_hit_total{site=\"regex\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("shellac_site_req_total{site=\"regex\"} 3"),
        "{metrics}"
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_name_on_an_address_without_a_default_gets_421() {
    let a = named("a").await;
    let b = named("b").await;
    let text = format!(
        "{SERVER}{}{}\n[[site]]\nname = \"first\"\nlisten = \"127.0.0.1:0\"\nserver_name = \"a.test\"\nbackend = \"a\"\n[[site]]\nname = \"other\"\nlisten = \"127.0.0.1:0\"\ndefault = true\nbackend = \"b\"\n[[site]]\nname = \"second\"\nlisten = \"127.0.0.2:0\"\nserver_name = \"a.test\"\nbackend = \"b\"\n",
        backend("a", &a),
        backend("b", &b)
    );
    let dir = temp_dir("sites-421");
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let [first, second] = shellac.listening()[..] else {
        panic!("two listeners")
    };
    assert_eq!(get_host(first, "a.test", "/").await.text(), "a /");
    assert_eq!(get_host(first, "z.test", "/").await.text(), "b /");
    assert_eq!(get_host(second, "a.test", "/x").await.text(), "b /x");
    let r = get_host(second, "z.test", "/").await;
    assert_eq!(r.status, 421);
    assert!(
        r.cache_status().contains("unknown-site"),
        "{}",
        r.cache_status()
    );
    // Twice: the second time the fast-hit path sees it first, and leaves it to the full path.
    assert_eq!(get_host(second, "z.test", "/").await.status, 421);
    assert_eq!(shellac.stat("client_req_unknown_site").await, 2);
    // The status is the operator's.
    write(
        &file,
        &text.replace("[server]\n", "[server]\nunknown_site_status = 404\n"),
    );
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(get_host(second, "z.test", "/").await.status, 404);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

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
rewrite = ['rewrite "^/external/([0-9]+)/?" /external.php?vid=$1 last;', '^/stop/(.*)$ /old/$1 break', '^/old/(.*)$ /new/$1 permanent', '^/chain/(.*)$ /old/$1 last', '^/moved$ https://elsewhere.test/ redirect']
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
    // A site's own rewrites replace the global ones; `last` looping is a clear 500.
    let r = get_host(addr, "loop.test", "/x").await;
    assert_eq!(r.status, 500);
    assert!(
        r.cache_status().contains("rewrite-cycle"),
        "{}",
        r.cache_status()
    );
    let stats = shellac.stats().await;
    assert_eq!(stats["rewrite"], 3);
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

/// examples/sites.toml: the 2009 operator's layout — the rewrite on `www.domain.com`, its
/// `.flv` videos from the site's document root with `?start=` seeks, any other host on the
/// default site.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2009_layout_example_works() {
    let apache = named("apache").await;
    let dir = temp_dir("sites-2009");
    let site_root = dir.join("domain.com");
    std::fs::create_dir_all(&site_root).unwrap();
    let mut flv = b"FLV\x01\x05\0\0\0\x09\0\0\0\0".to_vec();
    flv.extend((0..1000u32).map(|i| (i % 251) as u8));
    std::fs::write(site_root.join("video.flv"), &flv).unwrap();
    let shellac = Shellac::start_file("examples/sites.toml", apache.addr, |c| {
        let site = c.sites.iter_mut().find(|s| s.name == "domain").unwrap();
        site.root = Some(site_root.clone());
        let media = c.backends.iter_mut().find(|b| b.name == "media").unwrap();
        media.root = Some(dir.clone());
    })
    .await;
    let r = get_host(shellac.addr, "www.domain.com", "/video.flv").await;
    assert_eq!((r.status, &r.body[..]), (200, &flv[..]));
    let r = get_host(shellac.addr, "domain.com", "/video.flv?start=413").await;
    assert_eq!(r.status, 200);
    assert_eq!(&r.body[..13], &flv[..13], "the FLV header");
    assert_eq!(&r.body[13..], &flv[413..], "then the file from byte 413");
    // The default site has no such video (nor the media backend's own root).
    assert_eq!(
        get_host(shellac.addr, "66.55.44.33", "/video.flv")
            .await
            .text(),
        "apache /video.flv"
    );
    let r = get_host(shellac.addr, "www.domain.com", "/external/1234/").await;
    assert_eq!(r.text(), "apache /external.php?vid=1234");
    let r = get_host(shellac.addr, "www.domain.com", "/external/1234").await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    // Keys include the host: the site's other name is another object.
    let r = get_host(shellac.addr, "domain.com", "/external/1234").await;
    assert_eq!(r.text(), "apache /external.php?vid=1234");
    assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    // The default site has no rewrite.
    let r = get_host(shellac.addr, "66.55.44.33", "/external/1234/").await;
    assert_eq!(r.text(), "apache /external/1234/");
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 31: `shellac stat`, `top`, `log`, the dashboard and `/metrics` can be filtered or
/// labelled by site. Transaction records carry the site that answered (full path and fast
/// hits), so `/log/stream?site=` and `/top?site=` filter on it and `/top?by=site` ranks the
/// sites; `/sites` (also in `/stats/live`, which `shellac stat` shows, and `/api/dashboard`)
/// lists every site's counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stat_top_log_and_the_dashboard_filter_or_label_by_site() {
    let (blog, shop) = (named("blog").await, named("shop").await);
    let mut text = SERVER.to_string();
    text.push_str(&backend("blog", &blog));
    text.push_str(&backend("shop", &shop));
    text.push_str(
        "[[site]]\nname = \"blog\"\nserver_name = \"blog.test\"\nbackend = \"blog\"\n\
         [[site]]\nname = \"shop\"\ndefault = true\nbackend = \"shop\"\n",
    );
    let dir = temp_dir("sites-labelled");
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let mut blog_log = common::log_stream::stream(shellac.admin, "site=blog").await;
    // `shellac log --site blog`, the real binary, beside the admin stream (issue 31).
    let admin = shellac.admin.to_string();
    let cli_log = common::binary::Lines::spawn(&["log", "--site", "blog", "--admin", &admin]);
    assert!(
        eventually(std::time::Duration::from_secs(10), || async {
            shellac.stat("log_subscribers").await == 2
        })
        .await,
        "shellac log subscribed"
    );
    get(shellac.admin, "/top").await; // rankings collected from now on
    let mut conn = Conn::open(shellac.addr).await;
    for (host, path) in [
        ("shop.test", "/b"),
        ("blog.test", "/a"),
        ("blog.test", "/a"),
    ] {
        let r = conn.send("GET", path, &[("host", host)], b"").await;
        assert_eq!(r.status, 200);
    }
    // The log stream of one site: the blog's two requests (a miss, then a fast hit), never
    // the shop's.
    let mut caches = Vec::new();
    for _ in 0..2 {
        let t = common::log_stream::next_json(&mut blog_log).await;
        assert_eq!(
            (&t["url"], &t["site"]),
            (&"/a".into(), &"blog".into()),
            "{t}"
        );
        caches.push(t["cache"].as_str().unwrap_or("?").to_string());
    }
    caches.sort();
    assert_eq!(caches, ["hit", "miss"]);
    // The command prints the same two and not the shop's request, which came first.
    for _ in 0..2 {
        let line = cli_log
            .next()
            .expect("shellac log --site blog prints the blog's requests");
        assert!(line.contains(" GET blog.test/a 200 "), "{line}");
    }
    drop(cli_log);
    // A name that is no site: said at once (it used to stream nothing, for ever).
    let (code, _, err) = common::binary::run(&["log", "--site", "nope", "--admin", &admin]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("status 404: site: no [[site]] named `nope`"),
        "{err}"
    );
    assert_eq!(
        get(shellac.admin, "/log/stream?site=nope").await.status,
        404
    );
    assert_eq!(shellac.stat("cache_hit_fast").await, 1);
    // Rankings: by site, and one site's URLs (bounded wait for the log writer).
    let mut by_site = serde_json::Value::Null;
    for _ in 0..200 {
        by_site = serde_json::from_slice(&get(shellac.admin, "/top?by=site").await.body).unwrap();
        if by_site["rows"].as_array().is_some_and(|r| r.len() == 2) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        (&by_site["rows"][0]["key"], &by_site["rows"][0]["requests"]),
        (&"blog".into(), &2.into()),
        "{by_site}"
    );
    assert_eq!(by_site["rows"][1]["key"], "shop", "{by_site}");
    let v: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/top?site=shop").await.body).unwrap();
    assert_eq!(v["site"], "shop");
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["rows"][0]["key"], "shop.test/b", "{v}");
    assert_eq!(get(shellac.admin, "/top?site=nothing").await.status, 404);
    // Every site's counters: /sites, /stats/live (shellac stat), /api/dashboard.
    let sites: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/sites").await.body).unwrap();
    assert_eq!(sites[0]["name"], "blog", "{sites}");
    assert_eq!(
        (&sites[0]["req"], &sites[0]["hit"], &sites[0]["miss"]),
        (&2.into(), &1.into(), &1.into()),
        "{sites}"
    );
    assert_eq!(sites[0]["hit_ratio"], 0.5, "{sites}");
    assert_eq!(
        (&sites[1]["name"], &sites[1]["req"]),
        (&"shop".into(), &1.into())
    );
    let live: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/stats/live").await.body).unwrap();
    assert_eq!(live["sites"], sites);
    let dash: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/api/dashboard?site=blog").await.body).unwrap();
    assert_eq!(dash["sites"], sites);
    assert_eq!(dash["top_site"], "blog");
    assert_eq!(dash["top_urls"].as_array().map(Vec::len), Some(1), "{dash}");
    assert_eq!(dash["top_urls"][0]["key"], "blog.test/a", "{dash}");
    // /metrics labels the sites' counters.
    let metrics = get(shellac.admin, "/metrics").await.text();
    assert!(
        metrics.contains("shellac_site_req_total{site=\"blog\"} 2")
            && metrics.contains("shellac_site_req_total{site=\"shop\"} 1"),
        "{metrics}"
    );
    // TTFB per site too (the fast hit's as well as the miss's).
    assert!(
        metrics.contains("shellac_site_ttfb_seconds_count{site=\"blog\"} 2")
            && metrics.contains("shellac_site_ttfb_seconds_count{site=\"shop\"} 1"),
        "{metrics}"
    );
    // The command-line tools against it: `shellac stat --site`, `stat` (every site's row),
    // `top --site`, and a name that is not a site.
    let run = |args: &[&str]| common::binary::run(&[args, &["--admin", &admin][..]].concat());
    let (code, out, err) = run(&["stat", "-1", "--site", "blog"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Site blog: hit ratio 50.0% since start"),
        "{out}"
    );
    assert!(out.contains("\nsite_req "), "{out}");
    assert!(!out.contains("shop"), "{out}");
    let (code, out, err) = run(&["stat", "-1"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("SITE "))
        .collect();
    assert!(rows.get(1).is_some_and(|r| r.starts_with("blog ")), "{out}");
    assert!(rows.get(2).is_some_and(|r| r.starts_with("shop ")), "{out}");
    let (code, out, err) = run(&["top", "-1", "--site", "shop"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("Top url by requests of site shop over the last 60 s"),
        "{out}"
    );
    assert!(
        out.contains("shop.test/b") && !out.contains("blog.test"),
        "{out}"
    );
    let (code, _, err) = run(&["stat", "-1", "--site", "nope"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("--site nope: no [[site]] of that name; there are: blog, shop"),
        "{err}"
    );
    drop(blog_log);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// nginx's `access_log` per `server { }`: a site with a file and format of its own logs
/// there (full path and fast hits alike), one with a format only logs to the global file in
/// it, one with `access_log = "off"` logs nothing, and the others use the global log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_site_has_its_own_access_log_or_the_global_one() {
    let origin = named("app").await;
    let dir = temp_dir("sites-logs");
    let global = dir.join("access.log");
    let own = dir.join("own.log");
    let text = format!(
        "{SERVER}{}[log]\naccess_log = \"{}\"\nformat = \"global %U\"\n
[[site]]
name = \"own\"
server_name = \"own.test\"
access_log = \"{}\"
log_format = \"own %h %U %s\"
[[site]]
name = \"format\"
server_name = \"format.test\"
log_format = \"format %U\"
[[site]]
name = \"quiet\"
server_name = \"quiet.test\"
access_log = \"off\"
[[site]]
name = \"plain\"
default = true
",
        backend("app", &origin),
        global.display(),
        own.display()
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    // Twice each: a miss, then a hit (a fast hit where the request allows it).
    for (host, path) in [
        ("quiet.test", "/q"),
        ("own.test", "/o"),
        ("format.test", "/f"),
        ("other.test", "/p"),
    ] {
        for _ in 0..2 {
            assert_eq!(get_host(shellac.addr, host, path).await.status, 200);
        }
    }
    assert_eq!(
        wait_lines(&own, 2).await,
        ["own 127.0.0.1 /o 200", "own 127.0.0.1 /o 200"]
    );
    let mut lines = wait_lines(&global, 4).await;
    lines.sort();
    assert_eq!(
        lines,
        ["format /f", "format /f", "global /p", "global /p"],
        "nothing of the quiet site, nothing of the one with its own file"
    );
    assert_eq!(shellac.stat("log_write_error").await, 0);
    shellac.stop().await;
}

/// One request with `Connection: close` over the Unix socket at `path`: the whole answer.
async fn unix_get_host(path: &Path, host: &str, target: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::UnixStream::connect(path).await.unwrap();
    let req = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        s.read_to_string(&mut out),
    )
    .await;
    out
}

/// `listen = "unix:/path"` binds a site to one `server.listen_unix` socket (nginx's `listen
/// unix:/path`); a site without `listen` answers on every socket too, and a socket with sites
/// but no default answers an unknown name 421, as an address does. Hits on a socket take the
/// fast path under the socket's site.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_listens_on_a_unix_socket() {
    let a = named("a").await;
    let b = named("b").await;
    let dir = temp_dir("sites-unix");
    let (sock_a, sock_b) = (dir.join("a.sock"), dir.join("b.sock"));
    let text = format!(
        "{}listen_unix = [\"{}\", \"{}\"]\n{}{}\n[[site]]\nname = \"on-a\"\nlisten = \"unix:{}\"\ndefault = true\nbackend = \"a\"\n[[site]]\nname = \"everywhere\"\nserver_name = \"b.test\"\nbackend = \"b\"\n",
        SERVER,
        sock_a.display(),
        sock_b.display(),
        backend("a", &a),
        backend("b", &b),
        sock_a.display(),
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let body = |text: &str| text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    let r = unix_get_host(&sock_a, "x.test", "/p").await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_eq!(body(&r), "a /p");
    let r = unix_get_host(&sock_a, "x.test", "/p").await;
    assert_eq!(body(&r), "a /p");
    assert!(r.to_ascii_lowercase().contains("hit"), "{r}");
    assert_eq!(body(&unix_get_host(&sock_a, "b.test", "/p").await), "b /p");
    assert_eq!(body(&unix_get_host(&sock_b, "b.test", "/p").await), "b /p");
    let r = unix_get_host(&sock_b, "x.test", "/p").await;
    assert!(r.starts_with("HTTP/1.1 421"), "no default on b.sock: {r}");
    let first = shellac.listening()[0];
    assert_eq!(get_host(first, "x.test", "/q").await.status, 421);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// A VCL restart chooses the site again from the host it left: a host changed before the
/// restart takes the request to that site (and its rewrites); a restart on the same site
/// keeps the target its rewrites made, as nginx runs a server's rewrites once (they ran
/// twice before: `/a/a/x`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vcl_restart_that_changes_the_host_chooses_the_site_again() {
    let o = named("o").await;
    let dir = temp_dir("sites-restart");
    let vcl = format!(
        r#"vcl 4.1;
backend o {{ .host = "127.0.0.1"; .port = "{}"; }}
sub vcl_recv {{ return (pass); }}
sub vcl_deliver {{
    if (req.restarts == 0 && req.http.x-move) {{
        set req.http.host = req.http.x-move;
        return (restart);
    }}
    if (req.restarts == 0 && req.http.x-again) {{
        return (restart);
    }}
    set resp.http.x-restarts = req.restarts;
}}
"#,
        o.addr.port()
    );
    write(&dir.join("site.vcl"), &vcl);
    let text = format!(
        "{SERVER}[vcl]\nfile = \"site.vcl\"\n[[site]]\nname = \"a\"\nserver_name = \"a.test\"\nrewrite = '^/(.*)$ /a/$1 break'\n[[site]]\nname = \"b\"\nserver_name = \"b.test\"\nrewrite = '^/(.*)$ /b/$1 break'\n"
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let r = get_host(shellac.addr, "a.test", "/x").await;
    assert_eq!(r.text(), "o /a/x");
    let r = get_with(shellac.addr, "/x", &[("host", "a.test"), ("x-again", "1")]).await;
    assert_eq!(r.header("x-restarts"), Some("1"));
    assert_eq!(r.text(), "o /a/x", "the same site's rewrites run once");
    let r = get_with(
        shellac.addr,
        "/x",
        &[("host", "a.test"), ("x-move", "b.test")],
    )
    .await;
    assert_eq!(r.header("x-restarts"), Some("1"));
    assert_eq!(
        r.text(),
        "o /b/a/x",
        "site b after the restart, its rewrite too"
    );
    let r = get_with(
        shellac.addr,
        "/x",
        &[("host", "a.test"), ("x-move", "z.test")],
    )
    .await;
    assert_eq!(r.status, 421, "no site for the new host, no default");
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

/// nginx's `root` in a `server { }`: `[[site]] root` is the document root of the files
/// backend for that site's requests; a site without one serves the backend's own root. The
/// same path on two sites is two files (and two cache objects).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_site_serves_files_from_its_own_root() {
    let dir = temp_dir("sites-root");
    for (site, text) in [("main", "main page"), ("blog", "blog page")] {
        std::fs::create_dir_all(dir.join(site)).unwrap();
        write(&dir.join(site).join("index.html"), text);
    }
    write(&dir.join("blog").join("only-blog.txt"), "blog only");
    let text = format!(
        r#"{SERVER}
[[backend]]
name = "files"
protocol = "files"
root = "{main}"

[[site]]
name = "blog"
server_name = "blog.test"
root = "{blog}"
[[site]]
name = "main"
default = true
"#,
        main = dir.join("main").display(),
        blog = dir.join("blog").display(),
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let addr = shellac.addr;
    for _ in 0..2 {
        assert_eq!(get_host(addr, "blog.test", "/").await.text(), "blog page");
        assert_eq!(get_host(addr, "www.test", "/").await.text(), "main page");
    }
    assert_eq!(
        get_host(addr, "blog.test", "/only-blog.txt").await.text(),
        "blog only"
    );
    assert_eq!(
        get_host(addr, "www.test", "/only-blog.txt").await.status,
        404
    );
    // A reload that moves the site's root serves the new one.
    write(
        &dir.join("main").join("moved.txt"),
        "now from main's directory",
    );
    write(
        &file,
        &text.replace(
            &format!("root = \"{}\"\n[[site]]", dir.join("blog").display()),
            &format!("root = \"{}\"\n[[site]]", dir.join("main").display()),
        ),
    );
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        get_host(addr, "blog.test", "/moved.txt").await.text(),
        "now from main's directory"
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// nginx's `autoindex` in a `server { }`: `[[site]] autoindex` lists directories without an
/// index file for that site's requests only, with the backend's root or the site's own; the
/// other sites keep the backend's setting (403), and a site can turn a backend's listings off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_listings_are_on_per_site() {
    let dir = temp_dir("sites-autoindex");
    for sub in ["shared/pub", "own/pub"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    write(&dir.join("shared/pub/shared-file.txt"), "s");
    write(&dir.join("own/pub/own-file.txt"), "o");
    let text = format!(
        r#"{SERVER}
[[backend]]
name = "files"
protocol = "files"
root = "{shared}"

[[backend]]
name = "listing"
protocol = "files"
root = "{shared}"
autoindex = true

[[site]]
name = "docs"
server_name = "docs.test"
autoindex = true
[[site]]
name = "own"
server_name = "own.test"
root = "{own}"
autoindex = true
[[site]]
name = "closed"
server_name = "closed.test"
backend = "listing"
autoindex = false
[[site]]
name = "open"
server_name = "open.test"
backend = "listing"
[[site]]
name = "main"
default = true
"#,
        shared = dir.join("shared").display(),
        own = dir.join("own").display(),
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let addr = shellac.addr;
    let docs = get_host(addr, "docs.test", "/pub/").await;
    assert_eq!(docs.status, 200);
    assert!(docs.text().contains("shared-file.txt"), "{}", docs.text());
    let own = get_host(addr, "own.test", "/pub/").await;
    assert_eq!(own.status, 200);
    assert!(own.text().contains("own-file.txt"), "{}", own.text());
    assert!(!own.text().contains("shared-file.txt"), "{}", own.text());
    assert_eq!(get_host(addr, "www.test", "/pub/").await.status, 403);
    assert_eq!(get_host(addr, "closed.test", "/pub/").await.status, 403);
    let open = get_host(addr, "open.test", "/pub/").await;
    assert_eq!(open.status, 200);
    assert!(open.text().contains("shared-file.txt"), "{}", open.text());
    // Files are served as before on every site.
    assert_eq!(
        get_host(addr, "docs.test", "/pub/shared-file.txt")
            .await
            .text(),
        "s"
    );
    assert_eq!(
        get_host(addr, "www.test", "/pub/shared-file.txt")
            .await
            .text(),
        "s"
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// examples/static-site.toml: a static site whose deploy made `.gz` / `.br` siblings: the
/// cache is filled with the `.gz` as made (no compression at run time), gzip clients get it,
/// others get it decoded; fingerprinted assets are kept a year, immutable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_static_site_example_sends_precompressed_siblings() {
    use std::io::Write;
    let unused = named("unused").await;
    let dir = temp_dir("sites-static");
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    let js = "console.log('hello');\n".repeat(50);
    write(&dir.join("assets/app.3f9a1c.js"), &js);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(js.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    std::fs::write(dir.join("assets/app.3f9a1c.js.gz"), &gz).unwrap();
    let mut br = Vec::new();
    brotli::BrotliCompress(
        &mut js.as_bytes(),
        &mut br,
        &brotli::enc::BrotliEncoderParams::default(),
    )
    .unwrap();
    std::fs::write(dir.join("assets/app.3f9a1c.js.br"), &br).unwrap();
    write(&dir.join("index.html"), "<h1>home</h1>");
    let shellac = Shellac::start_file("examples/static-site.toml", unused.addr, |c| {
        c.backends[0].root = Some(dir.clone());
    })
    .await;
    let addr = shellac.addr;
    let host = ("host", "www.example.org");
    let r = get_with(addr, "/", &[host]).await;
    assert_eq!((r.status, r.text().as_str()), (200, "<h1>home</h1>"));
    let r = get_with(
        addr,
        "/assets/app.3f9a1c.js",
        &[host, ("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(&r.body[..], &gz[..]);
    assert!(
        r.header("vary")
            .is_some_and(|v| v.to_ascii_lowercase().contains("accept-encoding")),
        "{:?}",
        r.headers
    );
    assert!(
        r.header("cache-control")
            .is_some_and(|v| v.contains("immutable")),
        "{:?}",
        r.headers
    );
    // Each class of client is cached on its own: the file itself without `Accept-Encoding`,
    // the `.br` sibling for br (not the stored `.gz` decoded).
    let r = get_with(addr, "/assets/app.3f9a1c.js", &[host]).await;
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.text(), js);
    let r = get_with(
        addr,
        "/assets/app.3f9a1c.js",
        &[host, ("accept-encoding", "br")],
    )
    .await;
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(&r.body[..], &br[..]);
    let r = get_with(
        addr,
        "/assets/app.3f9a1c.js",
        &[host, ("accept-encoding", "gzip")],
    )
    .await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// Hotlink protection under a site: `valid_referers = ["server_names"]` takes a `Referer`
/// naming any of the site's `server_name`s (exact, wildcard), as nginx's `server_names` is
/// the server's names — not only the request's own host; another site's name is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hotlink_server_names_are_the_sites_own_names() {
    let a = named("a").await;
    let text = format!(
        r#"{SERVER}{}
[[site]]
name = "pics"
server_name = ["www.pics.test", "pics.test", "*.cdn.pics.test"]
[[site.rule]]
path = '^/img/'
valid_referers = ["server_names"]

[[site]]
name = "other"
server_name = "other.test"
"#,
        backend("a", &a)
    );
    let dir = temp_dir("sites-hotlink");
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let addr = shellac.addr;
    let with_referer = |referer: &'static str| async move {
        get_with(
            addr,
            "/img/cat.jpg",
            &[("host", "www.pics.test"), ("referer", referer)],
        )
        .await
    };
    for ok in [
        "https://www.pics.test/gallery",
        "https://pics.test/",
        "http://eu.cdn.pics.test:8080/page",
    ] {
        let r = with_referer(ok).await;
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "a /img/cat.jpg"),
            "{ok}"
        );
    }
    for refused in ["https://other.test/", "https://cdn.pics.test.evil.test/"] {
        assert_eq!(with_referer(refused).await.status, 403, "{refused}");
    }
    assert_eq!(shellac.stat("hotlink_refused").await, 2);
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
