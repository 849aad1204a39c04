//! Saint mode (VCL 2.1/3.0's `set beresp.saintmode = 10s;` in vcl_fetch): a backend that gave
//! a bad response for an object is held off for that object for a while — it counts as sick
//! for requests of that URL (a director picks another backend; 2.x grace serves the stale copy)
//! — and, once it is held off for `THRESHOLD` objects at once, for every object. As Varnish
//! 2.1's trouble list (`saintmode_threshold`, default 10).
//!
//! Without a VCL program that sets it the list stays empty, and the check on a backend pick is
//! one atomic load.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::cache::CacheKey;

/// Objects held off at once beyond which the backend counts as sick for every object
/// (Varnish 2.1's `saintmode_threshold` default).
pub const THRESHOLD: usize = 10;

/// Entries kept at most: past it the one ending first is dropped.
const CAPACITY: usize = 1024;

/// One backend's held-off objects: (URL key without variant, until).
#[derive(Default)]
pub struct Saint {
    entries: Mutex<Vec<(CacheKey, Instant)>>,
    /// `entries.len()`, read without the lock.
    len: AtomicUsize,
}

impl Saint {
    /// Holds the backend off for `key` (every variant of its URL) until `until`.
    pub fn hold(&self, key: &CacheKey, until: Instant) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        let now = Instant::now();
        entries.retain(|(_, t)| *t > now);
        let primary = key.primary();
        entries.retain(|(k, _)| *k != primary);
        if entries.len() >= CAPACITY
            && let Some(first) = entries
                .iter()
                .enumerate()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(i, _)| i)
        {
            entries.swap_remove(first);
        }
        entries.push((primary, until));
        self.len.store(entries.len(), Ordering::Relaxed);
    }

    /// Whether the backend may serve `key`: not held off for it, and held off for fewer
    /// than [`THRESHOLD`] other objects (expired entries are dropped on the way).
    pub fn allows(&self, key: &CacheKey) -> bool {
        if self.len.load(Ordering::Relaxed) == 0 {
            return true;
        }
        let Ok(mut entries) = self.entries.lock() else {
            return true;
        };
        let now = Instant::now();
        entries.retain(|(_, t)| *t > now);
        self.len.store(entries.len(), Ordering::Relaxed);
        let primary = key.primary();
        let mut others = 0;
        for (k, _) in entries.iter() {
            if *k == primary {
                return false;
            }
            others += 1;
        }
        others < THRESHOLD
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn held_off_for_one_object_until_it_ends_then_for_all_past_the_threshold() {
        let saint = Saint::default();
        let a = CacheKey::new("h", "/a");
        let b = CacheKey::new("h", "/b");
        assert!(saint.allows(&a));
        saint.hold(&a.with_variant(7), Instant::now() + Duration::from_secs(60));
        assert!(!saint.allows(&a), "every variant of the URL");
        assert!(saint.allows(&b));
        // An entry that has ended holds nothing off.
        saint.hold(&b, Instant::now() - Duration::from_millis(1));
        assert!(saint.allows(&b));
        for i in 0..THRESHOLD - 1 {
            saint.hold(
                &CacheKey::new("h", &format!("/x{i}")),
                Instant::now() + Duration::from_secs(60),
            );
        }
        assert!(
            !saint.allows(&b),
            "held off for THRESHOLD objects: sick for all"
        );
    }
}
