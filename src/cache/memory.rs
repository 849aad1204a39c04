//! The memory tier: a byte-bounded, sharded cache with S3-FIFO-like eviction (quick_cache's
//! CLOCK-PRO variant, scan resistant). Evictions are counted in `n_lru_nuked`.

use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::{Lifecycle, OptionsBuilder, Weighter};

use super::{CacheKey, InspectFuture, Object, Storage, StorageStats};
use crate::stats::Counters;

#[derive(Clone)]
struct ObjectWeighter;

impl Weighter<CacheKey, Arc<Object>> for ObjectWeighter {
    fn weight(&self, key: &CacheKey, obj: &Arc<Object>) -> u64 {
        key.weight() + obj.weight()
    }
}

/// Called with every object evicted for room (under the shard lock: must not block).
pub type EvictHook = Arc<dyn Fn(CacheKey, Arc<Object>) + Send + Sync>;

#[derive(Clone)]
struct CountEvictions(Arc<Counters>, Option<EvictHook>);

impl Lifecycle<CacheKey, Arc<Object>> for CountEvictions {
    type RequestState = ();
    fn on_evict(&self, _: &mut (), key: CacheKey, object: Arc<Object>) {
        self.0.n_lru_nuked.inc();
        if let Some(hook) = &self.1 {
            hook(key, object);
        }
    }
}

/// Memory storage bounded by `capacity` bytes.
pub struct MemoryStorage {
    cache: Cache<
        CacheKey,
        Arc<Object>,
        ObjectWeighter,
        quick_cache::DefaultHashBuilder,
        CountEvictions,
    >,
    capacity: u64,
    max_object: u64,
}

impl MemoryStorage {
    /// `max_object` is the largest object that will ever be inserted; shards are sized so it fits.
    pub fn new(capacity: u64, max_object: u64, counters: Arc<Counters>) -> MemoryStorage {
        MemoryStorage::with_evict_hook(capacity, max_object, counters, None)
    }

    /// Like [`MemoryStorage::new`]; `hook` sees every object evicted for room (the tiered
    /// storage uses it to admit objects to disk).
    pub fn with_evict_hook(
        capacity: u64,
        max_object: u64,
        counters: Arc<Counters>,
        hook: Option<EvictHook>,
    ) -> MemoryStorage {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        // Each shard holds capacity/shards bytes; an object must fit in one shard.
        let by_size = (capacity / max_object.max(1)).max(1) as usize;
        let shards = (cpus * 4).min(by_size).max(1).next_power_of_two();
        let shards = if capacity / shards as u64 >= max_object {
            shards
        } else {
            (shards / 2).max(1)
        };
        let options = OptionsBuilder::new()
            .shards(shards)
            .estimated_items_capacity((capacity / 8192).clamp(1024, 1 << 22) as usize)
            .weight_capacity(capacity)
            .build()
            .expect("valid cache options");
        MemoryStorage {
            cache: Cache::with_options(
                options,
                ObjectWeighter,
                Default::default(),
                CountEvictions(counters, hook),
            ),
            capacity,
            max_object: capacity / shards as u64,
        }
    }

    /// Largest object this tier accepts.
    pub fn max_object(&self) -> u64 {
        self.max_object
    }

    /// The object under `key` without making it hotter (an inspection is not a use).
    pub fn peek(&self, key: &CacheKey) -> Option<Arc<Object>> {
        self.cache.peek(key)
    }
}

impl Storage for MemoryStorage {
    fn scan(&self, f: &mut dyn FnMut(&CacheKey, &Arc<Object>)) -> bool {
        for (key, object) in self.cache.iter() {
            f(&key, &object);
        }
        true
    }

    fn name(&self) -> &'static str {
        "memory"
    }

    /// Also marks the object hit (the disk tier's admission signal, and `hit_in_memory` for
    /// inspection).
    fn lookup(&self, key: &CacheKey) -> Option<Arc<Object>> {
        let object = self.cache.get(key)?;
        object.state.mark_hit();
        Some(object)
    }

    fn inspect<'a>(&'a self, key: &'a CacheKey) -> InspectFuture<'a> {
        let found = self.peek(key).map(|o| ("memory", o));
        Box::pin(std::future::ready(found.into_iter().collect()))
    }

    fn insert(&self, key: CacheKey, object: Arc<Object>) {
        if key.weight() + object.weight() <= self.max_object {
            self.cache.insert(key, object);
        }
    }

    fn remove(&self, key: &CacheKey) -> bool {
        self.cache.remove(key).is_some()
    }

    fn stats(&self) -> StorageStats {
        StorageStats {
            objects: self.cache.len() as u64,
            bytes: self.cache.weight(),
            capacity: self.capacity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::time::{Duration, Instant};

    fn object(size: usize) -> Arc<Object> {
        Arc::new(Object {
            status: http::StatusCode::OK,
            headers: Default::default(),
            body: crate::cache::Body::Memory(smallvec::smallvec![Bytes::from(vec![b'x'; size])]),
            body_len: size as u64,
            vary: None,
            initial_age: crate::cache::Span::ZERO,
            ttl: Duration::from_secs(60).into(),
            stale_ok: true,
            grace: crate::cache::Span::ZERO,
            stale_if_error: crate::cache::MaybeSpan::NONE,
            keep: crate::cache::Span::ZERO,
            stored_at: Instant::now(),
            state: Default::default(),
            prepared: Default::default(),
        })
    }

    #[test]
    fn bounded_in_bytes_and_counts_evictions() {
        let counters = Arc::new(Counters::default());
        let m = MemoryStorage::new(1 << 20, 64 << 10, counters.clone());
        for i in 0..200 {
            m.insert(CacheKey::new("h", &format!("/{i}")), object(16 << 10));
        }
        let s = m.stats();
        assert!(s.bytes <= 1 << 20, "{} bytes", s.bytes);
        assert!(s.objects < 200);
        assert_eq!(counters.n_lru_nuked.get() + s.objects, 200);
    }
}
