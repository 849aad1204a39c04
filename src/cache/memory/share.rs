//! Holding a site to its share of the memory tier (`[[site]] cache_share`): the site's own
//! entries are evicted, least used first, until its charge is back within its share.
//!
//! Each shard's CLOCK hand looks at the site's entries only (lowering their use counts as it
//! passes, evicting those at 0), so the other sites' entries keep their counts and their
//! place. The shard where the site's object was stored is swept first (one sweep at most,
//! under the lock the store holds: entries spread over the shards by their key's hash, so it
//! usually has one of the site's to give); when the site is still over, every shard is swept
//! in turn, one lock at a time, round after round (at most four, as [`Shard::make_room`]'s
//! bound), so that an entry hit often is not evicted only because its shard holds few of the
//! site's entries.

use super::entry::Entry;
use super::{MemoryStorage, Shard};
use crate::cache::shares::SiteShares;
use crate::cache::slab::Block;

impl Shard {
    /// One sweep of the hand over this shard's buckets at most, stopping as soon as `site` is
    /// within its share: `site`'s entries used since the hand last passed have their count
    /// lowered, those at 0 are evicted; never `keep` (the entry just stored or looked up).
    /// Whether the sweep met any of `site`'s entries it could evict (now or later).
    pub(super) fn evict_for_share(
        &mut self,
        site: u16,
        shares: &SiteShares,
        keep: Option<&Entry>,
        evicted: &mut Vec<Entry>,
    ) -> bool {
        let buckets = self.table.num_buckets();
        let mut found = false;
        for _ in 0..buckets {
            if !shares.over(site) {
                break;
            }
            let i = self.hand % buckets;
            self.hand = i + 1;
            let Some(entry) = self.table.get_bucket(i) else {
                continue;
            };
            if entry.head().site != site || keep.is_some_and(|k| Block::same(entry, k)) {
                continue;
            }
            found = true;
            if let Some(entry) = self.age_or_evict(i, shares) {
                shares.count_eviction(site);
                evicted.push(entry);
            }
        }
        found
    }
}

impl MemoryStorage {
    /// After a store in shard `from` (whose lock is released) left `site` over its share:
    /// sweeps of the site's entries in the shards after it, one lock at a time and `from` last,
    /// round after round (a count of 3 needs four sweeps to reach 0), until the site is within
    /// its share or a round met none of its entries. Spreading the sweeps over every shard
    /// keeps eviction close to one CLOCK over all the site's entries: an entry hit often
    /// outlives one never hit whichever shard either is in. `keep`: the entry just stored.
    pub(super) fn hold_to_share(
        &self,
        site: u16,
        from: usize,
        keep: Option<&Entry>,
        evicted: &mut Vec<Entry>,
    ) {
        let n = self.shards.len();
        for _round in 0..4 {
            let mut found = false;
            for k in 1..=n {
                if !self.shares.over(site) {
                    return;
                }
                let mut shard = self.shards[(from + k) % n].write();
                found |= shard.evict_for_share(site, &self.shares, keep, evicted);
            }
            if !found {
                return;
            }
        }
    }
}
