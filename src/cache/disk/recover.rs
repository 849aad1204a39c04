//! Recovery of the disk tier at start-up: the ban list, region headers, then each region's
//! summary (or, for the region a crash left open, its entry headers) in incarnation order, and
//! what bans and variants need from that index. Never reads a body, except the last piece of
//! the last entry of a region a crash left open (to tell a torn tail from a complete entry).

use std::io;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use http::HeaderName;

use super::engine::{Batch, Engine, Loc, Recovered, RegionBook, now_ms};
use super::format::{
    self, BLOCK, BODY_CHUNK, ENTRY_HEADER, EntryHeader, EntryInfo, FLAG_KEY_RECORD, KIND_OBJECT,
    KIND_TOMBSTONE, KeyRecord, Meta, Record, SUMMARY_RECORD, Trailer,
};
use crate::cache::tags::tags_of_map;

/// A variant or tagged entry found at recovery: where it is and its key record.
struct Found {
    region: u32,
    seq: u64,
    offset: u32,
    hash: u64,
    record: KeyRecord,
}

impl Engine {
    /// Rebuilds the index: region headers, then each region's summary (or, for a region
    /// without one, its entry headers), in incarnation order so newer entries and tombstones
    /// win. A thread beside it asks the device for each region's tail ahead of the parse
    /// (`readahead.rs`); without one, it is asked for here first.
    pub(super) fn recover(&self) -> io::Result<Recovered> {
        let mut books = vec![RegionBook::default(); self.regions as usize];
        let order = self.regions_in_order();
        let now = now_ms();
        let mut next_seq = 1;
        let mut scanned = Vec::new();
        let mut found = Vec::new();
        // Grown as the summaries are read (each shard's table is sized once, when applied).
        let mut batch = Batch::with_capacity(0);
        std::thread::scope(|s| {
            let ahead = std::thread::Builder::new()
                .name("shellac-disk-readahead".into())
                .spawn_scoped(s, || self.read_ahead_tails(&order));
            if ahead.is_err() {
                self.read_ahead_tails(&order);
            }
            for &(seq, r) in &order {
                next_seq = next_seq.max(seq + 1);
                let book = &mut books[r as usize];
                if !self.index_region(r, seq, book, now, &mut batch, &mut found) {
                    scanned.push(r);
                }
            }
        });
        self.index_apply(batch);
        // Seal what a crash left open, so the next start reads its summary instead.
        for r in scanned {
            self.seal_recovered(r, &mut books[r as usize]);
        }
        let mut recovered = Recovered {
            books,
            next_seq,
            objects: 0,
            elapsed: Duration::ZERO,
            bans: Vec::new(),
            ban_generation: 0,
            variants: Vec::new(),
            tagged: Vec::new(),
        };
        self.add_keyed(found, &mut recovered);
        Ok(recovered)
    }

    /// Indexes region `r` (incarnation `seq`) from its summary, or from its entry headers when
    /// it has none, into `book` and `batch`; its variant and tagged entries go to `found`.
    /// Returns whether it was sealed (false: scanned, to be sealed now).
    fn index_region(
        &self,
        r: u32,
        seq: u64,
        book: &mut RegionBook,
        now: u64,
        batch: &mut Batch,
        found: &mut Vec<Found>,
    ) -> bool {
        let (entries, records, cursor, sealed) = match self.read_summary(r, seq) {
            Some((entries, records, cursor)) => (entries, records, cursor, true),
            None => {
                let open = !self.has_trailer(r, seq);
                let (entries, records, cursor) = self.scan_region(r, seq, open);
                self.counters.disk_recovery_scanned_regions.inc();
                (entries, records, cursor, false)
            }
        };
        self.set_region_seq(r, seq);
        book.seq = seq;
        book.cursor = cursor;
        book.sealed = sealed;
        for v in records {
            let Some(e) = entries.get(v.entry as usize) else {
                continue;
            };
            if !sealed {
                // Kept for the summary written when this region is sealed below.
                KeyRecord::encode_into(v.entry, &v.key, &v.names, &v.tags, &mut book.vary);
            }
            found.push(Found {
                region: r,
                seq,
                offset: e.offset,
                hash: e.hash,
                record: v,
            });
        }
        book.hashes.reserve(entries.len());
        for e in &entries {
            if e.kind == KIND_TOMBSTONE {
                book.tombstones += 1;
                batch.remove(e.hash);
                continue;
            }
            book.hashes.push(e.hash);
            book.max_expires_ms = book.max_expires_ms.max(e.expires_ms);
            if e.expires_ms > now {
                batch.put(
                    e.hash,
                    Loc {
                        region: r,
                        offset: e.offset,
                        len: e.len,
                        seq,
                        expires_ms: e.expires_ms,
                        verified: false,
                    },
                );
            } else {
                // Expired before the restart: a newer copy must not be shadowed by it, and
                // an older one must not come back.
                batch.remove(e.hash);
            }
        }
        book.entries = entries;
        sealed
    }

