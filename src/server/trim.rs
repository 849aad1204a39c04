//! Gives freed memory back to the operating system: large blocks at once, the memory of
//! released sessions (and of sessions closed at `header_read_timeout`) after a burst.
//!
//! Large blocks: glibc serves a block from its heap unless it is at least its mmap threshold,
//! and raises that threshold (up to 32 MiB) each time a mapped block is freed, so after a
//! while the large, short-lived buffers of fills (hyper's read buffers that a body's frames
//! pin until the object is stored) come from the heap, and once freed stay resident. With a
//! 64 MiB `memory_size` and 1 MB objects that left RSS 1.5× the setting above the base after
//! a fill (bench/RESULTS.md, "memory bound for large objects"). [`return_large_blocks`] fixes
//! the threshold at [`LARGE_BLOCK`]: every block that large is a mapping of its own, unmapped
//! when freed. The price is page faults on each such allocation (with the stored bodies'
//! own mappings, `cache::body`: ~1.8× the CPU per miss of a 100 KB–1 MB object; hits
//! allocate no such block).
//!
//! glibc keeps what a program frees for its next allocations, so after a burst of keep-alive
//! connections went idle and were released (`server.idle_release`), their sessions' ~16 KiB
//! each (hyper's buffers, the gate, the session future) stay in the process's RSS until new
//! sessions reuse them. Once at least [`TRIM_AFTER`] sessions were released since the last
//! trim and the burst is over (fewer than a tenth of them came in the last second), or
//! [`STEADY`] has passed with that many released, `malloc_trim(0)` hands whole free pages
//! back to the kernel. It runs on the blocking pool; while it walks a thread's malloc arena
//! that thread's allocations wait, which is why it runs after bursts and at most once per
//! [`STEADY`] under steady churn, never per release. Counted in `mem_trim` /
//! `mem_trim_usec` (measured effect: bench/RESULTS.md, workload 7).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::reload::Live;

/// Blocks of at least this size are mappings of their own (as stored bodies are:
/// `cache::body::MAPPED_MIN`).
pub const LARGE_BLOCK: usize = 64 * 1024;

/// Fixes glibc's mmap threshold at [`LARGE_BLOCK`] (once per process; elsewhere than glibc,
/// nothing).
pub fn return_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt only sets a parameter of glibc's allocator (under its lock); no
            // memory of ours is involved. Setting it also stops the threshold's adjustment.
            let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE_BLOCK as libc::c_int) };
            if ok != 1 {
                tracing::warn!("cannot set the allocator's mmap threshold; freed large blocks may stay resident");
            }
        });
    }
}

/// Released sessions (~16 KiB each, so ~16 MiB) that make a trim worth its walk of the heap.
pub const TRIM_AFTER: u64 = 1000;

/// Under steady churn (releases every second), at most one trim per this interval.
pub const STEADY: Duration = Duration::from_secs(30);

/// Whether to trim now: `pending` sessions released since the last trim, `last_second` of
/// them in the last second, `since` the last trim.
pub fn should_trim(pending: u64, last_second: u64, since: Duration) -> bool {
    pending >= TRIM_AFTER && (last_second * 10 < pending || since >= STEADY)
}

/// Checks once a second until shutdown.
pub(super) async fn run(live: Arc<Live>, mut shutdown: watch::Receiver<bool>) {
    // Sessions freed by a release, and by a header timeout (a client that sent part of a
    // head and stalled: its session's memory is just as free).
    let released = || {
        let c = &live.load().counters;
        c.client_idle_released.get() + c.client_header_timeout.get()
    };
    let (mut at_trim, mut previous) = (released(), released());
    let mut last_trim = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = shutdown.changed() => return,
        }
        let now = released();
        let (pending, last_second) = (now - at_trim, now - previous);
        previous = now;
        if !should_trim(pending, last_second, last_trim.elapsed()) {
            continue;
        }
        at_trim = now;
        last_trim = Instant::now();
        if let Ok(took) = tokio::task::spawn_blocking(trim).await {
            let counters = &live.load().counters;
            counters.mem_trim.inc();
            counters.mem_trim_usec.add(took.as_micros() as u64);
            tracing::debug!(released = pending, ?took, "freed session memory returned");
        }
    }
}

/// Returns free heap pages to the kernel; how long that took.
fn trim() -> Duration {
    let started = Instant::now();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own heap structures under their locks; it has no
    // preconditions on the caller.
    unsafe {
        libc::malloc_trim(0);
    }
    started.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_after_a_burst_is_over_not_during_it() {
        let s = Duration::from_secs(1);
        // Not enough released yet.
        assert!(!should_trim(TRIM_AFTER - 1, 0, STEADY));
        // Still coming in: wait for the burst to end.
        assert!(!should_trim(5000, 4000, s));
        // The burst is over.
        assert!(should_trim(5000, 100, s));
        assert!(should_trim(TRIM_AFTER, 0, s));
    }

    #[test]
    fn steady_churn_trims_at_most_once_per_interval() {
        assert!(!should_trim(3000, 1000, STEADY - Duration::from_secs(1)));
        assert!(should_trim(3000, 1000, STEADY));
    }
}
