//! When to renew and when to try again: pure functions of the certificate's dates, the
//! settings and the failures so far.
//!
//! Renewal: two thirds into the certificate's lifetime (30 days before a 90-day certificate
//! expires, 2 days before a 6-day one), or `renew_before` before expiry but never before
//! halfway — a `renew_before` longer than the lifetime must not renew in a loop.
//! Retries: `retry_min` after the first failure, doubling, at most `retry_max`.

use std::time::Duration;

/// When a certificate valid from `not_before` to `not_after` (seconds since the epoch) is due
/// for renewal.
pub fn renew_at(not_before: i64, not_after: i64, renew_before: Option<Duration>) -> i64 {
    let lifetime = (not_after - not_before).max(0);
    match renew_before {
        None => not_before + lifetime / 3 * 2,
        Some(d) => {
            let before = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            not_after
                .saturating_sub(before)
                .max(not_before + lifetime / 2)
        }
    }
}

/// The wait before the next attempt after `failures` failures in a row (at least 1).
pub fn retry_after(failures: u32, min: Duration, max: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(32);
    min.checked_mul(1u32 << doublings.min(31))
        .unwrap_or(max)
        .min(max)
        .max(min.min(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400;

    #[test]
    fn renewal_is_two_thirds_in_by_default() {
        assert_eq!(renew_at(0, 90 * DAY, None), 60 * DAY);
        assert_eq!(renew_at(100, 100 + 6 * DAY, None), 100 + 4 * DAY);
    }

    #[test]
    fn renew_before_counts_back_from_expiry_but_not_past_halfway() {
        let d = Duration::from_secs(30 * DAY as u64);
        assert_eq!(renew_at(0, 90 * DAY, Some(d)), 60 * DAY);
        assert_eq!(renew_at(0, 90 * DAY, Some(d / 3)), 80 * DAY);
        // Longer than the lifetime: halfway, not at once and again and again.
        assert_eq!(renew_at(0, 6 * DAY, Some(d)), 3 * DAY);
        assert_eq!(renew_at(0, 6 * DAY, Some(Duration::MAX)), 3 * DAY);
    }

    #[test]
    fn retries_double_up_to_the_cap() {
        let (min, max) = (Duration::from_secs(60), Duration::from_secs(3600));
        let waits: Vec<u64> = (1..=9)
            .map(|n| retry_after(n, min, max).as_secs())
            .collect();
        assert_eq!(waits, vec![60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]);
        assert_eq!(retry_after(u32::MAX, min, max), max);
        assert_eq!(retry_after(0, min, max), min);
        let tiny = Duration::from_millis(50);
        assert_eq!(
            retry_after(3, tiny, Duration::from_millis(150)),
            Duration::from_millis(150)
        );
    }
}
