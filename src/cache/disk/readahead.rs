//! What the index rebuild reads, asked of the device before it is read. The region headers
//! first (all of them at once: the order of the regions is only known from them), then, on a
//! thread beside the recovery, each used region's tail in the order the recovery reads them,
//! the rest of any summary longer than that tail, and the whole of a region that has no
//! trailer (walked entry by entry). The recovery parses the regions whose data has arrived
//! while the device reads the next ones, and the tails of regions never used are not read.

use std::os::unix::fs::FileExt;

use super::engine::Engine;
use super::format::{BLOCK, RegionHeader};

/// Bytes at the end of each used region read ahead at recovery: the trailer and the summary
/// before it (32 bytes per entry and its key record: ~1,500 entries of a 16 MiB region of
/// 4-16 KB objects fit).
pub(super) const TAIL_PREFETCH: u64 = 64 << 10;

/// At most this much of a region without a trailer is asked for at once; the kernel's own
/// read-ahead follows the walk beyond it.
const SCAN_PREFETCH: u64 = 32 << 20;

impl Engine {
    /// The regions of this file's instance, as (incarnation, region), oldest first. Every
    /// region's header is asked for at once: after a reboot (page cache cold) the device reads
    /// them side by side instead of one synchronous read after another.
    pub(super) fn regions_in_order(&self) -> Vec<(u64, u32)> {
        for r in 0..self.regions {
            self.prefetch(self.region_base(r), BLOCK);
        }
        let mut order = Vec::new();
        let mut block = vec![0u8; BLOCK as usize];
        for r in 0..self.regions {
            if self
                .file
                .read_exact_at(&mut block, self.region_base(r))
                .is_err()
            {
                continue;
            }
            if let Some(h) = RegionHeader::decode(&block)
                && h.index == r
                && h.instance == self.instance
                && h.seq > 0
            {
                order.push((h.seq, r));
            }
        }
        order.sort_unstable();
        order
    }

    /// Asks for what the recovery reads of the regions in `order` (oldest first), in that
    /// order: each one's tail; then, trailer by trailer, the rest of a summary longer than the
    /// tail, or (no valid trailer: the region a crash left open) the region itself. Waits only
    /// for the trailers it reads; the reads it asks for complete in the background. Returns
    /// the bytes asked for.
    pub(super) fn read_ahead_tails(&self, order: &[(u64, u32)]) -> u64 {
        let tail = TAIL_PREFETCH.min(self.region_size);
        let mut asked = 0;
        for &(_, r) in order {
            self.prefetch(self.region_base(r) + self.region_size - tail, tail);
            asked += tail;
        }
        for &(seq, r) in order {
            let base = self.region_base(r);
            let (at, len) = match self.trailer(r, seq) {
                Some(t) if (t.summary_offset as u64) < self.region_size - tail => {
                    // Only what the tail did not cover.
                    let end = t.summary_offset as u64 + t.summary_len as u64;
                    let start = t.summary_offset as u64;
                    (
                        base + start,
                        end.min(self.region_size - tail).saturating_sub(start),
                    )
                }
                Some(_) => continue,
                None => (
                    base + BLOCK,
                    (self.region_size - 2 * BLOCK).min(SCAN_PREFETCH),
                ),
            };
            self.prefetch(at, len);
            asked += len;
        }
        asked
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::tests::{TempDir, key, open_with_bans, small};
    use super::TAIL_PREFETCH;
    use crate::cache::Storage;

    /// Recovery asks for the tails of the regions in use, oldest first, and for nothing of
    /// the regions never written; it still finds every object (a crash left one region open,
    /// asked for whole while the others were parsed).
    #[tokio::test]
    async fn recovery_reads_ahead_the_regions_in_use_only() {
        let dir = TempDir::new("readahead");
        // 16 regions of 1 MiB; 700 objects of 3,000 bytes fill about two and a half.
        let config = dir.config(16 << 20, 1 << 20);
        let (disk, _, _) = open_with_bans(&config, 100);
        for i in 0..700 {
            disk.admit(key(i), small(i));
        }
        assert!(disk.flush(Duration::from_secs(10)));
        disk.crash();

        let (disk, counters, _) = open_with_bans(&config, 100);
        assert_eq!(
            counters.disk_recovery_scanned_regions.get(),
            1,
            "one left open"
        );
        let engine = disk.engine();
        let order = engine.regions_in_order();
        assert_eq!(order.len(), 3, "{order:?}");
        assert!(order.windows(2).all(|w| w[0].0 < w[1].0), "oldest first");
        // Three tails, and the summary the recovery wrote at the write cursor of the region it
        // sealed (before that region's tail); nothing of the 13 regions never written.
        let asked = engine.read_ahead_tails(&order);
        assert!(
            (3 * TAIL_PREFETCH..4 * TAIL_PREFETCH).contains(&asked),
            "{asked}"
        );
        for i in 0..700 {
            assert!(disk.lookup_io(&key(i)).await.is_some(), "object {i}");
        }
        disk.close();
    }
}
