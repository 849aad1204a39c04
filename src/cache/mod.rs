//! The cache: keys, stored objects, the storage trait and its tiers, and request coalescing.
//!
//! Architecture invariant: `cache/` knows nothing of client or backend connections; it deals in
//! keys, objects and body chunks.

pub mod armor;
pub mod ban;
mod ban_expr;
pub mod body;
pub mod busy;
pub mod disk;
mod disk_body;
pub mod fields;
pub mod identity;
pub mod inspect;
mod key;
pub mod memory;
mod object;
pub mod pages;
pub mod partial;
pub mod policy;
mod prefetch;
mod prepared;
pub mod representation;
pub mod shared;
pub mod shares;
pub mod slab;
pub mod slices;
mod span;
pub mod status_line;
mod storage;
pub mod stores;
pub mod tags;
pub mod tiered;
mod variants;
pub mod vary;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName};

pub use body::MemoryChunks;
pub use fields::StoredFields;
pub use key::{CacheKey, KeyRef, KeyText};
#[cfg(test)]
pub use object::test_object;
pub use object::{
    Body, OBJECT_OVERHEAD, Object, TierState, VarySelection, boxed_vary, vary_matches,
};
pub use prefetch::Prefetch;
pub use prepared::Prepared;
pub use span::{MaybeSpan, Span};
pub use storage::{
    BanFuture, InspectFuture, LookupFuture, NeedsIo, RecoveredIndex, Storage, StorageStats,
};

/// The cache as the request path sees it: a storage tier, the hit-for-miss memory and the
/// table of fetches in progress.
pub struct Cache {
    pub storage: Arc<dyn Storage>,
    pub busy: Arc<busy::BusyTable>,
    /// Until when each URL is remembered as uncacheable, and whether as hit-for-pass.
    hit_for_miss: quick_cache::sync::Cache<CacheKey, (Instant, bool)>,
    /// Primary key → the URL's Vary field names and stored variants.
    vary_index: quick_cache::sync::Cache<CacheKey, Arc<vary::VaryIndex>>,
    /// Set (before its first entry) once the index has held anything: until then a lookup
    /// skips it. A site without `Vary` never pays the index's hashed lookup per hit (~160
    /// instructions; bench/RESULTS.md).
    vary_seen: std::sync::atomic::AtomicBool,
    max_variants: usize,
    /// Active bans, checked at lookup (shared with a disk tier, which persists them).
    pub bans: Arc<ban::BanList>,
    /// Surrogate key → URLs.
    pub tags: tags::TagIndex,
    /// Partial content (206 pieces) per URL, beside the tiers (`partial.rs`).
    pub partial: partial::Partials,
    /// URLs cached in slices (`slices.rs`, `cache.slice`); the slices are in the tiers.
    pub slices: slices::SliceIndex,
    /// The fleet's shared tier (`[storage.shared]`), asked by a key's local leader after the
    /// local tiers missed; None without it (then nothing on any path touches it).
    pub shared: Option<Arc<shared::SharedTier>>,
}

/// What the partial content store holds at most unless told otherwise
/// ([`Cache::with_partial_capacity`]).
pub const DEFAULT_PARTIAL_CAPACITY: u64 = 64 << 20;

/// Hit-for-miss entries remembered at most (each is one key; oldest are evicted first).
pub const HIT_FOR_MISS_CAPACITY: usize = 65_536;

/// URLs with `Vary` whose variant list is remembered at most. A URL that falls out of this
/// index is looked up without its variant until its next response re-registers it (a miss,
/// never a wrong variant: objects carry their exact Vary selection).
pub const VARY_INDEX_CAPACITY: usize = 262_144;

