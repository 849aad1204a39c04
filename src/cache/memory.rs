//! The memory tier: a byte-bounded, sharded index of its own, with CLOCK eviction.
//!
//! Why not a general-purpose cache crate: per cached object those keep the key inline, a
//! pointer to the object, eviction links and table slots (~140 bytes), on top of the `Object`
//! (~190 bytes with its `Arc`) and one allocation each for the key, the header fields and the
//! body. For a 100-byte response that was ~390 bytes of overhead per object (workload 8,
//! bench/RESULTS.md, "memory tier of its own"). Here:
//!
//! - **One allocation per small object, in a slab.** An [`Entry`](entry::Entry) is a thin, reference-counted
//!   [`Block`]: a 4-byte count and length, a 72-byte `Head` (lifetimes as 4-byte `Life`s,
//!   the stored time as nanoseconds, status, flags), then the key's text, the stored header
//!   fields and the body. Blocks live in size-classed slabs apart from the process's heap
//!   ([`super::slab`]): under glibc, entries mixed with each fill's short-lived allocations
//!   left ~110 bytes of holes per object. Most cached objects are never hit (the long tail),
//!   so the block is all they cost.
//! - **The object is built on first use.** A lookup that finds only the compact form builds
//!   the `Arc<Object>` the pipeline works with (fields and body copied into `Bytes`) and keeps
//!   it in the entry (`Head::full`): hits after the first cost what they did before. Objects
//!   that are not small (a body over [`COMPACT_BODY`], several chunks, or on disk) are kept as
//!   an `Object` from the start, the entry holding only their key.
//! - **The index is a hash table of entry pointers** (8 bytes and a control byte per slot),
//!   one per shard behind a read-write lock; the key is compared where it is stored, in the
//!   entry.
//! - **Eviction is CLOCK over the table's buckets**, with a 2-bit use count per entry: a hit
//!   raises it (up to 3), the hand lowers it, and evicts entries it finds at 0. An entry just
//!   inserted starts at 0, so a scan of one-time URLs evicts itself before it evicts objects
//!   that are hit. No eviction queue or ghost list: nothing per object beyond the slot.
//!
//! Budget: what is held. Every entry is charged its block's slot ([`Block::footprint`]), plus
//! [`Object::weight`] once it has an object (from the start for the full form; for the compact
//! form when the first lookup builds it, which evicts if that takes the shard over its share);
//! each shard's table is charged its allocation. Evictions are counted in `n_lru_nuked`.
//!
//! Site shares (`[[site]] cache_share`, [`super::shares`]): each entry's head carries its
//! key's site account, charged and uncharged with the shard; a site over its share evicts its
//! own entries first ([`share`]). A named storage (`super::stores`) is an account of the same
//! kind: an object stored in it is charged to it instead of its site, and held to its size
//! the same way. A hit costs nothing more.

mod entry;
mod share;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::HashTable;
use hashbrown::hash_table::Entry as Slot;
use parking_lot::RwLock;

pub use entry::COMPACT_BODY;
use entry::{Entry, Head, MAX_HOST, build, charge, entry_for, is_key, key_of, key_text};

use super::shares::SiteShares;
use super::slab::Block;
use super::{CacheKey, InspectFuture, KeyRef, Object, Storage, StorageStats};
use crate::stats::Counters;

/// Told about objects evicted for room (the tiered storage admits some to disk).
pub trait EvictSink: Send + Sync {
    /// Whether an evicted object with these flags is wanted: only then is it built and passed
    /// to [`EvictSink::evicted`] (a compact entry that was never hit costs nothing to drop).
    fn wants(&self, hit: bool, on_disk: bool) -> bool;
    /// An object evicted for room (called outside the shard's lock).
    fn evicted(&self, key: CacheKey, object: Arc<Object>);
}

struct Shard {
    table: HashTable<Entry>,
    /// Bytes charged for the entries in `table`. Changed under the write lock, except that a
    /// lookup adds the weight of a compact entry's object when it builds it (read lock).
    weight: AtomicU64,
    /// The CLOCK hand: the next bucket to look at.
    hand: usize,
}

