//! The cache: keys, stored objects, the storage trait and its tiers, and request coalescing.
//!
//! Architecture invariant: `cache/` knows nothing of client or backend connections; it deals in
//! keys, objects and body chunks.

pub mod busy;
pub mod memory;
pub mod policy;
pub mod vary;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

/// The primary cache key: a structured tuple, never a concatenated string, so two different
/// requests cannot collide into one key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// Lower-cased authority with the default port elided.
    pub host: Box<str>,
    /// Path and query exactly as received.
    pub path_and_query: Box<str>,
    /// Secondary key: hash of the request values of the URL's `Vary` fields (0 = no Vary).
    pub variant: u64,
}

impl CacheKey {
    pub fn new(host: &str, path_and_query: &str) -> CacheKey {
        let mut host = host.trim().to_ascii_lowercase();
        if let Some(stripped) = host.strip_suffix(":80") {
            host.truncate(stripped.len());
        }
        CacheKey {
            host: host.into(),
            path_and_query: path_and_query.into(),
            variant: 0,
        }
    }

    /// The same URL, another variant.
    pub fn with_variant(&self, variant: u64) -> CacheKey {
        CacheKey {
            variant,
            ..self.clone()
        }
    }

    /// The URL without a variant (the primary key).
    pub fn primary(&self) -> CacheKey {
        self.with_variant(0)
    }

    fn weight(&self) -> u64 {
        (self.host.len() + self.path_and_query.len()) as u64
    }
}

impl std::fmt::Display for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.host, self.path_and_query)
    }
}

/// Fixed per-object bookkeeping charged against the memory budget on top of key, headers and body.
pub const OBJECT_OVERHEAD: u64 = 256;

/// A complete cached response.
#[derive(Debug)]
pub struct Object {
    pub status: StatusCode,
    /// Stored header fields (hop-by-hop removed); `Age` is computed on delivery.
    pub headers: HeaderMap,
    /// The body as received, in chunks (one chunk for small bodies).
    pub body: Vec<Bytes>,
    pub body_len: u64,
    /// Request header values this object was selected by (`Vary`), as (name, value) pairs.
    pub vary: VarySelection,
    /// RFC 9111 corrected_initial_age.
    pub initial_age: Duration,
    /// Freshness lifetime.
    pub ttl: Duration,
    /// Whether it may be served stale at all (see `StorePlan::stale_ok`).
    pub stale_ok: bool,
    /// Stale-while-revalidate window past `ttl`.
    pub grace: Duration,
    /// Window past `ttl` in which a backend 5xx may be answered with this object.
    pub stale_if_error: Option<Duration>,
    /// Window past `ttl + grace` in which the object is kept for revalidation and fallback.
    pub keep: Duration,
    /// When the response head arrived (monotonic).
    pub stored_at: Instant,
}

impl Object {
    /// RFC 9111 §4.2.3 current_age.
    pub fn age(&self, now: Instant) -> Duration {
        self.initial_age + now.saturating_duration_since(self.stored_at)
    }

    pub fn is_fresh(&self, now: Instant) -> bool {
        self.age(now) < self.ttl
    }

    /// Stale, but within its stale-while-revalidate window: deliver and refresh.
    pub fn within_grace(&self, now: Instant) -> bool {
        self.stale_ok && self.age(now) < self.ttl + self.grace
    }

    /// Stale beyond grace but within `keep`: usable for revalidation, and for answering when no
    /// backend can be reached (if stale serving is allowed at all).
    pub fn within_keep(&self, now: Instant) -> bool {
        self.age(now) < self.ttl + self.grace + self.keep
    }

    /// Whether a backend 5xx may be answered with this stale object (`stale-if-error`).
    pub fn stale_if_error_ok(&self, now: Instant) -> bool {
        self.stale_ok
            && self
                .stale_if_error
                .is_some_and(|w| self.age(now) < self.ttl + w)
    }

    /// The stored `ETag`, if any.
    pub fn etag(&self) -> Option<&HeaderValue> {
        self.headers.get(http::header::ETAG)
    }

    /// The stored `Last-Modified`, if any.
    pub fn last_modified(&self) -> Option<&HeaderValue> {
        self.headers.get(http::header::LAST_MODIFIED)
    }

    /// Freshness left, zero once stale.
    pub fn remaining_ttl(&self, now: Instant) -> Duration {
        self.ttl.saturating_sub(self.age(now))
    }

    /// Whether `request` selects this object (RFC 9111 §4.1).
    pub fn vary_matches(&self, request: &HeaderMap) -> bool {
        vary_matches(&self.vary, request)
    }

