//! Invalidation everywhere: a PURGE, soft purge, ban or tag purge sent to any node is applied
//! there, removed from the shared tier, appended to the fleet's log (a Redis Stream,
//! `P{fleet}log`, bounded by `log_length`) and announced on a sharded pub/sub channel
//! (`P{fleet}inval`). Every node's feed task applies the log in order from its position: at
//! once when the announcement arrives, and every [`POLL`] anyway (a lost message, a node that
//! was disconnected or restarted catches up from its position). A node that can no longer
//! read everything after its position — entries trimmed, the log lost or begun anew, while
//! it ran or while it was down (a saved position) — drops its local tiers (a ban on
//! everything) rather than serve something purged (`follow.rs`). Each node records its position and a heartbeat in
//! `P{fleet}nodes`; the sender waits, up to `confirm_timeout`, until every live node's
//! position has passed the invalidation, and says which did.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

pub use super::broadcast::{Broadcast, broadcast, broadcast_later, nodes};
use super::entry::OUTBOX;
pub use super::entry::{Invalidation, Position};
use super::layout::wall_ms;
use super::local::LocalTiers;
use crate::cache::CacheKey;

/// How often the feed reads the log without being told (also the heartbeat).
pub const POLL: Duration = Duration::from_millis(500);
/// The feed's state on this node.
pub struct Feed {
    pub(super) stream: Vec<u8>,
    pub(super) channel: Vec<u8>,
    /// The hash of every node's position and heartbeat (`P{fleet}nodes`).
    pub(super) nodes_key: Vec<u8>,
    applied: Mutex<Position>,
    /// Set once the node knows where it stands in the log.
    pub(super) started: AtomicBool,
    /// The node's own tiers, which the invalidations apply to.
    pub(super) local: OnceLock<Weak<dyn LocalTiers>>,
    /// Where the position survives a restart (beside the disk tier's file).
    pub(super) state_file: OnceLock<std::path::PathBuf>,
    pub(super) wake: tokio::sync::Notify,
    pub(super) outbox: Mutex<VecDeque<Invalidation>>,
    /// URLs purged (false) or soft-purged (true) here while their shared copies could not be
    /// removed, with the moment (wall ms): until the outbox has removed them, a copy this node
    /// reads from the shared tier that was stored before that moment is refused (or stale).
    held: Mutex<HashMap<CacheKey, (u64, bool)>>,
    /// The same for tags purged here while their shared copies could not be removed.
    held_tags: Mutex<HashMap<String, u64>>,
    /// Milliseconds since the last complete read of the log (0 before the first).
    pub(super) last_sync: AtomicU64,
    /// The log's newest position (ms part) at the last read, and ours then: the lag.
    pub lag_ms: AtomicU64,
    /// Set after the first complete read of the log.
    pub(super) synced: tokio::sync::watch::Sender<bool>,
    /// Complete reads of the log so far (sweeps of forgotten nodes are every SWEEP_EVERY).
    pub(super) reads: AtomicU64,
    /// A clean stop asked the feed task to mark this node stopped and end ([`Feed::leave`]).
    pub(super) leaving: AtomicBool,
    /// Set by the feed task once this node is marked stopped in `P{fleet}nodes`.
    pub(super) left: tokio::sync::watch::Sender<bool>,
}

impl Feed {
    pub fn new(prefix: &str) -> Feed {
        Feed {
            stream: format!("{prefix}{{fleet}}log").into_bytes(),
            channel: format!("{prefix}{{fleet}}inval").into_bytes(),
            nodes_key: format!("{prefix}{{fleet}}nodes").into_bytes(),
            applied: Mutex::new(Position::default()),
            started: AtomicBool::new(false),
            local: OnceLock::new(),
            state_file: OnceLock::new(),
            wake: tokio::sync::Notify::new(),
            outbox: Mutex::new(VecDeque::new()),
            held: Mutex::new(HashMap::new()),
            held_tags: Mutex::new(HashMap::new()),
            last_sync: AtomicU64::new(0),
            lag_ms: AtomicU64::new(0),
            synced: tokio::sync::watch::channel(false).0,
            reads: AtomicU64::new(0),
            leaving: AtomicBool::new(false),
            left: tokio::sync::watch::channel(false).0,
        }
    }

