//! The shared tier against a Redis that hangs, fails, is not connected yet, or holds a lease
//! forever: each costs a deadline at most, and the breaker stops the waiting.

use super::*;

/// A Redis that never answers in time (`hang`), or fails at once.
fn broken(hang: bool) -> Arc<Fake> {
    Arc::new(
        Fake::new()
            .always(|| Err(cluster_down()))
            .hanging(hang)
            .unconnected(),
    )
}

/// Redis hanging costs a lookup its deadline, then the breaker skips it: no wait at all.
#[tokio::test]
async fn a_hanging_redis_costs_one_deadline_then_nothing() {
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), broken(true));
    // As after a first successful operation (a new tier starts open: its first call probes).
    tier.breaker.success();
    let key = CacheKey::new("h", "/");
    for _ in 0..3 {
        let t = Instant::now();
        assert!(matches!(
            tier.lookup(&key, true).await,
            SharedFound::Miss(None)
        ));
        let spent = t.elapsed();
        assert!(spent >= Duration::from_millis(20), "{spent:?}");
    }
    assert_eq!(counters.shared_timeout.get(), 3);
    assert_eq!(tier.breaker.state(), "open");
    assert_eq!(counters.shared_breaker_open.get(), 1);
    let t = Instant::now();
    assert!(matches!(
        tier.lookup(&key, true).await,
        SharedFound::Miss(None)
    ));
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
    let tier = SharedTier::with_remote(&config(), "n".into(), counters.clone(), broken(false));
    tier.breaker.success();
    let key = CacheKey::new("h", "/");
    for _ in 0..4 {
        assert!(matches!(
            tier.lookup(&key, false).await,
            SharedFound::Miss(None)
        ));
    }
    assert_eq!(counters.shared_error.get(), 3);
    assert_eq!(counters.shared_skipped.get(), 1);
    assert_eq!(tier.breaker.state_code(), 1);
    assert_eq!(tier.purge_url(&key, feed::Position::default()).await, None);
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
        // A Redis not connected yet.
        Arc::new(
            Fake::new()
                .always(|| Err(RemoteError::NotConnected))
                .unconnected(),
        ),
    );
    let cache = Tiers::new(&counters);
    tier.feed.attach(&cache, None);
    follow::sync(&tier).await;
    follow::sync(&tier).await;
    assert_eq!(counters.shared_error.get(), 0);
    assert_eq!(counters.shared_skipped.get(), 2);
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
    // Another node holds the fleet lease on every key and never finishes (it died mid-fetch).
    let lease_held = Arc::new(Fake::new().eval(|_, _| {
        Ok(Reply::Array(vec![
            Reply::Nil,
            Reply::Nil,
            Reply::Data(Bytes::from_static(b"held")),
        ]))
    }));
    let counters = Arc::new(Counters::default());
    let tier = SharedTier::with_remote(&config, "n".into(), counters.clone(), lease_held);
    tier.breaker.success();
    let key = CacheKey::new("h", "/");
    let found = tokio::time::timeout(Duration::from_secs(30), tier.lookup(&key, true))
        .await
        .expect("the wait for a lease holder ends");
    assert!(
        matches!(found, SharedFound::Miss(None)),
        "a miss, without a lease"
    );
    assert_eq!(counters.shared_lease_wait.get(), 1);
    assert_eq!(counters.shared_lease_timeout.get(), 1);
    assert_eq!(counters.shared_lease_waited_hit.get(), 0);
}
