//! The feed task: follows the fleet's invalidation log from this node's position and applies
//! what others sent to the local tiers (the state it keeps is `feed.rs`'s [`Feed`]).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;

use super::broadcast::{flush_outbox, nodes};
use super::entry::{Invalidation, Position, STOPPED};
use super::feed::{Feed, POLL};
use super::layout::wall_ms;
use super::local::LocalTiers;
use super::remote::{RemoteError, Reply};
use super::tier::SharedTier;

/// Log entries read per request.
const BATCH: usize = 512;
/// A node whose heartbeat is older than this is forgotten (`P{fleet}nodes` stays bounded by
/// the nodes of the last hour).
const FORGET: Duration = Duration::from_secs(3600);
/// Reads of the log between two sweeps of forgotten nodes (about a minute).
const SWEEP_EVERY: u64 = 120;

/// Starts the feed task of `tier`.
pub fn spawn(
    tier: Arc<SharedTier>,
    mut messages: tokio::sync::mpsc::UnboundedReceiver<(Bytes, Bytes)>,
) {
    let weak = Arc::downgrade(&tier);
    drop(tier);
    tokio::spawn(async move {
        // The connection the subscription is on: a new one (renewed TLS files) needs its own.
        let mut subscribed: Option<u64> = None;
        loop {
            let Some(tier) = weak.upgrade() else {
                return;
            };
            let generation = tier.remote().generation();
            if subscribed != Some(generation) {
                let sub = tier.remote().subscribe(tier.feed.channel.clone());
                if tier.call(tier.write_timeout, sub).await.is_some() {
                    subscribed = Some(generation);
                }
            }
            flush_outbox(&tier).await;
            sync(&tier).await;
            let wake = async {
                tokio::select! {
                    m = messages.recv() => m.is_some(),
                    _ = tier.feed.wake.notified() => true,
                    _ = tokio::time::sleep(POLL) => true,
                }
            };
            if !wake.await {
                // The client is gone (shutdown).
                tokio::time::sleep(POLL).await;
            }
            if tier.feed.leaving.load(Ordering::Acquire) {
                mark_stopped(&tier).await;
                tier.feed.left.send_replace(true);
                return;
            }
            drop(tier);
        }
    });
}

/// Reads the log from this node's position and applies what it finds, in order.
pub(super) async fn sync(tier: &Arc<SharedTier>) {
    let feed = &tier.feed;
    let Some(cache) = feed.local.get().and_then(Weak::upgrade) else {
        return;
    };
    let started = crate::clock::now_ms();
    let Some(log) = log_info(tier).await else {
        return;
    };
    let newest = log.newest;
    let mut at = feed.position();
    if !feed.started.load(Ordering::Acquire) {
        at = start_position(tier, &*cache, &log).await;
        feed.set_position(at);
        feed.started.store(true, Ordering::Release);
    } else if log.missed_after(at) {
        tracing::warn!(position = %at, log = %newest, first = %log.first, "this node fell behind the fleet's invalidation log; dropping its local cache");
        drop_local(tier, &*cache).await;
        at = newest;
        feed.set_position(at);
    }
    loop {
        let read = tier.remote().command(vec![
            b"XRANGE".to_vec(),
            feed.stream.clone(),
            format!("({at}").into_bytes(),
            b"+".to_vec(),
            b"COUNT".to_vec(),
            BATCH.to_string().into_bytes(),
        ]);
        let Some(entries) = tier.call(tier.write_timeout, read).await else {
            return;
        };
        let entries = entries.array();
        let n = entries.len();
        for entry in entries {
            let mut parts = entry.array().into_iter();
            let Some(id) = parts
                .next()
                .and_then(|i| i.text().and_then(Position::parse))
            else {
                continue;
            };
            let fields = parts.next().map(Reply::array).unwrap_or_default();
            apply(tier, &*cache, &fields);
            at = id;
            feed.set_position(at);
        }
        if n < BATCH {
            break;
        }
    }
    feed.last_sync.store(started, Ordering::Relaxed);
    feed.synced.send_replace(true);
    feed.lag_ms
        .store(newest.ms.saturating_sub(at.ms), Ordering::Relaxed);
    let beat = tier.remote().command(vec![
        b"HSET".to_vec(),
        feed.nodes_key.clone(),
        tier.node.clone().into_bytes(),
        format!("{at} {}", wall_ms()).into_bytes(),
    ]);
    tier.call(tier.write_timeout, beat).await;
    save_position(feed, at);
    if feed.reads.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
        forget_old_nodes(tier).await;
    }
}

