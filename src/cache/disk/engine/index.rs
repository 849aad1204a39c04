//! The disk tier's index in memory: key hash → where the entry is ([`Loc`]), sharded, with
//! the live bytes of each region kept beside it.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use super::{Engine, INDEX_SHARDS, Loc};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Engine {
    pub(super) fn shard(&self, hash: u64) -> &Mutex<HashMap<u64, Loc>> {
        &self.shards[(hash >> 58) as usize % INDEX_SHARDS]
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
