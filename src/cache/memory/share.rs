//! Holding a site to its share of the memory tier (`[[site]] cache_share`): the site's own
//! entries are evicted, least used first, until its charge is back within its share.
//!
//! The CLOCK hand of the shard where the site's object was stored looks at the site's entries
//! only (lowering their use counts as it passes, evicting those at 0), so the other sites'
//! entries keep their counts and their place. Entries spread over the shards by their key's
//! hash, so that shard usually has some of the site's to give; when it has none left, the
//! shards after it are asked in turn, one lock at a time, until the site is within its share.
//! Each shard's walk is bounded as [`Shard::make_room`]'s is (four sweeps), and stops after
//! one sweep that found none of the site's entries.

use std::sync::atomic::Ordering;

use super::entry::Entry;
use super::{MemoryStorage, Shard};
use crate::cache::shares::SiteShares;
use crate::cache::slab::Block;

impl Shard {
    /// Evicts `site`'s entries until it is within its share or this shard has none of its
    /// entries left to evict; never `keep` (the entry just stored or looked up).
    pub(super) fn evict_for_share(
        &mut self,
        site: u16,
        shares: &SiteShares,
        keep: Option<&Entry>,
        evicted: &mut Vec<Entry>,
    ) {
        let buckets = self.table.num_buckets();
        let mut steps = 0;
        let mut found = false;
        while shares.over(site) && steps < 4 * buckets + 4 {
            if steps == buckets && !found {
                break;
            }
            steps += 1;
            let i = self.hand % buckets.max(1);
            self.hand = i + 1;
            let Some(entry) = self.table.get_bucket(i) else {
                continue;
            };
            if entry.head().site != site || keep.is_some_and(|k| Block::same(entry, k)) {
                continue;
            }
            found = true;
            let uses = &entry.head().uses;
            let n = uses.load(Ordering::Relaxed);
            if n > 0 {
                uses.store(n - 1, Ordering::Relaxed);
                continue;
            }
            if let Ok(slot) = self.table.get_bucket_entry(i) {
                let (entry, _) = slot.remove();
                self.uncharge(&entry, shares);
                shares.count_eviction(site);
                evicted.push(entry);
            }
        }
    }
}

impl MemoryStorage {
    /// After a store in shard `from` left `site` over its share: its entries in the other
    /// shards, one shard at a time, until it is within it.
    pub(super) fn hold_to_share(&self, site: u16, from: usize, evicted: &mut Vec<Entry>) {
        let n = self.shards.len();
        for k in 1..n {
            if !self.shares.over(site) {
                return;
            }
            let mut shard = self.shards[(from + k) % n].write();
            shard.evict_for_share(site, &self.shares, None, evicted);
        }
    }
}
