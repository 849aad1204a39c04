//! Counter history: a sampler task snapshots every counter and gauge once a second into a
//! bounded ring (the last [`CAPACITY`] seconds). Hit ratios and rates over a window are the
//! difference between the live counters and the sample taken that long ago, computed at scrape
//! time. Nothing here runs on the request path.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::stats::{LATENCY_BUCKETS, quantile_us};

/// Samples kept: enough for the 1000 s window plus its starting point.
pub const CAPACITY: usize = 1001;

/// The windows hit ratios are reported over, in seconds (as varnishstat shows them).
pub const WINDOWS: [u64; 3] = [10, 100, 1000];

/// Counters whose sum is the number of lookups that were served from the cache.
const HITS: [&str; 2] = ["cache_hit", "cache_coalesced"];
/// Counters whose sum is the number of requests that went to a backend instead.
const NOT_HITS: [&str; 4] = [
    "cache_miss",
    "cache_hitmiss",
    "cache_pass",
    "cache_vary_miss",
];

/// Every counter and gauge at one instant, in [`History::names`] order.
#[derive(Clone, Debug)]
pub struct Sample {
    pub at: Instant,
    pub values: Vec<u64>,
    /// Per-bucket counts of the `ttfb` histogram.
    pub ttfb: [u64; LATENCY_BUCKETS],
}

/// The ring of samples.
pub struct History {
    names: Vec<&'static str>,
    ring: Mutex<VecDeque<Sample>>,
}

impl History {
    /// A history of the values named `names` (the order of every sample's `values`).
    pub fn new(names: Vec<&'static str>) -> History {
        History {
            names,
            ring: Mutex::new(VecDeque::with_capacity(CAPACITY)),
        }
    }

    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    /// Adds a sample, forgetting the oldest beyond [`CAPACITY`].
    pub fn push(&self, sample: Sample) {
        if let Ok(mut ring) = self.ring.lock() {
            if ring.len() == CAPACITY {
                ring.pop_front();
            }
            ring.push_back(sample);
        }
    }

    /// The newest sample taken at least `secs` before `now`; the oldest one if none is that old
    /// yet (so a young process reports over its whole life).
    pub fn base(&self, secs: u64, now: Instant) -> Option<Sample> {
        let ring = self.ring.lock().ok()?;
        let window = Duration::from_secs(secs);
        ring.iter()
            .rev()
            .find(|s| now.saturating_duration_since(s.at) >= window)
            .or_else(|| ring.front())
            .cloned()
    }

    /// The last `n` samples, oldest first.
    pub fn recent(&self, n: usize) -> Vec<Sample> {
        match self.ring.lock() {
            Ok(ring) => ring
                .iter()
                .skip(ring.len().saturating_sub(n))
                .cloned()
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| *n == name)
    }

    /// Value of `name` in `values` (0 if unknown).
    pub fn value(&self, values: &[u64], name: &str) -> u64 {
        self.index(name)
            .and_then(|i| values.get(i).copied())
            .unwrap_or(0)
    }

    /// Share of lookups served from the cache between two snapshots:
    /// (`cache_hit` + `cache_coalesced`) ÷ (those + `cache_miss` + `cache_hitmiss` +
    /// `cache_pass` + `cache_vary_miss`). None when there was no lookup.
    pub fn hit_ratio(&self, from: &[u64], to: &[u64]) -> Option<f64> {
        let delta = |names: &[&str]| -> u64 {
            names
                .iter()
                .map(|n| self.value(to, n).saturating_sub(self.value(from, n)))
                .sum()
        };
        let hits = delta(&HITS);
        let total = hits + delta(&NOT_HITS);
        (total > 0).then(|| hits as f64 / total as f64)
    }

    /// Lookups served from the cache between two snapshots (the numerator of
    /// [`History::hit_ratio`]).
    pub fn hits(&self, from: &[u64], to: &[u64]) -> u64 {
        HITS.iter()
            .map(|n| self.value(to, n).saturating_sub(self.value(from, n)))
            .sum()
    }

    /// Hit ratio from `base(secs)` to the live values `now_values`.
    pub fn hit_ratio_over(&self, secs: u64, now: Instant, now_values: &[u64]) -> Option<f64> {
        let base = self.base(secs, now)?;
        self.hit_ratio(&base.values, now_values)
    }

