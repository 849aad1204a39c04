//! The shared tier against a Redis that hangs or fails (no Redis needed): deadlines and the
//! circuit breaker; the invalidation feed against a log in memory (trimmed, lost, begun
//! again). With a real cluster: tests/fleet.rs.

use super::*;
use crate::config::SharedConfig;

/// A Redis that never answers in time, or fails at once.
struct Broken {
    hang: bool,
}

impl Remote for Broken {
    fn eval<'a>(
        &'a self,
        _: &'static remote::Script,
        _: Vec<Vec<u8>>,
        _: Vec<Vec<u8>>,
    ) -> remote::RemoteFuture<'a, Reply> {
        self.command(Vec::new())
    }
    fn command<'a>(&'a self, _: Vec<Vec<u8>>) -> remote::RemoteFuture<'a, Reply> {
        let hang = self.hang;
        Box::pin(async move {
            if hang {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Err(RemoteError::Redis("CLUSTERDOWN".into()))
        })
    }
    fn subscribe<'a>(&'a self, _: Vec<u8>) -> remote::RemoteFuture<'a, ()> {
        Box::pin(async { Err(RemoteError::NotConnected) })
    }
}

fn config() -> SharedConfig {
    let text = "[storage.shared]\nnodes = [\"127.0.0.1:1\"]\nread_timeout = \"20ms\"\nbreaker_threshold = 3\nbreaker_cooldown = \"1h\"\n[[backend]]\nhost = \"a\"\n";
    crate::config::Config::parse(text, "t.toml")
        .unwrap()
        .storage
        .shared
        .unwrap()
}

/// Redis hanging costs a lookup its deadline, then the breaker skips it: no wait at all.
#[tokio::test]
async fn a_hanging_redis_costs_one_deadline_then_nothing() {
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(
        &config(),
        "n".into(),
        counters.clone(),
        Arc::new(Broken { hang: true }),
    );
    // As after a first successful operation (a new tier starts open: its first call probes).
    tier.breaker.success();
    let key = CacheKey::new("h", "/");
    for _ in 0..3 {
        let t = Instant::now();
        assert!(matches!(tier.lookup(&key, true).await, Found::Miss(None)));
        let spent = t.elapsed();
        assert!(spent >= Duration::from_millis(20), "{spent:?}");
    }
    assert_eq!(counters.shared_timeout.get(), 3);
    assert_eq!(tier.breaker.state(), "open");
    assert_eq!(counters.shared_breaker_open.get(), 1);
    let t = Instant::now();
    assert!(matches!(tier.lookup(&key, true).await, Found::Miss(None)));
    assert!(
        t.elapsed() < Duration::from_millis(20),
        "skipped, not waited for"
    );
    assert_eq!(counters.shared_skipped.get(), 1);
}

/// Errors open the breaker too; a write that cannot be made is dropped, nothing waits.
#[tokio::test]
async fn failing_redis_opens_the_breaker() {
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(
        &config(),
        "n".into(),
        counters.clone(),
        Arc::new(Broken { hang: false }),
    );
    tier.breaker.success();
    let key = CacheKey::new("h", "/");
    for _ in 0..4 {
        assert!(matches!(tier.lookup(&key, false).await, Found::Miss(None)));
    }
    assert_eq!(counters.shared_error.get(), 3);
    assert_eq!(counters.shared_skipped.get(), 1);
    assert_eq!(tier.breaker.state_code(), 1);
    assert_eq!(tier.purge_url(&key, feed::Position::default()).await, None);
}

/// A Redis not connected yet.
struct Unconnected;

impl Remote for Unconnected {
    fn eval<'a>(
        &'a self,
        _: &'static remote::Script,
        _: Vec<Vec<u8>>,
        _: Vec<Vec<u8>>,
    ) -> remote::RemoteFuture<'a, Reply> {
        self.command(Vec::new())
    }
    fn command<'a>(&'a self, _: Vec<Vec<u8>>) -> remote::RemoteFuture<'a, Reply> {
        Box::pin(async { Err(RemoteError::NotConnected) })
    }
    fn subscribe<'a>(&'a self, _: Vec<u8>) -> remote::RemoteFuture<'a, ()> {
        Box::pin(async { Err(RemoteError::NotConnected) })
    }
}

