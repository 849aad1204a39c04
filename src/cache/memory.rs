//! The memory tier: a byte-bounded, sharded index of its own, with CLOCK eviction.
//!
//! Why not a general-purpose cache crate: per cached object those keep the key inline, a
//! pointer to the object, eviction links and table slots (~140 bytes), on top of the `Object`
//! (~190 bytes with its `Arc`) and one allocation each for the key, the header fields and the
//! body. For a 100-byte response that was ~390 bytes of overhead per object (workload 8,
//! bench/RESULTS.md, "memory tier of its own"). Here:
//!
//! - **One allocation per small object, in a slab.** An [`Entry`] is a thin, reference-counted
//!   [`Block`]: a 4-byte count and length, a 72-byte [`Head`] (lifetimes as 4-byte [`Life`]s,
//!   the stored time as nanoseconds, status, flags), then the key's text, the stored header
//!   fields and the body. Blocks live in size-classed slabs apart from the process's heap
//!   ([`super::slab`]): under glibc, entries mixed with each fill's short-lived allocations
//!   left ~110 bytes of holes per object. Most cached objects are never hit (the long tail),
//!   so the block is all they cost.
//! - **The object is built on first use.** A lookup that finds only the compact form builds
//!   the `Arc<Object>` the pipeline works with (fields and body copied into `Bytes`) and keeps
//!   it in the entry ([`Head::full`]): hits after the first cost what they did before. Objects
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

use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry as Slot;
use http::StatusCode;
use once_cell::race::OnceBox;
use parking_lot::RwLock;

use super::slab::Block;
use super::{
    Body, CacheKey, InspectFuture, MaybeSpan, Object, Prefetch, Span, Storage, StorageStats,
    StoredFields, TierState, VarySelection,
};
use crate::stats::Counters;

/// Largest body kept in the compact form. A hit builds the full object once and keeps both
/// (the body twice), so the compact form is for objects whose per-object bookkeeping would
/// outweigh their body; larger ones are stored as objects directly.
pub const COMPACT_BODY: u64 = 2048;

/// Told about objects evicted for room (the tiered storage admits some to disk).
pub trait EvictSink: Send + Sync {
    /// Whether an evicted object with these flags is wanted: only then is it built and passed
    /// to [`EvictSink::evicted`] (a compact entry that was never hit costs nothing to drop).
    fn wants(&self, hit: bool, on_disk: bool) -> bool;
    /// An object evicted for room (called outside the shard's lock).
    fn evicted(&self, key: CacheKey, object: Arc<Object>);
}

/// One cached object: [`Head`], then the key's text, the fields block and the body (compact
/// form) or the key's text alone (full form, [`Head::full`] set at insert).
type Entry = Block<Head>;

/// An entry's fixed part (72 bytes; `memory::tests::an_entry_stays_compact`).
struct Head {
    /// `Object::stored_at`, nanoseconds from [`EPOCH`] (negative for objects read from disk
    /// that were stored before this process started).
    stored_at: i64,
    /// The key's variant (Vary).
    variant: u64,
    vary: Option<Box<VarySelection>>,
    /// The object as the pipeline uses it: set at insert (full form) or on the first lookup.
    full: OnceBox<Arc<Object>>,
    host_len: u32,
    key_len: u32,
    fields_len: u32,
    initial_age: Life,
    ttl: Life,
    grace: Life,
    keep: Life,
    stale_if_error: Life,
    field_count: u16,
    status: StatusCode,
    /// [`Head::STALE_OK`], [`Head::ON_DISK`] and [`Head::TRANSIENT`] (fixed at insert).
    flags: u8,
    /// `Object::prefetch`, in the two bytes the flags left of the padding.
    prefetch: u16,
    /// CLOCK use count, 0..=3.
    uses: AtomicU8,
}

