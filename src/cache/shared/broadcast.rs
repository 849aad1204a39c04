//! Sending an invalidation to the fleet (`feed.rs` applies what others sent): the shared
//! tier's copies removed, the entry appended to the log, the other nodes told by sharded
//! pub/sub and waited for up to `confirm_timeout`; what could not be sent — or whose shared
//! copies could not be removed — waits in the outbox.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::entry::{Invalidation, LIVE, OUTBOX, Position, STOPPED};
use super::layout::wall_ms;
use super::remote::Reply;
use super::tier::SharedTier;

/// What became of an invalidation sent to the fleet.
#[derive(Debug, Default)]
pub struct Broadcast {
    /// In the fleet's log (false: queued until Redis can be reached).
    pub sent: bool,
    /// Objects removed from the shared tier.
    pub shared_removed: u64,
    /// Other live nodes that applied it within `confirm_timeout`.
    pub confirmed: Vec<String>,
    /// Other live nodes that had not.
    pub pending: Vec<String>,
    /// Other nodes the fleet heard from in the last hour but not in the last 5 s (stopped,
    /// partitioned from Redis, hung): not waited for. One that runs on without reaching Redis
    /// serves what it holds until it reads the log.
    pub silent: Vec<String>,
    /// Other nodes that stopped cleanly (`Feed::leave`): not waited for; each reads the log
    /// before it serves again.
    pub stopped: Vec<String>,
    /// Sent, but the list of nodes could not be read within `confirm_timeout` (every poll
    /// failed or was late): who applied it is unknown, and no node is counted as confirmed.
    pub unanswered: bool,
}

impl Broadcast {
    /// One line for an answer: `fleet: sent; shared tier: N removed; confirmed by a, b;
    /// not confirmed in time by c; silent for 5 s or more: d; stopped: e` (or, the nodes never
    /// listed, `; confirmations unknown: ...` in place of the lists) or `fleet: queued (...)`.
    pub fn summary(&self) -> String {
        if !self.sent {
            return "fleet: queued (Redis cannot be reached; sent when it can)".into();
        }
        let mut out = format!("fleet: sent; shared tier: {} removed", self.shared_removed);
        if !self.confirmed.is_empty() {
            out.push_str(&format!("; confirmed by {}", self.confirmed.join(", ")));
        }
        if !self.pending.is_empty() {
            out.push_str(&format!(
                "; not confirmed in time by {}",
                self.pending.join(", ")
            ));
        }
        if !self.silent.is_empty() {
            out.push_str(&format!(
                "; silent for 5 s or more: {}",
                self.silent.join(", ")
            ));
        }
        if !self.stopped.is_empty() {
            out.push_str(&format!("; stopped: {}", self.stopped.join(", ")));
        }
        if self.unanswered {
            out.push_str("; confirmations unknown: Redis did not list the nodes in time");
        }
        out
    }

    /// The same as JSON, for the admin API.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "sent": self.sent,
            "shared_removed": self.shared_removed,
            "confirmed": self.confirmed,
            "pending": self.pending,
            "silent": self.silent,
            "stopped": self.stopped,
            "unanswered": self.unanswered,
        })
    }
}

/// [`broadcast`] for a caller that cannot wait for Redis (VCL's `return (purge)`,
/// `purge.hard()` / `purge.soft()`, `ban()`): sent in the background, unconfirmed; queued in
/// the outbox like any other while Redis is unreachable.
pub fn broadcast_later(tier: &Arc<SharedTier>, inv: Invalidation) {
    let tier = tier.clone();
    super::tier::spawn(async move {
        broadcast(&tier, inv).await;
    });
}

