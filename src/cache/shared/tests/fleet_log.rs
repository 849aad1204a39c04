//! The invalidation feed against a fleet's log kept in memory: missing, trimmed, lost, begun
//! again — while a node runs and while it was down.

use super::*;

/// Regression (issue 22, `shared_error` at start-up): `GET /fleet` on a fleet without a log
/// yet counted an error, and a failure towards the breaker, each time it was asked.
#[tokio::test]
async fn describing_a_fleet_without_a_log_is_not_an_error() {
    let counters = Arc::new(Counters::default());
    // A cluster that never saw an invalidation: no stream, no nodes yet. `XINFO` on the
    // missing stream is an error, as Redis answers it.
    let no_log = Fake::new().command(|args| match &args[0][..] {
        b"XINFO" => Err(RemoteError::Redis("ResponseError: no such key".into())),
        _ => Ok(Reply::Array(Vec::new())),
    });
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), Arc::new(no_log));
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

    /// Redis's answer to `args` (`XINFO STREAM`, `XRANGE`; anything else succeeds).
    fn reply(&self, args: &[Vec<u8>]) -> Result<Reply, RemoteError> {
        let log = self.0.lock().unwrap();
        let d = |s: String| Reply::Data(Bytes::from(s));
        match &args[0][..] {
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
        }
    }
}

/// A node with an empty memory tier following `log` (its saved position in `state`).
fn fleet_node(
    log: &Arc<FakeLog>,
    state: Option<std::path::PathBuf>,
) -> (Arc<SharedTier>, Arc<Tiers>, Arc<Counters>) {
    let counters = Arc::new(Counters::default());
    let remote = {
        let log = log.clone();
        Arc::new(Fake::new().command(move |args| log.reply(args)))
    };
    let tier = SharedTier::with_remote(&config(), "me".into(), counters.clone(), remote);
    tier.breaker.success();
    let cache = Tiers::new(&counters);
    tier.feed.attach(&cache, state);
    (tier, cache, counters)
}

/// What the node's tiers would still serve of an object stored before now.
fn still_served(cache: &Tiers, old: &crate::cache::Object) -> bool {
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
    follow::sync(&tier).await;
    let old = crate::cache::test_object(&[]);
    std::thread::sleep(Duration::from_millis(2));

    // Kept up: applies what others sent, in order, no reset.
    let p = log.add_purge("/b");
    follow::sync(&tier).await;
    assert_eq!(tier.feed.position(), p);
    assert_eq!(counters.fleet_inval_applied.get(), 1);
    assert_eq!(counters.fleet_reset.get(), 0);
    assert!(still_served(&cache, &old));
    // Everything trimmed, its own position last (`XTRIM MAXLEN 0`): nothing missed.
    log.trim_to(0);
    follow::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 0);
    assert_eq!(tier.feed.position(), p);

    // Two entries while it was not reading, the first trimmed away.
    log.add_purge("/c");
    let last = log.add_purge("/d");
    log.trim_to(1);
    follow::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 1, "trimmed past its position");
    assert!(!still_served(&cache, &old));
    assert_eq!(tier.feed.position(), last);

    // The log lost.
    let old = crate::cache::test_object(&[]);
    std::thread::sleep(Duration::from_millis(2));
    log.lose();
    follow::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 2, "log lost");
    assert!(!still_served(&cache, &old));

    // Lost again after the node read a newer entry, and begun anew by another invalidation
    // before the node looked: newest is past its position, nothing trimmed.
    let p = log.add_purge("/e");
    follow::sync(&tier).await;
    assert_eq!((tier.feed.position(), counters.fleet_reset.get()), (p, 2));
    let old = crate::cache::test_object(&[]);
    std::thread::sleep(Duration::from_millis(2));
    log.lose();
    let fresh = log.add_purge("/f");
    follow::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 3, "log begun anew");
    assert!(!still_served(&cache, &old));
    assert_eq!(tier.feed.position(), fresh);
    // And from there it follows the new log again.
    let next = log.add_purge("/g");
    follow::sync(&tier).await;
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
    follow::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 0);
    assert_eq!(counters.fleet_inval_applied.get(), 2);
    assert_eq!(tier.feed.position(), newest);

    // The entries after it trimmed while the node was down.
    log.trim_to(1);
    std::fs::write(state(2), format!("{saved}\n")).unwrap();
    let old = crate::cache::test_object(&[]);
    std::thread::sleep(Duration::from_millis(2));
    let (tier, cache, counters) = fleet_node(&log, Some(state(2)));
    follow::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 1, "trimmed while down");
    assert!(!still_served(&cache, &old));
    assert_eq!(tier.feed.position(), newest);
    assert_eq!(counters.fleet_inval_applied.get(), 0);

    // Everything trimmed (`XTRIM MAXLEN 0`): the same.
    log.trim_to(0);
    std::fs::write(state(3), format!("{saved}\n")).unwrap();
    let (tier, _cache, counters) = fleet_node(&log, Some(state(3)));
    follow::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 1, "all trimmed while down");

    // The log lost while it was down, then begun anew by a newer invalidation.
    let saved = log.add_purge("/d");
    log.lose();
    let newest = log.add_purge("/e");
    std::fs::write(state(4), format!("{saved}\n")).unwrap();
    let (tier, _cache, counters) = fleet_node(&log, Some(state(4)));
    follow::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 1, "log begun anew while down");
    assert_eq!(tier.feed.position(), newest);

    // The log lost and not begun again.
    log.lose();
    std::fs::write(state(5), format!("{newest}\n")).unwrap();
    let (tier, _cache, counters) = fleet_node(&log, Some(state(5)));
    follow::sync(&tier).await;
    assert_eq!(counters.fleet_reset.get(), 1, "log lost while down");
    let _ = std::fs::remove_dir_all(&dir);
}