    /// Writes the summary of region `r`, which a crash left open (scanned at recovery).
    fn seal_recovered(&self, r: u32, book: &mut RegionBook) {
        match self.write_summary(r, book.seq, book.cursor, &book.entries, &book.vary) {
            Ok(n) => {
                self.counters.disk_bytes_written.add(n);
                book.sealed = true;
            }
            Err(e) => tracing::warn!(region = r, error = %e, "cannot seal recovered region"),
        }
    }

    /// Adds to `recovered` the entries `found` still indexed (not replaced, removed or expired
    /// since) whose key bytes agree with their entry's hash: variants (with their names) and
    /// tagged URLs.
    fn add_keyed(&self, found: Vec<Found>, recovered: &mut Recovered) {
        for f in found {
            let live = self
                .index_get(f.hash)
                .is_some_and(|l| l.region == f.region && l.seq == f.seq && l.offset == f.offset);
            let Some(key) =
                format::decode_key(&f.record.key).filter(|k| live && format::key_hash(k) == f.hash)
            else {
                continue;
            };
            if !f.record.tags.is_empty() {
                recovered.tagged.push((key.primary(), f.record.tags));
            }
            if key.variant != 0 && !f.record.names.is_empty() {
                recovered.variants.push((key, f.record.names));
            }
        }
    }

    /// Region `r`'s trailer, if it is valid for incarnation `seq`.
    pub(super) fn trailer(&self, r: u32, seq: u64) -> Option<Trailer> {
        let mut block = vec![0u8; BLOCK as usize];
        self.file
            .read_exact_at(&mut block, self.region_base(r) + self.region_size - BLOCK)
            .ok()?;
        Trailer::decode(&block)
            .filter(|t| t.index == r && t.seq == seq && t.instance == self.instance)
    }

    /// The summary of a sealed region (records, key records) and the offset where its data
    /// ends.
    fn read_summary(&self, r: u32, seq: u64) -> Option<(Vec<EntryInfo>, Vec<KeyRecord>, u64)> {
        let base = self.region_base(r);
        let t = self.trailer(r, seq)?;
        let records = t.entries as u64 * SUMMARY_RECORD as u64;
        let len = t.summary_len as u64;
        let off = t.summary_offset as u64;
        if off < BLOCK || records > len || off + len > self.region_size - BLOCK {
            return None;
        }
        let mut buf = vec![0u8; len as usize];
        self.file.read_exact_at(&mut buf, base + off).ok()?;
        if format::checksum(&buf) != t.summary_hash {
            return None;
        }
        let entries = EntryInfo::decode_summary(&buf[..records as usize])?;
        let vary = KeyRecord::decode_section(&buf[records as usize..])?;
        let data_end = off;
        let sane = entries
            .iter()
            .all(|e| e.offset as u64 >= BLOCK && e.offset as u64 + e.len as u64 <= data_end)
            && vary.iter().all(|v| {
                entries
                    .get(v.entry as usize)
                    .is_some_and(|e| e.kind == KIND_OBJECT)
            });
        sane.then_some((entries, vary, data_end))
    }