impl Shard {
    /// Evicts until the shard is within `capacity`, never `keep` (the entry just inserted).
    /// Each step looks at one bucket: an entry used since the hand last passed has its count
    /// lowered, one at 0 is evicted. Bounded: four sweeps bring every count to 0.
    fn make_room(
        &mut self,
        capacity: u64,
        keep: &Entry,
        shares: &SiteShares,
        evicted: &mut Vec<Entry>,
    ) {
        let buckets = self.table.num_buckets();
        let mut steps = 0;
        // The table is charged too (it does not shrink as entries leave).
        let capacity = capacity.saturating_sub(self.table.allocation_size() as u64);
        while *self.weight.get_mut() > capacity && self.table.len() > 1 && steps < 4 * buckets + 4 {
            steps += 1;
            let i = self.hand % buckets;
            self.hand = i + 1;
            let Some(entry) = self.table.get_bucket(i) else {
                continue;
            };
            if Block::same(entry, keep) {
                continue;
            }
            if let Some(entry) = self.age_or_evict(i, shares) {
                evicted.push(entry);
            }
        }
    }

    /// The CLOCK step at bucket `i` (an entry the caller does not spare): one used since the
    /// hand last passed has its count lowered and stays; one at 0 is removed, taken off the
    /// shard's and its site's charges, and returned.
    fn age_or_evict(&mut self, i: usize, shares: &SiteShares) -> Option<Entry> {
        let uses = &self.table.get_bucket(i)?.head().uses;
        let n = uses.load(Ordering::Relaxed);
        if n > 0 {
            uses.store(n - 1, Ordering::Relaxed);
            return None;
        }
        let (entry, _) = self.table.get_bucket_entry(i).ok()?.remove();
        self.uncharge(&entry, shares);
        Some(entry)
    }

    /// Takes an entry just removed off the shard's and its site's charges.
    fn uncharge(&mut self, entry: &Entry, shares: &SiteShares) {
        let charged = charge(entry);
        let weight = self.weight.get_mut();
        *weight = weight.saturating_sub(charged);
        shares.sub(entry.head().site, charged);
        shares.count_gone(entry.head().site);
    }
}

/// Memory storage bounded by `capacity` bytes.
pub struct MemoryStorage {
    shards: Box<[RwLock<Shard>]>,
    hasher: foldhash::fast::RandomState,
    /// Bytes each shard may hold.
    shard_capacity: u64,
    capacity: u64,
    max_object: u64,
    counters: Arc<Counters>,
    sink: Option<Arc<dyn EvictSink>>,
    /// Bytes charged per site, and the sites' shares.
    shares: SiteShares,
}

impl MemoryStorage {
    /// `max_object` is the largest object that will ever be inserted; shards are sized so it fits.
    pub fn new(capacity: u64, max_object: u64, counters: Arc<Counters>) -> MemoryStorage {
        MemoryStorage::with_evict_sink(capacity, max_object, counters, None)
    }

    /// Like [`MemoryStorage::new`]; `sink` is told about objects evicted for room (the
    /// tiered storage uses it to admit objects to disk).
    pub fn with_evict_sink(
        capacity: u64,
        max_object: u64,
        counters: Arc<Counters>,
        sink: Option<Arc<dyn EvictSink>>,
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
        MemoryStorage {
            shards: (0..shards)
                .map(|_| {
                    RwLock::new(Shard {
                        table: HashTable::new(),
                        weight: AtomicU64::new(0),
                        hand: 0,
                    })
                })
                .collect(),
            hasher: Default::default(),
            shard_capacity: capacity / shards as u64,
            capacity,
            max_object: capacity / shards as u64,
            counters,
            sink,
            shares: SiteShares::default(),
        }
    }

    /// Largest object this tier accepts.
    pub fn max_object(&self) -> u64 {
        self.max_object
    }