/// Regression (issue 22, `shared_error=1` at start-up): reading the invalidation log before
/// the first connection counted an error on every healthy node; it is a skip, as for every
/// other operation.
#[tokio::test]
async fn reading_the_log_before_connecting_is_not_an_error() {
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(
        &config(),
        "n".into(),
        counters.clone(),
        Arc::new(Unconnected),
    );
    let cache = Arc::new(crate::cache::Cache::new(
        Arc::new(crate::cache::memory::MemoryStorage::new(
            1 << 20,
            1 << 16,
            counters.clone(),
        )),
        4,
    ));
    tier.feed.attach(&cache, None);
    feed::sync(&tier).await;
    feed::sync(&tier).await;
    assert_eq!(counters.shared_error.get(), 0);
    assert_eq!(counters.shared_skipped.get(), 2);
}

/// A cluster that never saw an invalidation: no stream, no nodes yet. `XINFO` on the missing
/// stream is an error, as Redis answers it.
struct NoLog;

impl Remote for NoLog {
    fn eval<'a>(
        &'a self,
        _: &'static remote::Script,
        _: Vec<Vec<u8>>,
        _: Vec<Vec<u8>>,
    ) -> remote::RemoteFuture<'a, Reply> {
        Box::pin(async { Ok(Reply::Nil) })
    }
    fn command<'a>(&'a self, args: Vec<Vec<u8>>) -> remote::RemoteFuture<'a, Reply> {
        Box::pin(async move {
            match &args[0][..] {
                b"XINFO" => Err(RemoteError::Redis("ResponseError: no such key".into())),
                _ => Ok(Reply::Array(Vec::new())),
            }
        })
    }
    fn subscribe<'a>(&'a self, _: Vec<u8>) -> remote::RemoteFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// Regression (issue 22, `shared_error` at start-up): `GET /fleet` on a fleet without a log
/// yet counted an error, and a failure towards the breaker, each time it was asked.
#[tokio::test]
async fn describing_a_fleet_without_a_log_is_not_an_error() {
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), Arc::new(NoLog));
    tier.breaker.success();
    for _ in 0..5 {
        assert_eq!(feed::nodes(&tier).await, Some(Vec::new()));
    }
    assert_eq!(counters.shared_error.get(), 0);
    assert_eq!(tier.breaker.state(), "closed");
}

/// The fleet's log as a Redis Stream keeps it, in memory: entries, the newest id ever given
/// (`last-generated-id`), how many were ever added, and whether the key exists at all.
/// Answers `XINFO STREAM` and `XRANGE` as redis-server 7.0 does — trimming leaves
/// `max-deleted-entry-id` alone; everything else succeeds.
#[derive(Default)]
struct Log {
    exists: bool,
    entries: Vec<(feed::Position, Vec<Reply>)>,
    newest: feed::Position,
    added: u64,
    next_ms: u64,
}

#[derive(Default)]
struct FakeLog(std::sync::Mutex<Log>);

impl FakeLog {
    /// Another node's purge of `path`, appended.
    fn add_purge(&self, path: &str) -> feed::Position {
        let mut log = self.0.lock().unwrap();
        log.next_ms += 1;
        // Ids keep growing, as Redis's do (wall-clock milliseconds), across a lost log too.
        let id = feed::Position {
            ms: 1_000 + log.next_ms,
            seq: 0,
        };
        let inv = feed::Invalidation::Purge(CacheKey::new("h", path));
        let d = |s: &str| Reply::Data(Bytes::from(s.to_string()));
        let fields = vec![
            d("n"),
            d("other"),
            d("k"),
            d("purge"),
            d("a"),
            d(&inv.arg()),
        ];
        log.exists = true;
        log.entries.push((id, fields));
        log.newest = id;
        log.added += 1;
        id
    }

    /// `XTRIM key MAXLEN keep`.
    fn trim_to(&self, keep: usize) {
        let mut log = self.0.lock().unwrap();
        let cut = log.entries.len().saturating_sub(keep);
        log.entries.drain(..cut);
    }

