//! Counter views for the admin listener: `/stats` (flat JSON), `/stats/descriptions` and
//! `/stats/live` (values, rates, averages, hit ratios, TTFB percentiles). `/metrics` is in
//! `metrics.rs`.

use std::time::Instant;

use serde_json::{Map, Value, json};

use crate::history::WINDOWS;
use crate::proxy::Proxy;
use crate::stats;

/// Hit ratio since start and over each window; None when there was no lookup.
pub(super) fn hit_ratios(
    proxy: &Proxy,
    now: Instant,
    values: &[u64],
) -> Vec<(String, Option<f64>)> {
    let history = &proxy.shared.history;
    let zero = vec![0; values.len()];
    let mut out = vec![("hit_ratio".to_string(), history.hit_ratio(&zero, values))];
    for w in WINDOWS {
        out.push((
            format!("hit_ratio_{w}s"),
            history.hit_ratio_over(w, now, values),
        ));
    }
    out
}

/// `GET /stats`: one flat object, name → number. Ratios are 0 when there was no lookup.
pub fn flat(proxy: &Proxy) -> Value {
    let now = Instant::now();
    let stats = proxy.stats();
    let values: Vec<u64> = stats.iter().map(|(_, v)| *v).collect();
    let mut map: Map<String, Value> = stats
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    for (name, ratio) in hit_ratios(proxy, now, &values) {
        map.insert(name, json!(ratio.unwrap_or(0.0)));
    }
    Value::Object(map)
}

/// `GET /stats/descriptions`: name → sentence.
pub fn descriptions() -> Value {
    let mut map: Map<String, Value> = stats::names()
        .into_iter()
        .map(|n| (n.to_string(), stats::description(n).into()))
        .collect();
    map.insert(
        "hit_ratio".into(),
        "Share of lookups served from the cache since start: (cache_hit + cache_coalesced) / (those + cache_miss + cache_hitmiss + cache_pass + cache_vary_miss)".into(),
    );
    for w in WINDOWS {
        map.insert(
            format!("hit_ratio_{w}s"),
            format!("hit_ratio over the last {w} seconds").into(),
        );
    }
    Value::Object(map)
}

/// `GET /stats/live`: what `shellac stat` and the dashboard show.
pub fn live(proxy: &Proxy) -> Value {
    let now = Instant::now();
    let history = &proxy.shared.history;
    let stats = proxy.stats();
    let values: Vec<u64> = stats.iter().map(|(_, v)| *v).collect();
    let uptime = proxy.shared.started.elapsed().as_secs_f64();
    let rates = history.rates_over(1, now, &values);
    let rates_10 = history.rates_over(10, now, &values);
    let counters: Vec<Value> = stats
        .iter()
        .enumerate()
        .map(|(i, (name, v))| {
            let gauge = stats::is_gauge(name);
            json!({
                "name": name,
                "value": v,
                "gauge": gauge,
                "rate": if gauge { 0.0 } else { round(rates[i]) },
                "rate_10s": if gauge { 0.0 } else { round(rates_10[i]) },
                "avg": if gauge || uptime <= 0.0 { 0.0 } else { round(*v as f64 / uptime) },
                "description": stats::description(name),
            })
        })
        .collect();
    let ratios: Map<String, Value> = hit_ratios(proxy, now, &values)
        .into_iter()
        .map(|(k, v)| (k, json!(v)))
        .collect();
    let ttfb = proxy.counters.ttfb.buckets();
    let quantile = |q| history.ttfb_quantile_over(10, now, &ttfb, q);
    json!({
        "uptime_seconds": uptime as u64,
        "hit_ratio": ratios,
        "ttfb_us_10s": { "p50": quantile(0.5), "p90": quantile(0.9), "p99": quantile(0.99) },
        "counters": counters,
        "fleet": super::fleet::summary(proxy),
        "sites": sites(proxy),
    })
}

