//! The shared tier of this node: its connection, settings and counters, and the one way
//! every operation reaches Redis ([`SharedTier::call`]: a deadline and the circuit breaker).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::auth;
use super::breaker::{Breaker, Permit};
use super::entry::Position;
use super::feed::Feed;
use super::remote::{Remote, RemoteError};
use crate::cache::{CacheKey, Object};
use crate::stats::Counters;

/// The shared tier of this node.
pub struct SharedTier {
    pub(super) remote: Arc<dyn Remote>,
    pub breaker: Breaker,
    pub counters: Arc<Counters>,
    pub(super) prefix: String,
    pub node: String,
    pub(super) max_object: u64,
    pub(super) read_timeout: Duration,
    pub(super) write_timeout: Duration,
    pub(super) lease_timeout: Duration,
    pub confirm_timeout: Duration,
    pub log_length: u64,
    pub(super) writes: tokio::sync::mpsc::Sender<Write>,
    /// The invalidation feed (positions, lag, the cache it applies to).
    pub feed: Feed,
    /// The cluster's refusals of the credentials or permissions (`auth.rs`).
    pub refusals: Arc<auth::Refusals>,
    pub(super) username: Option<String>,
}

/// Background writes queued at most; more are dropped (`shared_write_dropped`).
pub(super) const WRITE_QUEUE: usize = 4096;
/// One background write.
pub(super) struct Write {
    pub(super) primary: CacheKey,
    pub(super) key: CacheKey,
    pub(super) object: Arc<Object>,
    pub(super) ticket: Option<String>,
    pub(super) seen: Position,
}

impl SharedTier {
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `max_object_size`: larger objects stay in the node's own tiers.
    pub fn max_object_size(&self) -> u64 {
        self.max_object
    }

    /// Runs `op` under a deadline and the breaker; None when skipped, failed or late (counted).
    pub(crate) async fn call<T>(
        &self,
        deadline: Duration,
        op: impl Future<Output = Result<T, RemoteError>>,
    ) -> Option<T> {
        if self.breaker.permit(crate::clock::now_ms()) == Permit::Refused {
            self.counters.shared_skipped.inc();
            return None;
        }
        match tokio::time::timeout(deadline, op).await {
            Ok(Ok(v)) => {
                self.breaker.success();
                Some(v)
            }
            Ok(Err(RemoteError::NotConnected)) => {
                self.counters.shared_skipped.inc();
                self.breaker.not_ready(crate::clock::now_ms());
                None
            }
            Ok(Err(e)) => {
                let why = e.to_string();
                match auth::classify(&why, self.username.as_deref()) {
                    Some(refusal) => {
                        self.counters.shared_auth_error.inc();
                        self.refusals.report(refusal, crate::clock::now_ms());
                    }
                    None => {
                        self.counters.shared_error.inc();
                        tracing::debug!(error = %e, "shared tier operation failed");
                    }
                }
                self.failed(&why);
                None
            }
            Err(_) => {
                self.counters.shared_timeout.inc();
                self.failed("no answer within the deadline");
                None
            }
        }
    }

    /// One more failure in a row; `why` (the last one's reason) is logged if it opens the
    /// breaker — a TLS handshake refused after a reconnect shows there.
    pub(super) fn failed(&self, why: &str) {
        if self.breaker.failure(crate::clock::now_ms()) {
            self.counters.shared_breaker_open.inc();
            tracing::warn!(
                last_error = why,
                "shared tier circuit breaker open: serving without it for a while"
            );
        }
    }

    /// The remote, for the feed.
    pub(crate) fn remote(&self) -> &Arc<dyn Remote> {
        &self.remote
    }
}

pub(super) fn spawn(f: impl Future<Output = ()> + Send + 'static) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(f);
    }
}

/// A random 64-bit number (generations, lease tokens): xxh3 of the time and a counter is
/// enough, nothing depends on it being unpredictable.
pub(super) fn rand_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    xxhash_rust::xxh3::xxh3_64(
        &[
            t.to_le_bytes(),
            n.to_le_bytes(),
            (std::process::id() as u64).to_le_bytes(),
        ]
        .concat(),
    )
}
