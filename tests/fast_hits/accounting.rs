//! What fast hits count and log: a cookie-stripping rule's counter, request Cache-Control
//! counted only when configured, and the access log line the full path would write.

use super::*;

/// Where cookies matter to a hit (here: the access log prints them), a rule that strips them
/// keeps its requests on the full path, which logs what the rule left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cookie_stripping_rule_counts_where_cookies_are_logged() {
    let dir = TempDir::new("fast-cookie-log");
    let log = dir.path("access.log");
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let log_path = log.to_str().unwrap().to_string();
    let shellac = Shellac::start_file("examples/wordpress-apache.toml", origin.addr, |c| {
        c.log.access_log = log_path;
        c.log.format = "%r %{Cookie}i".to_string();
    })
    .await;
    get(shellac.addr, "/style.css").await;
    let css = get_with(shellac.addr, "/style.css", &[("cookie", "theme=dark")]).await;
    assert!(css.cache_status().contains("hit"), "{}", css.cache_status());
    assert_eq!(shellac.stat("cache_hit_fast").await, 0);
    let lines = wait_lines(&log, 2).await;
    assert!(
        lines.iter().all(|l| l.ends_with(" -")),
        "cookies stripped before logging: {lines:?}"
    );
    shellac.stop().await;
}

/// A request's `Cache-Control` and `Pragma` count only with `cache.request_cache_control`
/// (off by default): without it a browser's `max-age=0` or `no-cache` gets a fast hit, as the
/// full path would give it a hit; `no-store` is passed either way. With it, the full path
/// decides (here: revalidates).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_cache_control_counts_only_when_configured() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let default = Shellac::start(origin.addr, |_| {}).await;
    get(default.addr, "/a").await;
    for field in [
        ("cache-control", "max-age=0"),
        ("cache-control", "no-cache"),
        ("pragma", "no-cache"),
    ] {
        let r = get_with(default.addr, "/a", &[field]).await;
        assert!(r.cache_status().contains("hit"), "{field:?}");
    }
    assert_eq!(default.stat("cache_hit_fast").await, 3);
    let no_store = get_with(
        default.addr,
        "/a",
        &[("cache-control", "max-age=5, no-store")],
    )
    .await;
    assert!(
        no_store.cache_status().contains("fwd=request"),
        "{}",
        no_store.cache_status()
    );
    assert_eq!(default.stat("cache_hit_fast").await, 3);
    assert_eq!(origin.count(), 2);

    let strict = Shellac::start(origin.addr, |c| c.cache.request_cache_control = true).await;
    get(strict.addr, "/a").await;
    let r = get_with(strict.addr, "/a", &[("cache-control", "no-cache")]).await;
    assert!(r.cache_status().contains("fwd="), "{}", r.cache_status());
    assert_eq!(strict.stat("cache_hit_fast").await, 0);
    default.stop().await;
    strict.stop().await;
}

/// A fast hit's access-log line is the one the full path writes for the same hit: request
/// line, host, request and response fields, decision (the record is built by the same code
/// from the request head's bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_hits_log_line_is_the_full_paths() {
    let dir = TempDir::new("fast-log-line");
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let format = "%h %r %s %b %{host}x %{User-agent}i %{Referer}i %{X-Absent}i \
                  %{Cache-Status}o %{Content-Type}o %{cache}x %{reason}x %{backend}x";
    let mut lines = Vec::new();
    for (name, fast) in [("fast", true), ("full", false)] {
        let log = dir.path(&format!("{name}.log"));
        let log_path = log.to_str().unwrap().to_string();
        let shellac = Shellac::start(origin.addr, |c| {
            c.server.fast_hits = fast;
            c.log.access_log = log_path;
            c.log.format = format.to_string();
        })
        .await;
        get(shellac.addr, "/a?q=1").await;
        let hit = get_with(
            shellac.addr,
            "/a?q=1",
            &[("user-agent", "t/1"), ("referer", "http://r.test/")],
        )
        .await;
        assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
        assert_eq!(shellac.stat("cache_hit_fast").await, u64::from(fast));
        let mut got = wait_lines(&log, 2).await;
        // Cache-Status carries the remaining TTL, which may differ by a second.
        let line = got.remove(1);
        let ttl = line.find("ttl=").unwrap();
        let end = ttl + line[ttl..].find(' ').unwrap();
        lines.push(format!("{}ttl={}", &line[..ttl], &line[end..]));
        shellac.stop().await;
    }
    assert_eq!(lines[0], lines[1]);
    assert!(
        lines[0].contains("GET /a?q=1 HTTP/1.1 200 "),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains(" 200 14 test.example t/1 http://r.test/ - shellac; hit; "),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with(" hit - -"), "{}", lines[0]);
}
