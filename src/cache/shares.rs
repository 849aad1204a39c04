//! Per-site shares of the memory tier (`[[site]] cache_share`, docs/sites.md): the bytes each
//! site's objects are charged there, the bound a site with a share is held to, and the objects
//! evicted to hold it.
//!
//! A site's account is a small number ([`CacheKey::site`](super::CacheKey::site), set when the
//! request's site is known, `0` for none) that its objects carry in the memory tier's entry
//! head. The memory tier charges and uncharges an account wherever it charges a shard (an
//! insert, an eviction, a removal, the first lookup that builds a compact entry's object), and
//! when an insert takes a site over its share it evicts that site's own objects, least used
//! first, before anything else: a site at its share pushes out its own objects, never the other
//! sites'. A hit changes nothing here.
//!
//! Accounts are indexes into fixed arrays (no lock, no map on any path); the proxy gives each
//! site name seen since start its own ([`ACCOUNTS`] in all), so an account outlives a reload
//! that changes its site, and the objects it holds stay charged to it.

use std::sync::atomic::{AtomicU64, Ordering};

/// Accounts per memory tier, `0` (no site) included: the site names a process can tell apart
/// since it started. A site first named after the last one has no account (its objects count
/// in `0`, and it has no share); `shellac check` refuses more sites than
/// [`crate::config::site_share::MAX_SITES`] in one file.
pub const ACCOUNTS: usize = crate::config::site_share::MAX_SITES + 1;

/// No share: the account is bounded by the tier alone.
const NONE: u64 = u64::MAX;

/// Every account's bytes, share and evictions for its share.
pub struct SiteShares {
    bytes: Box<[AtomicU64]>,
    limit: Box<[AtomicU64]>,
    evicted: Box<[AtomicU64]>,
}

impl Default for SiteShares {
    fn default() -> SiteShares {
        let zeros = || (0..ACCOUNTS).map(|_| AtomicU64::new(0)).collect();
        SiteShares {
            bytes: zeros(),
            limit: (0..ACCOUNTS).map(|_| AtomicU64::new(NONE)).collect(),
            evicted: zeros(),
        }
    }
}

impl SiteShares {
    /// Charges `site` `n` bytes.
    pub(super) fn add(&self, site: u16, n: u64) {
        if let Some(b) = self.bytes.get(usize::from(site)) {
            b.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Takes `n` bytes off `site`'s charge.
    pub(super) fn sub(&self, site: u16, n: u64) {
        if let Some(b) = self.bytes.get(usize::from(site)) {
            let _ = b.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(n))
            });
        }
    }

    /// Counts an object of `site` evicted to hold it to its share.
    pub(super) fn count_eviction(&self, site: u16) {
        if let Some(e) = self.evicted.get(usize::from(site)) {
            e.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `site`'s share in bytes, if it has one.
    pub fn limit(&self, site: u16) -> Option<u64> {
        let limit = self.limit.get(usize::from(site))?.load(Ordering::Relaxed);
        (limit != NONE).then_some(limit)
    }

    /// Whether `site` holds more than its share.
    pub(super) fn over(&self, site: u16) -> bool {
        self.limit(site)
            .is_some_and(|limit| self.bytes(site) > limit)
    }

    /// Bytes the objects of `site` are charged in the memory tier.
    pub fn bytes(&self, site: u16) -> u64 {
        self.bytes
            .get(usize::from(site))
            .map_or(0, |b| b.load(Ordering::Relaxed))
    }

    /// Objects of `site` evicted to hold it to its share, since start.
    pub fn evictions(&self, site: u16) -> u64 {
        self.evicted
            .get(usize::from(site))
            .map_or(0, |e| e.load(Ordering::Relaxed))
    }

    /// The shares of a configuration: (account, bytes) for each site that has one; every
    /// other account has none from now on. A site over its new share is held to it as its
    /// next objects are stored.
    pub fn set_limits(&self, shares: &[(u16, u64)]) {
        for limit in self.limit.iter() {
            limit.store(NONE, Ordering::Relaxed);
        }
        for (site, bytes) in shares {
            if let Some(limit) = self.limit.get(usize::from(*site)) {
                limit.store(*bytes, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_over_its_share_only_past_it() {
        let shares = SiteShares::default();
        shares.add(3, 100);
        assert!(!shares.over(3), "no share: never over");
        shares.set_limits(&[(3, 100)]);
        assert_eq!(shares.limit(3), Some(100));
        assert!(!shares.over(3));
        shares.add(3, 1);
        assert!(shares.over(3));
        shares.sub(3, 500);
        assert_eq!(shares.bytes(3), 0, "saturates");
        shares.set_limits(&[]);
        assert_eq!(shares.limit(3), None);
        // Accounts past the last are ignored, not a panic.
        shares.add(u16::MAX, 1);
        assert_eq!(shares.bytes(u16::MAX), 0);
    }
}