impl Cache {
    /// The cache over `storage`; the variant lists of URLs and the tag index are rebuilt at
    /// once from what persistent storage found (see [`Cache::restore_variants`]).
    pub fn new(storage: Arc<dyn Storage>, max_variants: usize) -> Cache {
        let cache = Cache {
            storage,
            busy: Arc::new(busy::BusyTable::default()),
            hit_for_miss: quick_cache::sync::Cache::new(HIT_FOR_MISS_CAPACITY),
            vary_index: quick_cache::sync::Cache::new(VARY_INDEX_CAPACITY),
            vary_seen: std::sync::atomic::AtomicBool::new(false),
            max_variants,
            bans: Arc::new(ban::BanList::new(
                crate::config::invalidation::DEFAULT_MAX_BANS,
            )),
            tags: tags::TagIndex::default(),
            partial: partial::Partials::new(DEFAULT_PARTIAL_CAPACITY),
            slices: slices::SliceIndex::default(),
            shared: None,
        };
        let found = cache.storage.recovered_index();
        cache.restore_variants(found.variants);
        for (primary, tags) in &found.tagged {
            cache.tags.add(primary, tags);
        }
        cache
    }

    /// Holds at most `bytes` of partial content (206 pieces).
    pub fn with_partial_capacity(mut self, bytes: u64) -> Cache {
        self.partial = partial::Partials::new(bytes);
        self
    }

    /// Asks `shared` after the local tiers (`[storage.shared]`).
    pub fn with_shared(mut self, shared: Option<Arc<shared::SharedTier>>) -> Cache {
        self.shared = shared;
        self
    }

    /// Stores an object read from the shared tier in the local tiers (variant list and tags
    /// as a fetched one's), without writing it back. Returns the key it was stored under.
    pub fn store_from_shared(&self, primary: &CacheKey, object: Arc<Object>) -> CacheKey {
        self.store(primary, object)
    }

    /// Learns that `primary` varies on `names` (from the shared tier's variant index), so the
    /// next lookup computes the request's variant.
    pub fn learn_vary(&self, primary: &CacheKey, names: Vec<HeaderName>) {
        if self.vary_names(primary).is_some_and(|i| i.names == names) {
            return;
        }
        self.vary_seen.store(true, Ordering::Release);
        self.vary_index.insert(
            primary.clone(),
            Arc::new(vary::VaryIndex {
                names,
                variants: Vec::new(),
            }),
        );
    }

    /// Uses `bans` (shared with the storage that persists them) as the ban list.
    pub fn with_bans(mut self, bans: Arc<ban::BanList>) -> Cache {
        self.bans = bans;
        self
    }

    /// Adds a ban and waits until the storage has made it durable. Errors: the expression is
    /// invalid, the list is full, or the ban could not be persisted (`NotDurable`: applied
    /// anyway; `PersistFull`: not applied).
    pub async fn ban(&self, expr: &str) -> Result<Arc<ban::Ban>, ban::BanError> {
        let ban = self.bans.add(expr)?;
        self.storage.persist_ban(ban.clone()).await?;
        Ok(ban)
    }