    fn hash(&self, text: &[u8], host_len: usize, variant: u64) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one((text, host_len, variant))
    }

    fn hash_key(&self, key: KeyRef<'_>) -> u64 {
        self.hash(key.text(), key.host_len(), key.variant)
    }

    fn hash_entry(&self, entry: &Entry) -> u64 {
        let h = entry.head();
        self.hash(key_text(entry), h.host_len as usize, h.variant)
    }

    fn shard_index(&self, hash: u64) -> usize {
        // The table uses the low bits (bucket) and the top 7 (tag); the shard takes others.
        (hash >> 40) as usize & (self.shards.len() - 1)
    }

    fn shard(&self, hash: u64) -> &RwLock<Shard> {
        &self.shards[self.shard_index(hash)]
    }

    fn find(&self, key: &CacheKey) -> Option<Entry> {
        let key = key.as_key_ref();
        let hash = self.hash_key(key);
        let shard = self.shard(hash).read();
        shard.table.find(hash, |e| is_key(e, key)).cloned()
    }

    /// Counts entries evicted for room and hands those the sink wants to it (outside the
    /// shard's lock).
    fn hand_on(&self, evicted: Vec<Entry>) {
        for entry in evicted {
            self.counters.n_lru_nuked.inc();
            let Some(sink) = &self.sink else { continue };
            let h = entry.head();
            let (hit, on_disk, transient) = match h.full.get() {
                Some(object) => (
                    object.state.hit(),
                    object.state.on_disk(),
                    object.state.transient(),
                ),
                None => (false, h.has(Head::ON_DISK), h.has(Head::TRANSIENT)),
            };
            if !transient && sink.wants(hit, on_disk) {
                sink.evicted(key_of(&entry), build(&entry, false));
            }
        }
    }

    /// The object under `key` without making it hotter (an inspection is not a use); a
    /// compact entry's object is built for the caller and not kept.
    pub fn peek(&self, key: &CacheKey) -> Option<Arc<Object>> {
        self.find(key).map(|e| build(&e, false))
    }
}

impl Storage for MemoryStorage {
    /// Visits every object; compact entries' objects are built for the visit and not kept.
    /// Each shard's entries are collected under its lock and visited after it is released.
    fn scan(&self, f: &mut dyn FnMut(&CacheKey, &Arc<Object>)) -> bool {
        for shard in self.shards.iter() {
            let entries: Vec<Entry> = shard.read().table.iter().cloned().collect();
            for entry in entries {
                f(&key_of(&entry), &build(&entry, false));
            }
        }
        true
    }

