//! The process-wide bound on the bytes MP4 seeks hold to read `moov`s
//! (`server.mp4_moov_memory`): a file's first bytes held until its `moov` is in
//! (`proxy/filter/mp4.rs`: the body as it streams or from a stored copy; a `moov` after the
//! `mdat` gathered as the body streams, `proxy/filter/mp4_gather.rs`), and the first bytes and
//! `moov` a seek on a sliced file reads from its slices (`proxy/slice/seek.rs`).
//! `mp4_max_moov_size` bounds one request; without this, N clients seeking in N files could
//! hold N times it. A seek whose hold would pass the bound is sent whole (counted in
//! `mp4_seek_memory` and `mp4_seek_whole`), as any file that cannot be cut. Atomics only: no
//! I/O, as the rest of this module.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes held by every MP4 seek of the process (kept across reloads: `proxy::Process`).
#[derive(Debug, Default)]
pub struct MoovHeld {
    used: AtomicU64,
}

impl MoovHeld {
    /// Bytes held right now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `n` more bytes when the total stays within `limit`.
    fn take(&self, n: u64, limit: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&total| total <= limit)
            })
            .is_ok()
    }

    fn give(&self, n: u64) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// What one seek holds of the bound; given back when dropped.
#[derive(Debug)]
pub struct Hold {
    held: Arc<MoovHeld>,
    limit: u64,
    bytes: u64,
}

impl Hold {
    /// A hold of nothing yet under `limit` bytes for the whole process.
    pub fn new(held: Arc<MoovHeld>, limit: u64) -> Hold {
        Hold {
            held,
            limit,
            bytes: 0,
        }
    }

    /// Grows the hold to `total` bytes (a smaller `total` changes nothing); `false`, and
    /// nothing more taken, when the process's bound would be passed.
    pub fn grow_to(&mut self, total: u64) -> bool {
        if total <= self.bytes {
            return true;
        }
        let more = total - self.bytes;
        if !self.held.take(more, self.limit) {
            return false;
        }
        self.bytes = total;
        true
    }

    /// Gives back everything held.
    pub fn release(&mut self) {
        self.held.give(std::mem::take(&mut self.bytes));
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_share_the_bound_and_give_back_when_dropped() {
        let held = Arc::new(MoovHeld::default());
        let mut a = Hold::new(held.clone(), 100);
        let mut b = Hold::new(held.clone(), 100);
        assert!(a.grow_to(60));
        assert!(a.grow_to(40), "smaller: nothing changes");
        assert!(!b.grow_to(50), "60 + 50 passes 100");
        assert_eq!(held.used(), 60);
        assert!(b.grow_to(40));
        assert_eq!(held.used(), 100);
        a.release();
        assert_eq!(held.used(), 40);
        assert!(a.grow_to(10));
        drop(b);
        drop(a);
        assert_eq!(held.used(), 0);
    }
}
