//! A cheap shared millisecond clock for timeouts and health state that live in atomics.
//!
//! Every request reads it a few times (connection phases, timeouts), so it is the kernel's
//! coarse monotonic clock: a vDSO read of a value the kernel updates every tick (1–4 ms), about
//! a fifth of `Instant::now()` plus the subtraction and division of `elapsed().as_millis()`
//! (bench/RESULTS.md, "hit path"). Its resolution is far finer than any timeout it serves.

use std::sync::OnceLock;
use std::time::Instant;

/// Milliseconds on a monotonic clock with an arbitrary origin: only differences mean anything.
/// Never 0 in practice (it counts from boot), which callers may use as "unset".
pub fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes one `timespec` through the pointer, which points to a
    // live, properly aligned local for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    if rc == 0 && ts.tv_sec >= 0 {
        return ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000;
    }
    // No coarse clock (not Linux): milliseconds since the first call, plus one so the value
    // is never 0.
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_in_milliseconds() {
        let a = now_ms();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let b = now_ms();
        assert!(a > 0);
        // A sleep of 50 ms is at least 50 ms; the coarse clock may lag by a tick (≤ 10 ms).
        assert!(b >= a + 30, "{a} -> {b}");
    }
}
