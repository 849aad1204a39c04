//! `GET /metrics`: the OpenMetrics text exposition (which Prometheus scrapes natively), encoded
//! by the Prometheus org's `prometheus-client` crate at scrape time. A custom collector reads
//! a snapshot of Shellac's own counters: the request path keeps its relaxed atomic increments
//! on its own cells and never touches the crate's types.
//!
//! Sample names are stable: counters `shellac_NAME_total`, gauges `shellac_NAME`,
//! `shellac_pass_reason_total{reason}`, `shellac_hit_ratio{window}`, and the
//! `shellac_ttfb_seconds` histogram (`_bucket{le}`, `_sum`, `_count`).

use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::proxy::Proxy;
use crate::proxy::site::SiteSnapshot;
use crate::stats::{self, LATENCY_BOUNDS_US, TTFB_DESCRIPTION};

/// The exposition's media type (OpenMetrics 1.0; Prometheus asks for it and parses it).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Everything one scrape reports, read from the counters once.
#[derive(Debug)]
struct Snapshot {
    /// Counters and gauges of `/stats` (the `pass_reason_*` ones are reported as a family).
    values: Vec<(&'static str, u64)>,
    /// (Cache-Status detail word, responses).
    pass_reasons: Vec<(&'static str, u64)>,
    /// (window label, hit ratio).
    ratios: Vec<(String, f64)>,
    /// (upper bound in seconds, responses in that bucket alone); the last bound is +Inf.
    ttfb_buckets: Vec<(f64, u64)>,
    ttfb_sum_seconds: f64,
    /// Every TLS certificate.
    certs: Vec<crate::tls::server::CertView>,
    /// One row per ACME certificate.
    acme: Vec<super::acme::Row>,
    /// One row per backend, in declaration order.
    backends: Vec<BackendRow>,
    /// One row per `[[site]]` seen since start.
    sites: Vec<SiteRow>,
}

/// What `/metrics` says about one site (labels `site="NAME"`).
#[derive(Debug)]
struct SiteRow {
    name: String,
    counters: SiteSnapshot,
    cache: super::stats::SiteCache,
    ttfb_buckets: Vec<(f64, u64)>,
    ttfb_sum_seconds: f64,
}

/// What `/metrics` says about one backend (labels `backend="NAME"`), so an alert can name the
/// sick one.
#[derive(Debug)]
struct BackendRow {
    name: String,
    healthy: bool,
    requests: u64,
    /// (kind label, count): `connect` (refused, unreachable, connect timeout), `exchange`
    /// (reset, bad response, timeouts), `busy` (refused by max_connections).
    failures: [(&'static str, u64); 3],
    opened: u64,
    in_flight: i64,
    idle: i64,
    queued: i64,
    ttfb_buckets: Vec<(f64, u64)>,
    ttfb_sum_seconds: f64,
}

fn seconds_buckets(buckets: &[u64]) -> Vec<(f64, u64)> {
    buckets
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let bound = LATENCY_BOUNDS_US
                .get(i)
                .map_or(f64::INFINITY, |us| *us as f64 / 1e6);
            (bound, *n)
        })
        .collect()
}

fn backend_rows(proxy: &Proxy) -> Vec<BackendRow> {
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    proxy
        .backends
        .backends
        .iter()
        .map(|b| BackendRow {
            name: b.name().to_string(),
            healthy: b.health.is_healthy(),
            requests: b.stats.req.get(),
            failures: [
                ("connect", b.stats.fail.get()),
                ("exchange", b.stats.error.get()),
                ("busy", b.stats.busy.get()),
            ],
            opened: b.stats.conn.get(),
            in_flight: b.in_flight(),
            idle: count(b.idle_count()),
            queued: count(b.queued()),
            ttfb_buckets: seconds_buckets(&b.stats.ttfb.buckets()),
            ttfb_sum_seconds: b.stats.ttfb.sum_us() as f64 / 1e6,
        })
        .collect()
}

/// The per-backend families.
fn encode_backends(rows: &[BackendRow], encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(
        "shellac_backend_healthy",
        "Whether each backend is healthy (1) or sick (0) by its probe and passive health",
        None,
        MetricType::Gauge,
    )?;
    for b in rows {
        family
            .encode_family(&[("backend", b.name.as_str())])?
            .encode_gauge(&i64::from(b.healthy))?;
    }
    let mut family = encoder.encode_descriptor(
        "shellac_backend_requests",
        "Requests sent to each backend",
        None,
        MetricType::Counter,
    )?;
    for b in rows {
        family
            .encode_family(&[("backend", b.name.as_str())])?
            .encode_counter::<NoLabelSet, _, u64>(&b.requests, None)?;
    }
    let mut family = encoder.encode_descriptor(
        "shellac_backend_failures",
        "Failures per backend: kind connect (refused, unreachable, connect timeout), exchange (reset, bad response, timeouts), busy (refused by max_connections)",
        None,
        MetricType::Counter,
    )?;
    for b in rows {
        for (kind, n) in &b.failures {
            family
                .encode_family(&[("backend", b.name.as_str()), ("kind", kind)])?
                .encode_counter::<NoLabelSet, _, u64>(n, None)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "shellac_backend_connections_opened",
        "Connections opened to each backend",
        None,
        MetricType::Counter,
    )?;
    for b in rows {
        family
            .encode_family(&[("backend", b.name.as_str())])?
            .encode_counter::<NoLabelSet, _, u64>(&b.opened, None)?;
    }
    let mut family = encoder.encode_descriptor(
        "shellac_backend_connections",
        "Connections to each backend now: state in_flight (carrying a request) or idle (pooled)",
        None,
        MetricType::Gauge,
    )?;
    for b in rows {
        for (state, n) in [("in_flight", b.in_flight), ("idle", b.idle)] {
            family
                .encode_family(&[("backend", b.name.as_str()), ("state", state)])?
                .encode_gauge(&n)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "shellac_backend_queued",
        "Requests waiting for a connection slot of each backend (max_connections) now",
        None,
        MetricType::Gauge,
    )?;
    for b in rows {
        family
            .encode_family(&[("backend", b.name.as_str())])?
            .encode_gauge(&b.queued)?;
    }
    let mut family = encoder.encode_descriptor(
        "shellac_backend_ttfb_seconds",
        "Time from sending a request on a connection to each backend's response head",
        None,
        MetricType::Histogram,
    )?;
    for b in rows {
        let count = b.ttfb_buckets.iter().map(|(_, n)| n).sum();
        family
            .encode_family(&[("backend", b.name.as_str())])?
            .encode_histogram::<NoLabelSet>(b.ttfb_sum_seconds, count, &b.ttfb_buckets, None)?;
    }
    Ok(())
}

/// `GET /metrics` body; `certs`: the TLS listeners' certificates (their expiry).
pub fn encode(proxy: &Proxy, certs: &[crate::tls::server::CertView]) -> String {
    let now = Instant::now();
    let values = proxy.stats();
    let numbers: Vec<u64> = values.iter().map(|(_, v)| *v).collect();
    let ratios = super::stats::hit_ratios(proxy, now, &numbers)
        .into_iter()
        .map(|(name, ratio)| {
            let window = name.strip_prefix("hit_ratio_").unwrap_or("all").to_string();
            (window, ratio.unwrap_or(0.0))
        })
        .collect();
    let ttfb_buckets = proxy
        .counters
        .ttfb
        .buckets()
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            let bound = LATENCY_BOUNDS_US
                .get(i)
                .map_or(f64::INFINITY, |us| *us as f64 / 1e6);
            (bound, n)
        })
        .collect();
    let snapshot = Snapshot {
        pass_reasons: proxy
            .counters
            .pass_reason
            .snapshot()
            .map(|(word, _, n)| (word, n))
            .collect(),
        values,
        ratios,
        ttfb_buckets,
        ttfb_sum_seconds: proxy.counters.ttfb.sum_us() as f64 / 1e6,
        certs: certs.to_vec(),
        acme: super::acme::rows(proxy),
        backends: backend_rows(proxy),
        sites: proxy
            .shared
            .site_stats
            .all()
            .into_iter()
            .map(|(name, c)| SiteRow {
                cache: super::stats::site_cache(proxy, &name),
                name: name.to_string(),
                counters: c.snapshot(),
                ttfb_buckets: seconds_buckets(&c.ttfb.buckets()),
                ttfb_sum_seconds: c.ttfb.sum_us() as f64 / 1e6,
            })
            .collect(),
    };
    let mut registry = Registry::default();
    registry.register_collector(Box::new(snapshot));
    let mut out = String::with_capacity(32 * 1024);
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
        // Writing into a String cannot fail; say so rather than serve half an exposition.
        tracing::error!(error = %e, "encoding /metrics failed");
        return "# EOF\n".into();
    }
    out
}

/// HELP text escaped as OpenMetrics requires (backslash, double quote, line feed).
fn help(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (name, value) in &self.values {
            if name.starts_with("pass_reason_") {
                continue;
            }
            let metric = format!("shellac_{name}");
            let text = help(stats::description(name));
            if stats::is_gauge(name) {
                let gauge = ConstGauge::new(*value);
                gauge.encode(encoder.encode_descriptor(
                    &metric,
                    &text,
                    None,
                    gauge.metric_type(),
                )?)?;
            } else {
                // The encoder adds the `_total` suffix of counter samples.
                let counter = ConstCounter::new(*value);
                counter.encode(encoder.encode_descriptor(
                    &metric,
                    &text,
                    None,
                    counter.metric_type(),
                )?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "shellac_pass_reason",
            "Responses that were not a plain hit or miss, by reason (Cache-Status detail word)",
            None,
            MetricType::Counter,
        )?;
        for (word, n) in &self.pass_reasons {
            family
                .encode_family(&[("reason", *word)])?
                .encode_counter::<NoLabelSet, _, u64>(n, None)?;
        }
        let mut family = encoder.encode_descriptor(
            "shellac_hit_ratio",
            "Share of lookups served from the cache over a window (0 without lookups)",
            None,
            MetricType::Gauge,
        )?;
        for (window, ratio) in &self.ratios {
            family
                .encode_family(&[("window", window.as_str())])?
                .encode_gauge(ratio)?;
        }
        let mut family = encoder.encode_descriptor(
            "shellac_tls_certificate_not_after_seconds",
            "When each TLS certificate expires (seconds since the epoch), by listener, names and source",
            None,
            MetricType::Gauge,
        )?;
        for c in &self.certs {
            let names = c.names.join(",");
            family
                .encode_family(&[
                    ("listener", c.listener.as_str()),
                    ("names", names.as_str()),
                    ("source", c.source.as_str()),
                ])?
                .encode_gauge(&c.not_after)?;
        }
        let count = self.ttfb_buckets.iter().map(|(_, n)| n).sum();
        encoder
            .encode_descriptor(
                "shellac_ttfb_seconds",
                &help(TTFB_DESCRIPTION),
                None,
                MetricType::Histogram,
            )?
            .encode_histogram::<NoLabelSet>(
                self.ttfb_sum_seconds,
                count,
                &self.ttfb_buckets,
                None,
            )?;
        super::acme::encode(&self.acme, &mut encoder)?;
        encode_backends(&self.backends, &mut encoder)?;
        encode_sites(&self.sites, &mut encoder)?;
        Ok(())
    }
}

/// The per-site families: `shellac_site_NAME_total{site}` (req, hit, miss, pass, rewrite),
/// the memory tier's per site (`encode_site_cache`) and the `shellac_site_ttfb_seconds{site}`
/// histogram.
fn encode_sites(rows: &[SiteRow], encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    for (i, (name, description, _)) in first.counters.iter().enumerate() {
        let (metric, text) = (
            format!("shellac_site_{name}"),
            format!("{description}, per [[site]]"),
        );
        let mut family = encoder.encode_descriptor(&metric, &text, None, MetricType::Counter)?;
        for row in rows {
            let n = row.counters[i].2;
            family
                .encode_family(&[("site", row.name.as_str())])?
                .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
        }
    }
    encode_site_cache(rows, encoder)?;
    let mut family = encoder.encode_descriptor(
        "shellac_site_ttfb_seconds",
        "Time from a request's arrival to its response head, per [[site]]",
        None,
        MetricType::Histogram,
    )?;
    for row in rows {
        let count = row.ttfb_buckets.iter().map(|(_, n)| n).sum();
        family
            .encode_family(&[("site", row.name.as_str())])?
            .encode_histogram::<NoLabelSet>(row.ttfb_sum_seconds, count, &row.ttfb_buckets, None)?;
    }
    Ok(())
}

/// `shellac_site_cache_bytes{site}`, `shellac_site_cache_share_bytes{site}` (the sites with a
/// share) and `shellac_site_cache_share_evictions_total{site}`.
fn encode_site_cache(rows: &[SiteRow], encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(
        "shellac_site_cache_bytes",
        "Bytes the site's objects take in the memory tier, per [[site]]",
        None,
        MetricType::Gauge,
    )?;
    for row in rows {
        family
            .encode_family(&[("site", row.name.as_str())])?
            .encode_gauge(&row.cache.bytes)?;
    }
    let mut family = encoder.encode_descriptor(
        "shellac_site_cache_share_bytes",
        "The site's cache_share of the memory tier, per [[site]] that has one",
        None,
        MetricType::Gauge,
    )?;
    for row in rows {
        if let Some(share) = &row.cache.share {
            family
                .encode_family(&[("site", row.name.as_str())])?
                .encode_gauge(share)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "shellac_site_cache_share_evictions",
        "Objects evicted to hold the site to its cache_share, per [[site]]",
        None,
        MetricType::Counter,
    )?;
    for row in rows {
        family
            .encode_family(&[("site", row.name.as_str())])?
            .encode_counter::<NoLabelSet, _, u64>(&row.cache.evictions, None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn every_counter_and_gauge_is_exposed_once() {
        let proxy = Proxy::new(
            Arc::new(crate::config::Config::embedded_default()),
            crate::vcl::attach::Programs::default(),
            Arc::new(stats::Counters::default()),
        )
        .unwrap();
        proxy.counters.client_req.add(3);
        let text = encode(&proxy, &[]);
        assert!(text.ends_with("# EOF\n"), "OpenMetrics ends with EOF");
        assert!(text.contains("\nshellac_client_req_total 3\n"), "{text}");
        assert!(text.contains("# TYPE shellac_client_req counter\n"));
        assert!(text.contains("# TYPE shellac_n_object gauge\nshellac_n_object 0\n"));
        assert!(text.contains("shellac_ttfb_seconds_bucket{le=\"+Inf\"} 0\n"));
        for name in stats::names() {
            if name.starts_with("pass_reason_") {
                continue;
            }
            let family = format!("# TYPE shellac_{name} ");
            assert_eq!(text.matches(&family).count(), 1, "{name}");
        }
        proxy
            .shared
            .recorder
            .close(std::time::Duration::from_secs(5));
    }
}
