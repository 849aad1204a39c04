//! The writer's regions: where the next entry goes, reclaiming a region when the open one is
//! full (free, then all-dead, then oldest), writing whole blocks, flushing and sealing.

use super::super::engine::{Loc, RegionBook, now_ms};
use super::super::format::{self, BLOCK, RegionHeader};
use super::{Active, WRITEBACK_EVERY, Writer};

impl Writer {
    /// Write position within the active region.
    pub(super) fn cursor(&self) -> Option<u64> {
        self.active
            .as_ref()
            .map(|a| a.buf_start + self.buf.len() as u64)
    }

    /// Makes sure an entry of `total` bytes (and `record_len` more bytes of summary) fits the
    /// active region (sealing it and opening the next one if not); returns the active region's
    /// incarnation.
    pub(super) fn make_room(&mut self, total: u64, record_len: u64) -> Option<u64> {
        let fits = |w: &Writer| match (&w.active, w.cursor()) {
            (Some(a), Some(cursor)) => {
                let summary = w.books[a.region as usize].summary_bytes()
                    + format::SUMMARY_RECORD as u64
                    + record_len;
                format::align_up(cursor + total, BLOCK) + format::align_up(summary, BLOCK) + BLOCK
                    <= w.engine.region_size
            }
            _ => false,
        };
        if !fits(self) {
            self.flush();
            self.seal();
            self.open_next()?;
        }
        self.active.as_ref().map(|a| a.seq)
    }

    /// Picks the region to write next from bookkeeping alone: a free one; else one holding
    /// nothing live (everything expired, replaced or removed) and no tombstones; else the
    /// oldest (FIFO, which keeps every tombstone younger than what it deletes).
    pub(super) fn choose_victim(&self) -> u32 {
        let now = now_ms();
        let mut free = None;
        let mut dead = None;
        let mut oldest: Option<(u64, u32)> = None;
        for (i, b) in self.books.iter().enumerate() {
            let r = i as u32;
            if b.seq == 0 {
                free = free.or(Some(r));
                continue;
            }
            if b.tombstones == 0 && (self.engine.region_live(r) == 0 || b.max_expires_ms <= now) {
                dead = dead.or(Some(r));
            }
            if oldest.is_none_or(|(s, _)| b.seq < s) {
                oldest = Some((b.seq, r));
            }
        }
        free.or(dead).or(oldest.map(|(_, r)| r)).unwrap_or(0)
    }

    pub(super) fn open_next(&mut self) -> Option<()> {
        let r = self.choose_victim();
        let old = std::mem::take(&mut self.books[r as usize]);
        // Readers of the old incarnation see the change and back off before anything is
        // overwritten.
        self.engine.set_region_seq(r, 0);
        if old.seq != 0 {
            for h in &old.hashes {
                self.engine.index_remove_in(*h, r, old.seq);
            }
            self.engine.counters.disk_regions_reclaimed.inc();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let header = RegionHeader {
            index: r,
            seq,
            instance: self.engine.instance,
        };
        if let Err(e) = self
            .engine
            .write_at(&header.encode(), self.engine.region_base(r))
        {
            self.fail(e);
            return None;
        }
        self.engine.counters.disk_bytes_written.add(BLOCK);
        self.engine.set_region_seq(r, seq);
        self.books[r as usize] = RegionBook {
            seq,
            cursor: BLOCK,
            ..RegionBook::default()
        };
        self.active = Some(Active {
            region: r,
            seq,
            buf_start: BLOCK,
            writeback_from: 0,
        });
        Some(())
    }

    /// Writes the whole blocks of the buffer; indexes entries now complete on disk.
    pub(super) fn write_full_blocks(&mut self) -> bool {
        let Some(a) = &mut self.active else {
            self.buf.clear();
            return false;
        };
        let n = self.buf.len() / BLOCK as usize * BLOCK as usize;
        if n == 0 {
            return true;
        }
        let at = self.engine.region_base(a.region) + a.buf_start;
        if let Err(e) = self.engine.write_at(&self.buf[..n], at) {
            self.fail(e);
            return false;
        }
        self.engine.counters.disk_bytes_written.add(n as u64);
        self.buf.drain(..n);
        a.buf_start += n as u64;
        if a.buf_start - a.writeback_from >= WRITEBACK_EVERY {
            let base = self.engine.region_base(a.region);
            self.engine
                .start_writeback(base + a.writeback_from, a.buf_start - a.writeback_from);
            a.writeback_from = a.buf_start;
        }
        let (region, seq, written) = (a.region, a.seq, a.buf_start);
        self.books[region as usize].cursor = written;
        let mut i = 0;
        while i < self.pending.len() {
            let (e, end) = self.pending[i];
            if end <= written {
                self.pending.swap_remove(i);
                self.engine.index_put(
                    e.hash,
                    Loc {
                        region,
                        offset: e.offset,
                        len: e.len,
                        seq,
                        expires_ms: e.expires_ms,
                        verified: true,
                    },
                );
            } else {
                i += 1;
            }
        }
        true
    }

    /// Pads the buffer to a block and writes it.
    pub(super) fn flush(&mut self) {
        if let Some(a) = &self.active {
            if self.buf.is_empty() {
                return;
            }
            format::pad_to_block(&mut self.buf, a.buf_start);
            self.write_full_blocks();
        } else {
            self.buf.clear();
        }
    }

    /// Writes the active region's summary and trailer; the next entry opens another region.
    pub(super) fn seal(&mut self) {
        let Some(a) = self.active.take() else {
            return;
        };
        let book = &mut self.books[a.region as usize];
        match self
            .engine
            .write_summary(a.region, a.seq, a.buf_start, &book.entries, &book.vary)
        {
            Ok(n) => {
                book.sealed = true;
                // On disk now; only recovery reads it back.
                book.vary = Vec::new();
                self.engine.counters.disk_bytes_written.add(n);
            }
            Err(e) => self.fail(e),
        }
    }
}