    /// Adds a ban from the request path (VCL's `ban()`): applied at once; persisting it to the
    /// disk tier runs in the background, so no request waits for it (a ban VCL adds is as
    /// durable as the admin API's once that task is done).
    pub fn add_ban(&self, expr: &str) -> Result<Arc<ban::Ban>, ban::BanError> {
        let ban = self.bans.add(expr)?;
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (storage, b) = (self.storage.clone(), ban.clone());
            rt.spawn(async move {
                if let Err(e) = storage.persist_ban(b).await {
                    tracing::warn!(error = %e, "a ban added by VCL was not persisted");
                }
            });
        }
        Ok(ban)
    }

    /// The object stored under `key` in the tiers that need no I/O (memory); `Err(NeedsIo)`
    /// when they have none and a tier below (disk) must be asked with [`Cache::lookup_io`].
    /// Lets a request be answered from memory without becoming a future (`proxy::fsm`).
    pub fn lookup_now(&self, key: &CacheKey) -> Result<Option<Arc<Object>>, NeedsIo> {
        match self.storage.lookup(key) {
            Some(object) => Ok(Some(object)),
            None if self.storage.has_io() => Err(NeedsIo),
            None => Ok(None),
        }
    }

    /// As [`Cache::lookup_now`], with a borrowed key (a fast hit: no key allocated).
    pub fn lookup_now_ref(&self, key: KeyRef<'_>) -> Result<Option<Arc<Object>>, NeedsIo> {
        match self.storage.lookup_ref(key) {
            Some(object) => Ok(Some(object)),
            None if self.storage.has_io() => Err(NeedsIo),
            None => Ok(None),
        }
    }

    /// After [`Cache::lookup_now`] said `NeedsIo`: the object from the tiers that need I/O.
    pub async fn lookup_io(&self, key: &CacheKey) -> Option<Arc<Object>> {
        self.storage.lookup_io(key).await
    }

    /// True while `key` is remembered as uncacheable.
    pub fn is_hit_for_miss(&self, key: &CacheKey, now: Instant) -> bool {
        match self.hit_for_miss.get(key) {
            Some((until, _)) if until > now => true,
            Some(_) => {
                self.hit_for_miss.remove(key);
                false
            }
            None => false,
        }
    }

    /// Drops `object` found under `key` if a ban newer than it matches, evaluated for the
    /// request looking it up (`req`; `None`: [`ban::BanCheck::NeedsRequest`] when a ban on
    /// the request's fields may apply).
    pub fn check_bans(
        &self,
        key: &CacheKey,
        object: &Object,
        req: Option<&HeaderMap>,
    ) -> ban::BanCheck {
        let verdict = self.bans.check(key, object, req);
        if verdict == ban::BanCheck::Banned {
            self.storage.remove(key);
        }
        verdict
    }

    /// As [`Cache::check_bans`], with a borrowed key: an owned one is made only while there
    /// are bans to check (a fast hit).
    pub fn check_bans_ref(
        &self,
        key: KeyRef<'_>,
        object: &Object,
        req: Option<&HeaderMap>,
    ) -> ban::BanCheck {
        if self.bans.is_empty() {
            return ban::BanCheck::Clear;
        }
        self.check_bans(&key.to_key(), object, req)
    }

    /// Removes every object of every URL tagged with one of `tags`. Returns objects removed.
    pub fn purge_tags(&self, tags: &[String]) -> usize {
        tags.iter()
            .flat_map(|t| self.tags.take(t))
            .map(|url| self.purge(&url))
            .sum()
    }

    /// vmod_xkey's `softpurge()`: every variant of every URL tagged with one of `tags` that
    /// is still fresh becomes stale now, its grace and keep as they were (objects whose body
    /// is on disk are removed instead); those already stale are left and not counted.
    /// Returns the objects affected.
    pub fn soft_purge_tags(&self, tags: &[String]) -> usize {
        let mut seen = std::collections::HashSet::new();
        tags.iter()
            .flat_map(|t| self.tags.urls(t))
            .filter(|url| seen.insert(url.clone()))
            .map(|url| self.rearm_where(&url, Duration::ZERO, None, None, true))
            .sum()
    }

    /// Marks every variant of a URL stale now (kept for grace and keep, revalidated on next
    /// use). Objects whose body is on disk are removed instead. Returns objects affected.
    pub fn soft_purge(&self, primary: &CacheKey) -> usize {
        self.rearm(primary, Duration::ZERO, None, None)
    }

    /// VCL's `purge.soft(ttl, grace, keep)`: every variant of a URL fresh for at most `ttl`
    /// more, its grace and keep cut to those given (never lengthened). Objects whose body is on disk are
    /// removed instead. Returns objects affected.
    pub fn rearm(
        &self,
        primary: &CacheKey,
        ttl: Duration,
        grace: Option<Duration>,
        keep: Option<Duration>,
    ) -> usize {
        self.rearm_where(primary, ttl, grace, keep, false)
    }

    /// [`Cache::rearm`], of only the variants still fresh when `only_fresh`.
    fn rearm_where(
        &self,
        primary: &CacheKey,
        ttl: Duration,
        grace: Option<Duration>,
        keep: Option<Duration>,
        only_fresh: bool,
    ) -> usize {
        // Pieces of a representation cannot be revalidated as one: they go.
        self.partial.remove(primary);
        let mut keys = vec![primary.clone()];
        if let Some(index) = self.vary_index.get(primary) {
            keys.extend(index.variants.iter().map(|v| primary.with_variant(*v)));
        }
        let now = Instant::now();
        let mut n = 0;
        for key in keys {
            let Some(object) = self.storage.lookup(&key) else {
                continue;
            };
            if only_fresh && !object.is_fresh(now) {
                continue;
            }
            self.storage.remove(&key);
            n += 1;
            if let Some(stale) = object.rearmed_copy(now, ttl, grace, keep) {
                self.storage.insert(key, Arc::new(stale));
            }
        }
        n
    }

    /// Walks the memory tier removing banned objects, then retires bans that every object has
    /// been checked against (only when the walk saw every object of the storage).
    pub fn sweep_bans(&self) -> (usize, usize) {
        if self.bans.is_empty() {
            return (0, 0);
        }
        let started = Instant::now();
        let mut banned = Vec::new();
        // The oldest object seen: bans on the request's fields (which a sweep cannot check)
        // are retired only once older than it.
        let mut oldest = started;
        let complete = self.storage.scan(&mut |key, object| {
            oldest = oldest.min(object.stored_at);
            if self.bans.is_banned(key, object) {
                banned.push(key.clone());
            }
        });
        for key in &banned {
            self.storage.remove(key);
        }
        let retired = if complete {
            self.bans.retire_before(started, oldest)
        } else {
            self.storage.retire_bans(started, oldest)
        };
        (banned.len(), retired)
    }

    /// True while `key` is remembered as hit-for-pass (VCL's `return (pass(DURATION))`):
    /// its requests are passed, not looked up (a hit-for-pass is a hit-for-miss too).
    pub fn is_hit_for_pass(&self, key: &CacheKey, now: Instant) -> bool {
        self.hit_for_miss
            .get(key)
            .is_some_and(|(until, pass)| pass && until > now)
    }

    /// Remembers `key` as uncacheable for `ttl`: requests skip coalescing until then.
    pub fn mark_hit_for_miss(&self, key: CacheKey, ttl: Duration) {
        if !ttl.is_zero() {
            self.hit_for_miss.insert(key, (Instant::now() + ttl, false));
        }
    }

    /// Remembers `key` as hit-for-pass for `ttl` (Varnish's `return (pass(DURATION))`):
    /// until then its requests are passed.
    pub fn mark_hit_for_pass(&self, key: CacheKey, ttl: Duration) {
        if !ttl.is_zero() {
            self.hit_for_miss.insert(key, (Instant::now() + ttl, true));
        }
    }

    /// Forgets a hit-for-miss mark (the URL produced a cacheable response again).
    pub fn clear_hit_for_miss(&self, key: &CacheKey) {
        self.hit_for_miss.remove(key);
    }

    pub fn hit_for_miss_len(&self) -> usize {
        self.hit_for_miss.len()
    }
}

/// The fleet's invalidations reach this node's tiers through the cache (`shared/feed.rs`).
impl shared::LocalTiers for Cache {
    fn purge(&self, primary: &CacheKey) -> usize {
        Cache::purge(self, primary)
    }

    fn soft_purge(&self, primary: &CacheKey) -> usize {
        Cache::soft_purge(self, primary)
    }

    fn purge_tags(&self, tags: &[String]) -> usize {
        Cache::purge_tags(self, tags)
    }

    fn bans(&self) -> &ban::BanList {
        &self.bans
    }

    fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }
}
