//! Memory above disk: one [`Storage`] that decides what is written to disk (admission) and
//! what comes back to memory (promotion). The pipeline sees only the trait.
//!
//! Admission (`storage.disk.admission`):
//! - `second-request` (default): an object is written to disk when it is stored for a key that
//!   was stored-but-not-admitted recently (a remembered key hash: it was fetched before), or
//!   when the memory tier evicts it after it was hit there at least once. One-hit wonders never
//!   cost a disk write (`disk_admit_skip`).
//! - `always`: every stored object is also queued for disk (write-through); one the writer
//!   refused (queue full) is offered again when the memory tier evicts it.
//!
//! Promotion: a disk hit whose body was read whole (entries up to 1 MiB) is copied into memory;
//! larger objects stay on disk and are streamed from it.

use std::sync::Arc;
use std::time::Instant;

use super::ban::{Ban, BanError};
use super::disk::{DiskStorage, format};
use super::memory::{EvictSink, MemoryStorage};
use super::{
    BanFuture, Body, CacheKey, InspectFuture, KeyRef, LookupFuture, Object, RecoveredIndex,
    Storage, StorageStats,
};
use crate::config::Admission;
use crate::stats::Counters;

/// The memory tier above the disk tier.
pub struct Tiered {
    memory: MemoryStorage,
    disk: Arc<DiskStorage>,
    admission: Admission,
    /// Hashes of keys stored recently without being admitted (bounded; oldest forgotten).
    seen: quick_cache::sync::Cache<u64, ()>,
    counters: Arc<Counters>,
}

impl Tiered {
    pub fn new(
        memory_size: u64,
        max_object: u64,
        disk: DiskStorage,
        admission: Admission,
        counters: Arc<Counters>,
    ) -> Tiered {
        let disk = Arc::new(disk);
        let sink: Arc<dyn EvictSink> = Arc::new(Admit {
            disk: disk.clone(),
            admission,
        });
        let memory =
            MemoryStorage::with_evict_sink(memory_size, max_object, counters.clone(), Some(sink));
        let remembered = (disk.stats().capacity / 8192).clamp(4096, 1 << 22) as usize;
        Tiered {
            memory,
            disk,
            admission,
            seen: quick_cache::sync::Cache::new(remembered),
            counters,
        }
    }

    /// Largest object either tier accepts.
    pub fn max_object(&self) -> u64 {
        self.memory.max_object().max(self.disk.max_object())
    }

    /// The disk tier (for flushing in tests and benchmarks).
    pub fn disk(&self) -> &DiskStorage {
        &self.disk
    }
}

/// Admission on the way out of memory: an object hit there (or, write-through, one the
/// writer refused earlier because it was busy) gets one more chance at disk.
struct Admit {
    disk: Arc<DiskStorage>,
    admission: Admission,
}

impl EvictSink for Admit {
    fn wants(&self, hit: bool, on_disk: bool) -> bool {
        (self.admission == Admission::Always || hit) && !on_disk
    }

    fn evicted(&self, key: CacheKey, object: Arc<Object>) {
        if self.disk.admit(key, object.clone()) {
            object.state.mark_on_disk();
        }
    }
}

impl Storage for Tiered {
    /// Visits the memory tier only: objects on disk are checked against bans when read (by
    /// their position in the write stream), and bans are retired by [`Storage::retire_bans`].
    fn scan(&self, f: &mut dyn FnMut(&CacheKey, &Arc<Object>)) -> bool {
        self.memory.scan(f);
        false
    }

    fn persist_ban(&self, ban: Arc<Ban>) -> BanFuture {
        let disk = self.disk.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || disk.persist_ban(ban))
                .await
                .unwrap_or_else(|e| Err(BanError::NotDurable(e.to_string())))
        })
    }

    fn retire_bans(&self, before: Instant, oldest_in_memory: Instant) -> usize {
        self.disk.retire_bans(before, oldest_in_memory)
    }

    fn recovered_index(&self) -> RecoveredIndex {
        self.disk.take_index()
    }

    fn name(&self) -> &'static str {
        "memory+disk"
    }

    fn site_shares(&self) -> Option<&super::shares::SiteShares> {
        self.memory.site_shares()
    }

    fn lookup(&self, key: &CacheKey) -> Option<Arc<Object>> {
        self.lookup_ref(key.as_key_ref())
    }

    fn lookup_ref(&self, key: KeyRef<'_>) -> Option<Arc<Object>> {
        let object = self.memory.lookup_ref(key)?;
        if let Body::Disk(disk) = &object.body
            && !disk.is_current()
        {
            // A refreshed large object whose body's region has since been reclaimed.
            self.memory.remove(&key.to_key());
            return None;
        }
        Some(object)
    }

    fn has_io(&self) -> bool {
        true
    }

    fn lookup_io<'a>(&'a self, key: &'a CacheKey) -> LookupFuture<'a> {
        Box::pin(async move {
            let object = self.disk.lookup_io(key).await?;
            if let Some(copy) = object.promoted() {
                self.memory.insert(key.clone(), Arc::new(copy));
            }
            Some(object)
        })
    }

    /// The memory copy (peeked: not marked hit) and the disk copy (read from disk when the
    /// index has one, never promoted).
    fn inspect<'a>(&'a self, key: &'a CacheKey) -> InspectFuture<'a> {
        Box::pin(async move {
            let mut copies = Vec::new();
            if let Some(object) = self.memory.peek(key) {
                copies.push(("memory", object));
            }
            if let Some(object) = self.disk.lookup_io(key).await {
                copies.push(("disk", object));
            }
            copies
        })
    }

    fn insert(&self, key: CacheKey, object: Arc<Object>) {
        if object.state.transient() {
            // Memory only; an older copy on disk must not outlive it.
            self.counters.disk_transient.inc();
            self.disk.supersede(&key);
            self.memory.insert(key, object);
            return;
        }
        let admit = match self.admission {
            Admission::Always => true,
            Admission::SecondRequest => {
                let hash = format::key_hash(&key);
                if self.seen.remove(&hash).is_some() {
                    true
                } else {
                    self.seen.insert(hash, ());
                    false
                }
            }
        };
        if admit {
            if self.disk.admit(key.clone(), object.clone()) {
                object.state.mark_on_disk();
            }
        } else {
            self.counters.disk_admit_skip.inc();
            // An older copy on disk must not outlive the newer one in memory.
            self.disk.supersede(&key);
        }
        self.memory.insert(key, object);
    }

    fn remove(&self, key: &CacheKey) -> bool {
        let in_memory = self.memory.remove(key);
        self.disk.remove(key) || in_memory
    }

    fn stats(&self) -> StorageStats {
        self.memory.stats()
    }

    fn lower_tiers(&self) -> Vec<(&'static str, StorageStats)> {
        vec![("disk", self.disk.stats())]
    }

    fn close(&self) {
        self.disk.close();
    }
}
