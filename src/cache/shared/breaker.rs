//! The shared tier's circuit breaker: after `threshold` failures in a row (errors or deadlines
//! missed) the tier is skipped for `cooldown`; then one operation is let through as a probe —
//! its success closes the breaker, its failure opens it again. While open, every node works
//! as a single Shellac and no request waits on Redis at all.

use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

const CLOSED: u8 = 0;
const OPEN: u8 = 1;
const HALF_OPEN: u8 = 2;

/// What the breaker says about one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permit {
    /// Go ahead.
    Go,
    /// Go ahead: this is the probe after a cooldown.
    Probe,
    /// Skip the shared tier.
    Refused,
}

pub struct Breaker {
    state: AtomicU8,
    failures: AtomicU32,
    /// When (`clock::now_ms`) an open breaker lets a probe through.
    reopen_at: AtomicU64,
    threshold: u32,
    cooldown_ms: u64,
}

impl Breaker {
    pub fn new(threshold: u32, cooldown_ms: u64) -> Breaker {
        Breaker {
            state: AtomicU8::new(CLOSED),
            failures: AtomicU32::new(0),
            reopen_at: AtomicU64::new(0),
            threshold: threshold.max(1),
            cooldown_ms,
        }
    }

    /// A breaker that starts open (nothing connected yet): the first operation after
    /// `cooldown` is the probe.
    pub fn open_now(&self, now_ms: u64) {
        self.state.store(OPEN, Ordering::Release);
        self.reopen_at.store(now_ms, Ordering::Release);
    }

    pub fn permit(&self, now_ms: u64) -> Permit {
        match self.state.load(Ordering::Acquire) {
            CLOSED => Permit::Go,
            OPEN if now_ms >= self.reopen_at.load(Ordering::Acquire) => {
                // One caller wins the probe; the others keep skipping until it reports.
                match self.state.compare_exchange(
                    OPEN,
                    HALF_OPEN,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => Permit::Probe,
                    Err(_) => Permit::Refused,
                }
            }
            _ => Permit::Refused,
        }
    }

    pub fn success(&self) {
        self.failures.store(0, Ordering::Relaxed);
        if self.state.load(Ordering::Acquire) != CLOSED {
            self.state.store(CLOSED, Ordering::Release);
        }
    }

    /// Nothing is connected yet: stay open, and let the next operation probe again (a client
    /// that is still connecting fails at once, without touching the network).
    pub fn not_ready(&self, now_ms: u64) {
        self.open_now(now_ms);
    }

    /// Records a failure; true when it opened the breaker.
    pub fn failure(&self, now_ms: u64) -> bool {
        let state = self.state.load(Ordering::Acquire);
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if state == HALF_OPEN || (state == CLOSED && failures >= self.threshold) {
            self.reopen_at
                .store(now_ms + self.cooldown_ms, Ordering::Release);
            return self.state.swap(OPEN, Ordering::AcqRel) != OPEN;
        }
        false
    }

    /// `closed`, `open` or `half-open`.
    pub fn state(&self) -> &'static str {
        match self.state.load(Ordering::Acquire) {
            CLOSED => "closed",
            OPEN => "open",
            _ => "half-open",
        }
    }

    /// 0 closed, 1 open, 2 half-open (gauge `shared_breaker_state`).
    pub fn state_code(&self) -> u64 {
        u64::from(self.state.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_failures_probes_after_cooldown() {
        let b = Breaker::new(3, 100);
        assert_eq!(b.permit(0), Permit::Go);
        b.failure(0);
        b.failure(0);
        b.success();
        b.failure(1);
        b.failure(1);
        assert_eq!(b.state(), "closed", "a success resets the count");
        assert!(b.failure(2), "opened");
        assert_eq!(b.state(), "open");
        assert_eq!(b.permit(50), Permit::Refused);
        assert_eq!(b.permit(102), Permit::Probe);
        assert_eq!(b.permit(102), Permit::Refused, "one probe at a time");
        assert!(b.failure(103), "a failed probe opens it again");
        assert_eq!(b.state(), "open");
        assert_eq!(b.permit(150), Permit::Refused);
        assert_eq!(b.permit(203), Permit::Probe);
        b.success();
        assert_eq!(b.permit(204), Permit::Go);
    }

    #[test]
    fn starts_open_until_the_first_probe() {
        let b = Breaker::new(5, 1000);
        b.open_now(10);
        assert_eq!(b.state(), "open");
        assert_eq!(b.permit(10), Permit::Probe);
        b.success();
        assert_eq!(b.state_code(), 0);
    }
}
