//! The cache's variants of a URL (`Vary`): the storage key of a request, storing a variant
//! (the oldest dropped past `max_variants`), the variant lists rebuilt after a restart, and
//! purging a URL with all its variants.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::{HeaderMap, HeaderName};

use super::vary::{VaryIndex, variant_hash};
use super::{Cache, CacheKey, Object};

impl Cache {
    /// The storage key for a request: the primary key, plus the variant if the URL varies.
    pub fn lookup_key(&self, primary: &CacheKey, request: &HeaderMap) -> CacheKey {
        self.variant_key(primary, request)
            .unwrap_or_else(|| primary.clone())
    }

    /// The request fields the variant of `primary` depends on (its URL's `Vary`), or None
    /// when the URL does not vary.
    pub fn vary_names<Q>(&self, primary: &Q) -> Option<Arc<VaryIndex>>
    where
        Q: std::hash::Hash + quick_cache::Equivalent<CacheKey> + ?Sized,
    {
        if !self.vary_seen.load(Ordering::Acquire) {
            return None;
        }
        self.vary_index
            .get(primary)
            .filter(|index| !index.names.is_empty())
    }

    /// The variant key for a request if the URL varies; `None` means "use the primary key"
    /// (no copy of the key on the common path).
    pub fn variant_key(&self, primary: &CacheKey, request: &HeaderMap) -> Option<CacheKey> {
        if !self.vary_seen.load(Ordering::Acquire) {
            return None;
        }
        match self.vary_index.get(primary) {
            Some(index) if !index.names.is_empty() => {
                Some(primary.with_variant(variant_hash(&index.names, request)))
            }
            _ => None,
        }
    }

    /// The key of the variant of `primary` stored last, when the URL varies (VCL's
    /// `req.hash_ignore_vary`).
    pub fn newest_variant_key(&self, primary: &CacheKey) -> Option<CacheKey> {
        if !self.vary_seen.load(Ordering::Acquire) {
            return None;
        }
        let index = self.vary_index.get(primary)?;
        index.variants.last().map(|v| primary.with_variant(*v))
    }

    /// Stores `object` for `primary` under its variant, keeping at most `max_variants` per URL.
    /// Returns the key it was stored under.
    pub fn store(&self, primary: &CacheKey, object: Arc<Object>) -> CacheKey {
        let tags = super::tags::tags_of(&object.headers);
        if !tags.is_empty() {
            self.tags.add(primary, &tags);
        }
        let names: Vec<HeaderName> = object.vary().iter().map(|(n, _)| n.clone()).collect();
        if names.is_empty() {
            if let Some((_, old)) = self.vary_index.remove(primary) {
                for v in &old.variants {
                    self.storage.remove(&primary.with_variant(*v));
                }
            }
            self.storage.insert(primary.clone(), object);
            return primary.clone();
        }
        let selection: HeaderMap = object
            .vary()
            .iter()
            .filter_map(|(n, v)| v.clone().map(|v| (n.clone(), v)))
            .collect();
        let variant = variant_hash(&names, &selection);
        let key = primary.with_variant(variant);
        let old = self.vary_index.get(primary);
        let mut index = VaryIndex {
            names: names.clone(),
            variants: Vec::new(),
        };
        match &old {
            // Same field list: keep the known variants.
            Some(old) if old.names == names => index.variants = old.variants.clone(),
            // The URL now varies differently (or did not vary): older variants are unreachable.
            Some(old) => {
                for v in &old.variants {
                    self.storage.remove(&primary.with_variant(*v));
                }
            }
            None => {
                self.storage.remove(primary);
            }
        }
        index.variants.retain(|v| *v != variant);
        index.variants.push(variant);
        while index.variants.len() > self.max_variants {
            let oldest = index.variants.remove(0);
            self.storage.remove(&primary.with_variant(oldest));
        }
        self.vary_seen.store(true, Ordering::Release);
        self.vary_index.insert(primary.clone(), Arc::new(index));
        self.storage.insert(key.clone(), object);
        key
    }

