//! `GET /metrics`: the OpenMetrics text exposition (which Prometheus scrapes natively), encoded
//! by the Prometheus org's `prometheus-client` crate at scrape time. A custom collector reads
//! a snapshot of Shellac's own counters: the request path keeps its relaxed atomic increments
//! on its own cells and never touches the crate's types.
//!
//! Sample names are stable: counters `shellac_NAME_total`, gauges `shellac_NAME`,
//! `shellac_pass_reason_total{reason}`, `shellac_hit_ratio{window}`, and the
//! `shellac_ttfb_seconds` histogram (`_bucket{le}`, `_sum`, `_count`), then the families per
//! backend (`backend` label) and per site (`site` label), a files origin's refusals among
//! them (`shellac_{backend,site}_files_refused_total{reason}`).

use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeGaugeValue, EncodeLabelSet, EncodeMetric, NoLabelSet,
};
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
    /// `Transient` and each named storage seen since start (`cache/stores.rs`).
    storages: Vec<crate::cache::shares::StoreFigures>,
}

/// What `/metrics` says about one site (labels `site="NAME"`).
#[derive(Debug)]
struct SiteRow {
    name: String,
    counters: SiteSnapshot,
    /// (reason word, count) of the site's requests a files backend refused; empty while none.
    files_refused: Vec<(&'static str, u64)>,
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
    /// (reason word, count): a files backend's refusals; empty for other kinds.
    files_refused: Vec<(&'static str, u64)>,
}

impl BackendRow {
    fn labels(&self) -> [(&'static str, &str); 1] {
        [("backend", self.name.as_str())]
    }
}

impl SiteRow {
    fn labels(&self) -> [(&'static str, &str); 1] {
        [("site", self.name.as_str())]
    }
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
            files_refused: b.files_refused(),
        })
        .collect()
}

/// The family `shellac_{of}_files_refused_total{of, reason}`: each row's refusals by reason.
fn files_refused<'a>(
    encoder: &mut DescriptorEncoder,
    of: &'static str,
    help: &str,
    rows: impl Iterator<Item = (&'a str, &'a [(&'static str, u64)])>,
) -> std::fmt::Result {
    counters(
        encoder,
        &format!("shellac_{of}_files_refused"),
        help,
        rows.flat_map(|(name, refused)| {
            refused
                .iter()
                .map(move |(reason, n)| ([(of, name), ("reason", *reason)], *n))
        }),
    )
}

/// A family of gauges `name` (`help`): one sample per (labels, value) of `samples`.
fn gauges<L: EncodeLabelSet, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, V)>,
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in samples {
        family.encode_family(&labels)?.encode_gauge(&v)?;
    }
    Ok(())
}

/// A family of counters `name` (`help`; the encoder adds `_total` to the samples): one
/// sample per (labels, count) of `samples`.
fn counters<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, u64)>,
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, n) in samples {
        family
            .encode_family(&labels)?
            .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
    }
    Ok(())
}

/// A family of latency histograms `name` (`help`): one per (labels, sum in seconds, buckets)
/// of `samples`.
fn histograms<'a, L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, f64, &'a [(f64, u64)])>,
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, sum, buckets) in samples {
        let count = buckets.iter().map(|(_, n)| n).sum();
        family
            .encode_family(&labels)?
            .encode_histogram::<NoLabelSet>(sum, count, buckets, None)?;
    }
    Ok(())
}

