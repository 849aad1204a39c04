//! The disk tier's index in memory: key hash → where the entry is ([`Loc`]), sharded, with
//! the live bytes of each region kept beside it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::{Engine, INDEX_SHARDS, Loc, Shard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn add_signed(counter: &AtomicU64, delta: i64) {
    if delta >= 0 {
        counter.fetch_add(delta as u64, Ordering::Relaxed);
    } else {
        counter.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
    }
}

/// Changes to the index found at recovery, by shard, in the order found: for each key the
/// last one wins (regions are read oldest first). `None` removes (a tombstone, an expired
/// entry).
pub(in crate::cache::disk) struct Batch {
    shards: Vec<Vec<(u64, Option<Loc>)>>,
}

impl Batch {
    /// A batch for about `entries` changes.
    pub(in crate::cache::disk) fn with_capacity(entries: usize) -> Batch {
        let each = entries / INDEX_SHARDS + entries / INDEX_SHARDS / 4 + 16;
        Batch {
            shards: (0..INDEX_SHARDS)
                .map(|_| Vec::with_capacity(each))
                .collect(),
        }
    }

    pub(in crate::cache::disk) fn put(&mut self, hash: u64, loc: Loc) {
        self.shards[shard_of(hash)].push((hash, Some(loc)));
    }

    pub(in crate::cache::disk) fn remove(&mut self, hash: u64) {
        self.shards[shard_of(hash)].push((hash, None));
    }
}

fn shard_of(hash: u64) -> usize {
    (hash >> 58) as usize % INDEX_SHARDS
}

impl Engine {
    pub(super) fn shard(&self, hash: u64) -> &Mutex<Shard> {
        &self.shards[shard_of(hash)]
    }

    pub(super) fn account_add(&self, loc: &Loc) {
        self.objects.fetch_add(1, Ordering::Relaxed);
        self.live_bytes.fetch_add(loc.len as u64, Ordering::Relaxed);
        self.region_live[loc.region as usize].fetch_add(loc.len as u64, Ordering::Relaxed);
    }

    pub(super) fn account_sub(&self, loc: &Loc) {
        self.objects.fetch_sub(1, Ordering::Relaxed);
        self.live_bytes.fetch_sub(loc.len as u64, Ordering::Relaxed);
        self.region_live[loc.region as usize].fetch_sub(loc.len as u64, Ordering::Relaxed);
    }

    /// Applies what recovery found, one shard at a time: each shard's table is sized once and
    /// filled while it stays in the CPU's cache, under one lock, and the counts are added once
    /// at the end (inserting entry by entry in region order took most of a restart's CPU:
    /// a random walk over every shard, with its tables doubling and rehashing on the way).
    pub(in crate::cache::disk) fn index_apply(&self, batch: Batch) {
        let mut live = vec![0i64; self.regions as usize];
        let mut objects = 0i64;
        for (shard, ops) in self.shards.iter().zip(batch.shards) {
            let mut map = lock(shard);
            map.reserve(ops.len());
            for (hash, op) in ops {
                let old = match op {
                    Some(loc) => {
                        objects += 1;
                        live[loc.region as usize] += loc.len as i64;
                        map.insert(hash, loc)
                    }
                    None => map.remove(&hash),
                };
                if let Some(old) = old {
                    objects -= 1;
                    live[old.region as usize] -= old.len as i64;
                }
            }
        }
        add_signed(&self.objects, objects);
        add_signed(&self.live_bytes, live.iter().sum());
        for (counter, delta) in self.region_live.iter().zip(live) {
            add_signed(counter, delta);
        }
    }

    /// Indexes an entry, replacing any older one for the same hash.
    pub fn index_put(&self, hash: u64, loc: Loc) {
        let old = lock(self.shard(hash)).insert(hash, loc);
        if let Some(old) = old {
            self.account_sub(&old);
        }
        self.account_add(&loc);
    }

    pub fn index_get(&self, hash: u64) -> Option<Loc> {
        lock(self.shard(hash)).get(&hash).copied()
    }

    pub fn index_remove(&self, hash: u64) -> Option<Loc> {
        let old = lock(self.shard(hash)).remove(&hash);
        if let Some(old) = &old {
            self.account_sub(old);
        }
        old
    }

    /// Removes `hash` only if it still points at `loc` (a newer copy may have replaced it).
    pub fn index_remove_exact(&self, hash: u64, loc: &Loc) -> bool {
        let mut shard = lock(self.shard(hash));
        if shard.get(&hash) == Some(loc) {
            shard.remove(&hash);
            drop(shard);
            self.account_sub(loc);
            true
        } else {
            false
        }
    }

    /// Removes `hash` if it points into incarnation `seq` of region `r` (reclaim).
    pub fn index_remove_in(&self, hash: u64, r: u32, seq: u64) {
        let mut shard = lock(self.shard(hash));
        if let Some(loc) = shard.get(&hash).copied()
            && loc.region == r
            && loc.seq == seq
        {
            shard.remove(&hash);
            drop(shard);
            self.account_sub(&loc);
        }
    }

    pub(super) fn mark_verified(&self, hash: u64, loc: &Loc) {
        if let Some(l) = lock(self.shard(hash)).get_mut(&hash)
            && l == loc
        {
            l.verified = true;
        }
    }
}