    /// Rebuilds the variant lists of URLs from variant keys found in persistent storage (oldest
    /// first) with the `Vary` names of each: a URL's newest names win (variants stored under
    /// other names are unreachable and removed), and at most `max_variants` per URL are kept
    /// (the oldest removed), as [`Cache::store`] would have left them.
    pub fn restore_variants(&self, found: Vec<(CacheKey, Vec<HeaderName>)>) {
        if found.is_empty() {
            return;
        }
        let mut urls: HashMap<CacheKey, VaryIndex> = HashMap::new();
        let mut order = Vec::new();
        for (key, names) in found {
            let primary = key.primary();
            let index = urls.entry(primary.clone()).or_insert_with(|| {
                order.push(primary.clone());
                VaryIndex::default()
            });
            if index.names != names {
                for v in index.variants.drain(..) {
                    self.storage.remove(&primary.with_variant(v));
                }
                index.names = names;
            }
            index.variants.retain(|v| *v != key.variant);
            index.variants.push(key.variant);
            while index.variants.len() > self.max_variants {
                let oldest = index.variants.remove(0);
                self.storage.remove(&primary.with_variant(oldest));
            }
        }
        for primary in order {
            if let Some(index) = urls.remove(&primary) {
                self.vary_seen.store(true, Ordering::Release);
                self.vary_index.insert(primary, Arc::new(index));
            }
        }
    }

    /// Removes every variant of a URL, its partial content and its slices. Returns how many
    /// objects were removed (partial content counting as one).
    pub fn purge(&self, primary: &CacheKey) -> usize {
        // Marked before the removals: a fill that stores after them sees the mark.
        self.busy.mark_purged(primary);
        if let Some(index) = self.vary_index.get(primary) {
            for v in &index.variants {
                self.busy.mark_purged(&primary.with_variant(*v));
            }
        }
        let mut removed = self.storage.remove(primary) as usize;
        removed += self.partial.remove(primary) as usize;
        removed += self.slices.purge(primary, &*self.storage);
        let mut keys = vec![primary.clone()];
        if let Some((_, index)) = self.vary_index.remove(primary) {
            for v in &index.variants {
                let key = primary.with_variant(*v);
                removed += self.storage.remove(&key) as usize;
                keys.push(key);
            }
        }
        // Their br and zstd representations go with them (`representation.rs`).
        for key in keys {
            for coding in super::representation::CODINGS {
                self.storage
                    .remove(&super::representation::key(&key, coding));
            }
        }
        removed
    }

    /// Variants stored for a URL (0 when it does not vary).
    pub fn variants(&self, primary: &CacheKey) -> usize {
        self.vary_index
            .get(primary)
            .map(|i| i.variants.len())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::memory::MemoryStorage;
    use crate::stats::Counters;
    use bytes::Bytes;
    use http::HeaderValue;
    use std::time::{Duration, Instant};

    fn object(lang: &str) -> Arc<Object> {
        Arc::new(Object {
            status: http::StatusCode::OK,
            headers: Default::default(),
            body: crate::cache::Body::Memory(smallvec::smallvec![Bytes::from(lang.to_string())]),
            body_len: lang.len() as u64,
            vary: Some(Box::new(vec![(
                HeaderName::from_static("accept-language"),
                Some(HeaderValue::from_str(lang).unwrap()),
            )])),
            initial_age: crate::cache::Span::ZERO,
            ttl: Duration::from_secs(60).into(),
            stale_ok: true,
            grace: crate::cache::Span::ZERO,
            stale_if_error: crate::cache::MaybeSpan::NONE,
            keep: crate::cache::Span::ZERO,
            stored_at: Instant::now(),
            state: Default::default(),
            prepared: Default::default(),
            hits: Default::default(),
            prefetch: crate::cache::Prefetch::CONFIGURED,
        })
    }

    fn request(lang: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("accept-language", HeaderValue::from_str(lang).unwrap());
        h
    }

    #[test]
    fn variants_are_stored_side_by_side_and_purged_together() {
        let cache = Cache::new(
            Arc::new(MemoryStorage::new(
                1 << 20,
                1 << 16,
                Arc::new(Counters::default()),
            )),
            2,
        );
        let url = CacheKey::new("h", "/");
        cache.store(&url, object("fr"));
        cache.store(&url, object("de"));
        for lang in ["fr", "de"] {
            let key = cache.lookup_key(&url, &request(lang));
            let got = cache.storage.lookup(&key).expect("variant stored");
            let crate::cache::Body::Memory(chunks) = &got.body else {
                panic!("memory body");
            };
            assert_eq!(chunks[0], lang);
        }
        assert!(
            cache
                .storage
                .lookup(&cache.lookup_key(&url, &request("it")))
                .is_none()
        );
        cache.store(&url, object("it"));
        assert_eq!(cache.variants(&url), 2, "oldest variant dropped");
        assert!(
            cache
                .storage
                .lookup(&cache.lookup_key(&url, &request("fr")))
                .is_none()
        );
        assert_eq!(cache.purge(&url), 2);
        assert!(
            cache
                .storage
                .lookup(&cache.lookup_key(&url, &request("de")))
                .is_none()
        );
    }
}