/// The per-backend families.
fn encode_backends(rows: &[BackendRow], encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    gauges(
        encoder,
        "shellac_backend_healthy",
        "Whether each backend is healthy (1) or sick (0) by its probe and passive health",
        rows.iter().map(|b| (b.labels(), i64::from(b.healthy))),
    )?;
    counters(
        encoder,
        "shellac_backend_requests",
        "Requests sent to each backend",
        rows.iter().map(|b| (b.labels(), b.requests)),
    )?;
    counters(
        encoder,
        "shellac_backend_failures",
        "Failures per backend: kind connect (refused, unreachable, connect timeout), exchange (reset, bad response, timeouts), busy (refused by max_connections)",
        rows.iter().flat_map(|b| {
            b.failures
                .iter()
                .map(|(kind, n)| ([("backend", b.name.as_str()), ("kind", kind)], *n))
        }),
    )?;
    counters(
        encoder,
        "shellac_backend_connections_opened",
        "Connections opened to each backend",
        rows.iter().map(|b| (b.labels(), b.opened)),
    )?;
    gauges(
        encoder,
        "shellac_backend_connections",
        "Connections to each backend now: state in_flight (carrying a request) or idle (pooled)",
        rows.iter().flat_map(|b| {
            [("in_flight", b.in_flight), ("idle", b.idle)]
                .map(|(state, n)| ([("backend", b.name.as_str()), ("state", state)], n))
        }),
    )?;
    gauges(
        encoder,
        "shellac_backend_queued",
        "Requests waiting for a connection slot of each backend (max_connections) now",
        rows.iter().map(|b| (b.labels(), b.queued)),
    )?;
    files_refused(
        encoder,
        "backend",
        "Requests each files backend refused, by reason (the word of its files_refused_* counter; script: files_script_refused)",
        rows.iter()
            .filter(|b| !b.files_refused.is_empty())
            .map(|b| (b.name.as_str(), b.files_refused.as_slice())),
    )?;
    histograms(
        encoder,
        "shellac_backend_ttfb_seconds",
        "Time from sending a request on a connection to each backend's response head",
        rows.iter()
            .map(|b| (b.labels(), b.ttfb_sum_seconds, b.ttfb_buckets.as_slice())),
    )
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
    let ttfb_buckets = seconds_buckets(&proxy.counters.ttfb.buckets());
    // A site's refusal series exist from the start (at 0) where a files backend could refuse
    // its requests, so a rate or an alert on them has a series before the first probe.
    let files = proxy
        .config
        .backends
        .iter()
        .any(|b| b.protocol == crate::config::BackendProtocol::Files);
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
                files_refused: if files || c.files_refused.any() {
                    c.files_refused
                        .snapshot()
                        .into_iter()
                        .map(|(r, n)| (r.as_str(), n))
                        .collect()
                } else {
                    Vec::new()
                },
                ttfb_buckets: seconds_buckets(&c.ttfb.buckets()),
                ttfb_sum_seconds: c.ttfb.sum_us() as f64 / 1e6,
            })
            .collect(),
        storages: proxy
            .cache
            .storage
            .site_shares()
            .map(|s| s.stores())
            .unwrap_or_default(),
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
        counters(
            &mut encoder,
            "shellac_pass_reason",
            "Responses that were not a plain hit or miss, by reason (Cache-Status detail word)",
            self.pass_reasons
                .iter()
                .map(|(word, n)| ([("reason", *word)], *n)),
        )?;
        gauges(
            &mut encoder,
            "shellac_hit_ratio",
            "Share of lookups served from the cache over a window (0 without lookups)",
            self.ratios
                .iter()
                .map(|(window, ratio)| ([("window", window.as_str())], *ratio)),
        )?;
        gauges(
            &mut encoder,
            "shellac_tls_certificate_not_after_seconds",
            "When each TLS certificate expires (seconds since the epoch), by listener, names and source",
            self.certs.iter().map(|c| {
                let labels = [
                    ("listener", c.listener.clone()),
                    ("names", c.names.join(",")),
                    ("source", c.source.clone()),
                ];
                (labels, c.not_after)
            }),
        )?;
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
        encode_storages(&self.storages, &mut encoder)?;
        Ok(())
    }
}

