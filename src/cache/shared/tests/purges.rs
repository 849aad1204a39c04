//! Purges, tag purges and tagged writes when part of the cluster fails: queued rather than
//! reported sent, retried whole, refused copies meanwhile; the nodes an answer did not wait for.

use super::*;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

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
    // The `purge` script fails (the URL's master failing over) until healed, while the log
    // takes entries and `lookup` finds the copy.
    let healed = Arc::new(AtomicBool::new(false));
    let remote = {
        let healed = healed.clone();
        Fake::new()
            .eval(move |script, _| match script {
                "purge" if !healed.load(Relaxed) => Err(cluster_down()),
                "purge" => Ok(Reply::Int(1)),
                "lookup" => Ok(found(&record)),
                _ => Ok(Reply::Nil),
            })
            .command(|args| {
                Ok(match &args[0][..] {
                    b"XADD" => Reply::Data(Bytes::from_static(b"1700000000000-0")),
                    _ => Reply::Array(Vec::new()),
                })
            })
    };
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), Arc::new(remote));
    tier.breaker.success();
    assert!(matches!(
        tier.lookup(&key, false).await,
        SharedFound::Object(_)
    ));

    let out = feed::broadcast(&tier, feed::Invalidation::Purge(key.clone())).await;
    assert!(!out.sent, "{out:?}");
    assert!(out.summary().contains("queued"), "{}", out.summary());
    assert_eq!(counters.fleet_inval_sent.get(), 0);
    assert_eq!(counters.fleet_inval_queued.get(), 1);
    assert_eq!(tier.feed.queued(), 1);
    // The copy the shared tier still holds is not read back here.
    assert!(matches!(
        tier.lookup(&key, false).await,
        SharedFound::Miss(None)
    ));
    assert_eq!(counters.shared_refused.get(), 1);

    // Redis answers again: removed, then sent; the shared tier is read as usual.
    healed.store(true, Relaxed);
    broadcast::flush_outbox(&tier).await;
    assert_eq!(tier.feed.queued(), 0);
    assert_eq!(counters.fleet_inval_sent.get(), 1);
    assert!(tier.feed.held(&key).is_none());
    assert!(matches!(
        tier.lookup(&key, false).await,
        SharedFound::Object(_)
    ));
}

/// One tag's set in Redis, and a `purge` script that fails for one URL until `heal`.
struct TagSet {
    members: std::sync::Mutex<Vec<Bytes>>,
    purged: std::sync::Mutex<Vec<Vec<u8>>>,
    healed: AtomicBool,
    failing: Vec<u8>,
}

impl TagSet {
    /// Redis's answer to the script `script` run on `keys`.
    fn script(&self, script: &str, keys: &[Vec<u8>]) -> Result<Reply, RemoteError> {
        if script == "tag_take" {
            // What the script that took and deleted a tag's set did (Redis's `SMEMBERS`, `DEL`).
            let taken = std::mem::take(&mut *self.members.lock().unwrap());
            Ok(Reply::Array(taken.into_iter().map(Reply::Data).collect()))
        } else if script != "purge" {
            Ok(Reply::Nil)
        } else if keys[0] == self.failing && !self.healed.load(Relaxed) {
            Err(cluster_down())
        } else {
            self.purged.lock().unwrap().push(keys[0].clone());
            Ok(Reply::Int(1))
        }
    }

    /// Redis's answer to the command `args`.
    fn command(&self, args: &[Vec<u8>]) -> Result<Reply, RemoteError> {
        let mut members = self.members.lock().unwrap();
        Ok(match &args[0][..] {
            b"SMEMBERS" => Reply::Array(members.iter().cloned().map(Reply::Data).collect()),
            b"SREM" => {
                members.retain(|m| !args[2..].iter().any(|a| a[..] == m[..]));
                Reply::Int(1)
            }
            b"XADD" => Reply::Data(Bytes::from_static(b"1700000000000-0")),
            _ => Reply::Array(Vec::new()),
        })
    }

