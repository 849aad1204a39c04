//! Sites in what the operator reads: `shellac stat`, `top`, `log` and the dashboard filter or
//! label by site; each site has its own access log or the global one.

use super::*;

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