    /// `DEL key` (a flush, or a failover that lost the stream).
    fn lose(&self) {
        let mut log = self.0.lock().unwrap();
        log.exists = false;
        log.entries.clear();
        log.newest = feed::Position::default();
        log.added = 0;
    }
}

impl Remote for FakeLog {
    fn eval<'a>(
        &'a self,
        _: &'static remote::Script,
        _: Vec<Vec<u8>>,
        _: Vec<Vec<u8>>,
    ) -> remote::RemoteFuture<'a, Reply> {
        Box::pin(async { Ok(Reply::Nil) })
    }
    fn command<'a>(&'a self, args: Vec<Vec<u8>>) -> remote::RemoteFuture<'a, Reply> {
        let log = self.0.lock().unwrap();
        let d = |s: String| Reply::Data(Bytes::from(s));
        let reply = match &args[0][..] {
            b"XINFO" if !log.exists => Err(RemoteError::Redis("ResponseError: no such key".into())),
            b"XINFO" => Ok(Reply::Array(vec![
                d("length".into()),
                Reply::Int(log.entries.len() as i64),
                d("last-generated-id".into()),
                d(log.newest.to_string()),
                d("max-deleted-entry-id".into()),
                d("0-0".into()),
                d("entries-added".into()),
                Reply::Int(log.added as i64),
                d("recorded-first-entry-id".into()),
                d(log
                    .entries
                    .first()
                    .map_or(feed::Position::default(), |e| e.0)
                    .to_string()),
            ])),
            b"XRANGE" => {
                let from = String::from_utf8(args[2].clone()).unwrap();
                let count: usize = String::from_utf8(args[5].clone()).unwrap().parse().unwrap();
                let (exclusive, from) = match from.strip_prefix('(') {
                    Some(f) => (true, f.to_string()),
                    None => (false, from),
                };
                let from = feed::Position::parse(&from).unwrap();
                Ok(Reply::Array(
                    log.entries
                        .iter()
                        .filter(|(id, _)| if exclusive { *id > from } else { *id >= from })
                        .take(count)
                        .map(|(id, fields)| {
                            Reply::Array(vec![d(id.to_string()), Reply::Array(fields.clone())])
                        })
                        .collect(),
                ))
            }
            _ => Ok(Reply::Int(1)),
        };
        Box::pin(async move { reply })
    }
    fn subscribe<'a>(&'a self, _: Vec<u8>) -> remote::RemoteFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// A node with an empty memory tier following `log` (its saved position in `state`).
fn fleet_node(
    log: &Arc<FakeLog>,
    state: Option<std::path::PathBuf>,
) -> (Arc<SharedTier>, Arc<crate::cache::Cache>, Arc<Counters>) {
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(&config(), "me".into(), counters.clone(), log.clone());
    tier.breaker.success();
    let cache = Arc::new(crate::cache::Cache::new(
        Arc::new(crate::cache::memory::MemoryStorage::new(
            1 << 20,
            1 << 16,
            counters.clone(),
        )),
        4,
    ));
    tier.feed.attach(&cache, state);
    (tier, cache, counters)
}

/// What the node's tiers would still serve of an object stored before now.
fn still_served(cache: &crate::cache::Cache, old: &crate::cache::Object) -> bool {
    !cache.bans.is_banned(&CacheKey::new("h", "/old"), old)
}