    /// Whether region `r` has a valid trailer for incarnation `seq`: it was sealed (its
    /// summary may still be damaged). A region without one was being written when the
    /// process stopped.
    fn has_trailer(&self, r: u32, seq: u64) -> bool {
        self.trailer(r, seq).is_some()
    }

    /// Walks a region without a summary entry header by entry header (64-byte reads), up to
    /// the first record that is not valid for incarnation `seq`. The key and metadata of an
    /// entry flagged [`FLAG_KEY_RECORD`] are read too (checksum verified) for its key record.
    /// In a region that was `open` (never sealed), the last entry found is dropped if it was
    /// not completely written ([`Engine::complete`]): the torn tail a `kill -9` leaves,
    /// counted in `disk_incomplete_tail`, not as corruption. (In a sealed region whose summary
    /// is damaged every entry was written whole, so a bad one is damage, found when read.)
    /// Returns the entries, their key records and the block-aligned offset after them.
    fn scan_region(&self, r: u32, seq: u64, open: bool) -> (Vec<EntryInfo>, Vec<KeyRecord>, u64) {
        let base = self.region_base(r);
        let limit = self.region_size - BLOCK;
        let mut pos = BLOCK;
        let mut entries = Vec::new();
        let mut records = Vec::new();
        // The entry found last, taken in once the next one shows it is not the tail.
        let mut last: Option<(u64, EntryHeader)> = None;
        let mut head = [0u8; ENTRY_HEADER];
        while pos + 8 <= limit {
            let n = (limit - pos).min(ENTRY_HEADER as u64) as usize;
            if self.file.read_exact_at(&mut head[..n], base + pos).is_err() {
                break;
            }
            match format::record_at(&head[..n]) {
                Record::Pad(len) if pos + len <= limit => pos += len,
                Record::Entry(h) if h.seq == seq && pos + h.total_len() <= limit => {
                    if let Some((at, prev)) = last.replace((pos, h)) {
                        self.take_scanned(base, at, &prev, &mut entries, &mut records);
                    }
                    pos += h.total_len();
                }
                _ => break,
            }
        }
        if let Some((at, h)) = last {
            if !open || self.complete(base + at, &h) {
                self.take_scanned(base, at, &h, &mut entries, &mut records);
            } else {
                pos = at;
                self.counters.disk_incomplete_tail.inc();
                tracing::info!(
                    region = r,
                    offset = at,
                    "incomplete tail entry dropped (unclean shutdown)"
                );
            }
        }
        (entries, records, format::align_up(pos, BLOCK))
    }

    /// Adds the entry at `at` (offset in the region at `base`) to `entries`, with its key
    /// record if it is flagged as having one.
    fn take_scanned(
        &self,
        base: u64,
        at: u64,
        h: &EntryHeader,
        entries: &mut Vec<EntryInfo>,
        records: &mut Vec<KeyRecord>,
    ) {
        let (Ok(offset), Ok(len)) = (u32::try_from(at), u32::try_from(h.total_len())) else {
            return;
        };
        if h.kind == KIND_OBJECT
            && h.flags & FLAG_KEY_RECORD != 0
            && let Some(record) = self.read_key_record(base + at, h, entries.len() as u32)
        {
            records.push(record);
        }
        entries.push(EntryInfo {
            hash: h.hash,
            offset,
            len,
            expires_ms: h.expires_ms,
            kind: h.kind,
        });
    }

