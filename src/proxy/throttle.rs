//! Rate limiting by key: token buckets (vmod_vsthrottle's, and `[[rule]] rate_limit`'s), in a
//! table of bounded size that outlives reloads.
//!
//! A bucket is named by its key and its limit (`limit` requests per `period`, and `block`):
//! the same key under another limit is another bucket, as in vsthrottle. It starts full
//! (`limit` tokens), a request takes one, and tokens come back at `limit / period`, up to
//! `limit`. A request that finds it empty is denied; with `block`, every request is then
//! denied for that long.
//!
//! Memory: at most `server.rate_limit_keys` buckets, in shards. A shard that is full first
//! forgets its buckets that have refilled (a full bucket is what a new one would be: nothing
//! is lost); if none has, it evicts the one used least recently, which forgets that key's
//! count (counter `rate_limit_evicted`). Keys are hashed with a per-process random key, so a
//! client cannot choose keys that collide.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::stats::Counters;

/// Shards of the table (each behind its own lock).
const SHARDS: usize = 16;

/// A limit: `requests` per `per`, and how long an empty bucket blocks its key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limit {
    pub requests: u64,
    pub per: Duration,
    pub block: Duration,
}

/// What a request found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Allowed; this many tokens are left.
    Allowed(u64),
    /// Denied; a token comes back (or the block ends) after this long.
    Denied(Duration),
}

#[derive(Debug)]
struct Bucket {
    tokens: u64,
    /// When the tokens were last counted up.
    refilled: Instant,
    blocked_until: Option<Instant>,
    used: Instant,
}

impl Bucket {
    fn new(limit: &Limit, now: Instant) -> Bucket {
        Bucket {
            tokens: limit.requests,
            refilled: now,
            blocked_until: None,
            used: now,
        }
    }

    /// Time for one token.
    fn interval(limit: &Limit) -> Duration {
        limit.per / u32::try_from(limit.requests.max(1)).unwrap_or(u32::MAX)
    }

    fn refill(&mut self, limit: &Limit, now: Instant) {
        if self.tokens >= limit.requests {
            self.refilled = now;
            return;
        }
        let interval = Bucket::interval(limit);
        if interval.is_zero() {
            self.tokens = limit.requests;
            self.refilled = now;
            return;
        }
        let elapsed = now.saturating_duration_since(self.refilled);
        let new = (elapsed.as_nanos() / interval.as_nanos()).min(u128::from(limit.requests)) as u64;
        if new == 0 {
            return;
        }
        self.tokens = (self.tokens + new).min(limit.requests);
        self.refilled = if self.tokens >= limit.requests {
            now
        } else {
            self.refilled + interval * new as u32
        };
    }

    fn blocked(&self, now: Instant) -> Duration {
        self.blocked_until
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now))
    }

    /// Refilled to the full limit and not blocked: a new bucket would be the same.
    fn is_idle(&self, limit_tokens: u64, interval: Duration, now: Instant) -> bool {
        self.blocked(now).is_zero()
            && (self.tokens >= limit_tokens
                || now.saturating_duration_since(self.refilled)
                    >= interval.saturating_mul(u32::try_from(limit_tokens).unwrap_or(u32::MAX)))
    }
}

/// One shard: buckets by id, with each one's limit (to tell an idle bucket).
type Shard = HashMap<u64, (Bucket, Limit)>;

/// The table of buckets.
pub struct Throttle {
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
    hasher: std::collections::hash_map::RandomState,
    counters: Arc<Counters>,
}

impl Throttle {
    /// A table of at most `max_keys` buckets (at least one per shard).
    pub fn new(max_keys: usize, counters: Arc<Counters>) -> Throttle {
        Throttle {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: max_keys.div_ceil(SHARDS).max(1),
            hasher: std::collections::hash_map::RandomState::new(),
            counters,
        }
    }

    fn id(&self, key: &str, limit: &Limit) -> u64 {
        let mut h = self.hasher.build_hasher();
        key.hash(&mut h);
        limit.requests.hash(&mut h);
        limit.per.hash(&mut h);
        limit.block.hash(&mut h);
        h.finish()
    }

    /// Runs `f` on the bucket of `key` under `limit`, made (full) if there is none.
    fn with<T>(&self, key: &str, limit: &Limit, f: impl FnOnce(&mut Bucket, Instant) -> T) -> T {
        let now = Instant::now();
        let id = self.id(key, limit);
        let mut shard = self.shards[(id as usize) % SHARDS].lock();
        if !shard.contains_key(&id) && shard.len() >= self.per_shard {
            self.make_room(&mut shard, now);
        }
        let (bucket, _) = shard
            .entry(id)
            .or_insert_with(|| (Bucket::new(limit, now), *limit));
        bucket.refill(limit, now);
        bucket.used = now;
        f(bucket, now)
    }

    /// Forgets the refilled buckets of a full shard; if there are none, evicts the one used
    /// least recently (counted).
    fn make_room(&self, shard: &mut Shard, now: Instant) {
        shard.retain(|_, (b, l)| !b.is_idle(l.requests, Bucket::interval(l), now));
        if shard.len() < self.per_shard {
            return;
        }
        if let Some(oldest) = shard
            .iter()
            .min_by_key(|(_, (b, _))| b.used)
            .map(|(id, _)| *id)
        {
            shard.remove(&oldest);
            self.counters.rate_limit_evicted.inc();
        }
    }