/// A running node that fell behind: the entries after its position trimmed, the log lost, the
/// log lost and begun again by a newer invalidation. Each time it drops its local tiers
/// (`fleet_reset`) instead of going on from its position; a node the log kept up with does not.
#[tokio::test]
async fn a_running_node_that_fell_behind_drops_its_local_tiers() {
    let log = Arc::new(FakeLog::default());
    log.add_purge("/a");
    let (tier, cache, counters) = fleet_node(&log, None);
    feed::sync(&tier).await;
    let old = crate::cache::test_object(&[]);
    std::thread::sleep(Duration::from_millis(2));

    // Kept up: applies what others sent, in order, no reset.
    let p = log.add_purge("/b");
    feed::sync(&tier).await;
    assert_eq!(tier.feed.position(), p);
    assert_eq!(counters.fleet_inval_applied.get(), 1);
    assert_eq!(counters.fleet_reset.get(), 0);
    assert!(still_served(&cache, &old));
    // Everything trimmed, its own position last (`XTRIM MAXLEN 0`): nothing missed.
    log.trim_to(0);
    feed::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 0);
    assert_eq!(tier.feed.position(), p);

    // Two entries while it was not reading, the first trimmed away.
    log.add_purge("/c");
    let last = log.add_purge("/d");
    log.trim_to(1);
    feed::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 1, "trimmed past its position");
    assert!(!still_served(&cache, &old));
    assert_eq!(tier.feed.position(), last);

    // The log lost.
    let old = crate::cache::test_object(&[]);
    std::thread::sleep(Duration::from_millis(2));
    log.lose();
    feed::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 2, "log lost");
    assert!(!still_served(&cache, &old));

    // Lost again after the node read a newer entry, and begun anew by another invalidation
    // before the node looked: newest is past its position, nothing trimmed.
    let p = log.add_purge("/e");
    feed::sync(&tier).await;
    assert_eq!((tier.feed.position(), counters.fleet_reset.get()), (p, 2));
    let old = crate::cache::test_object(&[]);
    std::thread::sleep(Duration::from_millis(2));
    log.lose();
    let fresh = log.add_purge("/f");
    feed::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 3, "log begun anew");
    assert!(!still_served(&cache, &old));
    assert_eq!(tier.feed.position(), fresh);
    // And from there it follows the new log again.
    let next = log.add_purge("/g");
    feed::sync(&tier).await;
    assert_eq!(
        (tier.feed.position(), counters.fleet_reset.get()),
        (next, 3)
    );
}

/// Regression (issue 22): a node restarting with a saved position resumed there if the
/// position was not past the log's newest entry, without checking that the entries after it
/// were still in the log. Trimmed while it was down, they were skipped, and the node served
/// from its disk tier what they had purged.
#[tokio::test]
async fn a_saved_position_the_log_no_longer_holds_drops_the_local_tiers() {
    let dir = std::env::temp_dir().join(format!("shellac-fleet-feed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A file per start: the previous node's feed may still be saving its own position.
    let state = |n: u32| dir.join(format!("cache{n}.fleet"));

    // Saved position still in the log: resumes there and applies what came after.
    let log = Arc::new(FakeLog::default());
    let saved = log.add_purge("/a");
    log.add_purge("/b");
    let newest = log.add_purge("/c");
    std::fs::write(state(1), format!("{saved}\n")).unwrap();
    let (tier, _cache, counters) = fleet_node(&log, Some(state(1)));
    feed::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 0);
    assert_eq!(counters.fleet_inval_applied.get(), 2);
    assert_eq!(tier.feed.position(), newest);

    // The entries after it trimmed while the node was down.
    log.trim_to(1);
    std::fs::write(state(2), format!("{saved}\n")).unwrap();
    let old = crate::cache::test_object(&[]);
    std::thread::sleep(Duration::from_millis(2));
    let (tier, cache, counters) = fleet_node(&log, Some(state(2)));
    feed::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 1, "trimmed while down");
    assert!(!still_served(&cache, &old));
    assert_eq!(tier.feed.position(), newest);
    assert_eq!(counters.fleet_inval_applied.get(), 0);

    // Everything trimmed (`XTRIM MAXLEN 0`): the same.
    log.trim_to(0);
    std::fs::write(state(3), format!("{saved}\n")).unwrap();
    let (tier, _cache, counters) = fleet_node(&log, Some(state(3)));
    feed::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 1, "all trimmed while down");

    // The log lost while it was down, then begun anew by a newer invalidation.
    let saved = log.add_purge("/d");
    log.lose();
    let newest = log.add_purge("/e");
    std::fs::write(state(4), format!("{saved}\n")).unwrap();
    let (tier, _cache, counters) = fleet_node(&log, Some(state(4)));
    feed::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 1, "log begun anew while down");
    assert_eq!(tier.feed.position(), newest);

    // The log lost and not begun again.
    log.lose();
    std::fs::write(state(5), format!("{newest}\n")).unwrap();
    let (tier, _cache, counters) = fleet_node(&log, Some(state(5)));
    feed::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 1, "log lost while down");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cluster whose `purge` script fails (the URL's master failing over) until `heal`, while
/// the log takes entries and `lookup` finds `record`.
struct PurgeFails {
    healed: std::sync::atomic::AtomicBool,
    record: Bytes,
}

impl Remote for PurgeFails {
    fn eval<'a>(
        &'a self,
        script: &'static remote::Script,
        _: Vec<Vec<u8>>,
        _: Vec<Vec<u8>>,
    ) -> remote::RemoteFuture<'a, Reply> {
        let healed = self.healed.load(std::sync::atomic::Ordering::Relaxed);
        let d = |s: &'static str| Reply::Data(Bytes::from_static(s.as_bytes()));
        let reply = match script.name {
            "purge" if !healed => Err(RemoteError::Redis("CLUSTERDOWN".into())),
            "purge" => Ok(Reply::Int(1)),
            "lookup" => Ok(Reply::Array(vec![
                Reply::Data(self.record.clone()),
                Reply::Nil,
                d("hit"),
                Reply::Nil,
            ])),
            _ => Ok(Reply::Nil),
        };
        Box::pin(async move { reply })
    }
    fn command<'a>(&'a self, args: Vec<Vec<u8>>) -> remote::RemoteFuture<'a, Reply> {
        Box::pin(async move {
            Ok(match &args[0][..] {
                b"XADD" => Reply::Data(Bytes::from_static(b"1700000000000-0")),
                _ => Reply::Array(Vec::new()),
            })
        })
    }
    fn subscribe<'a>(&'a self, _: Vec<u8>) -> remote::RemoteFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// Regression (issue 22): a purge whose shared copies could not be removed was appended to