    /// Bytes charged against the memory budget.
    pub fn weight(&self) -> u64 {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 32)
            .sum();
        OBJECT_OVERHEAD + headers as u64 + self.body_len
    }
}

/// The request header values a stored response was selected by (`Vary`).
pub type VarySelection = Vec<(HeaderName, Option<HeaderValue>)>;

/// Whether `request` carries the same values for the `Vary` fields as `selection`.
/// A field present several times never matches (it would need combining first).
pub fn vary_matches(selection: &[(HeaderName, Option<HeaderValue>)], request: &HeaderMap) -> bool {
    selection.iter().all(|(name, value)| {
        let mut got = request.get_all(name).iter();
        match (value, got.next()) {
            (None, None) => true,
            (Some(want), Some(first)) => {
                got.next().is_none() && normalise(first) == normalise(want)
            }
            _ => false,
        }
    })
}

/// A field value with list members trimmed and lower-cased, for variant comparison.
pub fn normalised_value(v: &HeaderValue) -> Vec<u8> {
    normalise(v)
}

fn normalise(v: &HeaderValue) -> Vec<u8> {
    v.as_bytes()
        .split(|b| *b == b',')
        .map(|p| p.trim_ascii().to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(&b", "[..])
}

/// Size and occupancy of a storage tier.
#[derive(Clone, Copy, Debug, Default)]
pub struct StorageStats {
    pub objects: u64,
    pub bytes: u64,
    pub capacity: u64,
}

/// A storage tier ("stevedore"). The pipeline only sees this trait, so disk and shared tiers
/// can be added without touching it.
pub trait Storage: Send + Sync + 'static {
    /// Short name for logs and `Cache-Status` detail, e.g. `memory`.
    fn name(&self) -> &'static str;
    /// The object stored under `key`, fresh or not.
    fn lookup(&self, key: &CacheKey) -> Option<Arc<Object>>;
    /// Stores `object` under `key`, replacing any previous one; may evict others.
    fn insert(&self, key: CacheKey, object: Arc<Object>);
    /// Removes `key`; true if something was removed.
    fn remove(&self, key: &CacheKey) -> bool;
    fn stats(&self) -> StorageStats;
}

/// The cache as the request path sees it: a storage tier, the hit-for-miss memory and the
/// table of fetches in progress.
pub struct Cache {
    pub storage: Arc<dyn Storage>,
    pub busy: Arc<busy::BusyTable>,
    hit_for_miss: quick_cache::sync::Cache<CacheKey, Instant>,
    /// Primary key → the URL's Vary field names and stored variants.
    vary_index: quick_cache::sync::Cache<CacheKey, Arc<vary::VaryIndex>>,
    max_variants: usize,
}

/// Hit-for-miss entries remembered at most (each is one key; oldest are evicted first).
pub const HIT_FOR_MISS_CAPACITY: usize = 65_536;

/// URLs with `Vary` whose variant list is remembered at most. A URL that falls out of this
/// index is looked up without its variant until its next response re-registers it (a miss,
/// never a wrong variant: objects carry their exact Vary selection).
pub const VARY_INDEX_CAPACITY: usize = 262_144;

impl Cache {
    pub fn new(storage: Arc<dyn Storage>, max_variants: usize) -> Cache {
        Cache {
            storage,
            busy: Arc::new(busy::BusyTable::default()),
            hit_for_miss: quick_cache::sync::Cache::new(HIT_FOR_MISS_CAPACITY),
            vary_index: quick_cache::sync::Cache::new(VARY_INDEX_CAPACITY),
            max_variants,
        }
    }

    /// True while `key` is remembered as uncacheable.
    pub fn is_hit_for_miss(&self, key: &CacheKey, now: Instant) -> bool {
        match self.hit_for_miss.get(key) {
            Some(until) if until > now => true,
            Some(_) => {
                self.hit_for_miss.remove(key);
                false
            }
            None => false,
        }
    }

    /// Remembers `key` as uncacheable for `ttl`: requests skip coalescing until then.
    pub fn mark_hit_for_miss(&self, key: CacheKey, ttl: Duration) {
        if !ttl.is_zero() {
            self.hit_for_miss.insert(key, Instant::now() + ttl);
        }
    }

    /// Forgets a hit-for-miss mark (the URL produced a cacheable response again).
    pub fn clear_hit_for_miss(&self, key: &CacheKey) {
        self.hit_for_miss.remove(key);
    }

    pub fn hit_for_miss_len(&self) -> usize {
        self.hit_for_miss.len()
    }
}
