//! Counters as the operator sees them: `/stats` hit ratios, `/stats/live`, `/metrics`.

mod common;

use std::collections::HashSet;

use common::*;

async fn traffic(shellac: &Shellac) {
    get(shellac.addr, "/a").await; // miss
    for _ in 0..3 {
        get(shellac.addr, "/a").await; // hits
    }
    get(shellac.addr, "/nostore").await; // miss, not stored (no-store)
    request(shellac.addr, "POST", "/form", &[], b"x").await; // pass (method)
}

fn origin_handler(s: &Seen) -> Reply {
    match s.path.as_str() {
        "/nostore" => Reply::ok("n").cc("no-store"),
        _ => Reply::ok("hello").cc("max-age=60"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hit_ratios_in_stats() {
    let origin = Origin::start(origin_handler).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    assert_eq!(shellac.ratio("hit_ratio_10s").await, 0.0, "no lookups yet");
    traffic(&shellac).await;
    // 3 hits out of 6 requests (2 misses, 1 pass), whatever the window: the process is young.
    for name in [
        "hit_ratio",
        "hit_ratio_10s",
        "hit_ratio_100s",
        "hit_ratio_1000s",
    ] {
        assert_eq!(shellac.ratio(name).await, 0.5, "{name}");
    }
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_hit"], 3);
    assert_eq!(stats["pass_reason_no_store"], 1);
    assert_eq!(stats["pass_reason_method"], 1);
    assert_eq!(stats["pass_reason_private"], 0);
    let descriptions = get(shellac.admin, "/stats/descriptions").await;
    let descriptions: std::collections::HashMap<String, String> =
        serde_json::from_slice(&descriptions.body).unwrap();
    for name in shellac.stats_json().await.keys() {
        assert!(
            descriptions.get(name).is_some_and(|d| !d.is_empty()),
            "{name} has no description"
        );
    }
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_stats_have_rates_and_percentiles() {
    let origin = Origin::start(origin_handler).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    traffic(&shellac).await;
    let resp = get(shellac.admin, "/stats/live").await;
    assert_eq!(resp.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(v["hit_ratio"]["hit_ratio_10s"], 0.5);
    assert!(v["ttfb_us_10s"]["p50"].as_u64().is_some(), "{v}");
    let counters = v["counters"].as_array().unwrap();
    let req = counters
        .iter()
        .find(|c| c["name"] == "client_req")
        .expect("client_req");
    assert_eq!(req["value"], 6);
    assert_eq!(req["gauge"], false);
    assert!(req["rate"].as_f64().unwrap() >= 0.0);
    assert!(req["avg"].as_f64().unwrap() >= 0.0);
    assert!(!req["description"].as_str().unwrap().is_empty());
    let objects = counters.iter().find(|c| c["name"] == "n_object").unwrap();
    assert_eq!(objects["gauge"], true);
    assert_eq!(objects["value"], 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_in_prometheus_text_format() {
    let origin = Origin::start(origin_handler).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    traffic(&shellac).await;
    let resp = get(shellac.admin, "/metrics").await;
    assert_eq!(resp.status, 200);
    assert!(
        resp.header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = resp.text();
    for line in [
        "shellac_client_req_total 6",
        "shellac_cache_hit_total 3",
        "shellac_cache_miss_total 2",
        "shellac_n_object 1",
        "# TYPE shellac_n_object gauge",
        "# TYPE shellac_cache_hit_total counter",
        "shellac_pass_reason_total{reason=\"no-store\"} 1",
        "shellac_pass_reason_total{reason=\"method\"} 1",
        "shellac_hit_ratio{window=\"10s\"} 0.5",
        "shellac_hit_ratio{window=\"all\"} 0.5",
        "shellac_ttfb_seconds_bucket{le=\"+Inf\"} 6",
        "shellac_ttfb_seconds_count 6",
        "# TYPE shellac_ttfb_seconds histogram",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing `{line}` in\n{text}"
        );
    }
    // Structure: every sample line is `name{labels} number`, every metric has HELP and TYPE
    // before its samples, and names are valid.
    let mut described = HashSet::new();
    let mut typed = HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            described.insert(rest.split(' ').next().unwrap().to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let name = parts.next().unwrap();
            let kind = parts.next().unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            typed.insert(name.to_string());
        } else {
            let (name, value) = line.rsplit_once(' ').expect(line);
            value
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("value in {line}"));
            let base = name.split('{').next().unwrap();
            assert!(
                base.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line}"
            );
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| base.strip_suffix(s).filter(|f| typed.contains(*f)))
                .unwrap_or(base);
            assert!(typed.contains(family), "no TYPE before {line}");
            assert!(described.contains(family), "no HELP before {line}");
        }
    }
    // Cumulative buckets never decrease.
    let buckets: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with("shellac_ttfb_seconds_bucket"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
        .collect();
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    shellac.stop().await;
}
