//! The shared tier against a Redis that hangs or fails (no Redis needed): deadlines and the
//! circuit breaker. With a real cluster: tests/fleet.rs.

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
