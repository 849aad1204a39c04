//! Per-site shares of the memory tier (`[[site]] cache_share`, docs/sites.md) and named
//! storages (`[[storage.named]]`, `stores.rs`): the bytes each account's objects are charged
//! there, the bound an account with a share or a size is held to, and the objects evicted to
//! hold it.
//!
//! Accounts `0..SITE_ACCOUNTS` are sites'; the [`MAX_STORES`] after them are storages'
//! ([`store_account`]), `Transient` and the named ones (`s0`, id 0, has none: its objects are
//! charged to their site).
//!
//! A site's account is a small number ([`CacheKey::site`](super::CacheKey::site), set when the
//! request's site is known, `0` for none) that its objects carry in the memory tier's entry
//! head. The memory tier charges and uncharges an account wherever it charges a shard (an
//! insert, an eviction, a removal, the first lookup that builds a compact entry's object), and
//! when an insert takes a site over its share it evicts that site's own objects, least used
//! first, before anything else: a site at its share pushes out its own objects, never the other
//! sites'. A hit changes nothing here.
//!
//! A fill under way is charged to its account as it runs (`proxy/fill.rs`'s `FillCharge`:
//! its head, then each chunk of its body), as Varnish allocates an object's storage during its fetch: a
//! storage's figures (`/storages`, VCL's `storage.NAME.used_space`) count it. It is reported
//! only: the bound an account is held to, and the evictions that hold it, count the objects
//! stored (an insert makes room), so the memory tier's limits are what they were.
//!
//! Accounts are indexes into fixed arrays (no lock, no map on any path); the proxy gives each
//! site name seen since start its own ([`ACCOUNTS`] in all), so an account outlives a reload
//! that changes its site, and the objects it holds stay charged to it.

use std::sync::atomic::{AtomicU64, Ordering};

use super::stores::{MAX_STORES, S0, StoreNames};

/// Site accounts per memory tier, `0` (no site) included: the site names a process can tell
/// apart since it started. A site first named after the last one has no account (its objects
/// count in `0`, and it has no share); `shellac check` refuses more sites than
/// [`crate::config::site_share::MAX_SITES`] in one file.
pub const SITE_ACCOUNTS: usize = crate::config::site_share::MAX_SITES + 1;

/// Accounts per memory tier: the sites', then one per storage id.
pub const ACCOUNTS: usize = SITE_ACCOUNTS + MAX_STORES;

/// The account of storage `id` (`None` for `s0`, whose objects are charged to their site).
pub fn store_account(id: u8) -> Option<u16> {
    (id != S0 && usize::from(id) < MAX_STORES).then(|| (SITE_ACCOUNTS + usize::from(id)) as u16)
}

/// The storage id of `account` (`s0` for a site's).
pub fn store_of_account(account: u16) -> u8 {
    usize::from(account)
        .checked_sub(SITE_ACCOUNTS)
        .filter(|id| *id < MAX_STORES)
        .map_or(S0, |id| id as u8)
}

/// What a named storage reports (`/stats` `storages`, VCL's `storage.NAME.*`, Varnish's
/// `SMA.NAME.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreFigures {
    pub name: String,
    /// Bytes its objects are charged in the memory tier, and its fills under way.
    pub bytes: u64,
    /// Its size (`None`: bounded by the memory tier alone).
    pub size: Option<u64>,
    /// Objects it holds now.
    pub objects: u64,
    /// Objects stored in it since start.
    pub stored: u64,
    /// Objects evicted to hold it to its size, since start.
    pub evicted: u64,
}

/// No share: the account is bounded by the tier alone.
const NONE: u64 = u64::MAX;

/// Every account's bytes, share and evictions for its share; the storages' names and what
/// they hold.
pub struct SiteShares {
    bytes: Box<[AtomicU64]>,
    /// Bytes of the fills under way ([`SiteShares::fill_add`]).
    filling: Box<[AtomicU64]>,
    limit: Box<[AtomicU64]>,
    evicted: Box<[AtomicU64]>,
    /// Objects held, and stored since start (counted for storage accounts only).
    objects: Box<[AtomicU64]>,
    stored: Box<[AtomicU64]>,
    /// The storages' names by id.
    pub names: StoreNames,
}