impl Head {
    /// `Object::stale_ok`.
    const STALE_OK: u8 = 1;
    /// The object was on (or queued to) the disk tier when it was inserted.
    const ON_DISK: u8 = 2;
    /// `TierState::transient`: never handed to the eviction sink (the disk tier).
    const TRANSIENT: u8 = 4;

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// [`Head::flags`] for `object`.
fn head_flags(object: &Object) -> u8 {
    let mut flags = 0;
    if object.stale_ok {
        flags |= Head::STALE_OK;
    }
    if object.state.on_disk() {
        flags |= Head::ON_DISK;
    }
    if object.state.transient() {
        flags |= Head::TRANSIENT;
    }
    flags
}

/// The process's reference instant for [`Head::stored_at`].
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn nanos_from_epoch(at: Instant) -> i64 {
    let epoch = *EPOCH;
    match at.checked_duration_since(epoch) {
        Some(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        None => -i64::try_from(epoch.duration_since(at).as_nanos()).unwrap_or(i64::MAX),
    }
}

fn instant_from_epoch(nanos: i64) -> Instant {
    let epoch = *EPOCH;
    let d = Duration::from_nanos(nanos.unsigned_abs());
    if nanos >= 0 {
        epoch.checked_add(d).unwrap_or(epoch)
    } else {
        epoch.checked_sub(d).unwrap_or(epoch)
    }
}

/// A lifetime in 4 bytes: milliseconds below 2^31 (24.8 days), whole seconds with the top bit
/// set above (up to 68 years); `u32::MAX` is "none" (for `stale-if-error`). Lifetimes that long
/// come from `max-age` in whole seconds anyway.
#[derive(Clone, Copy)]
struct Life(u32);

impl Life {
    const SECONDS: u32 = 1 << 31;
    const NONE: Life = Life(u32::MAX);

    fn new(ms: u64) -> Life {
        match u32::try_from(ms) {
            Ok(ms) if ms < Life::SECONDS => Life(ms),
            _ => Life(Life::SECONDS | (ms / 1000).min(u64::from(Life::SECONDS - 2)) as u32),
        }
    }

    fn of(span: Span) -> Life {
        Life::new(span.millis())
    }

    fn of_maybe(span: MaybeSpan) -> Life {
        span.get()
            .map_or(Life::NONE, |d| Life::new(Span::new(d).millis()))
    }

    fn millis(self) -> u64 {
        if self.0 & Life::SECONDS == 0 {
            u64::from(self.0)
        } else {
            u64::from(self.0 & !Life::SECONDS) * 1000
        }
    }

    fn span(self) -> Span {
        Span::new(Duration::from_millis(self.millis()))
    }

    fn maybe_span(self) -> MaybeSpan {
        if self.0 == u32::MAX {
            MaybeSpan::NONE
        } else {
            MaybeSpan::new(Some(Duration::from_millis(self.millis())))
        }
    }
}

fn key_text(entry: &Entry) -> &[u8] {
    entry
        .bytes()
        .get(..entry.head().key_len as usize)
        .unwrap_or(&[])
}

fn key_of(entry: &Entry) -> CacheKey {
    let h = entry.head();
    let text = std::str::from_utf8(key_text(entry)).unwrap_or("");
    CacheKey::from_text_parts(text, h.host_len as usize, h.variant)
}

fn is_key(entry: &Entry, key: &CacheKey) -> bool {
    let h = entry.head();
    h.variant == key.variant
        && h.host_len as usize == key.host_len()
        && key_text(entry) == key.text().as_bytes()
}

/// Whether `object` is kept compact, and its fields' count and block length if so.
fn compact_shape(key: &CacheKey, object: &Object) -> Option<(u16, u32)> {
    let Body::Memory(chunks) = &object.body else {
        return None;
    };
    let small = chunks.len() <= 1 && object.body_len <= COMPACT_BODY;
    let count = u16::try_from(object.headers.len()).ok()?;
    let fields = u32::try_from(object.headers.block().len()).ok()?;
    u32::try_from(key.text().len()).ok()?;
    small.then_some((count, fields))
}

/// The entry for `key` and `object`: compact when it is small, else the key and the object.
fn entry_for(key: &CacheKey, object: Arc<Object>) -> Entry {
    let shape = compact_shape(key, &object);
    let text = key.text().as_bytes();
    let (count, fields_len) = shape.unwrap_or((0, 0));
    let head = Head {
        stored_at: nanos_from_epoch(object.stored_at),
        variant: key.variant,
        vary: object.vary.clone(),
        full: OnceBox::new(),
        host_len: key.host_len() as u32,
        key_len: text.len().min(u32::MAX as usize) as u32,
        fields_len,
        initial_age: Life::of(object.initial_age),
        ttl: Life::of(object.ttl),
        grace: Life::of(object.grace),
        keep: Life::of(object.keep),
        stale_if_error: Life::of_maybe(object.stale_if_error),
        field_count: count,
        status: object.status,
        flags: head_flags(&object),
        prefetch: object.prefetch.to_bits(),
        uses: AtomicU8::new(0),
    };
    match (shape, &object.body) {
        (Some(_), Body::Memory(chunks)) => {
            let body = chunks.first().map_or(&[][..], |c| &c[..]);
            let block = object.headers.block();
            Block::new(head, &[text, block, body])
        }
        _ => {
            let _ = head.full.set(Box::new(object));
            Block::new(head, &[text])
        }
    }
}

/// The object a compact entry holds, built from its block (a full entry's own object).
fn build(entry: &Entry, hit: bool) -> Arc<Object> {
    let h = entry.head();
    if let Some(object) = h.full.get() {
        return object.clone();
    }
    let fields_at = h.key_len as usize;
    let body_at = fields_at + h.fields_len as usize;
    let fields = entry.bytes().get(fields_at..body_at).unwrap_or(&[]);
    let body = entry.bytes().get(body_at..).unwrap_or(&[]);
    let chunks = if body.is_empty() {
        Default::default()
    } else {
        smallvec::smallvec![Bytes::copy_from_slice(body)]
    };
    Arc::new(Object {
        status: h.status,
        headers: StoredFields::from_block(Bytes::copy_from_slice(fields), u32::from(h.field_count)),
        body: Body::Memory(chunks),
        body_len: body.len() as u64,
        vary: h.vary.clone(),
        initial_age: h.initial_age.span(),
        ttl: h.ttl.span(),
        stale_ok: h.has(Head::STALE_OK),
        grace: h.grace.span(),
        stale_if_error: h.stale_if_error.maybe_span(),
        keep: h.keep.span(),
        stored_at: instant_from_epoch(h.stored_at),
        state: TierState::with(hit, h.has(Head::ON_DISK), h.has(Head::TRANSIENT)),
        prepared: Default::default(),
        hits: Default::default(),
        prefetch: Prefetch::from_bits(h.prefetch),
    })
}

/// Bytes an entry is charged: its block, plus the object's weight
/// once there is an object (from the start for the full form; for the compact form from the
/// first lookup, which builds it and adds its weight to the shard's then).
fn charge(entry: &Entry) -> u64 {
    let own = entry.footprint() as u64;
    entry
        .head()
        .full
        .get()
        .map_or(own, |object| own + object.weight())
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
    fn make_room(&mut self, capacity: u64, keep: &Entry, evicted: &mut Vec<Entry>) {
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
            let uses = &entry.head().uses;
            let n = uses.load(Ordering::Relaxed);
            if n > 0 {
                uses.store(n - 1, Ordering::Relaxed);
                continue;
            }
            if let Ok(slot) = self.table.get_bucket_entry(i) {
                let (entry, _) = slot.remove();
                let weight = self.weight.get_mut();
                *weight = weight.saturating_sub(charge(&entry));
                evicted.push(entry);
            }
        }
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

    fn hash_key(&self, key: &CacheKey) -> u64 {
        self.hash(key.text().as_bytes(), key.host_len(), key.variant)
    }

    fn hash_entry(&self, entry: &Entry) -> u64 {
        let h = entry.head();
        self.hash(key_text(entry), h.host_len as usize, h.variant)
    }

    fn shard(&self, hash: u64) -> &RwLock<Shard> {
        // The table uses the low bits (bucket) and the top 7 (tag); the shard takes others.
        &self.shards[(hash >> 40) as usize & (self.shards.len() - 1)]
    }

    fn find(&self, key: &CacheKey) -> Option<Entry> {
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

    /// Also marks the object hit (the disk tier's admission signal, and `hit_in_memory` for
    /// inspection) and raises the entry's CLOCK count.
    fn lookup(&self, key: &CacheKey) -> Option<Arc<Object>> {
        let hash = self.hash_key(key);
        let lock = self.shard(hash);
        let (object, over) = {
            let shard = lock.read();
            let entry = shard.table.find(hash, |e| is_key(e, key))?;
            let h = entry.head();
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
                            let table = shard.table.allocation_size() as u64;
                            (object, now + table > self.shard_capacity)
                        }
                        Err(_) => (h.full.get().map_or(object, Arc::clone), false),
                    }
                }
            }
        };
        if over {
            // The object just built took the shard over its budget: make room as an insert
            // would (the entry looked up stays, its count just raised).
            let mut evicted = Vec::new();
            let mut shard = lock.write();
            if let Some(entry) = shard.table.find(hash, |e| is_key(e, key)).cloned() {
                shard.make_room(self.shard_capacity, &entry, &mut evicted);
            }
            drop(shard);
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
        let entry = entry_for(&key, object);
        let weight = charge(&entry);
        if weight > self.max_object {
            return;
        }
        let hash = self.hash_key(&key);
        let mut evicted = Vec::new();
        let replaced = {
            let mut shard = self.shard(hash).write();
            let shard = &mut *shard;
            let replaced =
                match shard
                    .table
                    .entry(hash, |e| is_key(e, &key), |e| self.hash_entry(e))
                {
                    Slot::Occupied(mut slot) => {
                        Some(std::mem::replace(slot.get_mut(), entry.clone()))
                    }
                    Slot::Vacant(slot) => {
                        slot.insert(entry.clone());
                        None
                    }
                };
            let charged = shard.weight.get_mut();
            if let Some(old) = &replaced {
                *charged = charged.saturating_sub(charge(old));
            }
            *charged += weight;
            shard.make_room(self.shard_capacity, &entry, &mut evicted);
            replaced
        };
        // Dropped and handed on outside the lock.
        drop(replaced);
        self.hand_on(evicted);
    }

