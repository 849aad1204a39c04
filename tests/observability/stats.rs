//! Counters as the operator sees them: `/stats` hit ratios, `/stats/live`, `/metrics`
//! (read back with a strict OpenMetrics reader written here, independent of the encoder).

use std::collections::{HashMap, HashSet};

use crate::common::*;

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

/// `client_req` in `/stats/live`: its value, its average since start and its rates.
fn client_req(live: &serde_json::Value) -> (u64, f64, f64, f64) {
    let c = live["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "client_req")
        .expect("client_req");
    assert_eq!(c["gauge"], false);
    assert!(!c["description"].as_str().unwrap().is_empty());
    let f = |k: &str| c[k].as_f64().unwrap_or_else(|| panic!("{k} in {c}"));
    (
        c["value"].as_u64().unwrap(),
        f("avg"),
        f("rate"),
        f("rate_10s"),
    )
}

async fn live(shellac: &Shellac) -> serde_json::Value {
    let resp = get(shellac.admin, "/stats/live").await;
    assert_eq!(resp.status, 200);
    serde_json::from_slice(&resp.body).unwrap()
}

/// Rates and averages are checked against what they must be, not only for being numbers. The
/// sampler takes a sample at start (before any request) and one a second after; a rate is the
/// growth since the newest sample at least its window old (else since the first). So: the
/// average is the value over the uptime; while the process is younger than 10 s the 10 s rate
/// counts all 6 requests (at least 6 / (uptime + 1)); and once a sample taken after the traffic
/// is a second old, the 1 s rate is exactly 0 while the average is not. None of this depends on
/// how fast the machine is (the loop waiting for the quiet second is bounded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_stats_have_rates_and_percentiles() {
    let origin = Origin::start(origin_handler).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    traffic(&shellac).await;
    let v = live(&shellac).await;
    assert_eq!(v["hit_ratio"]["hit_ratio_10s"], 0.5);
    assert!(v["ttfb_us_10s"]["p50"].as_u64().is_some(), "{v}");
    let uptime = v["uptime_seconds"].as_u64().unwrap() as f64;
    let (value, avg, rate, rate_10s) = client_req(&v);
    assert_eq!(value, 6);
    // avg = 6 / uptime (seconds, fractional); `uptime_seconds` is its whole part; rounded to
    // hundredths.
    assert!(
        avg >= 6.0 / (uptime + 1.0) - 0.01,
        "avg {avg}, uptime {uptime}"
    );
    if uptime > 0.0 {
        assert!(avg <= 6.0 / uptime + 0.01, "avg {avg}, uptime {uptime}");
    }
    if uptime < 9.0 {
        // No sample is 10 s old yet: the 10 s rate is over the whole life, since the first
        // sample (taken before any request).
        assert!(
            rate_10s >= 6.0 / (uptime + 1.0) - 0.01,
            "rate_10s {rate_10s}, uptime {uptime}"
        );
    }
    if uptime == 0.0 {
        // Younger than a second: the 1 s rate too is since the first sample.
        assert!(rate >= 6.0 - 0.01, "rate {rate}");
    }
    assert!(rate >= 0.0);
    // A quiet second later the 1 s rate is 0; the average is not.
    let mut quiet = None;
    for _ in 0..100 {
        let v = live(&shellac).await;
        let (value, avg, rate, _) = client_req(&v);
        assert_eq!(value, 6, "admin requests are not client requests");
        if rate == 0.0 {
            quiet = Some(avg);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let avg = quiet.expect("the 1 s rate fell to 0 within 10 s of quiet");
    assert!(avg > 0.0);
    let objects = v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "n_object")
        .unwrap();
    assert_eq!(objects["gauge"], true);
    assert_eq!(objects["value"], 1);
    assert_eq!(objects["rate"], 0.0, "gauges have no rate");
    shellac.stop().await;
}

/// One sample of an exposition: family it belongs to, type, labels, value.
#[derive(Debug)]
struct Sample {
    family: String,
    kind: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// A strict reader of the OpenMetrics text format (written for this test, independent of the
/// encoder): `# HELP` then `# TYPE` before a family's samples, sample names that are the
/// family plus the suffix its type allows, `name{k="v",...} value` with escaped label values,
/// one `# EOF` at the very end. Returns samples by their full name and labels.
fn parse_openmetrics(text: &str) -> HashMap<String, Sample> {
    let body = text.strip_suffix("# EOF\n").expect("ends with # EOF");
    assert!(!body.contains("# EOF"), "one EOF");
    let mut helped: Option<String> = None;
    let mut current: Option<(String, String)> = None;
    let mut families = HashSet::new();
    let mut samples = HashMap::new();
    for line in body.lines() {
        assert!(!line.is_empty(), "no blank lines");
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, _) = rest.split_once(' ').expect(line);
            assert!(families.insert(name.to_string()), "family {name} twice");
            helped = Some(name.to_string());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect(line);
            assert_eq!(helped.as_deref(), Some(name), "HELP before TYPE: {line}");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            current = Some((name.to_string(), kind.to_string()));
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment {line}");
        let (family, kind) = current.clone().expect("TYPE before samples");
        let (series, value) = line.rsplit_once(' ').expect(line);
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value in {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, Vec::new()),
            Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}').expect(line))),
        };
        let allowed: &[&str] = match kind.as_str() {
            "counter" => &["_total"],
            "gauge" => &[""],
            _ => &["_bucket", "_sum", "_count"],
        };
        assert!(
            allowed
                .iter()
                .any(|suffix| name.strip_suffix(suffix) == Some(family.as_str())),
            "{name} is not a sample of {kind} {family}"
        );
        let key = format!(
            "{name}{}",
            labels
                .iter()
                .map(|(k, v)| format!("{{{k}={v}}}"))
                .collect::<String>()
        );
        let sample = Sample {
            family,
            kind,
            labels,
            value,
        };
        assert!(samples.insert(key.clone(), sample).is_none(), "{key} twice");
    }
    samples
}

