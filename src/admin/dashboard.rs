//! The web dashboard: a page and a script embedded in the binary (no CDN, nothing fetched at
//! run time) and `GET /api/dashboard`, the JSON the page polls every second: per-second series
//! from the counter history (req/s, hit ratio, bandwidth, TTFB percentiles, storage), backend
//! health, every `[[site]]`'s counters and the top URLs (of all requests or one site's).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::history::{Sample, WINDOWS};
use crate::proxy::Proxy;
use crate::stats::{LATENCY_BUCKETS, quantile_us};
use crate::txlog::Dimension;

pub const INDEX_HTML: &str = include_str!("assets/index.html");
pub const SCRIPT_JS: &str = include_str!("assets/dashboard.js");

/// Seconds of history the charts show.
pub const SERIES_SECONDS: usize = 300;

/// `GET /api/dashboard[?site=NAME]` (`site`: the top URLs of that `[[site]]`'s requests).
pub fn data(proxy: &Proxy, site: Option<&str>) -> Value {
    let history = &proxy.shared.history;
    let samples = history.recent(SERIES_SECONDS + 1);
    let now = Instant::now();
    let unix_now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut series = Series::default();
    for pair in samples.windows(2) {
        series.push(history, &pair[0], &pair[1], now, unix_now);
    }
    let live = proxy.sample();
    let ratios: serde_json::Map<String, Value> = std::iter::once((
        "all".to_string(),
        json!(history.hit_ratio(&vec![0; live.values.len()], &live.values)),
    ))
    .chain(WINDOWS.iter().map(|w| {
        (
            format!("{w}s"),
            json!(history.hit_ratio_over(*w, now, &live.values)),
        )
    }))
    .collect();
    // Watching the dashboard keeps the rankings fed.
    let recorder = &proxy.shared.recorder;
    recorder.lease_top();
    let top: Vec<Value> = recorder
        .top(Dimension::Url, |c| c.requests, 60, 10, site)
        .into_iter()
        .map(|(k, c)| json!({"key": k, "requests": c.requests, "misses": c.misses, "bytes": c.bytes}))
        .collect();
    let value = |name: &str| history.value(&live.values, name);
    json!({
        "uptime_seconds": proxy.shared.started.elapsed().as_secs(),
        "version": env!("CARGO_PKG_VERSION"),
        "hit_ratio": ratios,
        "totals": {
            "client_req": value("client_req"),
            "cache_hit": value("cache_hit"),
            "s_resp_bytes": value("s_resp_bytes"),
            "n_client_conn": value("n_client_conn"),
            "n_client_conn_released": value("n_client_conn_released"),
            "log_dropped": value("log_dropped"),
        },
        "storage": {
            "bytes": value("cache_bytes"),
            "capacity": value("cache_capacity_bytes"),
            "objects": value("n_object"),
            "evicted": value("n_lru_nuked"),
        },
        "fleet": super::fleet::summary(proxy),
        "series": series.into_json(),
        "backends": proxy.backends.backends.iter().map(|b| b.describe()).collect::<Vec<_>>(),
        "top_urls": top,
        "top_site": site,
        "sites": super::stats::sites(proxy),
    })
}

/// The TLS panel: handshakes (completed, resumed, failed, and the failures by reason that
/// happened), and each certificate (listener, names, expiry).
pub fn tls(proxy: &Proxy, certs: &[crate::tls::server::CertView]) -> serde_json::Value {
    let now = crate::tls::certs::unix_now();
    let c = &proxy.counters;
    let failures: serde_json::Map<String, Value> = c
        .snapshot()
        .into_iter()
        .filter_map(|(name, n)| {
            let reason = name.strip_prefix("tls_handshake_fail_")?;
            (n > 0).then(|| (reason.to_string(), json!(n)))
        })
        .collect();
    let certificates = serde_json::Value::Array(
        certs
            .iter()
            .map(|c| {
                serde_json::json!({
                    "listener": c.listener,
                    "names": c.names.join(", "),
                    "key": c.algorithm,
                    "not_after": crate::tls::certs::format_time(c.not_after),
                    "days_left": (c.not_after - now).div_euclid(86_400),
                })
            })
            .collect(),
    );
    json!({
        "handshakes": c.tls_handshake.get(),
        "resumed": c.tls_handshake_resumed.get(),
        "failed": c.tls_handshake_fail.get(),
        "failures": failures,
        "certificates": certificates,
    })
}

#[derive(Default)]
struct Series {
    t: Vec<f64>,
    req: Vec<f64>,
    hit_ratio: Vec<Option<f64>>,
    bytes: Vec<f64>,
    backend_errors: Vec<f64>,
    p50: Vec<Option<u64>>,
    p90: Vec<Option<u64>>,
    p99: Vec<Option<u64>>,
    cache_bytes: Vec<u64>,
    objects: Vec<u64>,
}

impl Series {
    fn push(
        &mut self,
        h: &crate::history::History,
        prev: &Sample,
        cur: &Sample,
        now: Instant,
        unix_now: f64,
    ) {
        let dt = cur.at.saturating_duration_since(prev.at).as_secs_f64();
        if dt <= 0.0 {
            return;
        }
        let rate = |names: &[&str]| -> f64 {
            let d: u64 = names
                .iter()
                .map(|n| {
                    h.value(&cur.values, n)
                        .saturating_sub(h.value(&prev.values, n))
                })
                .sum();
            (d as f64 / dt * 100.0).round() / 100.0
        };
        let ago = now.saturating_duration_since(cur.at).as_secs_f64();
        self.t.push((unix_now - ago).round());
        self.req.push(rate(&["client_req"]));
        self.hit_ratio.push(h.hit_ratio(&prev.values, &cur.values));
        self.bytes.push(rate(&["s_resp_bytes"]));
        self.backend_errors.push(rate(&[
            "backend_fail",
            "backend_timeout",
            "backend_error",
            "backend_busy",
            "backend_unhealthy",
        ]));
        let delta: [u64; LATENCY_BUCKETS] =
            std::array::from_fn(|i| cur.ttfb[i].saturating_sub(prev.ttfb[i]));
        self.p50.push(quantile_us(&delta, 0.5));
        self.p90.push(quantile_us(&delta, 0.9));
        self.p99.push(quantile_us(&delta, 0.99));
        self.cache_bytes.push(h.value(&cur.values, "cache_bytes"));
        self.objects.push(h.value(&cur.values, "n_object"));
    }

    fn into_json(self) -> Value {
        json!({
            "t": self.t,
            "req_per_s": self.req,
            "hit_ratio": self.hit_ratio,
            "bytes_per_s": self.bytes,
            "backend_errors_per_s": self.backend_errors,
            "ttfb_p50_us": self.p50,
            "ttfb_p90_us": self.p90,
            "ttfb_p99_us": self.p99,
            "cache_bytes": self.cache_bytes,
            "objects": self.objects,
        })
    }
}