/// The per-site families: `shellac_site_NAME_total{site}` (req, hit, miss, pass, rewrite),
/// `shellac_site_files_refused_total{site,reason}`, the memory tier's per site
/// (`encode_site_cache`) and the `shellac_site_ttfb_seconds{site}`
/// histogram.
fn encode_sites(rows: &[SiteRow], encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    for (i, (name, description, _)) in first.counters.iter().enumerate() {
        counters(
            encoder,
            &format!("shellac_site_{name}"),
            &format!("{description}, per [[site]]"),
            rows.iter().map(|row| (row.labels(), row.counters[i].2)),
        )?;
    }
    files_refused(
        encoder,
        "site",
        "Requests of each [[site]] a files backend refused, by reason (every site when a files backend is configured, else those with a refusal since start)",
        rows.iter()
            .filter(|row| !row.files_refused.is_empty())
            .map(|row| (row.name.as_str(), row.files_refused.as_slice())),
    )?;
    encode_site_cache(rows, encoder)?;
    histograms(
        encoder,
        "shellac_site_ttfb_seconds",
        "Time from a request's arrival to its response head, per [[site]]",
        rows.iter().map(|row| {
            (
                row.labels(),
                row.ttfb_sum_seconds,
                row.ttfb_buckets.as_slice(),
            )
        }),
    )
}

/// `shellac_site_cache_bytes{site}`, `shellac_site_cache_share_bytes{site}` (the sites with a
/// share) and `shellac_site_cache_share_evictions_total{site}`.
fn encode_site_cache(rows: &[SiteRow], encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    gauges(
        encoder,
        "shellac_site_cache_bytes",
        "Bytes the site's objects take in the memory tier, per [[site]]",
        rows.iter().map(|row| (row.labels(), row.cache.bytes)),
    )?;
    gauges(
        encoder,
        "shellac_site_cache_share_bytes",
        "The site's cache_share of the memory tier, per [[site]] that has one",
        rows.iter()
            .filter_map(|row| Some((row.labels(), row.cache.share?))),
    )?;
    counters(
        encoder,
        "shellac_site_cache_share_evictions",
        "Objects evicted to hold the site to its cache_share, per [[site]]",
        rows.iter().map(|row| (row.labels(), row.cache.evictions)),
    )
}

/// `shellac_storage_bytes{storage}`, `shellac_storage_size_bytes{storage}` (those with a
/// size), `shellac_storage_objects{storage}`, `shellac_storage_stored_total{storage}` and
/// `shellac_storage_evicted_total{storage}`: `Transient` and the named storages.
fn encode_storages(
    rows: &[crate::cache::shares::StoreFigures],
    encoder: &mut DescriptorEncoder,
) -> std::fmt::Result {
    fn labels(f: &crate::cache::shares::StoreFigures) -> [(&'static str, &str); 1] {
        [("storage", f.name.as_str())]
    }
    gauges(
        encoder,
        "shellac_storage_bytes",
        "Bytes the storage's objects take in the memory tier and its fills under way hold, per storage ([[storage.named]], Transient)",
        rows.iter().map(|f| (labels(f), f.bytes)),
    )?;
    gauges(
        encoder,
        "shellac_storage_size_bytes",
        "The storage's size, per [[storage.named]] that has one",
        rows.iter().filter_map(|f| Some((labels(f), f.size?))),
    )?;
    gauges(
        encoder,
        "shellac_storage_objects",
        "Objects the storage holds, per storage",
        rows.iter().map(|f| (labels(f), f.objects)),
    )?;
    counters(
        encoder,
        "shellac_storage_stored",
        "Objects stored in the storage, per storage",
        rows.iter().map(|f| (labels(f), f.stored)),
    )?;
    counters(
        encoder,
        "shellac_storage_evicted",
        "Objects evicted to hold the storage to its size, per storage",
        rows.iter().map(|f| (labels(f), f.evicted)),
    )
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
        let cert = crate::tls::server::CertView {
            listener: "127.0.0.1:443".into(),
            names: vec!["a.example".into(), "b.example".into()],
            subject: "CN=a.example".into(),
            issuer: "CN=ca".into(),
            algorithm: "ECDSA P-256",
            not_before: 1_700_000_000,
            not_after: 1_800_000_000,
            source: "files: a.pem".into(),
        };
        let text = encode(&proxy, &[cert]);
        assert!(
            text.contains(
                "\nshellac_tls_certificate_not_after_seconds{listener=\"127.0.0.1:443\",\
                 names=\"a.example,b.example\",source=\"files: a.pem\"} 1800000000\n"
            ),
            "{text}"
        );
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