/// `k="v",k2="v2"` with `\\`, `\"` and `\n` escapes.
fn parse_labels(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        assert!(!key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        assert_eq!(chars.next(), Some('"'), "quoted value in {s}");
        let mut value = String::new();
        loop {
            match chars.next().expect("closing quote") {
                '"' => break,
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(c @ ('\\' | '"')) => value.push(c),
                    other => panic!("bad escape {other:?} in {s}"),
                },
                c => value.push(c),
            }
        }
        out.push((key, value));
        match chars.next() {
            None => break,
            Some(',') => {}
            Some(c) => panic!("unexpected {c} in {s}"),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_in_prometheus_text_format() {
    let origin = Origin::start(origin_handler).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    traffic(&shellac).await;
    let resp = get(shellac.admin, "/metrics").await;
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("content-type").unwrap(),
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let samples = parse_openmetrics(&resp.text());
    let value = |key: &str| {
        samples
            .get(key)
            .unwrap_or_else(|| panic!("no sample {key}"))
            .value
    };
    // What the traffic did: 6 requests, 3 hits, 2 misses (one not stored), 1 pass.
    assert_eq!(value("shellac_client_req_total"), 6.0);
    assert_eq!(value("shellac_cache_hit_total"), 3.0);
    assert_eq!(value("shellac_cache_miss_total"), 2.0);
    assert_eq!(value("shellac_cache_pass_total"), 1.0);
    assert_eq!(value("shellac_n_object"), 1.0);
    assert_eq!(samples["shellac_n_object"].kind, "gauge");
    assert_eq!(samples["shellac_cache_hit_total"].kind, "counter");
    assert_eq!(
        samples["shellac_cache_hit_total"].family,
        "shellac_cache_hit"
    );
    assert_eq!(value("shellac_pass_reason_total{reason=no-store}"), 1.0);
    assert_eq!(value("shellac_pass_reason_total{reason=method}"), 1.0);
    assert_eq!(value("shellac_hit_ratio{window=10s}"), 0.5);
    assert_eq!(value("shellac_hit_ratio{window=all}"), 0.5);
    assert_eq!(value("shellac_ttfb_seconds_count"), 6.0);
    assert_eq!(value("shellac_ttfb_seconds_bucket{le=+Inf}"), 6.0);
    assert_eq!(samples["shellac_ttfb_seconds_count"].kind, "histogram");
    // Buckets: cumulative, bounds increasing, ending at +Inf.
    let mut buckets: Vec<(f64, f64)> = samples
        .values()
        .filter(|s| s.family == "shellac_ttfb_seconds" && !s.labels.is_empty())
        .map(|s| {
            assert_eq!(s.labels[0].0, "le");
            let le = match s.labels[0].1.as_str() {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap(),
            };
            (le, s.value)
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(buckets.len(), 17);
    assert_eq!(buckets[0].0, 0.0001);
    assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
    // Every counter of /stats has the same value under its Prometheus name.
    let stats = shellac.stats().await;
    let descriptions = get(shellac.admin, "/stats/descriptions").await;
    let descriptions: HashMap<String, String> = serde_json::from_slice(&descriptions.body).unwrap();
    let mut compared = 0;
    for (name, v) in &stats {
        if name.starts_with("pass_reason_") || !descriptions.contains_key(name) {
            continue;
        }
        let total = format!("shellac_{name}_total");
        if let Some(s) = samples.get(&total) {
            assert_eq!(s.value, *v as f64, "{name}");
            compared += 1;
        } else {
            let gauge = &samples[&format!("shellac_{name}")];
            assert_eq!(gauge.kind, "gauge", "{name}");
        }
    }
    assert!(compared > 50, "{compared} counters compared");
    shellac.stop().await;
}

/// Issue 32: `/metrics` had no per-backend series, so Prometheus could not alert on a sick
/// backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_have_per_backend_health_requests_failures_connections_and_ttfb() {
    let origin = Origin::start(origin_handler).await;
    let dead_port = refused_port();
    let toml = format!(
        "[[backend]]\nname = \"web\"\nhost = \"127.0.0.1\"\nport = {}\n\
         [[backend]]\nname = \"dead\"\nhost = \"127.0.0.1\"\nport = {dead_port}\n\
         [[backend]]\nname = \"sick\"\nhost = \"127.0.0.1\"\nport = {dead_port}\n\
         probe = {{ url = \"/health\", interval = \"1h\", initial = 0 }}\n\
         [routing]\ndefault = \"web\"\n\
         [[rule]]\npath = \"^/dead\"\ndirector = \"dead\"\n",
        origin.addr.port()
    );
    let shellac = Shellac::start(origin.addr, |c| {
        let (listen, admin) = (c.server.listen.clone(), c.server.admin);
        *c = shellac::config::Config::parse(&toml, "t.toml").unwrap();
        c.server.listen = listen;
        c.server.admin = admin;
    })
    .await;
    get(shellac.addr, "/a").await; // web: miss
    get(shellac.addr, "/nostore").await; // web: miss
    get(shellac.addr, "/a").await; // hit: no backend request
    assert_eq!(get(shellac.addr, "/dead").await.status, 503);
    let samples = parse_openmetrics(&get(shellac.admin, "/metrics").await.text());
    let value = |key: &str| {
        samples
            .get(key)
            .unwrap_or_else(|| panic!("no sample {key}"))
            .value
    };
    assert_eq!(value("shellac_backend_healthy{backend=web}"), 1.0);
    assert_eq!(value("shellac_backend_healthy{backend=sick}"), 0.0);
    assert_eq!(value("shellac_backend_requests_total{backend=web}"), 2.0);
    assert_eq!(value("shellac_backend_requests_total{backend=sick}"), 0.0);
    assert!(value("shellac_backend_requests_total{backend=dead}") >= 1.0);
    assert!(value("shellac_backend_failures_total{backend=dead}{kind=connect}") >= 1.0);
    assert_eq!(
        value("shellac_backend_failures_total{backend=web}{kind=connect}"),
        0.0
    );
    assert_eq!(
        value("shellac_backend_failures_total{backend=web}{kind=exchange}"),
        0.0
    );
    assert_eq!(
        value("shellac_backend_connections_opened_total{backend=web}"),
        1.0
    );
    assert_eq!(
        samples["shellac_backend_connections{backend=web}{state=in_flight}"].kind,
        "gauge"
    );
    assert!(samples.contains_key("shellac_backend_connections{backend=web}{state=idle}"));
    assert_eq!(value("shellac_backend_queued{backend=web}"), 0.0);
    assert_eq!(
        value("shellac_backend_ttfb_seconds_count{backend=web}"),
        2.0
    );
    let inf = samples.keys().find(|k| {
        k.starts_with("shellac_backend_ttfb_seconds_bucket")
            && k.contains("{backend=web}")
            && k.contains("{le=+Inf}")
    });
    assert_eq!(
        inf.map(|k| samples[k].value),
        Some(2.0),
        "{:?}",
        samples
            .keys()
            .filter(|k| k.contains("backend_ttfb"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        value("shellac_backend_ttfb_seconds_count{backend=dead}"),
        0.0
    );
    assert_eq!(
        samples["shellac_backend_ttfb_seconds_count{backend=web}"].kind,
        "histogram"
    );
    shellac.stop().await;
}