/// Sends `inv` (already applied on this node) to the fleet: the shared tier's copies go,
/// the log gets it, the other nodes are told and, up to `confirm_timeout`, waited for.
pub async fn broadcast(tier: &Arc<SharedTier>, inv: Invalidation) -> Broadcast {
    // Copies in the shared tier go first: a node that applies the entry and misses locally
    // must not find them there. If they cannot be removed (their master failing over, the
    // breaker open) the entry is not sent either: queued, both are done in that order once
    // Redis answers. Regression (issue 22): a failed removal was ignored and the entry sent,
    // so every node answered "confirmed" and then read the purged copy back from the shared
    // tier at its next local miss.
    let Some(removed) = remove_shared(tier, &inv, tier.feed.position()).await else {
        queue(tier, inv);
        return Broadcast::default();
    };
    let mut out = Broadcast {
        shared_removed: removed,
        ..Broadcast::default()
    };
    let Some(at) = append(tier, &inv).await else {
        queue(tier, inv);
        return out;
    };
    out.sent = true;
    tier.counters.fleet_inval_sent.inc();
    // Again at the log position: what a fill that raced the purge committed meanwhile goes,
    // and later commits of fills that started before it are refused.
    if let Some(n) = remove_shared(tier, &inv, at).await {
        out.shared_removed += n;
    }
    let publish = tier.remote().command(vec![
        b"SPUBLISH".to_vec(),
        tier.feed.channel.clone(),
        at.to_string().into_bytes(),
    ]);
    tier.call(tier.write_timeout, publish).await;
    match confirmations(tier, at).await {
        Some(c) => (out.confirmed, out.pending, out.silent, out.stopped) = c,
        None => out.unanswered = true,
    }
    out
}

/// Keeps `inv` (applied here) for when Redis answers; until its shared copies are removed
/// this node reads none stored before it ([`super::feed::Feed::held`],
/// [`super::feed::Feed::held_tag`]; a ban needs nothing: bans are checked at every lookup).
fn queue(tier: &SharedTier, inv: Invalidation) {
    tier.counters.fleet_inval_queued.inc();
    tier.feed.hold(&inv);
    let mut q = tier.feed.outbox.lock().unwrap_or_else(|p| p.into_inner());
    if q.len() < OUTBOX {
        q.push_back(inv);
    } else {
        tier.counters.fleet_inval_dropped.inc();
    }
}

async fn remove_shared(tier: &SharedTier, inv: &Invalidation, at: Position) -> Option<u64> {
    match inv {
        Invalidation::Purge(k) => tier.purge_url(k, at).await,
        // Marked stale, not removed: other nodes still serve it in grace, as the local tiers do.
        Invalidation::Soft(k) => tier.soft_purge_url(k).await,
        // A tag's set loses its members only once their copies are purged: a purge that fails
        // halfway is retried from the outbox with the set still whole. (Regression, issue 22:
        // the set was taken and deleted first, and the retry of a failed purge found it
        // empty, leaving the URLs it had not reached in the shared tier.)
        Invalidation::Tags(tags) => {
            let mut n = 0;
            for tag in tags {
                let members = tier.tag_members(tag).await?;
                let mut done = Vec::with_capacity(members.len());
                for (member, url) in members {
                    n += tier.purge_url(&url, at).await?;
                    done.push(member);
                }
                tier.drop_tag_members(tag, done).await?;
            }
            Some(n)
        }
        // Bans are checked when an object is read from the shared tier (`Cache::check_bans`
        // at lookup), by the node reading it: no scan of the keyspace.
        Invalidation::Ban(_) => Some(0),
    }
}

async fn append(tier: &SharedTier, inv: &Invalidation) -> Option<Position> {
    let add = tier.remote().command(vec![
        b"XADD".to_vec(),
        tier.feed.stream.clone(),
        b"MAXLEN".to_vec(),
        b"~".to_vec(),
        tier.log_length.to_string().into_bytes(),
        b"*".to_vec(),
        b"n".to_vec(),
        tier.node.clone().into_bytes(),
        b"k".to_vec(),
        inv.kind().as_bytes().to_vec(),
        b"a".to_vec(),
        inv.arg().into_bytes(),
    ]);
    let id = tier.call(tier.write_timeout, add).await?;
    id.text().and_then(Position::parse)
}

/// Who has passed `at`: (confirmed, pending, silent, stopped).
type Confirmations = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);