/// the log anyway and reported sent — every node applied it, then read the purged copy back
/// from the shared tier at its next miss. It is queued instead (removal first, then the log,
/// once Redis answers), and meanwhile the node that took it refuses shared copies stored
/// before it.
#[tokio::test]
async fn a_purge_whose_shared_copy_stays_is_queued_not_sent() {
    let key = CacheKey::new("h", "/p");
    let old = crate::cache::test_object(&[]);
    let record = layout::encode(&key, &old, 1, Instant::now()).unwrap().meta;
    std::thread::sleep(Duration::from_millis(2));
    let remote = Arc::new(PurgeFails {
        healed: false.into(),
        record,
    });
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), remote.clone());
    tier.breaker.success();
    assert!(matches!(tier.lookup(&key, false).await, Found::Object(_)));

    let out = feed::broadcast(&tier, feed::Invalidation::Purge(key.clone())).await;
    assert!(!out.sent, "{out:?}");
    assert!(out.summary().contains("queued"), "{}", out.summary());
    assert_eq!(counters.fleet_inval_sent.get(), 0);
    assert_eq!(counters.fleet_inval_queued.get(), 1);
    assert_eq!(tier.feed.queued(), 1);
    // The copy the shared tier still holds is not read back here.
    assert!(matches!(tier.lookup(&key, false).await, Found::Miss(None)));
    assert_eq!(counters.shared_refused.get(), 1);

    // Redis answers again: removed, then sent; the shared tier is read as usual.
    remote
        .healed
        .store(true, std::sync::atomic::Ordering::Relaxed);
    broadcast::flush_outbox(&tier).await;
    assert_eq!(tier.feed.queued(), 0);
    assert_eq!(counters.fleet_inval_sent.get(), 1);
    assert!(tier.feed.held(&key).is_none());
    assert!(matches!(tier.lookup(&key, false).await, Found::Object(_)));
}

/// A cluster where another node holds the fleet lease on every key and never finishes (it
/// died mid-fetch).
struct LeaseHeld;

impl Remote for LeaseHeld {
    fn eval<'a>(
        &'a self,
        _: &'static remote::Script,
        _: Vec<Vec<u8>>,
        _: Vec<Vec<u8>>,
    ) -> remote::RemoteFuture<'a, Reply> {
        Box::pin(async {
            Ok(Reply::Array(vec![
                Reply::Nil,
                Reply::Nil,
                Reply::Data(Bytes::from_static(b"held")),
            ]))
        })
    }
    fn command<'a>(&'a self, _: Vec<Vec<u8>>) -> remote::RemoteFuture<'a, Reply> {
        Box::pin(async { Ok(Reply::Nil) })
    }
    fn subscribe<'a>(&'a self, _: Vec<u8>) -> remote::RemoteFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// Fleet coalescing is bounded: a lease holder that never writes its copy makes the others
