//! One counter (a relaxed atomic on its own cache line) and the latency histogram made of
//! them, with the quantiles read from its buckets.

use std::sync::atomic::{AtomicU64, Ordering};

/// One monotonically increasing counter, padded to a cache line.
#[derive(Default, Debug)]
#[repr(align(64))]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What the `ttfb` histogram measures.
pub const TTFB_DESCRIPTION: &str =
    "Time from request arrival to the response head (time to first byte), every response";

/// Upper bounds (µs) of the latency histogram buckets; a last bucket takes the rest (+Inf).
pub const LATENCY_BOUNDS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Buckets in a [`Histogram`]: one per bound plus +Inf.
pub const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_US.len() + 1;

/// A latency histogram: one padded counter per bucket (non-cumulative) and the sum. Observing
/// is a short search and two relaxed increments.
#[derive(Debug)]
pub struct Histogram {
    buckets: [Counter; LATENCY_BUCKETS],
    sum_us: Counter,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| Counter::default()),
            sum_us: Counter::default(),
        }
    }
}

impl Histogram {
    #[inline]
    pub fn observe(&self, d: std::time::Duration) {
        let us = d.as_micros().min(u64::MAX as u128) as u64;
        let i = LATENCY_BOUNDS_US.partition_point(|b| *b < us);
        self.buckets[i].inc();
        self.sum_us.add(us);
    }

    /// Per-bucket counts (not cumulative), +Inf last.
    pub fn buckets(&self) -> [u64; LATENCY_BUCKETS] {
        std::array::from_fn(|i| self.buckets[i].get())
    }

    /// Sum of observed values in microseconds.
    pub fn sum_us(&self) -> u64 {
        self.sum_us.get()
    }
}

/// The `q` quantile (0..1) of the observations counted in `buckets` (per-bucket counts, as
/// from [`Histogram::buckets`] or a difference of two), interpolated linearly inside a bucket.
/// None when empty. Values in the +Inf bucket are reported as the last bound.
pub fn quantile_us(buckets: &[u64; LATENCY_BUCKETS], q: f64) -> Option<u64> {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * total as f64).max(1.0);
    let mut seen = 0u64;
    for (i, n) in buckets.iter().enumerate() {
        if *n == 0 {
            continue;
        }
        if (seen + n) as f64 >= rank {
            let lower = if i == 0 { 0 } else { LATENCY_BOUNDS_US[i - 1] };
            let Some(upper) = LATENCY_BOUNDS_US.get(i) else {
                return Some(lower);
            };
            let within = (rank - seen as f64) / *n as f64;
            return Some(lower + ((upper - lower) as f64 * within) as u64);
        }
        seen += n;
    }
    LATENCY_BOUNDS_US.last().copied()
}
