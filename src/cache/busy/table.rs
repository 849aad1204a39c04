//! The table of fetches in progress, by key: the first request for a key leads the fetch
//! ([`LeaderGuard`]), later ones wait on its [`BusyObject`].

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{BusyObject, State};
use crate::cache::CacheKey;
use crate::cache::shared::Ticket;

const SHARDS: usize = 64;

/// All busy objects, by key.
pub struct BusyTable {
    shards: Vec<Mutex<HashMap<CacheKey, Arc<BusyObject>>>>,
    hasher: std::collections::hash_map::RandomState,
}

/// Result of joining the busy table for a key.
pub enum Join {
    Leader(LeaderGuard),
    Waiter(Arc<BusyObject>),
}

impl Default for BusyTable {
    fn default() -> Self {
        BusyTable {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: Default::default(),
        }
    }
}

impl BusyTable {
    fn shard(&self, key: &CacheKey) -> MutexGuard<'_, HashMap<CacheKey, Arc<BusyObject>>> {
        let i = self.hasher.hash_one(key) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Becomes the leader for `key`, or a waiter on the current leader.
    ///
    /// A fetch that is over without a response to share (abandoned, or failed mid-body:
    /// [`BusyObject::is_over`]) stays in the table until its leader's guard drops, a moment
    /// after it is marked. A request joining in that moment leads a fetch of its own: as a
    /// waiter it would be told to look up again, find the same object, and after
    /// `MAX_LOOKUPS` such turns (no await between them) answer 503 `too-many-lookups`. The old
    /// leader's guard then leaves the new fetch in place (`remove` compares the object).
    pub fn join(self: &Arc<Self>, key: &CacheKey) -> Join {
        let mut shard = self.shard(key);
        if let Some(existing) = shard.get(key)
            && !existing.is_over()
        {
            return Join::Waiter(existing.clone());
        }
        let object = BusyObject::new();
        shard.insert(key.clone(), object.clone());
        Join::Leader(LeaderGuard {
            table: self.clone(),
            key: key.clone(),
            object,
            released: false,
            ticket: None,
        })
    }

    /// Marks the fetch of `key` in progress, if any, as purged (see [`BusyObject::is_purged`])
    /// and takes it out of the table: requests after the purge start a fetch of their own
    /// instead of following one that started before it.
    pub fn mark_purged(&self, key: &CacheKey) {
        let removed = self.shard(key).remove(key);
        if let Some(object) = removed {
            object
                .purged
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// The fetch of `key` in progress that a request may still wait for, if any (one over
    /// without a response to share is not: see [`join`](Self::join)).
    pub fn in_progress(&self, key: &CacheKey) -> Option<Arc<BusyObject>> {
        self.shard(key).get(key).filter(|o| !o.is_over()).cloned()
    }

    /// Whether a fetch of `key` is in progress.
    pub fn contains(&self, key: &CacheKey) -> bool {
        self.shard(key).contains_key(key)
    }

    /// Fetches in progress.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map(|m| m.len()).unwrap_or(0))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn remove(&self, key: &CacheKey, object: &Arc<BusyObject>) {
        let mut shard = self.shard(key);
        if shard.get(key).is_some_and(|o| Arc::ptr_eq(o, object)) {
            shard.remove(key);
        }
    }
}

/// The leader's handle. Dropping it removes the key from the busy table and, if the fetch did
/// not finish, fails the object so no waiter hangs.
pub struct LeaderGuard {
    table: Arc<BusyTable>,
    key: CacheKey,
    object: Arc<BusyObject>,
    released: bool,
    /// The fleet lease on this fetch (`[storage.shared]`), released when the fetch ends.
    ticket: Option<Ticket>,
}

impl LeaderGuard {
    pub fn object(&self) -> &Arc<BusyObject> {
        &self.object
    }

    /// Holds the fleet lease for this fetch.
    pub fn set_ticket(&mut self, ticket: Option<Ticket>) {
        self.ticket = ticket;
    }

    /// The fleet lease, for the write that releases it (or to mark the URL uncacheable).
    pub fn take_ticket(&mut self) -> Option<Ticket> {
        self.ticket.take()
    }

    /// Stops new requests from joining (the object was stored, abandoned or is trimming).
    pub fn release(&mut self) {
        if !self.released {
            self.released = true;
            self.table.remove(&self.key, &self.object);
        }
    }
}

impl Drop for LeaderGuard {
    fn drop(&mut self) {
        self.release();
        let state = self.object.lock().state;
        match state {
            // The leader went away before a response (its client disconnected): waiters retry.
            State::Pending => self.object.abandon(),
            State::Streaming => self.object.fail(),
            _ => {}
        }
    }
}
