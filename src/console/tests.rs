//! The screens rendered from fixed JSON: stat, a site's stat, top, log lines, inspect.

use super::*;
use serde_json::json;

#[test]
fn stat_screen() {
    let live = json!({
        "uptime_seconds": 3725,
        "hit_ratio": {"hit_ratio": 0.5, "hit_ratio_10s": 0.75, "hit_ratio_100s": null, "hit_ratio_1000s": 1.0},
        "ttfb_us_10s": {"p50": 120, "p90": 2500, "p99": null},
        "counters": [
            {"name": "client_req", "value": 10, "gauge": false, "rate": 2.5, "avg": 0.1, "description": "Client requests received"},
            {"name": "cache_miss", "value": 0, "gauge": false, "rate": 0.0, "avg": 0.0, "description": "Misses"},
            {"name": "n_object", "value": 3, "gauge": true, "rate": 0.0, "avg": 0.0, "description": "Objects"},
        ]
    });
    let s = render_stat(&live, false);
    assert!(
        s.starts_with(
            "Uptime 0d+01:02:05   Hit ratio: 10s  75.0%  100s   -     1000s 100.0%  (all  50.0%)"
        ),
        "{s}"
    );
    assert!(s.contains("TTFB (10s): p50 120µs  p90 2.5ms  p99 -"), "{s}");
    assert!(s.contains("client_req"));
    assert!(s.contains("2.50"));
    assert!(!s.contains("cache_miss"), "zero counters hidden");
    assert!(render_stat(&live, true).contains("cache_miss"));
}

#[test]
fn log_lines() {
    let v = json!({"time": "2000-10-10T13:55:36.123Z", "client": "127.0.0.1", "method": "GET",
        "url": "/a", "host": "example.com", "status": 200, "bytes": 5, "duration_us": 1500,
        "ttfb_us": 900, "cache": "pass", "reason": "no-store", "backend": "app", "complete": true});
    assert_eq!(
        render_log_line(&v).unwrap(),
        "13:55:36.123 127.0.0.1 GET example.com/a 200 pass(no-store) backend=app ttfb=900µs time=1.5ms 5B"
    );
    assert_eq!(
        render_log_line(&json!({"dropped": 7})).unwrap(),
        "-- 7 transactions dropped: this reader was too slow --"
    );
    assert_eq!(render_log_line(&json!({"streaming": true})), None);
}

#[test]
fn top_screen_ends_with_the_windows_totals() {
    let top = json!({"by": "url", "sort": "requests", "window": 60, "collecting": true,
        "rows": [{"key": "www.example.com/a", "requests": 3, "misses": 1, "bytes": 30}],
        "totals": {"requests": 40, "misses": 9, "bytes": 20480, "seconds": 60}});
    let s = render_top(&top);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines[0], "Top url by requests over the last 60 s");
    assert_eq!(
        lines[2],
        "         3          1        30B  www.example.com/a"
    );
    assert_eq!(
        lines[3],
        "        40          9      20KiB  (all requests, last 60 s)"
    );
    assert_eq!(lines.len(), 4);
    let old_server = json!({"by": "url", "sort": "requests", "window": 60, "rows": []});
    assert_eq!(render_top(&old_server).lines().count(), 2);
}

/// Issue 31: `shellac stat` lists every site; `--site NAME` shows one site's counters
/// (change per second from the previous screen) or names the sites there are.
#[test]
fn stat_by_site() {
    let live = |req: u64| {
        json!({"uptime_seconds": 10, "hit_ratio": {}, "ttfb_us_10s": {}, "counters": [],
            "sites": [{"name": "blog", "req": req, "hit": 3, "miss": 1, "pass": 0, "rewrite": 0, "hit_ratio": 0.75,
                       "cache_bytes": 9216, "cache_share": 65536, "cache_share_evictions": 2,
                       "files_refused_dotfile": 3, "files_refused_traversal": 0},
                      {"name": "shop", "req": 0, "hit": 0, "miss": 0, "pass": 0, "rewrite": 0, "hit_ratio": null,
                       "cache_bytes": 0, "cache_share": null, "cache_share_evictions": 0}]})
    };
    let s = render_stat(&live(4), false);
    let rows: Vec<Vec<&str>> = s
        .lines()
        .skip_while(|l| !l.starts_with("SITE "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[1],
        ["blog", "4", "3", "1", "0", "0", "9KiB", "64KiB", "75.0%"],
        "{s}"
    );
    assert_eq!(
        rows[2],
        ["shop", "0", "0", "0", "0", "0", "0B", "-", "-"],
        "{s}"
    );
    let (before, now) = (live(4), live(14));
    let one = render_site_stat(&now, "blog", Some((&before, 2.0))).unwrap();
    assert!(
        one.starts_with("Uptime 0d+00:00:10   Site blog: hit ratio 75.0% since start\n"),
        "{one}"
    );
    let req: Vec<&str> = one
        .lines()
        .find(|l| l.starts_with("site_req "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(req[..4], ["site_req", "14", "5.00", "1.40"], "{one}");
    assert!(one.contains("\nsite_cache_share_evictions "), "{one}");
    // The site's files refusals that moved, named as the process-wide counters.
    assert!(one.contains("\nsite_files_refused_dotfile "), "{one}");
    assert!(!one.contains("files_refused_traversal"), "{one}");
    assert!(!one.contains("shop"), "{one}");
    assert_eq!(
        render_site_stat(&now, "nope", None).unwrap_err(),
        "--site nope: no [[site]] of that name; there are: blog, shop"
    );
    let v = json!({"time": "2000-10-10T13:55:36.123Z", "client": "127.0.0.1", "method": "GET",
        "url": "/a", "host": "blog.test", "status": 200, "bytes": 5, "duration_us": 1500,
        "ttfb_us": 900, "cache": "hit", "backend": null, "site": "blog", "complete": true});
    assert!(
        render_log_line(&v)
            .unwrap()
            .contains(" backend=- site=blog ttfb="),
        "{:?}",
        render_log_line(&v)
    );
}

#[test]
fn encoding() {
    assert_eq!(encode("^/a b?c=1"), "%5E%2Fa%20b%3Fc%3D1");
}