    fn remove(&self, key: &CacheKey) -> bool {
        let hash = self.hash_key(key);
        let removed = {
            let mut shard = self.shard(hash).write();
            let shard = &mut *shard;
            match shard.table.find_entry(hash, |e| is_key(e, key)) {
                Ok(slot) => {
                    let (entry, _) = slot.remove();
                    let charged = shard.weight.get_mut();
                    *charged = charged.saturating_sub(charge(&entry));
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    fn object_with(size: usize, headers: &HeaderMap) -> Arc<Object> {
        let body = if size == 0 {
            Default::default()
        } else {
            smallvec::smallvec![Bytes::from(vec![b'x'; size])]
        };
        Arc::new(Object {
            status: http::StatusCode::OK,
            headers: StoredFields::from_map(headers),
            body: crate::cache::Body::Memory(body),
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
            hits: Default::default(),
            prefetch: crate::cache::Prefetch::CONFIGURED,
        })
    }

    fn object(size: usize) -> Arc<Object> {
        object_with(size, &HeaderMap::new())
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

    #[test]
    fn small_objects_are_bounded_and_counted_too() {
        let counters = Arc::new(Counters::default());
        let m = MemoryStorage::new(1 << 20, 64 << 10, counters.clone());
        for i in 0..5000 {
            m.insert(CacheKey::new("h", &format!("/{i}")), object(100));
        }
        let s = m.stats();
        assert!(s.bytes <= 1 << 20, "{} bytes", s.bytes);
        assert!(s.objects > 100 && s.objects < 5000, "{} objects", s.objects);
        assert_eq!(counters.n_lru_nuked.get() + s.objects, 5000);
    }

    /// Objects built by lookups are charged when built, and the shard stays within budget:
    /// a lookup that takes it over evicts as an insert would.
    #[test]
    fn objects_built_by_lookups_stay_within_budget() {
        let counters = Arc::new(Counters::default());
        let m = MemoryStorage::new(1 << 20, 64 << 10, counters.clone());
        let keys: Vec<_> = (0..3000)
            .map(|i| CacheKey::new("h", &format!("/{i}")))
            .collect();
        for key in &keys {
            m.insert(key.clone(), object(100));
        }
        // Entries that were never looked up are charged their block only: all fit.
        assert_eq!(m.stats().objects, 3000);
        assert_eq!(counters.n_lru_nuked.get(), 0);
        let mut found = 0;
        for key in &keys {
            found += usize::from(m.lookup(key).is_some());
            assert!(m.stats().bytes <= 1 << 20, "{} bytes", m.stats().bytes);
        }
        let s = m.stats();
        assert!(counters.n_lru_nuked.get() > 1000, "{counters:?}");
        assert_eq!(counters.n_lru_nuked.get() + s.objects, 3000);
        // Cold entries (never looked up) go first, so about a budget's worth of objects is found.
        assert!(found > 500, "{found} found");
    }

    /// A compact entry's object is the stored object, field for field.
    #[test]
    fn a_compact_object_comes_back_as_stored() {
        let m = MemoryStorage::new(1 << 20, 64 << 10, Arc::new(Counters::default()));
        let mut headers = HeaderMap::new();
        headers.insert("cache-control", "max-age=60".parse().unwrap());
        headers.append("set-cookie", "a=1".parse().unwrap());
        headers.append("set-cookie", "b=2".parse().unwrap());
        headers.insert("etag", "\"v1\"".parse().unwrap());
        let stored_at = Instant::now() - Duration::from_millis(1500);
        let original = Object {
            status: StatusCode::NOT_FOUND,
            headers: StoredFields::from_map(&headers),
            body: Body::Memory(smallvec::smallvec![Bytes::from_static(b"not here")]),
            body_len: 8,
            vary: crate::cache::boxed_vary(vec![(
                http::header::ACCEPT_ENCODING,
                Some("gzip".parse().unwrap()),
            )]),
            initial_age: Duration::from_secs(3).into(),
            ttl: Duration::from_secs(365 * 86400).into(),
            stale_ok: false,
            grace: Duration::from_millis(2500).into(),
            stale_if_error: Some(Duration::from_secs(30)).into(),
            keep: Duration::from_secs(40 * 86400 + 1).into(),
            stored_at,
            state: Default::default(),
            prepared: Default::default(),
            hits: Default::default(),
            prefetch: Prefetch::before(Duration::from_secs(30)),
        };
        original.state.mark_on_disk();
        let key = CacheKey::new("Example.COM:80", "/a?b=1").with_variant(7);
        m.insert(key.clone(), Arc::new(original));
        assert!(m.lookup(&CacheKey::new("example.com", "/a?b=1")).is_none());
        let got = m.lookup(&key).expect("stored");
        assert_eq!(got.status, StatusCode::NOT_FOUND);
        assert_eq!(got.headers.map(), &headers);
        let Body::Memory(chunks) = &got.body else {
            panic!("body in memory")
        };
        assert_eq!(&chunks[..], &[Bytes::from_static(b"not here")]);
        assert_eq!(got.body_len, 8);
        assert_eq!(got.vary().len(), 1);
        assert_eq!(got.initial_age.get(), Duration::from_secs(3));
        assert_eq!(got.ttl.get(), Duration::from_secs(365 * 86400));
        assert!(!got.stale_ok);
        assert_eq!(got.prefetch, Prefetch::before(Duration::from_secs(30)));
        assert_eq!(got.grace.get(), Duration::from_millis(2500));
        assert_eq!(got.stale_if_error.get(), Some(Duration::from_secs(30)));
        assert_eq!(got.keep.get(), Duration::from_secs(40 * 86400 + 1));
        assert_eq!(got.stored_at, stored_at);
        assert!(got.state.on_disk());
        assert!(got.state.hit());
        // Built once: the next hit gets the same object.
        assert!(Arc::ptr_eq(&got, &m.lookup(&key).unwrap()));
    }

    #[test]
    fn large_and_empty_bodies() {
        let m = MemoryStorage::new(1 << 22, 1 << 20, Arc::new(Counters::default()));
        let large = object(COMPACT_BODY as usize + 1);
        m.insert(CacheKey::new("h", "/large"), large.clone());
        // Not compact: the very object stored.
        assert!(Arc::ptr_eq(
            &large,
            &m.lookup(&CacheKey::new("h", "/large")).unwrap()
        ));
        m.insert(CacheKey::new("h", "/empty"), object(0));
        let empty = m.lookup(&CacheKey::new("h", "/empty")).unwrap();
        assert_eq!(empty.body_len, 0);
        assert!(matches!(&empty.body, Body::Memory(c) if c.is_empty()));
    }

    #[test]
    fn replace_remove_scan_and_stats() {
        let m = MemoryStorage::new(1 << 22, 1 << 20, Arc::new(Counters::default()));
        let key = CacheKey::new("h", "/x");
        m.insert(key.clone(), object(10));
        let table = m
            .shards
            .iter()
            .map(|s| s.read().table.allocation_size())
            .sum::<usize>();
        let slot = |key: &CacheKey| (table + m.find(key).unwrap().footprint()) as u64;
        // Never looked up: the entry alone.
        assert_eq!(m.stats().bytes, slot(&key));
        m.insert(key.clone(), object(20));
        assert_eq!(m.stats().objects, 1);
        assert_eq!(m.stats().bytes, slot(&key));
        // The first lookup builds the object and charges it, once.
        let found = m.lookup(&key).unwrap();
        assert_eq!(found.body_len, 20);
        assert_eq!(m.stats().bytes, slot(&key) + found.weight());
        m.lookup(&key).unwrap();
        assert_eq!(m.stats().bytes, slot(&key) + found.weight());
        m.insert(CacheKey::new("h", "/y"), object(5000));
        let mut seen = Vec::new();
        m.scan(&mut |k, o| seen.push((k.to_string(), o.body_len)));
        seen.sort();
        assert_eq!(seen, [("h/x".to_string(), 20), ("h/y".to_string(), 5000)]);
        assert!(m.remove(&key));
        assert!(!m.remove(&key));
        assert!(m.lookup(&key).is_none());
        assert_eq!(m.stats().objects, 1);
        assert!(m.remove(&CacheKey::new("h", "/y")));
        // What is left is the index's tables, which keep their size.
        let tables = m
            .shards
            .iter()
            .map(|s| s.read().table.allocation_size())
            .sum::<usize>();
        assert!(tables > 0);
        assert_eq!(m.stats().bytes, tables as u64);
    }

    /// Objects that are hit survive a scan of one-time URLs through a full cache.
    #[test]
    fn hit_objects_outlive_a_scan() {
        let m = MemoryStorage::new(1 << 20, 64 << 10, Arc::new(Counters::default()));
        let hot: Vec<CacheKey> = (0..50)
            .map(|i| CacheKey::new("h", &format!("/hot{i}")))
            .collect();
        for key in &hot {
            m.insert(key.clone(), object(1000));
        }
        for i in 0..5000 {
            for key in hot.iter().skip(i % 10).step_by(10) {
                assert!(m.lookup(key).is_some(), "{key} evicted after {i} scanned");
            }
            m.insert(CacheKey::new("h", &format!("/scan{i}")), object(1000));
        }
    }

    #[test]
    fn lifetimes_in_four_bytes() {
        for ms in [0, 1, 999, 86_400_000, (1 << 31) - 1] {
            assert_eq!(Life::new(ms).millis(), ms);
        }
        // Beyond 24.8 days: whole seconds.
        assert_eq!(Life::new(365 * 86_400_000 + 999).millis(), 365 * 86_400_000);
        assert_eq!(
            Life::new(u64::MAX).millis(),
            (u64::from(Life::SECONDS) - 2) * 1000
        );
        assert_ne!(Life::new(u64::MAX).0, Life::NONE.0);
        assert!(Life::of_maybe(MaybeSpan::NONE).maybe_span().get().is_none());
    }

    #[test]
    fn an_entry_stays_compact() {
        assert_eq!(std::mem::size_of::<Head>(), 72);
        assert_eq!(std::mem::size_of::<Entry>(), 8);
    }
}