    /// Per-second rate of every value from `base(secs)` to the live values.
    pub fn rates_over(&self, secs: u64, now: Instant, now_values: &[u64]) -> Vec<f64> {
        let Some(base) = self.base(secs, now) else {
            return vec![0.0; now_values.len()];
        };
        let elapsed = now.saturating_duration_since(base.at).as_secs_f64();
        now_values
            .iter()
            .zip(base.values.iter())
            .map(|(now, then)| {
                if elapsed > 0.0 {
                    now.saturating_sub(*then) as f64 / elapsed
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// TTFB quantile (µs) over the observations since `base(secs)`.
    pub fn ttfb_quantile_over(
        &self,
        secs: u64,
        now: Instant,
        now_ttfb: &[u64; LATENCY_BUCKETS],
        q: f64,
    ) -> Option<u64> {
        let base = self.base(secs, now)?;
        let delta: [u64; LATENCY_BUCKETS] =
            std::array::from_fn(|i| now_ttfb[i].saturating_sub(base.ttfb[i]));
        quantile_us(&delta, q)
    }
}

/// Takes a sample now (so windows have a starting point before the first request), then one
/// every second until `shutdown`. `take` reads the live values.
pub fn start_sampler(
    history: Arc<History>,
    take: impl Fn() -> Sample + Send + 'static,
    shutdown: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static {
    history.push(take());
    sample_loop(history, take, shutdown)
}

async fn sample_loop(
    history: Arc<History>,
    take: impl Fn() -> Sample + Send + 'static,
    mut shutdown: watch::Receiver<bool>,
) {
    let period = Duration::from_secs(1);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => history.push(take()),
            _ = shutdown.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: [&str; 7] = [
        "cache_hit",
        "cache_coalesced",
        "cache_miss",
        "cache_hitmiss",
        "cache_pass",
        "cache_vary_miss",
        "client_req",
    ];

    fn sample(at: Instant, hit: u64, miss: u64) -> Sample {
        Sample {
            at,
            values: vec![hit, 0, miss, 0, 0, 0, hit + miss],
            ttfb: [0; LATENCY_BUCKETS],
        }
    }

    #[test]
    fn windows_use_the_sample_that_old_or_the_oldest() {
        let h = History::new(NAMES.to_vec());
        let t0 = Instant::now();
        // 2000 s of history: 1 hit/s for the first 1900 s, then 1 miss/s.
        for s in 0..=2000u64 {
            let (hit, miss) = if s <= 1900 { (s, 0) } else { (1900, s - 1900) };
            h.push(sample(t0 + Duration::from_secs(s), hit, miss));
        }
        let now = t0 + Duration::from_secs(2000);
        let live = sample(now, 1900, 100).values;
        assert_eq!(h.hit_ratio_over(10, now, &live), Some(0.0));
        assert_eq!(h.hit_ratio_over(100, now, &live), Some(0.0));
        assert_eq!(h.hit_ratio_over(1000, now, &live), Some(0.9));
        let rates = h.rates_over(10, now, &live);
        assert_eq!(rates[6], 1.0, "client_req per second");
        assert_eq!(rates[2], 1.0, "cache_miss per second");
        assert_eq!(rates[0], 0.0);
        assert_eq!(h.recent(usize::MAX).len(), CAPACITY, "the ring is bounded");
    }

    #[test]
    fn young_process_reports_over_its_life() {
        let h = History::new(NAMES.to_vec());
        let t0 = Instant::now();
        h.push(sample(t0, 0, 0));
        let live = sample(t0, 3, 1).values;
        assert_eq!(h.hit_ratio_over(1000, t0, &live), Some(0.75));
        let idle = sample(t0, 0, 0).values;
        assert_eq!(h.hit_ratio_over(10, t0, &idle), None);
    }

    #[test]
    fn ttfb_quantiles_over_a_window() {
        let h = History::new(NAMES.to_vec());
        let t0 = Instant::now();
        let mut s = sample(t0, 0, 0);
        s.ttfb[12] = 1000; // old slow responses, outside the window
        h.push(s);
        let now = t0 + Duration::from_secs(20);
        let mut live = [0u64; LATENCY_BUCKETS];
        live[12] = 1000;
        live[0] = 50; // ≤100 µs in the last 20 s
        assert!(h.ttfb_quantile_over(10, now, &live, 0.99).unwrap() <= 100);
    }
}