/// What `XINFO STREAM` says of the fleet's log (all zero when there is no log yet); None when
/// it could not be read (counted).
async fn log_info(tier: &SharedTier) -> Option<LogInfo> {
    let info = tier.remote().command(vec![
        b"XINFO".to_vec(),
        b"STREAM".to_vec(),
        tier.feed.stream.clone(),
    ]);
    match tokio::time::timeout(tier.write_timeout, info).await {
        Ok(Ok(reply)) => Some(LogInfo::parse(reply)),
        // No log yet (no invalidation was ever sent), or lost.
        Ok(Err(e)) if e.to_string().contains("no such key") => Some(LogInfo::default()),
        // Not connected yet (start-up, a cluster unreachable since): nothing failed, the
        // connection is being retried. Counted as `call` counts it (skipped, not an error:
        // `shared_error` at start-up made every healthy node look like it had a problem).
        Ok(Err(RemoteError::NotConnected)) => {
            tier.counters.shared_skipped.inc();
            None
        }
        Ok(Err(e)) => {
            tier.counters.shared_error.inc();
            tracing::debug!(error = %e, "reading the fleet's invalidation log failed");
            None
        }
        Err(_) => {
            tier.counters.shared_timeout.inc();
            None
        }
    }
}

/// Writes this node into `P{fleet}nodes` as stopped: its position, the time, `stopped`
/// (written by the feed task alone, after its last heartbeat, so no heartbeat follows it).
async fn mark_stopped(tier: &SharedTier) {
    let feed = &tier.feed;
    if !feed.started.load(Ordering::Acquire) {
        return;
    }
    let mark = tier.remote().command(vec![
        b"HSET".to_vec(),
        feed.nodes_key.clone(),
        tier.node.clone().into_bytes(),
        format!("{} {} {STOPPED}", feed.position(), wall_ms()).into_bytes(),
    ]);
    tier.call(tier.write_timeout, mark).await;
}

/// Removes nodes not heard of for [`FORGET`] from `P{fleet}nodes`.
async fn forget_old_nodes(tier: &SharedTier) {
    let Some(nodes) = nodes(tier).await else {
        return;
    };
    let old: Vec<Vec<u8>> = nodes
        .into_iter()
        .filter(|(_, _, beat_ms, _)| *beat_ms > FORGET.as_millis() as u64)
        .map(|(name, ..)| name.into_bytes())
        .collect();
    if old.is_empty() {
        return;
    }
    let mut args = vec![b"HDEL".to_vec(), tier.feed.nodes_key.clone()];
    args.extend(old);
    tier.call(tier.write_timeout, tier.remote().command(args))
        .await;
}

fn apply(tier: &SharedTier, cache: &dyn LocalTiers, fields: &[Reply]) {
    let mut node = None;
    let (mut kind, mut arg) = (None, None);
    for pair in fields.chunks(2) {
        if let [Reply::Data(name), Reply::Data(value)] = pair {
            match &name[..] {
                b"n" => node = Some(value.clone()),
                b"k" => kind = Some(value.clone()),
                b"a" => arg = Some(value.clone()),
                _ => {}
            }
        }
    }
    if node.as_deref() == Some(tier.node.as_bytes()) {
        return; // Ours: applied when it was sent.
    }
    let (Some(kind), Some(arg)) = (kind, arg) else {
        return;
    };
    match Invalidation::decode(&kind, &arg) {
        Some(inv) => {
            inv.apply_locally(cache);
            tier.counters.fleet_inval_applied.inc();
        }
        None => tracing::warn!("unreadable entry in the fleet's invalidation log; skipped"),
    }
}

/// Where a node that just connected starts: its saved position if it has one (a restart with
/// a disk tier) and the log still holds everything after it; else the log's end — dropping
/// what the local tiers hold if they hold anything, since what was invalidated meanwhile is
/// unknown.
async fn start_position(tier: &SharedTier, cache: &dyn LocalTiers, log: &LogInfo) -> Position {
    if let Some(saved) = tier
        .feed
        .state_file
        .get()
        .and_then(|f| std::fs::read_to_string(f).ok())
        && let Some(p) = Position::parse(saved.trim())
    {
        if !log.missed_after(p) {
            return p;
        }
        // Entries after the saved position were trimmed while the node was down, or the log
        // was lost: resuming there would skip them and serve what they purged. Regression:
        // issue 22, a saved position was checked against the newest entry only.
        tracing::warn!(position = %p, log = %log.newest, first = %log.first, "this node's saved position is no longer in the fleet's invalidation log; dropping its local cache");
        drop_local(tier, cache).await;
        return log.newest;
    }
    let local = cache.storage().stats().objects
        + cache
            .storage()
            .lower_tiers()
            .iter()
            .map(|(_, s)| s.objects)
            .sum::<u64>();
    if local > 0 {
        tracing::warn!(
            objects = local,
            "joining the fleet's invalidation log without a saved position; dropping the local cache"
        );
        drop_local(tier, cache).await;
    }
    log.newest
}

/// Bans everything stored until now on this node only (memory and disk).
async fn drop_local(tier: &SharedTier, cache: &dyn LocalTiers) {
    tier.counters.fleet_reset.inc();
    // As `Cache::ban`: applied at once, then persisted (waited for).
    let persisted = match cache.bans().add("req.url ~ .") {
        Ok(ban) => cache.storage().persist_ban(ban).await,
        Err(e) => Err(e),
    };
    if let Err(e) = persisted {
        tracing::warn!(error = %e, "dropping the local cache: ban not persisted");
    }
}

