//! Inspecting a cached URL (admin `GET /cache`): every variant, the tiers holding it and what
//! each copy says — without touching recency, admission or counters (an inspection is not a hit).

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderName;

use super::{Body, Cache, CacheKey, Object, tags};

/// What the cache holds for one URL.
#[derive(Debug)]
pub struct Inspection {
    /// The primary key (variant 0) the URL is stored under.
    pub key: CacheKey,
    /// The request fields the URL varies on (`Vary`), empty when it does not vary or its
    /// variant index was forgotten (then only the primary key is looked at).
    pub vary: Vec<HeaderName>,
    /// Variants with at least one copy in some tier, in the order they were stored.
    pub variants: Vec<VariantView>,
    /// The URL is remembered as uncacheable (requests pass without coalescing).
    pub hit_for_miss: bool,
    /// With a fleet (`[storage.shared]`): whether the shared tier could be asked (its copies
    /// are in `variants` under the tier name `shared`). None without one.
    pub shared: Option<bool>,
}

/// One variant of a URL.
#[derive(Debug)]
pub struct VariantView {
    /// The storage key (primary key plus variant hash; 0 = no `Vary`).
    pub key: CacheKey,
    /// The copy in each tier holding it, top tier first (e.g. memory, then disk).
    pub copies: Vec<(&'static str, Arc<Object>)>,
}

impl VariantView {
    /// Names of the tiers holding this variant.
    pub fn tiers(&self) -> Vec<&'static str> {
        self.copies.iter().map(|(t, _)| *t).collect()
    }
}

impl Inspection {
    pub fn is_empty(&self) -> bool {
        self.variants.is_empty()
    }
}

impl Cache {
    /// Everything cached for `primary`, read through [`super::Storage::inspect`]: nothing is
    /// promoted, marked hit, admitted or counted, and the variant index's recency is untouched.
    pub async fn inspect(&self, primary: &CacheKey) -> Inspection {
        let primary = primary.primary();
        let index = self.vary_index.peek(&primary);
        let mut keys = vec![primary.clone()];
        let mut vary = Vec::new();
        if let Some(index) = &index {
            vary = index.names.clone();
            keys.extend(index.variants.iter().map(|v| primary.with_variant(*v)));
        }
        let mut shared_ok = None;
        if let Some(shared) = &self.shared {
            // The shared tier's variant index names variants this node may never have seen.
            match shared.variants(&primary).await {
                Some((names, found)) => {
                    shared_ok = Some(true);
                    if vary.is_empty() {
                        vary = names;
                    }
                    for v in found {
                        let key = primary.with_variant(v);
                        if !keys.contains(&key) {
                            keys.push(key);
                        }
                    }
                }
                None => shared_ok = Some(false),
            }
        }
        let mut variants = Vec::new();
        for key in keys {
            let mut copies = self.storage.inspect(&key).await;
            if let (Some(shared), Some(true)) = (&self.shared, shared_ok) {
                match shared.inspect(&key).await {
                    Some(Some(object)) => copies.push(("shared", Arc::new(object))),
                    Some(None) => {}
                    None => shared_ok = Some(false),
                }
            }
            if !copies.is_empty() {
                variants.push(VariantView { key, copies });
            }
        }
        let hit_for_miss = self
            .hit_for_miss
            .peek(&primary)
            .is_some_and(|(until, _)| until > Instant::now());
        Inspection {
            key: primary,
            vary,
            variants,
            hit_for_miss,
            shared: shared_ok,
        }
    }
}

/// Where an object stands in its life (RFC 9111 freshness, then Shellac's windows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Fresh: served as a hit.
    Fresh,
    /// Stale within grace: served while one background refresh runs.
    Grace,
    /// Stale beyond grace, within keep: revalidated, or served if no backend answers.
    Keep,
    /// Past keep: never used again; its space is reclaimed.
    Expired,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Fresh => "fresh",
            Phase::Grace => "grace",
            Phase::Keep => "keep",
            Phase::Expired => "expired",
        }
    }
}