/// Polls the nodes' positions until every other live node has passed `at`, at most
/// `confirm_timeout`. A poll that fails or is late is tried again within that time (one slow
/// answer on a busy machine is not "nobody confirmed"); at the end the last answered poll
/// stands, None when none was answered.
async fn confirmations(tier: &SharedTier, at: Position) -> Option<Confirmations> {
    let until = Instant::now() + tier.confirm_timeout;
    let mut pause = Duration::from_millis(1);
    let mut last: Option<Confirmations> = None;
    loop {
        let get = tier
            .remote()
            .command(vec![b"HGETALL".to_vec(), tier.feed.nodes_key.clone()]);
        if let Some(nodes) = tier.call(tier.write_timeout, get).await {
            let answered = positions(tier, nodes, at);
            if answered.1.is_empty() {
                return Some(answered);
            }
            last = Some(answered);
        }
        if Instant::now() + pause > until {
            // Some live node pending, or nobody known to have applied it.
            tier.counters.fleet_inval_unconfirmed.inc();
            return last;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// One answer of `HGETALL P{fleet}nodes` sorted against `at`.
fn positions(tier: &SharedTier, nodes: Reply, at: Position) -> Confirmations {
    let (mut confirmed, mut pending, mut silent, mut stopped) = Confirmations::default();
    let now = wall_ms();
    for pair in nodes.array().chunks(2) {
        let [Reply::Data(name), Reply::Data(value)] = pair else {
            continue;
        };
        let name = String::from_utf8_lossy(name).into_owned();
        if name == tier.node {
            continue;
        }
        let value = String::from_utf8_lossy(value);
        let mut parts = value.split_ascii_whitespace();
        let pos = parts.next().and_then(Position::parse).unwrap_or_default();
        let beat: u64 = parts.next().and_then(|b| b.parse().ok()).unwrap_or(0);
        if parts.next() == Some(STOPPED) {
            stopped.push(name);
            continue;
        }
        if now.saturating_sub(beat) > LIVE.as_millis() as u64 {
            silent.push(name);
            continue;
        }
        if pos >= at {
            confirmed.push(name);
        } else {
            pending.push(name);
        }
    }
    (confirmed, pending, silent, stopped)
}

/// Sends what was queued while Redis could not be reached.
pub(super) async fn flush_outbox(tier: &Arc<SharedTier>) {
    loop {
        let next = tier.feed.outbox.lock().ok().and_then(|mut q| q.pop_front());
        let Some(inv) = next else {
            return;
        };
        let at = tier.feed.position();
        if remove_shared(tier, &inv, at).await.is_none() {
            push_front(tier, inv);
            return;
        }
        tier.feed.release_hold(&inv);
        let Some(at) = append(tier, &inv).await else {
            push_front(tier, inv);
            return;
        };
        tier.counters.fleet_inval_sent.inc();
        remove_shared(tier, &inv, at).await;
        let publish = tier.remote().command(vec![
            b"SPUBLISH".to_vec(),
            tier.feed.channel.clone(),
            at.to_string().into_bytes(),
        ]);
        tier.call(tier.write_timeout, publish).await;
    }
}

fn push_front(tier: &SharedTier, inv: Invalidation) {
    if let Ok(mut q) = tier.feed.outbox.lock() {
        q.push_front(inv);
    }
}

/// The other nodes as the log sees them: (name, position, milliseconds since its heartbeat,
/// lag behind the log's newest entry in ms). For `/fleet`.
pub async fn nodes(tier: &SharedTier) -> Option<Vec<(String, Position, u64, u64)>> {
    let get = tier
        .remote()
        .command(vec![b"HGETALL".to_vec(), tier.feed.nodes_key.clone()]);
    let nodes = tier
        .call(tier.read_timeout.max(Duration::from_millis(200)), get)
        .await?;
    // The newest entry's id. Not `XINFO STREAM`: it fails on a fleet that never sent an
    // invalidation (no stream yet), and that counted an error — and a failure towards the
    // breaker — at every `GET /fleet` (issue 22, `shared_error` at start-up).
    let last = tier.remote().command(vec![
        b"XREVRANGE".to_vec(),
        tier.feed.stream.clone(),
        b"+".to_vec(),
        b"-".to_vec(),
        b"COUNT".to_vec(),
        b"1".to_vec(),
    ]);
    let newest = tier
        .call(tier.read_timeout.max(Duration::from_millis(200)), last)
        .await
        .and_then(|r| r.array().into_iter().next())
        .and_then(|entry| entry.array().into_iter().next())
        .and_then(|id| id.text().and_then(Position::parse))
        .unwrap_or_default();
    let now = wall_ms();
    let mut out = Vec::new();
    for pair in nodes.array().chunks(2) {
        let [Reply::Data(name), Reply::Data(value)] = pair else {
            continue;
        };
        let value = String::from_utf8_lossy(value);
        let mut parts = value.split_ascii_whitespace();
        let pos = parts.next().and_then(Position::parse).unwrap_or_default();
        let beat: u64 = parts.next().and_then(|b| b.parse().ok()).unwrap_or(0);
        out.push((
            String::from_utf8_lossy(name).into_owned(),
            pos,
            now.saturating_sub(beat),
            newest.ms.saturating_sub(pos.ms),
        ));
    }
    out.sort();
    Some(out)
}