impl Default for SiteShares {
    fn default() -> SiteShares {
        let zeros = |n| (0..n).map(|_| AtomicU64::new(0)).collect();
        SiteShares {
            bytes: zeros(ACCOUNTS),
            filling: zeros(ACCOUNTS),
            limit: (0..ACCOUNTS).map(|_| AtomicU64::new(NONE)).collect(),
            evicted: zeros(ACCOUNTS),
            objects: zeros(MAX_STORES),
            stored: zeros(MAX_STORES),
            names: StoreNames::default(),
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

    /// Bytes of `account`'s fills under way.
    pub fn filling(&self, account: u16) -> u64 {
        self.filling
            .get(usize::from(account))
            .map_or(0, |b| b.load(Ordering::Relaxed))
    }

    /// Bytes of every fill under way.
    pub fn filling_total(&self) -> u64 {
        self.filling.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Charges a fill under way of `account` `n` more bytes (reported in its figures only).
    pub fn fill_add(&self, account: u16, n: u64) {
        if let Some(b) = self.filling.get(usize::from(account)) {
            b.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Takes `n` bytes of a fill of `account` off (the fill ended).
    pub fn fill_sub(&self, account: u16, n: u64) {
        if let Some(b) = self.filling.get(usize::from(account)) {
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
    /// other site account has none from now on. A site over its new share is held to it as
    /// its next objects are stored.
    pub fn set_limits(&self, shares: &[(u16, u64)]) {
        for limit in self.limit.iter().take(SITE_ACCOUNTS) {
            limit.store(NONE, Ordering::Relaxed);
        }
        for (site, bytes) in shares {
            if let Some(limit) = self
                .limit
                .get(usize::from(*site))
                .filter(|_| usize::from(*site) < SITE_ACCOUNTS)
            {
                limit.store(*bytes, Ordering::Relaxed);
            }
        }
    }

    /// The named storages of a configuration, (name, size): each gets its id (kept from an
    /// earlier configuration that named it) and its size; every other storage is unbounded
    /// from now on (`Transient` when not declared). A storage over its new size is held to it
    /// as its next objects are stored.
    pub fn set_stores(&self, stores: &[(String, Option<u64>)]) {
        for id in 0..MAX_STORES as u8 {
            if let Some(a) = store_account(id) {
                self.limit[usize::from(a)].store(NONE, Ordering::Relaxed);
            }
        }
        for (name, size) in stores {
            let account = self.names.register(name).and_then(store_account);
            if let (Some(a), Some(size)) = (account, size) {
                self.limit[usize::from(a)].store(*size, Ordering::Relaxed);
            }
        }
    }

    /// Counts an object stored in storage `account` (no count for a site's).
    pub(super) fn count_stored(&self, account: u16) {
        let id = usize::from(store_of_account(account));
        if id != usize::from(S0) {
            self.stored[id].fetch_add(1, Ordering::Relaxed);
            self.objects[id].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts an object of storage `account` gone (evicted, removed, replaced).
    pub(super) fn count_gone(&self, account: u16) {
        let id = usize::from(store_of_account(account));
        if id != usize::from(S0) {
            let _ = self.objects[id].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(1))
            });
        }
    }

    /// The figures of every storage but `s0`, by id: `Transient` and every name seen since
    /// start (one a reload removed stays, unbounded, until its objects are gone).
    pub fn stores(&self) -> Vec<StoreFigures> {
        (1..self.names.len().min(MAX_STORES))
            .filter_map(|id| self.store(id as u8))
            .collect()
    }

    /// The figures of storage `id` (`None` for `s0`, whose figures are the memory tier's).
    pub fn store(&self, id: u8) -> Option<StoreFigures> {
        let account = store_account(id)?;
        let i = usize::from(id);
        Some(StoreFigures {
            name: self.names.name(id),
            bytes: self.bytes(account) + self.filling(account),
            size: self.limit(account),
            objects: self.objects[i].load(Ordering::Relaxed),
            stored: self.stored[i].load(Ordering::Relaxed),
            evicted: self.evictions(account),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fill's charge counts in its account's figures (a storage's `bytes`) while it runs
    /// and is gone when taken off; the account's stored bytes, which its bound and the
    /// evictions count, never include it.
    #[test]
    fn a_fill_is_charged_while_it_runs() {
        let shares = SiteShares::default();
        let transient = store_account(crate::cache::stores::TRANSIENT).expect("account");
        shares.fill_add(transient, 100);
        shares.fill_add(transient, 1000);
        shares.fill_add(0, 7);
        assert_eq!(shares.filling(transient), 1100);
        assert_eq!(shares.filling_total(), 1107);
        let figures = shares
            .store(crate::cache::stores::TRANSIENT)
            .expect("figures");
        assert_eq!(figures.bytes, 1100);
        assert_eq!(
            shares.bytes(transient),
            0,
            "not stored: not charged as an object"
        );
        shares.set_stores(&[("Transient".into(), Some(10))]);
        assert!(
            !shares.over(transient),
            "a fill does not take it over its size"
        );
        shares.fill_sub(transient, 1100);
        assert_eq!(shares.filling(transient), 0);
        shares.fill_sub(0, 70);
        assert_eq!(shares.filling_total(), 0, "saturates");
        // Accounts past the last are ignored, not a panic.
        shares.fill_add(u16::MAX, 1);
        assert_eq!(shares.filling(u16::MAX), 0);
    }

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

    #[test]
    fn a_storage_has_an_account_of_its_own_and_keeps_it_across_configurations() {
        let shares = SiteShares::default();
        assert_eq!(store_account(S0), None);
        let transient = store_account(crate::cache::stores::TRANSIENT).expect("account");
        assert_eq!(usize::from(transient), SITE_ACCOUNTS + 1);
        assert_eq!(store_of_account(transient), crate::cache::stores::TRANSIENT);
        assert_eq!(store_of_account(3), S0, "a site's account is s0's");
        shares.set_stores(&[("images".into(), Some(1000))]);
        let images = shares.names.id("images").expect("registered");
        let a = store_account(images).expect("account");
        assert!(!shares.over(a));
        shares.add(a, 1001);
        shares.count_stored(a);
        assert!(shares.over(a));
        // A site's share leaves the storages' sizes alone, and the other way round.
        shares.set_limits(&[(3, 10)]);
        assert_eq!(shares.limit(a), Some(1000));
        shares.set_stores(&[("video".into(), None), ("images".into(), Some(5000))]);
        assert_eq!(shares.limit(3), Some(10));
        assert_eq!(shares.names.id("images"), Some(images), "kept its id");
        let f = shares.store(images).expect("figures");
        assert_eq!(
            (f.name.as_str(), f.bytes, f.size, f.objects, f.stored),
            ("images", 1001, Some(5000), 1, 1)
        );
        shares.count_gone(a);
        shares.count_gone(a);
        assert_eq!(
            shares.store(images).map(|f| f.objects),
            Some(0),
            "saturates"
        );
        let t = shares
            .store(crate::cache::stores::TRANSIENT)
            .expect("figures");
        assert_eq!((t.name.as_str(), t.size), ("Transient", None));
        assert_eq!(shares.store(S0), None);
    }
}