/// wait `lease_timeout` at most, then fetch themselves (`shared_lease_timeout`), without a
/// lease of their own.
#[tokio::test]
async fn a_dead_lease_holder_blocks_nobody_past_lease_timeout() {
    let text = "[storage.shared]\nnodes = [\"127.0.0.1:1\"]\nlease_timeout = \"150ms\"\n[[backend]]\nhost = \"a\"\n";
    let config = crate::config::Config::parse(text, "t.toml")
        .unwrap()
        .storage
        .shared
        .unwrap();
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(&config, "n".into(), counters.clone(), Arc::new(LeaseHeld));
    tier.breaker.success();
    let key = CacheKey::new("h", "/");
    let found = tokio::time::timeout(Duration::from_secs(30), tier.lookup(&key, true))
        .await
        .expect("the wait for a lease holder ends");
    assert!(
        matches!(found, Found::Miss(None)),
        "a miss, without a lease"
    );
    assert_eq!(counters.shared_lease_wait.get(), 1);
    assert_eq!(counters.shared_lease_timeout.get(), 1);
    assert_eq!(counters.shared_lease_waited_hit.get(), 0);
}

/// One tag's set in Redis, and a `purge` script that fails for one URL until `heal`.
struct TagSet {
    members: std::sync::Mutex<Vec<Bytes>>,
    purged: std::sync::Mutex<Vec<Vec<u8>>>,
    healed: std::sync::atomic::AtomicBool,
    failing: Vec<u8>,
}

impl Remote for TagSet {
    fn eval<'a>(
        &'a self,
        script: &'static remote::Script,
        keys: Vec<Vec<u8>>,
        _: Vec<Vec<u8>>,
    ) -> remote::RemoteFuture<'a, Reply> {
        let reply = if script.name == "tag_take" {
            // What the script that took and deleted a tag's set did (Redis's `SMEMBERS`, `DEL`).
            let taken = std::mem::take(&mut *self.members.lock().unwrap());
            Ok(Reply::Array(taken.into_iter().map(Reply::Data).collect()))
        } else if script.name != "purge" {
            Ok(Reply::Nil)
        } else if keys[0] == self.failing && !self.healed.load(std::sync::atomic::Ordering::Relaxed)
        {
            Err(RemoteError::Redis("CLUSTERDOWN".into()))
        } else {
            self.purged.lock().unwrap().push(keys[0].clone());
            Ok(Reply::Int(1))
        };
        Box::pin(async move { reply })
    }
    fn command<'a>(&'a self, args: Vec<Vec<u8>>) -> remote::RemoteFuture<'a, Reply> {
        let mut members = self.members.lock().unwrap();
        let reply = match &args[0][..] {
            b"SMEMBERS" => Reply::Array(members.iter().cloned().map(Reply::Data).collect()),
            b"SREM" => {
                members.retain(|m| !args[2..].iter().any(|a| a[..] == m[..]));
                Reply::Int(1)
            }
            b"XADD" => Reply::Data(Bytes::from_static(b"1700000000000-0")),
            _ => Reply::Array(Vec::new()),
        };
        Box::pin(async move { Ok(reply) })
    }
    fn subscribe<'a>(&'a self, _: Vec<u8>) -> remote::RemoteFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// Regression (issue 22): a tag purge took the tag's set (and deleted it) before purging its
