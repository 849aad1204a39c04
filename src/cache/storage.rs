//! The storage trait every tier implements ("stevedore"), and what it returns.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use http::HeaderName;

use super::ban;
use super::key::{CacheKey, KeyRef};
use super::object::Object;

/// Size and occupancy of a storage tier.
#[derive(Clone, Copy, Debug, Default)]
pub struct StorageStats {
    pub objects: u64,
    pub bytes: u64,
    pub capacity: u64,
}

/// A future returned by [`Storage::lookup_io`].
pub type LookupFuture<'a> = Pin<Box<dyn Future<Output = Option<Arc<Object>>> + Send + 'a>>;

/// [`Cache::lookup_now`]: the tiers without I/O have no copy; a tier with I/O must be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeedsIo;

/// A future returned by [`Storage::persist_ban`].
pub type BanFuture = Pin<Box<dyn Future<Output = Result<(), ban::BanError>> + Send>>;
/// A future returned by [`Storage::inspect`]: the copy in each tier holding a key, top first.
pub type InspectFuture<'a> =
    Pin<Box<dyn Future<Output = Vec<(&'static str, Arc<Object>)>> + Send + 'a>>;

/// A storage tier ("stevedore"). The pipeline only sees this trait (through [`Cache::lookup_now`] and [`Cache::lookup_io`]),
/// so tiers can be added without touching it.
pub trait Storage: Send + Sync + 'static {
    /// Short name for logs and `Cache-Status` detail, e.g. `memory`.
    fn name(&self) -> &'static str;
    /// The object stored under `key` that can be had without I/O, fresh or not.
    fn lookup(&self, key: &CacheKey) -> Option<Arc<Object>>;
    /// As [`Storage::lookup`], with a borrowed key ([`KeyRef`]). Default: through an owned
    /// key; the memory tier looks it up as it is (a fast hit allocates no key).
    fn lookup_ref(&self, key: KeyRef<'_>) -> Option<Arc<Object>> {
        self.lookup(&key.to_key())
    }
    /// True if a tier needs I/O ([`Storage::lookup_io`]) to look a key up. Default: false.
    fn has_io(&self) -> bool {
        false
    }
    /// After `lookup` found nothing: the object from tiers that need I/O (disk). Such tiers
    /// return only objects not yet expired. Default: nothing.
    fn lookup_io<'a>(&'a self, _key: &'a CacheKey) -> LookupFuture<'a> {
        Box::pin(std::future::ready(None))
    }
    /// The copy of `key` in each tier holding it, top tier first, for the admin API. Unlike
    /// a lookup it changes nothing: no recency, no hit mark, no promotion, no counter.
    fn inspect<'a>(&'a self, key: &'a CacheKey) -> InspectFuture<'a>;
    /// Stores `object` under `key`, replacing any previous one; may evict others.
    fn insert(&self, key: CacheKey, object: Arc<Object>);
    /// Removes `key`; true if something was removed.
    fn remove(&self, key: &CacheKey) -> bool;
    fn stats(&self) -> StorageStats;
    /// The memory tier's per-site accounts (`cache/shares.rs`). Default: none (a tier that
    /// keeps no accounts).
    fn site_shares(&self) -> Option<&super::shares::SiteShares> {
        None
    }
    /// Occupancy of each tier below this one, by name (e.g. `disk`). Default: none.
    fn lower_tiers(&self) -> Vec<(&'static str, StorageStats)> {
        Vec::new()
    }
    /// Clean shutdown: persist what is pending (blocking). Default: nothing to do.
    fn close(&self) {}
    /// Calls `f` for every object the tier holds in memory (for the ban sweeper; runs in the
    /// background). Returns true if that was every object of the tier, false if some (e.g. on
    /// disk) were not visited. Default: visits nothing.
    fn scan(&self, _f: &mut dyn FnMut(&CacheKey, &Arc<Object>)) -> bool {
        false
    }
    /// Makes a ban just added to the list durable; resolves once it is (tiers that keep
    /// nothing across a restart: at once).
    fn persist_ban(&self, _ban: Arc<ban::Ban>) -> BanFuture {
        Box::pin(std::future::ready(Ok(())))
    }
    /// After a [`Storage::scan`] that started at `before` but did not visit every object:
    /// retires the bans the tiers it did not visit no longer need (one on the request's
    /// fields only if older than `oldest_in_memory`, the oldest object the scan saw).
    /// Blocking. Default: none.
    fn retire_bans(&self, _before: Instant, _oldest_in_memory: Instant) -> usize {
        0
    }
    /// What persistent storage found at start-up for the cache's own indexes; handed over
    /// once. Default: nothing.
    fn recovered_index(&self) -> RecoveredIndex {
        RecoveredIndex::default()
    }
}

/// Index entries read back from persistent storage at start-up.
#[derive(Debug, Default)]
pub struct RecoveredIndex {
    /// Variant keys with the `Vary` names of each, oldest first.
    pub variants: Vec<(CacheKey, Vec<HeaderName>)>,
    /// URLs (primary keys) with the surrogate keys of their stored objects.
    pub tagged: Vec<(CacheKey, Vec<String>)>,
}