    /// A fake Redis answering as this set does.
    fn remote(self: &Arc<TagSet>) -> Arc<Fake> {
        let (scripts, commands) = (self.clone(), self.clone());
        Arc::new(
            Fake::new()
                .eval(move |script, keys| scripts.script(script, keys))
                .command(move |args| commands.command(args)),
        )
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
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), remote.remote());
    tier.breaker.success();
    let out = feed::broadcast(&tier, feed::Invalidation::Tags(vec!["t".into()])).await;
    assert!(!out.sent, "{out:?}");
    assert_eq!(
        remote.members.lock().unwrap().len(),
        2,
        "the set kept whole"
    );

    remote.healed.store(true, Relaxed);
    broadcast::flush_outbox(&tier).await;
    assert_eq!(tier.feed.queued(), 0);
    assert_eq!(counters.fleet_inval_sent.get(), 1);
    assert!(
        remote.purged.lock().unwrap().contains(&index(&two)),
        "the URL the first attempt missed is purged"
    );
    assert!(remote.members.lock().unwrap().is_empty());
}

/// Regression (issue 22): a write committed the copy, then added the URL to its tags' sets;
/// a tag purge between the two missed it and the copy outlived the purge. The URL joins its
/// tags' sets first (a tag purge then marks it purged and the commit is refused), and a tag
/// that cannot be added stops the write.
#[tokio::test]
async fn a_copy_joins_its_tags_before_it_is_committed() {
    // Records the scripts run, in order; `tag_add` fails while `tags_fail`.
    let tags_fail = Arc::new(AtomicBool::new(false));
    let remote = {
        let tags_fail = tags_fail.clone();
        Arc::new(Fake::new().eval(move |script, _| {
            if script == "tag_add" && tags_fail.load(Relaxed) {
                Err(cluster_down())
            } else {
                Ok(Reply::Int(1))
            }
        }))
    };
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
    tags_fail.store(true, Relaxed);
    tier.share(&key, &key, &object, None, feed::Position::default());
    let seen = ran(1).await;
    // Nothing after the failed tag (give the writer a moment to do something wrong).
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(seen, ["tag_add"]);
    assert_eq!(*remote.ran.lock().unwrap(), ["tag_add"]);
    assert_eq!(counters.shared_write.get(), 1);
}

/// A cluster whose log takes every entry at `1700000000000-0` and whose list of nodes
/// (`HGETALL`) is what `nodes(now_ms)` answers: name and value pairs, or an error.
fn fleet(
    nodes: impl Fn(u64) -> Result<Vec<(String, String)>, RemoteError> + Send + Sync + 'static,
) -> Fake {
    Fake::new()
        .eval(|_, _| Ok(Reply::Int(0)))
        .command(move |args| {
            let d = |s: String| Reply::Data(Bytes::from(s));
            Ok(match &args[0][..] {
                b"XADD" => d("1700000000000-0".into()),
                b"HGETALL" => Reply::Array(
                    nodes(layout::wall_ms())?
                        .into_iter()
                        .flat_map(|(name, value)| [d(name), d(value)])
                        .collect(),
                ),
                _ => Reply::Nil,
            })
        })
}

/// A fleet of `live` (at the log's position, heartbeat now) and `name` with the value
/// `value(now_ms)`.
fn other_nodes(name: &'static str, value: fn(u64) -> String) -> Fake {
    fleet(move |now| {
        Ok(vec![
            ("live".into(), format!("1700000000000-0 {now}")),
            (name.into(), value(now)),
        ])
    })
}

/// A purge's answer names the nodes it did not wait for because they have been silent for
/// 5 s or more (stopped, partitioned from Redis): before, they were left out of it, and an
/// answer "confirmed by" every other live node read as the whole fleet's.
#[tokio::test]
async fn a_purge_answer_names_the_silent_nodes() {
    let counters = Arc::new(Counters::default());
    // A fleet of two other nodes: `live` (at the log's end, heartbeat now) and `gone`
    // (heartbeat a minute ago).
    let two_nodes = other_nodes("gone", |now| format!("1600000000000-0 {}", now - 60_000));
    let tier = SharedTier::with_remote(&config(), "n".into(), counters, Arc::new(two_nodes));
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

/// A node that stopped cleanly (`Feed::leave` wrote `stopped` after its position, its
/// heartbeat still recent) is not waited for — nothing is unconfirmed — and the answer names
/// it as stopped.
#[tokio::test]
async fn a_purge_does_not_wait_for_a_node_that_stopped_cleanly() {
    let counters = Arc::new(Counters::default());
    let nodes = other_nodes("left", |now| format!("1600000000000-0 {now} stopped"));
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), Arc::new(nodes));
    tier.breaker.success();
    let out = feed::broadcast(&tier, feed::Invalidation::Ban("req.url ~ /x".into())).await;
    assert!(out.sent);
    assert_eq!(out.confirmed, ["live"]);
    assert!(out.pending.is_empty() && out.silent.is_empty());
    assert_eq!(out.stopped, ["left"]);
    assert_eq!(counters.fleet_inval_unconfirmed.get(), 0);
    assert!(
        out.summary().ends_with("confirmed by live; stopped: left"),
        "{}",
        out.summary()
    );
    assert_eq!(out.json()["stopped"], serde_json::json!(["left"]));
}