    /// A clean stop: the feed task writes this node into `P{fleet}nodes` as stopped (its
    /// position kept) and ends, so that the other nodes' invalidations do not wait for its
    /// confirmation — it reads the log before it serves again. Waits for that at most `limit`;
    /// true if done.
    pub async fn leave(&self, limit: Duration) -> bool {
        let mut rx = self.left.subscribe();
        self.leaving.store(true, Ordering::Release);
        self.wake.notify_one();
        tokio::time::timeout(limit, rx.wait_for(|left| *left))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Waits (at most `limit`) for the first complete read of the log; true if it happened.
    pub async fn wait_synced(&self, limit: Duration) -> bool {
        let mut rx = self.synced.subscribe();
        tokio::time::timeout(limit, rx.wait_for(|s| *s))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The cache invalidations apply to (set once, after it is built).
    pub fn attach<L: LocalTiers + 'static>(
        &self,
        cache: &Arc<L>,
        state_file: Option<std::path::PathBuf>,
    ) {
        let weak: Weak<dyn LocalTiers> = Arc::downgrade(cache) as Weak<dyn LocalTiers>;
        let _ = self.local.set(weak);
        if let Some(f) = state_file {
            let _ = self.state_file.set(f);
        }
    }

    /// This node's position: every invalidation up to it is applied here.
    pub fn position(&self) -> Position {
        *self.applied.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn set_position(&self, p: Position) {
        *self.applied.lock().unwrap_or_else(|p| p.into_inner()) = p;
    }

    /// Remembers a purge or soft purge of a URL queued for the outbox ([`Feed::held`]).
    pub(super) fn hold(&self, inv: &Invalidation) {
        let (key, soft) = match inv {
            Invalidation::Purge(k) => (k.primary(), false),
            Invalidation::Soft(k) => (k.primary(), true),
            Invalidation::Tags(tags) => {
                let mut held = self.held_tags.lock().unwrap_or_else(|p| p.into_inner());
                let now = wall_ms();
                for tag in tags {
                    if held.len() < OUTBOX || held.contains_key(tag) {
                        held.insert(tag.clone(), now);
                    }
                }
                return;
            }
            Invalidation::Ban(_) => return,
        };
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.len() < OUTBOX || held.contains_key(&key) {
            let mark = held.entry(key).or_insert((0, soft));
            *mark = (wall_ms(), mark.1 && soft);
        }
    }

    /// The outbox removed `inv`'s shared copies.
    pub(super) fn release_hold(&self, inv: &Invalidation) {
        match inv {
            Invalidation::Purge(k) | Invalidation::Soft(k) => {
                self.held
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&k.primary());
            }
            Invalidation::Tags(tags) => {
                let mut held = self.held_tags.lock().unwrap_or_else(|p| p.into_inner());
                for tag in tags {
                    held.remove(tag);
                }
            }
            Invalidation::Ban(_) => {}
        }
    }

    /// For a URL (`primary`) this node purged while Redis could not remove its shared
    /// copies: the moment (wall ms), and whether it was a soft purge.
    pub fn held(&self, primary: &CacheKey) -> Option<(u64, bool)> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.is_empty() {
            return None;
        }
        held.get(primary).copied()
    }

    /// Whether a shared copy stored at `stored_ms` (wall ms) with these fields carries a tag
    /// this node purged later while Redis could not remove its copies.
    pub fn held_tag(&self, headers: &crate::cache::StoredFields, stored_ms: u64) -> bool {
        let held = self.held_tags.lock().unwrap_or_else(|p| p.into_inner());
        if held.is_empty() {
            return false;
        }
        crate::cache::tags::tags_of(headers)
            .iter()
            .any(|t| held.get(t).is_some_and(|mark| stored_ms <= *mark))
    }

    /// Invalidations waiting for Redis.
    pub fn queued(&self) -> usize {
        self.outbox.lock().map(|q| q.len()).unwrap_or(0)
    }

    /// Milliseconds since the log was last read completely (`u64::MAX`: never).
    pub fn sync_age_ms(&self) -> u64 {
        match self.last_sync.load(Ordering::Relaxed) {
            0 => u64::MAX,
            t => crate::clock::now_ms().saturating_sub(t),
        }
    }
}
