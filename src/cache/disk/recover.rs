//! Recovery of the disk tier at start-up: the ban list, region headers, then each region's
//! summary (or, for the region a crash left open, its entry headers) in incarnation order, and
//! what bans and variants need from that index. Never reads a body.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;

use super::engine::{Engine, Loc, Recovered, RegionBook, now_ms};
use super::format::{
    self, BAN_SLOT, BLOCK, BanRecord, ENTRY_HEADER, EntryHeader, EntryInfo, KIND_OBJECT,
    KIND_TOMBSTONE, Meta, Record, RegionHeader, SUMMARY_RECORD, Trailer, VaryRecord,
};
use crate::stats::Counters;

/// A variant entry found at recovery: where it is, its key and the names it varies on.
struct FoundVariant {
    region: u32,
    seq: u64,
    offset: u32,
    hash: u64,
    key: Vec<u8>,
    names: Vec<HeaderName>,
}

impl Engine {
    /// Rebuilds the index: region headers, then each region's summary (or, for a region
    /// without one, its entry headers), in incarnation order so newer entries and tombstones win.
    pub(super) fn recover(self: &Arc<Self>) -> io::Result<Recovered> {
        let mut books = vec![RegionBook::default(); self.regions as usize];
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
        let now = now_ms();
        let mut next_seq = 1;
        let mut scanned = Vec::new();
        let mut found = Vec::new();
        for &(seq, r) in &order {
            next_seq = next_seq.max(seq + 1);
            let (entries, vary, cursor, sealed) = match self.read_summary(r, seq) {
                Some((entries, vary, cursor)) => (entries, vary, cursor, true),
                None => {
                    let (entries, vary, cursor) = self.scan_region(r, seq);
                    scanned.push(r);
                    (entries, vary, cursor, false)
                }
            };
            self.set_region_seq(r, seq);
            let book = &mut books[r as usize];
            book.seq = seq;
            book.cursor = cursor;
            book.sealed = sealed;
            for v in vary {
                let Some(e) = entries.get(v.entry as usize) else {
                    continue;
                };
                if !sealed {
                    // Kept for the summary written when this region is sealed below.
                    VaryRecord::encode_into(v.entry, &v.key, &v.names, &mut book.vary);
                }
                found.push(FoundVariant {
                    region: r,
                    seq,
                    offset: e.offset,
                    hash: e.hash,
                    key: v.key,
                    names: v.names,
                });
            }
            for e in &entries {
                if e.kind == KIND_TOMBSTONE {
                    book.tombstones += 1;
                    self.index_remove(e.hash);
                    continue;
                }
                book.hashes.push(e.hash);
                book.max_expires_ms = book.max_expires_ms.max(e.expires_ms);
                if e.expires_ms > now {
                    self.index_put(
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
                    self.index_remove(e.hash);
                }
            }
            book.entries = entries;
        }
        // Seal what a crash left open, so the next start reads its summary instead.
        for r in scanned {
            let book = &mut books[r as usize];
            match self.write_summary(r, book.seq, book.cursor, &book.entries, &book.vary) {
                Ok(n) => {
                    self.counters.disk_bytes_written.add(n);
                    book.sealed = true;
                }
                Err(e) => tracing::warn!(region = r, error = %e, "cannot seal recovered region"),
            }
        }
        // Variants still indexed (not replaced, removed or expired since) and whose key bytes
        // agree with their entry's hash.
        let variants = found
            .into_iter()
            .filter(|v| {
                self.index_get(v.hash)
                    .is_some_and(|l| l.region == v.region && l.seq == v.seq && l.offset == v.offset)
            })
            .filter_map(|v| {
                let key = format::decode_key(&v.key)?;
                (key.variant != 0 && format::key_hash(&key) == v.hash).then_some((key, v.names))
            })
            .collect();
        Ok(Recovered {
            books,
            next_seq,
            objects: 0,
            elapsed: Duration::ZERO,
            bans: Vec::new(),
            ban_generation: 0,
            variants,
        })
    }

    /// The summary of a sealed region (records, vary records) and the offset where its data
    /// ends.
    fn read_summary(&self, r: u32, seq: u64) -> Option<(Vec<EntryInfo>, Vec<VaryRecord>, u64)> {
        let base = self.region_base(r);
        let mut block = vec![0u8; BLOCK as usize];
        self.file
            .read_exact_at(&mut block, base + self.region_size - BLOCK)
            .ok()?;
        let t = Trailer::decode(&block)?;
        if t.index != r || t.seq != seq || t.instance != self.instance {
            return None;
        }
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
        let vary = VaryRecord::decode_section(&buf[records as usize..])?;
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

    /// Walks a region without a summary entry header by entry header (a 72-byte read: the
    /// header and the key's variant), up to the first record that is not valid for incarnation
    /// `seq`. A variant entry's key and metadata are read too (checksum verified) for its
    /// `Vary` names. Returns the entries, their vary records and the block-aligned offset after
    /// them.
    fn scan_region(&self, r: u32, seq: u64) -> (Vec<EntryInfo>, Vec<VaryRecord>, u64) {
        let base = self.region_base(r);
        let limit = self.region_size - BLOCK;
        let mut pos = BLOCK;
        let mut entries = Vec::new();
        let mut vary = Vec::new();
        let mut head = [0u8; ENTRY_HEADER + 8];
        while pos + 8 <= limit {
            let n = (limit - pos).min(head.len() as u64) as usize;
            if self.file.read_exact_at(&mut head[..n], base + pos).is_err() {
                break;
            }
            match format::record_at(&head[..n]) {
                Record::Pad(len) if pos + len <= limit => pos += len,
                Record::Entry(h) if h.seq == seq && pos + h.total_len() <= limit => {
                    if let (Ok(offset), Ok(len)) =
                        (u32::try_from(pos), u32::try_from(h.total_len()))
                    {
                        let variant = format::key_variant(head.get(ENTRY_HEADER..n).unwrap_or(&[]));
                        if h.kind == KIND_OBJECT
                            && variant.is_some_and(|v| v != 0)
                            && let Some((key, names)) = self.read_vary(base + pos, &h)
                        {
                            vary.push(VaryRecord {
                                entry: entries.len() as u32,
                                key,
                                names,
                            });
                        }
                        entries.push(EntryInfo {
                            hash: h.hash,
                            offset,
                            len,
                            expires_ms: h.expires_ms,
                            kind: h.kind,
                        });
                    }
                    pos += h.total_len();
                }
                _ => break,
            }
        }
        (entries, vary, format::align_up(pos, BLOCK))
    }

    /// The key and `Vary` names of the entry at file offset `at`, if its key and metadata pass
    /// their checksum (otherwise the variant is not registered: a miss, never a wrong variant).
    fn read_vary(&self, at: u64, h: &EntryHeader) -> Option<(Vec<u8>, Vec<HeaderName>)> {
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
        let names: Vec<HeaderName> = meta.vary.into_iter().map(|(n, _)| n).collect();
        (!names.is_empty()).then(|| (key.to_vec(), names))
    }

    /// Stream position of the oldest region holding an indexed object (`u64::MAX` if none):
    /// a ban positioned before it covers nothing on disk any more.
    pub fn oldest_live_pos(&self, books: &[RegionBook]) -> u64 {
        books
            .iter()
            .enumerate()
            .filter(|(r, b)| b.seq != 0 && self.region_live(*r as u32) > 0)
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

/// The newest intact copy of the ban list: `(generation, bans)`. `None` when neither copy is
/// intact (then no ban can be trusted to be known). A damaged copy is counted in
/// `disk_checksum_fail` and logged.
pub(super) fn read_bans(
    file: &File,
    instance: u64,
    counters: &Counters,
) -> Option<(u64, Vec<BanRecord>)> {
    let mut best: Option<(u64, Vec<BanRecord>)> = None;
    for (copy, at) in [("A", BLOCK), ("B", BLOCK + BAN_SLOT)] {
        let read = || {
            let mut head = vec![0u8; BLOCK as usize];
            file.read_exact_at(&mut head, at).ok()?;
            let mut buf = vec![0u8; format::bans_len(&head)? as usize];
            file.read_exact_at(&mut buf, at).ok()?;
            format::decode_bans(&buf, instance)
        };
        match read() {
            Some((generation, bans)) => {
                if best.as_ref().is_none_or(|(g, _)| generation > *g) {
                    best = Some((generation, bans));
                }
            }
            None => {
                counters.disk_checksum_fail.inc();
                tracing::warn!(
                    copy,
                    "disk cache ban list copy damaged; using the other copy"
                );
            }
        }
    }
    best
}