/// A cluster whose log takes every entry at `1700000000000-0` and whose list of nodes holds
/// `live` and `live2`, both at that position with a heartbeat now — but whose `HGETALL` of
/// that list fails the first `failures` times (`u32::MAX`: always).
fn nodes_listed_after(failures: u32) -> Fake {
    let calls = std::sync::atomic::AtomicU32::new(0);
    fleet(move |now| {
        if calls.fetch_add(1, Relaxed) < failures {
            return Err(RemoteError::Reply);
        }
        Ok(vec![
            ("live".into(), format!("1700000000000-0 {now}")),
            ("live2".into(), format!("1700000000000-0 {now}")),
        ])
    })
}

/// Regression (stop 42, tests/fleet under load): one failed or late poll of the list of nodes
/// ended the wait, and the answer said "sent" with no confirmation list at all. A failed poll
/// is tried again within `confirm_timeout`.
#[tokio::test]
async fn a_failed_poll_of_the_nodes_is_tried_again() {
    let counters = Arc::new(Counters::default());
    let fleet = nodes_listed_after(1);
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), Arc::new(fleet));
    tier.breaker.success();
    let out = feed::broadcast(&tier, feed::Invalidation::Ban("req.url ~ /x".into())).await;
    assert!(out.sent && !out.unanswered, "{}", out.summary());
    assert_eq!(out.confirmed, ["live", "live2"]);
    assert!(out.pending.is_empty());
    assert_eq!(counters.fleet_inval_unconfirmed.get(), 0);
    assert!(
        out.summary().ends_with("confirmed by live, live2"),
        "{}",
        out.summary()
    );
}

/// Sent, and the list of nodes never read within `confirm_timeout`: the answer says who
/// applied it is unknown (and counts it unconfirmed) instead of listing nobody.
#[tokio::test]
async fn a_purge_whose_nodes_cannot_be_listed_says_so() {
    let counters = Arc::new(Counters::default());
    let fleet = nodes_listed_after(u32::MAX);
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), Arc::new(fleet));
    tier.breaker.success();
    let out = feed::broadcast(&tier, feed::Invalidation::Ban("req.url ~ /x".into())).await;
    assert!(out.sent && out.unanswered, "{}", out.summary());
    assert!(out.confirmed.is_empty() && out.pending.is_empty());
    assert_eq!(counters.fleet_inval_unconfirmed.get(), 1);
    assert_eq!(
        out.summary(),
        "fleet: sent; shared tier: 0 removed; confirmations unknown: Redis did not list the \
         nodes in time"
    );
    assert_eq!(out.json()["unanswered"], true);
}

/// A cluster that answers lookups with `record` and fails everything else (the tag's master
/// failing over).
fn only_lookups(record: Bytes) -> Arc<Fake> {
    Arc::new(
        Fake::new()
            .eval(move |script, _| match script {
                "lookup" => Ok(found(&record)),
                _ => Err(cluster_down()),
            })
            .command(|_| Err(cluster_down())),
    )
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
        only_lookups(record),
    );
    tier.breaker.success();
    assert!(matches!(
        tier.lookup(&key, false).await,
        SharedFound::Object(_)
    ));
    tier.breaker.success();
    let out = feed::broadcast(&tier, feed::Invalidation::Tags(vec!["blue".into()])).await;
    assert!(!out.sent);
    tier.breaker.success();
    assert!(matches!(
        tier.lookup(&key, false).await,
        SharedFound::Miss(None)
    ));
    assert_eq!(counters.shared_refused.get(), 1);

    let other =
        SharedTier::with_remote(&config(), "n".into(), counters.clone(), only_lookups(plain));
    other.breaker.success();
    other
        .feed
        .hold(&feed::Invalidation::Tags(vec!["blue".into()]));
    assert!(matches!(
        other.lookup(&key, false).await,
        SharedFound::Object(_)
    ));
}