/// `GET /sites` (and `sites` in `/stats/live` and `/api/dashboard`): every `[[site]]` seen
/// since start, in file order, with its counters (`req`, `hit`, `miss`, `pass`, `rewrite`, as
/// `/metrics` labels them `site="NAME"`, and the requests of the site a files backend refused,
/// `files_refused_*` and `files_script_refused`), its hit ratio since start (null before a request),
/// and its use of the memory tier (`cache_bytes`, `cache_share` in bytes or null,
/// `cache_share_evictions`). An empty list without sites.
pub fn sites(proxy: &Proxy) -> Value {
    let rows = proxy
        .shared
        .site_stats
        .all()
        .into_iter()
        .map(|(name, c)| {
            let mut row = Map::new();
            row.insert("name".into(), json!(&*name));
            for (key, _, value) in c.snapshot() {
                row.insert(key.into(), json!(value));
            }
            // The site's files refusals, named as the process-wide counters.
            for (reason, n) in c.files_refused.snapshot() {
                row.insert(reason.name().into(), json!(n));
            }
            let cache = site_cache(proxy, &name);
            row.insert("cache_bytes".into(), json!(cache.bytes));
            row.insert("cache_share".into(), json!(cache.share));
            row.insert("cache_share_evictions".into(), json!(cache.evictions));
            let (hit, req) = (c.hit.get(), c.req.get());
            row.insert(
                "hit_ratio".into(),
                json!((req > 0).then(|| round(hit as f64 / req as f64 * 100.0) / 100.0)),
            );
            Value::Object(row)
        })
        .collect();
    Value::Array(rows)
}

/// `GET /storages`: the memory tier's storages (`[[storage.named]]`, docs/configuration.md),
/// first `s0` (the memory tier itself: `bytes`, `size` its `cache.memory_size`, `objects`),
/// then `Transient` and every named storage seen since start: `bytes` its objects are charged
/// and its fills under way (each storage's `bytes`, `s0`'s too: `cache/shares.rs`),
/// `size` (null: bounded by the memory tier alone), `free` (what it can still take before it
/// evicts its own: its size, else the memory tier's, less what is used), `objects` held now,
/// `stored` and `evicted` since start (`evicted`: to hold it to its size).
pub fn storages(proxy: &Proxy) -> Value {
    let tier = proxy.cache.storage.stats();
    let filling = proxy
        .cache
        .storage
        .site_shares()
        .map_or(0, |s| s.filling_total());
    let tier_used = tier.bytes + filling;
    let tier_free = tier.capacity.saturating_sub(tier_used);
    let mut rows = vec![json!({
        "name": "s0",
        "bytes": tier_used,
        "size": tier.capacity,
        "free": tier_free,
        "objects": tier.objects,
    })];
    if let Some(shares) = proxy.cache.storage.site_shares() {
        for f in shares.stores() {
            rows.push(json!({
                "name": f.name,
                "bytes": f.bytes,
                "size": f.size,
                "free": f.size.map_or(tier_free, |s| s.saturating_sub(f.bytes).min(tier_free)),
                "objects": f.objects,
                "stored": f.stored,
                "evicted": f.evicted,
            }));
        }
    }
    Value::Array(rows)
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A site's use of the memory tier (`[[site]] cache_share`).
#[derive(Debug)]
pub(super) struct SiteCache {
    /// Bytes its objects are charged.
    pub bytes: u64,
    /// Its share, if it has one (in the configuration running now).
    pub share: Option<u64>,
    /// Its objects evicted to hold it to its share, since start.
    pub evictions: u64,
}

/// [`SiteCache`] of the site named `name`.
pub(super) fn site_cache(proxy: &Proxy, name: &str) -> SiteCache {
    let account = proxy.shared.site_stats.account(name);
    match proxy.cache.storage.site_shares() {
        Some(shares) if account != 0 => SiteCache {
            bytes: shares.bytes(account),
            share: shares.limit(account),
            evictions: shares.evictions(account),
        },
        _ => SiteCache {
            bytes: 0,
            share: None,
            evictions: 0,
        },
    }
}