    fn name(&self) -> &'static str {
        "memory"
    }

    fn site_shares(&self) -> Option<&SiteShares> {
        Some(&self.shares)
    }

    /// Also marks the object hit (the disk tier's admission signal, and `hit_in_memory` for
    /// inspection) and raises the entry's CLOCK count.
    fn lookup(&self, key: &CacheKey) -> Option<Arc<Object>> {
        self.lookup_ref(key.as_key_ref())
    }

    /// As [`Storage::lookup`], with a borrowed key: a fast hit's lookup allocates nothing.
    fn lookup_ref(&self, key: KeyRef<'_>) -> Option<Arc<Object>> {
        let hash = self.hash_key(key);
        let lock = self.shard(hash);
        let site;
        let (object, over) = {
            let shard = lock.read();
            let entry = shard.table.find(hash, |e| is_key(e, key))?;
            let h = entry.head();
            site = h.site;
            let uses = h.uses.load(Ordering::Relaxed);
            if uses < 3 {
                h.uses.store(uses + 1, Ordering::Relaxed);
            }
            match h.full.get() {
                Some(object) => (object.clone(), false),
                None => {
                    // Built and charged under the read lock, so that a removal (write lock)
                    // finds either no object or one already charged. Of two lookups building
                    // at once, the one whose object is kept charges it.
                    let object = build(entry, true);
                    match h.full.set(Box::new(object.clone())) {
                        Ok(()) => {
                            let weight = object.weight();
                            let now = shard.weight.fetch_add(weight, Ordering::Relaxed) + weight;
                            self.shares.add(site, weight);
                            let table = shard.table.allocation_size() as u64;
                            let over = now + table > self.shard_capacity || self.shares.over(site);
                            (object, over)
                        }
                        Err(_) => (h.full.get().map_or(object, Arc::clone), false),
                    }
                }
            }
        };
        if over {
            // The object just built took the shard over its budget, or its site over its
            // share: make room as an insert would (the entry looked up stays, its count just
            // raised).
            let mut evicted = Vec::new();
            let mut shard = lock.write();
            if let Some(entry) = shard.table.find(hash, |e| is_key(e, key)).cloned() {
                shard.evict_for_share(site, &self.shares, Some(&entry), &mut evicted);
                shard.make_room(self.shard_capacity, &entry, &self.shares, &mut evicted);
                drop(shard);
                self.hold_to_share(site, self.shard_index(hash), Some(&entry), &mut evicted);
            }
            self.hand_on(evicted);
        }
        object.state.mark_hit();
        Some(object)
    }

    fn inspect<'a>(&'a self, key: &'a CacheKey) -> InspectFuture<'a> {
        let found = self.peek(key).map(|o| ("memory", o));
        Box::pin(std::future::ready(found.into_iter().collect()))
    }

    fn insert(&self, key: CacheKey, object: Arc<Object>) {
        if key.host_len() > MAX_HOST {
            return;
        }
        // An object in a named storage (or `Transient`) is charged to the storage.
        let site = super::shares::store_account(object.state.store()).unwrap_or(key.site());
        let mut key = key;
        key.set_site(site);
        let entry = entry_for(&key, object);
        let weight = charge(&entry);
        // Larger than the tier's shard, or than its site's whole share: not kept here.
        if weight > self.max_object || self.shares.limit(site).is_some_and(|l| weight > l) {
            return;
        }
        let hash = self.hash_key(key.as_key_ref());
        let mut evicted = Vec::new();
        let replaced = {
            let mut shard = self.shard(hash).write();
            let shard = &mut *shard;
            let replaced = match shard.table.entry(
                hash,
                |e| is_key(e, key.as_key_ref()),
                |e| self.hash_entry(e),
            ) {
                Slot::Occupied(mut slot) => Some(std::mem::replace(slot.get_mut(), entry.clone())),
                Slot::Vacant(slot) => {
                    slot.insert(entry.clone());
                    None
                }
            };
            if let Some(old) = &replaced {
                shard.uncharge(old, &self.shares);
            }
            *shard.weight.get_mut() += weight;
            self.shares.add(site, weight);
            self.shares.count_stored(site);
            // The site's own entries first, then anyone's for the shard's budget.
            shard.evict_for_share(site, &self.shares, Some(&entry), &mut evicted);
            shard.make_room(self.shard_capacity, &entry, &self.shares, &mut evicted);
            replaced
        };
        self.hold_to_share(site, self.shard_index(hash), Some(&entry), &mut evicted);
        // Dropped and handed on outside the lock.
        drop(replaced);
        self.hand_on(evicted);
    }

    fn remove(&self, key: &CacheKey) -> bool {
        let key = key.as_key_ref();
        let hash = self.hash_key(key);
        let removed = {
            let mut shard = self.shard(hash).write();
            let shard = &mut *shard;
            match shard.table.find_entry(hash, |e| is_key(e, key)) {
                Ok(slot) => {
                    let (entry, _) = slot.remove();
                    shard.uncharge(&entry, &self.shares);
                    Some(entry)
                }
                Err(_) => None,
            }
        };
        removed.is_some()
    }

    fn stats(&self) -> StorageStats {
        let (mut objects, mut bytes) = (0, 0);
        for shard in self.shards.iter() {
            let shard = shard.read();
            objects += shard.table.len() as u64;
            bytes += shard.weight.load(Ordering::Relaxed) + shard.table.allocation_size() as u64;
        }
        StorageStats {
            objects,
            bytes,
            capacity: self.capacity,
        }
    }
}