    /// vsthrottle's `is_denied`: takes a token if there is one (allowed); else denied, and
    /// with `block` the key is blocked for that long.
    pub fn take(&self, key: &str, limit: &Limit) -> Taken {
        if limit.requests == 0 || limit.per.is_zero() {
            return Taken::Denied(limit.per);
        }
        self.with(key, limit, |b, now| {
            let blocked = b.blocked(now);
            if !blocked.is_zero() {
                return Taken::Denied(blocked);
            }
            b.blocked_until = None;
            if b.tokens > 0 {
                b.tokens -= 1;
                return Taken::Allowed(b.tokens);
            }
            if !limit.block.is_zero() {
                b.blocked_until = Some(now + limit.block);
                return Taken::Denied(limit.block);
            }
            let next = b.refilled + Bucket::interval(limit);
            Taken::Denied(next.saturating_duration_since(now))
        })
    }

    /// vsthrottle's `remaining`: tokens left, none taken.
    pub fn remaining(&self, key: &str, limit: &Limit) -> u64 {
        if limit.requests == 0 || limit.per.is_zero() {
            return 0;
        }
        self.with(key, limit, |b, _| b.tokens)
    }

    /// vsthrottle's `blocked`: how long the key stays blocked (zero if it is not).
    pub fn blocked(&self, key: &str, limit: &Limit) -> Duration {
        if limit.requests == 0 || limit.per.is_zero() {
            return Duration::ZERO;
        }
        self.with(key, limit, |b, now| b.blocked(now))
    }

    /// vsthrottle's `return_token`: gives a token back (up to the limit).
    pub fn give_back(&self, key: &str, limit: &Limit) {
        if limit.requests == 0 || limit.per.is_zero() {
            return;
        }
        self.with(key, limit, |b, _| {
            b.tokens = (b.tokens + 1).min(limit.requests)
        });
    }

    /// Buckets held now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `[[rule]] rate_limit` takes its tokens here (the rules layer sees only the trait).
impl crate::rules::Limiter for Throttle {
    fn deny(&self, key: &str, limit: crate::rules::Limit) -> Option<Duration> {
        let limit = Limit {
            requests: limit.requests,
            per: limit.per,
            block: limit.block,
        };
        match self.take(key, &limit) {
            Taken::Allowed(_) => None,
            Taken::Denied(after) => Some(after),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(requests: u64, secs: u64) -> Limit {
        Limit {
            requests,
            per: Duration::from_secs(secs),
            block: Duration::ZERO,
        }
    }

    #[test]
    fn a_bucket_allows_its_limit_then_denies() {
        let t = Throttle::new(100, Arc::new(Counters::default()));
        let l = limit(3, 3600);
        assert_eq!(t.take("a", &l), Taken::Allowed(2));
        assert_eq!(t.take("a", &l), Taken::Allowed(1));
        assert_eq!(t.remaining("a", &l), 1);
        assert_eq!(t.take("a", &l), Taken::Allowed(0));
        assert!(matches!(t.take("a", &l), Taken::Denied(d) if d > Duration::from_secs(1000)));
        // Another key, or the same key under another limit, is another bucket.
        assert_eq!(t.take("b", &l), Taken::Allowed(2));
        assert_eq!(t.take("a", &limit(3, 60)), Taken::Allowed(2));
        // A token given back is taken again.
        t.give_back("a", &l);
        assert_eq!(t.take("a", &l), Taken::Allowed(0));
        assert!(t.blocked("a", &l).is_zero());
    }

    #[test]
    fn block_holds_the_key_off() {
        let t = Throttle::new(100, Arc::new(Counters::default()));
        let l = Limit {
            block: Duration::from_secs(600),
            ..limit(1, 3600)
        };
        assert_eq!(t.take("a", &l), Taken::Allowed(0));
        assert_eq!(t.take("a", &l), Taken::Denied(Duration::from_secs(600)));
        assert!(t.blocked("a", &l) > Duration::from_secs(590));
        // A zero limit denies everything.
        assert!(matches!(t.take("z", &limit(0, 1)), Taken::Denied(_)));
    }

    #[test]
    fn tokens_come_back_at_the_rate() {
        let l = limit(10, 10);
        let start = Instant::now();
        let mut b = Bucket::new(&l, start);
        b.tokens = 0;
        b.refill(&l, start + Duration::from_millis(2500));
        assert_eq!(b.tokens, 2);
        b.refill(&l, start + Duration::from_millis(3000));
        assert_eq!(b.tokens, 3);
        b.refill(&l, start + Duration::from_secs(60));
        assert_eq!(b.tokens, 10);
    }

    /// Bounded: a full table forgets refilled buckets first (nothing lost), then evicts the
    /// least recently used, counted.
    #[test]
    fn the_table_is_bounded_and_evictions_are_counted() {
        let counters = Arc::new(Counters::default());
        let t = Throttle::new(SHARDS * 2, counters.clone());
        let l = limit(1, 3600);
        for i in 0..1000 {
            t.take(&format!("k{i}"), &l);
        }
        assert!(t.len() <= SHARDS * 2, "{}", t.len());
        assert!(counters.rate_limit_evicted.get() >= 1000 - (SHARDS * 2) as u64);
        // Buckets that refilled make room without an eviction.
        let before = counters.rate_limit_evicted.get();
        let t = Throttle::new(SHARDS, counters.clone());
        let idle = limit(5, 3600);
        for i in 0..200 {
            t.remaining(&format!("idle{i}"), &idle);
        }
        assert_eq!(counters.rate_limit_evicted.get(), before);
    }
}