/// URLs; when one purge failed the invalidation was retried with an empty set, and the URLs
/// it had not reached stayed in the shared tier. The set now loses only purged members.
#[tokio::test]
async fn a_tag_purge_that_fails_halfway_is_retried_whole() {
    let (one, two) = (CacheKey::new("h", "/one"), CacheKey::new("h", "/two"));
    let index = |k: &CacheKey| layout::UrlKeys::new("shellac:", k).index();
    let remote = Arc::new(TagSet {
        members: std::sync::Mutex::new(vec![
            Bytes::from(layout::tag_member(&one)),
            Bytes::from(layout::tag_member(&two)),
        ]),
        purged: Default::default(),
        healed: false.into(),
        failing: index(&two),
    });
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), remote.clone());
    tier.breaker.success();
    let out = feed::broadcast(&tier, feed::Invalidation::Tags(vec!["t".into()])).await;
    assert!(!out.sent, "{out:?}");
    assert_eq!(
        remote.members.lock().unwrap().len(),
        2,
        "the set kept whole"
    );

    remote
        .healed
        .store(true, std::sync::atomic::Ordering::Relaxed);
    broadcast::flush_outbox(&tier).await;
    assert_eq!(tier.feed.queued(), 0);
    assert_eq!(counters.fleet_inval_sent.get(), 1);
    assert!(
        remote.purged.lock().unwrap().contains(&index(&two)),
        "the URL the first attempt missed is purged"
    );
    assert!(remote.members.lock().unwrap().is_empty());
}

/// Records the scripts run, in order; `tag_add` fails while `tags_fail`.
#[derive(Default)]
struct Recorder {
    ran: std::sync::Mutex<Vec<&'static str>>,
    tags_fail: std::sync::atomic::AtomicBool,
}

impl Remote for Recorder {
    fn eval<'a>(
        &'a self,
        script: &'static remote::Script,
        _: Vec<Vec<u8>>,
        _: Vec<Vec<u8>>,
    ) -> remote::RemoteFuture<'a, Reply> {
        self.ran.lock().unwrap().push(script.name);
        let fail =
            script.name == "tag_add" && self.tags_fail.load(std::sync::atomic::Ordering::Relaxed);
        Box::pin(async move {
            if fail {
                Err(RemoteError::Redis("CLUSTERDOWN".into()))
            } else {
                Ok(Reply::Int(1))
            }
        })
    }
    fn command<'a>(&'a self, _: Vec<Vec<u8>>) -> remote::RemoteFuture<'a, Reply> {
        Box::pin(async { Ok(Reply::Nil) })
    }
    fn subscribe<'a>(&'a self, _: Vec<u8>) -> remote::RemoteFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// Regression (issue 22): a write committed the copy, then added the URL to its tags' sets;
/// a tag purge between the two missed it and the copy outlived the purge. The URL joins its
/// tags' sets first (a tag purge then marks it purged and the commit is refused), and a tag
/// that cannot be added stops the write.
#[tokio::test]
async fn a_copy_joins_its_tags_before_it_is_committed() {
    let remote = Arc::new(Recorder::default());
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), remote.clone());
    tier.breaker.success();
    let key = CacheKey::new("h", "/tagged");
    let object = Arc::new(crate::cache::test_object(&[("surrogate-key", "a b")]));
    let ran = |n: usize| {
        let remote = remote.clone();
        async move {
            for _ in 0..500 {
                if remote.ran.lock().unwrap().len() >= n {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            remote.ran.lock().unwrap().clone()
        }
    };
    tier.share(&key, &key, &object, None, feed::Position::default());
    assert_eq!(ran(3).await, ["tag_add", "tag_add", "commit"]);

    remote.ran.lock().unwrap().clear();
    remote
        .tags_fail
        .store(true, std::sync::atomic::Ordering::Relaxed);
    tier.share(&key, &key, &object, None, feed::Position::default());
    let seen = ran(1).await;
    // Nothing after the failed tag (give the writer a moment to do something wrong).
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(seen, ["tag_add"]);
    assert_eq!(*remote.ran.lock().unwrap(), ["tag_add"]);
    assert_eq!(counters.shared_write.get(), 1);
}

/// A fleet of two other nodes: `live` (at the log's end, heartbeat now) and `gone` (heartbeat
/// a minute ago).
struct TwoNodes;

impl Remote for TwoNodes {
    fn eval<'a>(
        &'a self,
        _: &'static remote::Script,
        _: Vec<Vec<u8>>,
        _: Vec<Vec<u8>>,
    ) -> remote::RemoteFuture<'a, Reply> {
        Box::pin(async { Ok(Reply::Int(0)) })
    }
    fn command<'a>(&'a self, args: Vec<Vec<u8>>) -> remote::RemoteFuture<'a, Reply> {
        let d = |s: String| Reply::Data(Bytes::from(s));
        let now = layout::wall_ms();
        let reply = match &args[0][..] {
            b"XADD" => d("1700000000000-0".into()),
            b"HGETALL" => Reply::Array(vec![
                d("live".into()),
                d(format!("1700000000000-0 {now}")),
                d("gone".into()),
                d(format!("1600000000000-0 {}", now - 60_000)),
            ]),
            _ => Reply::Nil,
        };
        Box::pin(async move { Ok(reply) })
    }
    fn subscribe<'a>(&'a self, _: Vec<u8>) -> remote::RemoteFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// A purge's answer names the nodes it did not wait for because they have been silent for
