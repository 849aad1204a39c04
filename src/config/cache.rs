//! `[cache]`: the memory tier's bounds and the TTL policy's operator settings.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::lists;
use super::units::{self, Dur, Size};

/// `[cache]`: the memory tier and the TTL policy.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Bound on the memory tier, charged what it holds (slab slots of compact objects, built
    /// objects' weight, the index's tables). Partial content (206 pieces) is held beside it,
    /// up to an eighth of it more. Default `256MiB`, at least 64 KiB.
    pub memory_size: Size,
    /// Largest single object stored; larger responses are streamed through uncached.
    /// Default `64MiB`; at most `memory_size`, or with a disk tier the larger of `memory_size`
    /// and `storage.disk.region_size - 64KiB`.
    pub max_object_size: Size,
    /// TTL for responses with a heuristically cacheable status short of 5xx (200, 203, 204,
    /// 206, 300, 301, 308, 404, 405, 410, 414) that carry no freshness information at all.
    /// Default `0s` (RFC 9111: such responses are not reused). Opt-in.
    pub default_ttl: Dur,
    /// Upper clamp on any TTL: origin-given, heuristic or `default_ttl`. Default: none.
    pub max_ttl: Option<Dur>,
    /// Heuristic freshness: this percentage of the time since `Last-Modified`, for responses
    /// without explicit lifetime (RFC 9111 §4.2.2). Default 10; 0 disables.
    pub heuristic_percent: u32,
    /// How long a URL whose response was uncacheable skips request coalescing (hit-for-miss).
    /// Default `120s`.
    pub hit_for_miss_ttl: Dur,
    /// Grace (stale-while-revalidate): how long past its TTL an object is still delivered at
    /// once while one background fetch refreshes it. A response's `stale-while-revalidate=N`
    /// overrides it. Default `0s`: RFC 9111 §4.2.4 forbids stale responses unless permitted.
    pub grace: Dur,
    /// Keep: how long past TTL + grace a stale object is kept usable for conditional
    /// revalidation (If-None-Match / If-Modified-Since to the backend) and served when no backend
    /// can be reached (RFC 9111 §4.2.4 "disconnected"; a response's `stale-if-error=N` extends
    /// it to 5xx answers). Default `1h`.
    pub keep: Dur,
    /// Honour request `Cache-Control` (`no-cache`, `max-age`, `min-fresh`, `max-stale`,
    /// `only-if-cached`) and `Pragma: no-cache`. Default false: ignored, as Varnish does, so
    /// clients cannot force backend traffic.
    pub request_cache_control: bool,
    /// Targeted cache-control fields (RFC 9213) honoured instead of `Cache-Control` and
    /// `Expires`, the first present with a valid value wins. Each is read as a Structured Field
    /// Dictionary (invalid: ignored whole; a member of the wrong type: ignored), except
    /// `Surrogate-Control`, read like `Cache-Control`. Default `["CDN-Cache-Control",
    /// "Surrogate-Control"]`.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub targeted_cache_control: Vec<String>,
    /// Normalise `Accept-Encoding` to `zstd`, `br`, `gzip` or nothing before lookup, so
    /// trivial differences share one `Vary` variant. Default true.
    pub normalize_accept_encoding: bool,
    /// Variants (by `Vary`) kept per URL at most; the oldest is dropped first. Default 16.
    pub max_variants: usize,
    /// Cache deception armor: a rule's `ttl`, `min_ttl` and `override_origin` apply only when
    /// the response's `Content-Type` fits the extension the URL claims (`.css` → `text/css`;
    /// `application/octet-stream` fits any; an unknown extension fits anything but HTML), so
    /// `/account.php/x.css` answered with the private account page is never stored by a
    /// static-files rule. Default true.
    pub deception_armor: bool,
    /// Refresh-ahead (Varnish's `obj.prefetch`, Akamai's prefresh): a fresh object requested
    /// within this much of its expiry is delivered and refreshed in the background (one
    /// refresh at a time per object, revalidated with its validators), so popular objects
    /// neither go stale nor miss. `"off"`, a share of the object's TTL (`"10%"`: its last
    /// tenth; 1–99 %) or a duration (`"30s"`). Counter `cache_refresh_ahead`. Default `"off"`.
    pub refresh_ahead: units::RefreshAhead,
    /// Varnish's `shortlived`: objects whose freshness left + grace + keep is below this are
    /// kept in the memory tier only (not the disk or shared tier). Default `0s`: none.
    pub shortlived: Dur,
    /// Big media (nginx's `slice`, ATS's slice plugin): a response longer than
    /// `max_object_size` with a strong validator is cached as `slice_size` slices fetched by
    /// Range on demand (`proxy/slice/`, docs/slices.md). Default true.
    pub slice: bool,
    /// The size of one slice, 1–8 MiB, at most `max_object_size`. Default `1MiB`.
    pub slice_size: Size,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            memory_size: Size(256 << 20),
            max_object_size: Size(64 << 20),
            default_ttl: Dur(Duration::ZERO),
            max_ttl: None,
            heuristic_percent: 10,
            hit_for_miss_ttl: Dur(Duration::from_secs(120)),
            grace: Dur(Duration::ZERO),
            keep: Dur(Duration::from_secs(3600)),
            request_cache_control: false,
            targeted_cache_control: vec!["CDN-Cache-Control".into(), "Surrogate-Control".into()],
            normalize_accept_encoding: true,
            max_variants: 16,
            deception_armor: true,
            refresh_ahead: units::RefreshAhead::Off,
            shortlived: Dur(Duration::ZERO),
            slice: true,
            slice_size: Size(1 << 20),
        }
    }
}
