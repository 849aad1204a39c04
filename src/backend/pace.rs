//! The pace of a client's body streamed to a backend over HTTP/2 ([`BodyPace`], put on the
//! request by server/h2): the HTTP/1.1 gate's body clock for one body, and what became of it
//! ([`BodyOutcome`]: too large, too slow) for server/h2 to answer `413` / `408`.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Context;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// A client body that passed `server.max_body_size` while streaming to a backend.
#[derive(Debug, thiserror::Error)]
#[error("request body larger than server.max_body_size")]
pub struct BodyTooLarge;

/// A client body that came slower than `body_timeout` / `body_min_rate` allow.
#[derive(Debug, thiserror::Error)]
#[error("request body too slow (server.body_timeout, server.body_min_rate)")]
pub struct BodyTooSlow;

/// How an HTTP/2 request's body is paced, and what became of it: put on the request (an
/// extension) by server/h2, taken by the backend request that streams the body, read back by
/// server/h2 to answer `413` / `408` in place of the failed fetch's answer.
#[derive(Clone, Debug)]
pub struct BodyPace {
    /// `server.body_timeout` (ms): the longest wait for body bytes in one stretch, and the
    /// allowance before `min_rate` applies.
    pub timeout_ms: u64,
    /// `server.body_min_rate` (bytes/s; 0: no rate check).
    pub min_rate: u64,
    pub outcome: Arc<BodyOutcome>,
}

/// Why a paced body failed, if it did.
#[derive(Debug, Default)]
pub struct BodyOutcome {
    too_large: AtomicBool,
    too_slow: AtomicBool,
}

impl BodyOutcome {
    /// The body went over `server.max_body_size`.
    pub fn too_large(&self) -> bool {
        self.too_large.load(Ordering::Relaxed)
    }

    /// The body came too slowly.
    pub fn too_slow(&self) -> bool {
        self.too_slow.load(Ordering::Relaxed)
    }
}

/// The HTTP/1.1 gate's body clock (server/h1/conn.rs `body_too_slow`) for one body: only time
/// spent waiting on the client counts (not time the backend took to take the bytes); too slow
/// is one wait longer than `timeout_ms`, or waits adding up to more than `timeout_ms` plus one
/// second per `min_rate` bytes received.
pub(super) struct Pacer {
    pace: BodyPace,
    bytes: u64,
    waited_ms: u64,
    /// The wait in progress began then (the client had nothing for us).
    since: Option<Instant>,
    sleep: Option<Pin<Box<Sleep>>>,
}

/// How long the wait that starts now may last (ms): `timeout_ms` in one stretch, and no more
/// than what is left of `timeout_ms` plus one second per `min_rate` bytes received after the
/// `waited_ms` already spent waiting (0: no rate check).
fn allowance(timeout_ms: u64, min_rate: u64, bytes: u64, waited_ms: u64) -> u64 {
    match bytes.saturating_mul(1000).checked_div(min_rate) {
        Some(earned) => timeout_ms.min(timeout_ms.saturating_add(earned).saturating_sub(waited_ms)),
        None => timeout_ms,
    }
}

impl Pacer {
    pub(super) fn new(pace: BodyPace) -> Pacer {
        Pacer {
            pace,
            bytes: 0,
            waited_ms: 0,
            since: None,
            sleep: None,
        }
    }

    /// `n` bytes came from the client: the wait in progress, if any, is over.
    pub(super) fn received(&mut self, n: u64) {
        if let Some(since) = self.since.take() {
            self.waited_ms = self
                .waited_ms
                .saturating_add(since.elapsed().as_millis() as u64);
        }
        self.bytes = self.bytes.saturating_add(n);
    }

    /// The client has nothing for us: whether the wait is over its allowance now (else the
    /// timer is armed to wake this body when it will be).
    pub(super) fn waiting(&mut self, cx: &mut Context<'_>) -> bool {
        let since = *self.since.get_or_insert_with(Instant::now);
        let allowed = allowance(
            self.pace.timeout_ms,
            self.pace.min_rate,
            self.bytes,
            self.waited_ms,
        );
        let deadline = since + Duration::from_millis(allowed.saturating_add(1));
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.deadline() != deadline {
            sleep.as_mut().reset(deadline);
        }
        sleep.as_mut().poll(cx).is_ready()
    }

    /// The body failed for coming too slowly: what server/h2 reads back.
    pub(super) fn too_slow(&self) {
        self.pace.outcome.too_slow.store(true, Ordering::Relaxed);
    }

    /// The body failed for going over `server.max_body_size`.
    pub(super) fn too_large(&self) {
        self.pace.outcome.too_large.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The HTTP/1.1 gate's rule (server/h1/conn.rs `body_too_slow`), per HTTP/2 body.
    #[test]
    fn the_allowance_follows_the_gate() {
        // One stretch: never more than body_timeout.
        assert_eq!(allowance(30_000, 500, 0, 0), 30_000);
        assert_eq!(allowance(30_000, 500, 1 << 30, 0), 30_000);
        // 100 bytes at 100 B/s earn 1 s: 1.5 s waited of 1 + 1 s leaves 0.5 s.
        assert_eq!(allowance(1_000, 100, 100, 1_500), 500);
        // Waited beyond it: nothing left, the next wait is too slow at once.
        assert_eq!(allowance(1_000, 100, 100, 2_500), 0);
        // Rate 0: the stretch limit alone, however long the waits added up.
        assert_eq!(allowance(1_000, 0, 0, 1_000_000), 1_000);
    }
}
