//! The shared tier's unit tests, no Redis needed (one scriptable fake stands for it): the
//! tier against a Redis that hangs or fails (deadlines, the circuit breaker, leases); the
//! invalidation feed against a log in memory (trimmed, lost, begun again); purges and tagged
//! writes when part of the cluster fails. With a real cluster: tests/fleet/.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::remote::{RemoteError, Reply};
use super::{LocalTiers, SharedFound, SharedTier, broadcast, feed, follow, layout};
use crate::cache::ban::BanList;
use crate::cache::{CacheKey, Storage};
use crate::config::SharedConfig;
use crate::stats::Counters;
use fake::{Fake, cluster_down, found};

mod deadlines;
mod fake;
mod fleet_log;
mod purges;

pub(super) fn config() -> SharedConfig {
    let text = "[storage.shared]\nnodes = [\"127.0.0.1:1\"]\nread_timeout = \"20ms\"\nbreaker_threshold = 3\nbreaker_cooldown = \"1h\"\n[[backend]]\nhost = \"a\"\n";
    crate::config::Config::parse(text, "t.toml")
        .unwrap()
        .storage
        .shared
        .unwrap()
}

/// The node's own tiers as the feed's tests need them: a memory tier and a ban list (what the
/// cache does with a purge is the cache's own tests' business).
pub(super) struct Tiers {
    pub(super) bans: BanList,
    storage: Arc<dyn Storage>,
}

impl Tiers {
    /// An empty memory tier counting into `counters`.
    pub(super) fn new(counters: &Arc<Counters>) -> Arc<Tiers> {
        Arc::new(Tiers {
            bans: BanList::new(crate::config::invalidation::DEFAULT_MAX_BANS),
            storage: Arc::new(crate::cache::memory::MemoryStorage::new(
                1 << 20,
                1 << 16,
                counters.clone(),
            )),
        })
    }
}

impl LocalTiers for Tiers {
    fn purge(&self, primary: &CacheKey) -> usize {
        usize::from(self.storage.remove(primary))
    }

    fn soft_purge(&self, primary: &CacheKey) -> usize {
        usize::from(self.storage.remove(primary))
    }

    fn purge_tags(&self, _tags: &[String]) -> usize {
        0
    }

    fn bans(&self) -> &BanList {
        &self.bans
    }

    fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }
}