/// 5 s or more (stopped, partitioned from Redis): before, they were left out of it, and an
/// answer "confirmed by" every other live node read as the whole fleet's.
#[tokio::test]
async fn a_purge_answer_names_the_silent_nodes() {
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(&config(), "n".into(), counters, Arc::new(TwoNodes));
    tier.breaker.success();
    let out = feed::broadcast(&tier, feed::Invalidation::Ban("req.url ~ /x".into())).await;
    assert!(out.sent);
    assert_eq!(out.confirmed, ["live"]);
    assert!(out.pending.is_empty());
    assert_eq!(out.silent, ["gone"]);
    assert!(
        out.summary()
            .ends_with("confirmed by live; silent for 5 s or more: gone"),
        "{}",
        out.summary()
    );
    assert_eq!(out.json()["silent"], serde_json::json!(["gone"]));
}

/// A cluster that answers lookups with `record` and fails everything else (the tag's master
/// failing over).
struct OnlyLookups {
    record: Bytes,
}

impl Remote for OnlyLookups {
    fn eval<'a>(
        &'a self,
        script: &'static remote::Script,
        _: Vec<Vec<u8>>,
        _: Vec<Vec<u8>>,
    ) -> remote::RemoteFuture<'a, Reply> {
        let reply = match script.name {
            "lookup" => Ok(Reply::Array(vec![
                Reply::Data(self.record.clone()),
                Reply::Nil,
                Reply::Data(Bytes::from_static(b"hit")),
                Reply::Nil,
            ])),
            _ => Err(RemoteError::Redis("CLUSTERDOWN".into())),
        };
        Box::pin(async move { reply })
    }
    fn command<'a>(&'a self, _: Vec<Vec<u8>>) -> remote::RemoteFuture<'a, Reply> {
        Box::pin(async { Err(RemoteError::Redis("CLUSTERDOWN".into())) })
    }
    fn subscribe<'a>(&'a self, _: Vec<u8>) -> remote::RemoteFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// A tag purge queued because the tag's set could not be read: until it is sent, the node it
/// was sent to refuses shared copies carrying the tag that were stored before it (those
/// without the tag are still read).
#[tokio::test]
async fn a_queued_tag_purge_keeps_its_copies_from_being_read_back() {
    let key = CacheKey::new("h", "/t");
    let tagged = crate::cache::test_object(&[("surrogate-key", "red blue")]);
    let record = layout::encode(&key, &tagged, 1, Instant::now())
        .unwrap()
        .meta;
    let untagged = crate::cache::test_object(&[]);
    let plain = layout::encode(&key, &untagged, 1, Instant::now())
        .unwrap()
        .meta;
    std::thread::sleep(Duration::from_millis(2));
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(
        &config(),
        "n".into(),
        counters.clone(),
        Arc::new(OnlyLookups { record }),
    );
    tier.breaker.success();
    assert!(matches!(tier.lookup(&key, false).await, Found::Object(_)));
    tier.breaker.success();
    let out = feed::broadcast(&tier, feed::Invalidation::Tags(vec!["blue".into()])).await;
    assert!(!out.sent);
    tier.breaker.success();
    assert!(matches!(tier.lookup(&key, false).await, Found::Miss(None)));
    assert_eq!(counters.shared_refused.get(), 1);

    let other = SharedTier::with_remote(
        &config(),
        "n".into(),
        counters.clone(),
        Arc::new(OnlyLookups { record: plain }),
    );
    other.breaker.success();
    other
        .feed
        .hold(&feed::Invalidation::Tags(vec!["blue".into()]));
    assert!(matches!(other.lookup(&key, false).await, Found::Object(_)));
}