/// Read-only views of a stored object for inspection. Kept here, next to their only user, so
/// the object's own definition stays small.
impl Object {
    /// Where the object stands at `now`.
    pub fn phase(&self, now: Instant) -> Phase {
        if self.is_fresh(now) {
            Phase::Fresh
        } else if self.within_grace(now) {
            Phase::Grace
        } else if self.within_keep(now) {
            Phase::Keep
        } else {
            Phase::Expired
        }
    }

    /// Freshness lifetime.
    pub fn ttl(&self) -> Duration {
        self.ttl.get()
    }

    /// Time left in which the object may be served stale while refreshed (zero when stale
    /// serving is not allowed or the window has passed).
    pub fn grace_left(&self, now: Instant) -> Duration {
        if !self.stale_ok {
            return Duration::ZERO;
        }
        (self.ttl.get() + self.grace.get()).saturating_sub(self.age(now))
    }

    /// Time left before the object is dropped (past TTL, grace and keep).
    pub fn keep_left(&self, now: Instant) -> Duration {
        (self.ttl.get() + self.grace.get() + self.keep.get()).saturating_sub(self.age(now))
    }

    /// Time left in which a backend 5xx may be answered with this object; None when the
    /// response did not allow it (`stale-if-error`).
    pub fn stale_if_error_left(&self, now: Instant) -> Option<Duration> {
        if !self.stale_ok {
            return None;
        }
        self.stale_if_error
            .get()
            .map(|w| (self.ttl.get() + w).saturating_sub(self.age(now)))
    }

    /// The stored status code.
    pub fn status_code(&self) -> u16 {
        self.status.as_u16()
    }

    /// Bytes of the stored header fields as they would be sent (`name: value\r\n`).
    pub fn header_bytes(&self) -> u64 {
        self.headers
            .iter()
            .map(|(k, v)| (k.len() + v.len() + 4) as u64)
            .sum()
    }

    /// Body bytes.
    pub fn body_bytes(&self) -> u64 {
        self.body_len
    }

    /// Where the body is kept: `memory` or `disk` (a large object is streamed from disk).
    pub fn body_location(&self) -> &'static str {
        match self.body {
            Body::Memory(_) => "memory",
            Body::Disk(_) => "disk",
        }
    }

    /// Surrogate keys (`Surrogate-Key`, `xkey`), sorted.
    pub fn tags(&self) -> Vec<String> {
        tags::tags_of(&self.headers)
    }

    /// The `Vary` selection as (field, value) text; None for a field the request lacked.
    pub fn vary_selection(&self) -> Vec<(String, Option<String>)> {
        self.vary()
            .iter()
            .map(|(n, v)| {
                let v = v
                    .as_ref()
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
                (n.as_str().to_string(), v)
            })
            .collect()
    }

    /// Found in the memory tier by a request at least once (the second-request admission
    /// signal; Shellac keeps no per-object hit count on the hot path).
    pub fn was_hit(&self) -> bool {
        self.state.hit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::memory::MemoryStorage;
    use crate::cache::{Storage, test_object};
    use crate::stats::Counters;

    #[tokio::test]
    async fn inspecting_does_not_mark_a_hit() {
        let storage = Arc::new(MemoryStorage::new(
            1 << 20,
            1 << 16,
            Arc::new(Counters::default()),
        ));
        let cache = Cache::new(storage.clone(), 4);
        let key = CacheKey::new("h", "/a");
        cache.store(&key, Arc::new(test_object(&[("xkey", "b a")])));
        let seen = cache.inspect(&key).await;
        assert_eq!(seen.variants.len(), 1);
        let (tier, object) = &seen.variants[0].copies[0];
        assert_eq!(*tier, "memory");
        assert_eq!(object.tags(), vec!["a", "b"]);
        assert_eq!(object.phase(Instant::now()), Phase::Fresh);
        assert!(!object.was_hit(), "inspection is not a hit");
        assert!(storage.lookup(&key).is_some());
        assert!(
            cache
                .inspect(&CacheKey::new("h", "/b"))
                .await
                .variants
                .is_empty()
        );
    }
}
