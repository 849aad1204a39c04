//! The node's own tiers as the fleet's invalidations reach them. The cache (`cache/mod.rs`)
//! implements it and holds the shared tier; the shared tier names only this trait, so the two
//! do not import each other.

use std::sync::Arc;

use crate::cache::ban::BanList;
use crate::cache::{CacheKey, Storage};

/// What the feed applies an invalidation to, and what it drops when it fell behind.
pub trait LocalTiers: Send + Sync {
    /// Removes every variant of the URL `primary`; objects removed.
    fn purge(&self, primary: &CacheKey) -> usize;
    /// Marks every variant of the URL `primary` stale now; objects affected.
    fn soft_purge(&self, primary: &CacheKey) -> usize;
    /// Removes every object of every URL tagged with one of `tags`; objects removed.
    fn purge_tags(&self, tags: &[String]) -> usize;
    /// The ban list checked at lookup.
    fn bans(&self) -> &BanList;
    /// The storage tiers (bans are persisted by them; the feed counts their objects).
    fn storage(&self) -> &Arc<dyn Storage>;
}