    /// Whether the entry at file offset `at` was written to its end: its key and metadata
    /// match their checksum and, for an object, so does the last piece of its body.
    ///
    /// Why the end is enough: the writer fills a region front to back, one thread, each write
    /// a sequence of whole blocks after the previous one, so what a `kill -9` leaves written
    /// is a prefix of the region (the page cache keeps every completed write). An entry whose
    /// last bytes are there was written whole; one whose header is there but not its end
    /// straddled the point where writing stopped, and the bytes after it are zeros or an
    /// earlier incarnation's. Damage anywhere else (a bad sector, a scribble) is found when
    /// the entry is read, and counted in `disk_checksum_fail`.
    fn complete(&self, at: u64, h: &EntryHeader) -> bool {
        let key_meta = h.key_len as u64 + h.meta_len as u64;
        if key_meta > self.region_size {
            return false;
        }
        let mut buf = vec![0u8; key_meta as usize];
        if self
            .file
            .read_exact_at(&mut buf, at + ENTRY_HEADER as u64)
            .is_err()
            || format::checksum(&buf) != h.meta_hash
        {
            return false;
        }
        if h.kind != KIND_OBJECT {
            return true;
        }
        let Some(meta) = Meta::decode(&buf[h.key_len as usize..]) else {
            // Written whole (its checksum holds) but not an object's metadata: damage, for the
            // read to find and count.
            return true;
        };
        let (Some(&want), Some(last)) = (
            meta.chunk_hashes.last(),
            format::chunk_count(h.body_len).checked_sub(1),
        ) else {
            return true;
        };
        let start = last as u64 * BODY_CHUNK;
        let len = h.body_len.saturating_sub(start).min(BODY_CHUNK);
        let mut piece = vec![0u8; len as usize];
        self.file
            .read_exact_at(&mut piece, at + h.body_offset() + start)
            .is_ok()
            && format::checksum(&piece) == want
    }

    /// The key record of entry number `entry` at file offset `at`, if its key and metadata pass
    /// their checksum (otherwise nothing is registered for it: a miss, never a wrong variant;
    /// the entry itself fails the same check when read).
    fn read_key_record(&self, at: u64, h: &EntryHeader, entry: u32) -> Option<KeyRecord> {
        let len = h.key_len as usize + h.meta_len as usize;
        if len as u64 > self.region_size {
            return None;
        }
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, at + ENTRY_HEADER as u64)
            .ok()?;
        if format::checksum(&buf) != h.meta_hash {
            self.counters.disk_checksum_fail.inc();
            return None;
        }
        let (key, meta) = buf.split_at(h.key_len as usize);
        let meta = Meta::decode(meta)?;
        let names: Vec<HeaderName> = if format::key_variant(key)? != 0 {
            meta.vary.into_iter().map(|(n, _)| n).collect()
        } else {
            Vec::new()
        };
        let tags = tags_of_map(&meta.headers);
        (!names.is_empty() || !tags.is_empty()).then(|| KeyRecord {
            entry,
            key: key.to_vec(),
            names,
            tags,
        })
    }

    /// Stream position of the oldest region holding an indexed object that has not expired
    /// (`u64::MAX` if none): a ban positioned before it covers nothing servable on disk any
    /// more (an expired entry is never read; it only waits for its region to be reused).
    pub fn oldest_live_pos(&self, books: &[RegionBook]) -> u64 {
        let now = now_ms();
        books
            .iter()
            .enumerate()
            .filter(|(r, b)| {
                b.seq != 0 && self.region_live(*r as u32) > 0 && b.max_expires_ms > now
            })
            .map(|(_, b)| format::stream_pos(b.seq, 0))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Drops from the index every object written before stream position `pos` (a ban that
    /// cannot be reloaded is replaced by dropping everything it could cover). Returns how many.
    pub fn drop_before(&self, books: &[RegionBook], pos: u64) -> u64 {
        let mut n = 0;
        for (r, b) in books.iter().enumerate() {
            if b.seq == 0 || format::stream_pos(b.seq, 0) >= pos {
                continue;
            }
            for e in &b.entries {
                if e.kind == KIND_OBJECT
                    && format::stream_pos(b.seq, e.offset as u64) < pos
                    && let Some(loc) = self.index_get(e.hash)
                    && loc.region == r as u32
                    && loc.seq == b.seq
                    && loc.offset == e.offset
                    && self.index_remove_exact(e.hash, &loc)
                {
                    n += 1;
                }
            }
        }
        n
    }
}