fn save_position(feed: &Feed, at: Position) {
    let Some(path) = feed.state_file.get().cloned() else {
        return;
    };
    tokio::task::spawn_blocking(move || {
        let tmp = path.with_extension("fleet.tmp");
        if std::fs::write(&tmp, format!("{at}\n")).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    });
}

/// The fleet's log as `XINFO STREAM` describes it (Redis 7.0 or later).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct LogInfo {
    /// The newest id ever given (`last-generated-id`; it stays when entries are trimmed).
    pub newest: Position,
    /// The oldest entry still in the log (`recorded-first-entry-id`; 0-0 when empty).
    pub first: Position,
    /// The largest id removed by `XDEL` (`max-deleted-entry-id`). Trimming — `XADD MAXLEN`,
    /// `XTRIM` — does not set it (Redis 7.0): it cannot tell a trim.
    pub deleted: Position,
    /// Entries in the log now.
    pub length: u64,
    /// Entries ever added (`entries-added`).
    pub added: u64,
}

impl LogInfo {
    pub fn parse(reply: Reply) -> LogInfo {
        let mut info = LogInfo::default();
        for pair in reply.array().chunks(2) {
            let [Reply::Data(name), value] = pair else {
                continue;
            };
            let id = || value.text().and_then(Position::parse).unwrap_or_default();
            let n = || value.int().and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
            match &name[..] {
                b"last-generated-id" => info.newest = id(),
                b"recorded-first-entry-id" => info.first = id(),
                b"max-deleted-entry-id" => info.deleted = id(),
                b"length" => info.length = n(),
                b"entries-added" => info.added = n(),
                _ => {}
            }
        }
        info
    }

    /// Whether a node that applied everything up to `at` (an id it read from this log, or
    /// 0-0) can no longer read everything after it: the log is older than `at` (lost, and not
    /// begun again), entries after `at` were trimmed (more than `log_length` since, an
    /// `XTRIM`) or deleted, or the log was lost and begun again by newer invalidations (its
    /// oldest entry is then newer than `at` with nothing trimmed). A node whose own position
    /// was the last entry trimmed cannot be told from one that lost more: it drops its cache
    /// too, unless the log is empty and ends at it.
    pub fn missed_after(&self, at: Position) -> bool {
        if self.newest < at || self.deleted > at {
            return true;
        }
        if self.length == 0 {
            // Everything trimmed (or no log): nothing was missed only if it ended with us.
            return at != self.newest;
        }
        // Entries before the oldest one left were trimmed; `at` among them means it was
        // trimmed too, and maybe what followed it. A node that never read an entry (0-0)
        // missed nothing if nothing was ever removed.
        at < self.first && !(at == Position::default() && self.added == self.length)
    }
}

impl SharedTier {
    /// Wakes the feed (tests, and after a local drop).
    pub fn wake_feed(&self) {
        self.feed.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_info_reads_xinfo_stream() {
        let d = |s: &str| Reply::Data(Bytes::from(s.to_string()));
        // What redis-server 7.0.15 answers after three XADDs and `XTRIM MAXLEN 1`.
        let reply = Reply::Array(vec![
            d("length"),
            Reply::Int(1),
            d("radix-tree-keys"),
            Reply::Int(1),
            d("last-generated-id"),
            d("5-1"),
            d("max-deleted-entry-id"),
            d("0-0"),
            d("entries-added"),
            Reply::Int(3),
            d("recorded-first-entry-id"),
            d("5-1"),
            d("first-entry"),
            Reply::Array(vec![d("5-1"), Reply::Array(vec![d("a"), d("3")])]),
        ]);
        let p = |ms, seq| Position { ms, seq };
        let info = LogInfo::parse(reply);
        assert_eq!(
            info,
            LogInfo {
                newest: p(5, 1),
                first: p(5, 1),
                deleted: p(0, 0),
                length: 1,
                added: 3,
            }
        );
        // Up to date, or at the last entry: nothing missed. Before the trimmed entries, or
        // past the log's end (lost): missed.
        assert!(!info.missed_after(p(5, 1)));
        assert!(info.missed_after(p(4, 0)));
        assert!(info.missed_after(p(0, 0)));
        assert!(info.missed_after(p(6, 0)));
        // Everything trimmed: only a node at the end missed nothing.
        let empty = LogInfo {
            length: 0,
            first: p(0, 0),
            ..info
        };
        assert!(!empty.missed_after(p(5, 1)));
        assert!(empty.missed_after(p(5, 0)));
        // A log never trimmed: a node that never read an entry reads them all.
        let whole = LogInfo {
            length: 3,
            first: p(1, 0),
            ..info
        };
        assert!(!whole.missed_after(p(0, 0)));
        assert!(!whole.missed_after(p(1, 0)));
        // An entry after the position deleted (`XDEL`).
        let deleted = LogInfo {
            deleted: p(3, 0),
            ..whole
        };
        assert!(deleted.missed_after(p(2, 0)));
        assert!(!deleted.missed_after(p(3, 0)));
        // No log at all: a node that had read one missed what it said.
        assert!(LogInfo::default().missed_after(p(5, 1)));
        assert!(!LogInfo::default().missed_after(p(0, 0)));
    }
}
