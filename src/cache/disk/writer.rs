//! The disk writer: one background thread that turns admitted objects into large, sequential,
//! block-aligned writes, seals full regions (summary + trailer) and reclaims whole regions.
//! Nothing here runs on the request path; the request path only `try_send`s to its queue.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

use xxhash_rust::xxh3::Xxh3;

use super::engine::{BanWriteError, Engine, Loc, RegionBook, now_ms};
use super::format::{
    self, BAN_SLOT, BLOCK, BODY_CHUNK, BanRecord, EntryHeader, EntryInfo, FLAG_KEY_RECORD,
    KIND_OBJECT, KIND_TOMBSTONE, KeyRecord, Meta, RegionHeader,
};
use crate::cache::ban::{Ban, BanError, BanList, NOT_PERSISTED};
use crate::cache::{Body, CacheKey, Object};

/// Writes are issued once this much is buffered (whole blocks only; the tail waits). Kept
/// small enough that one `pwrite` (copy into the page cache, in the kernel, where a
/// non-preemptible kernel does not let a request thread on the same core run) stays well
/// under a millisecond.
pub const WRITE_BATCH: usize = 256 << 10;
/// Write-back of what was written is started (not waited for) every this many bytes, so the
/// `fdatasync` when a region is sealed has little left to do: without it that one call wrote
/// back the whole region (~1 ms of kernel work per 16 MiB, not preemptible, on the core the
/// request threads share). Smaller steps cost more CPU in total (ext4 per-call overhead:
/// 256 KiB steps took 4× the CPU of one write-back per region).
pub const WRITEBACK_EVERY: u64 = 2 << 20;
/// A partly filled batch is written after the queue has been quiet this long.
pub const FLUSH_AFTER: Duration = Duration::from_millis(5);
/// With the queue empty, the writer naps this long before looking again (up to
/// [`FLUSH_AFTER`], then it blocks). While it naps, admitting an object costs the request
/// path no wake-up: without the naps every admission woke the writer (two context switches
/// per object on the request thread's core).
pub const NAP: Duration = Duration::from_millis(1);
/// After an I/O error the tier stops admitting for this long (then tries again), and logs at
/// most once per this interval.
pub const SUSPEND_FOR: Duration = Duration::from_secs(10);

/// Work for the writer.
pub enum Cmd {
    Put(CacheKey, Arc<Object>, u64),
    Remove(CacheKey),
    /// Write everything queued so far, then answer.
    Flush(SyncSender<()>),
    /// Give the ban its stream position and persist the ban list (synced) before answering.
    Ban(Arc<Ban>, SyncSender<Result<(), BanError>>),
    /// Retire the bans created before this instant that no indexed object is older than (the
    /// memory tier was swept completely since); answers how many.
    RetireBans(Instant, Instant, SyncSender<usize>),
    /// Flush, seal the open region, sync, answer and stop.
    Close(SyncSender<()>),
    /// Stop at once without writing anything more, as if the process died (tests).
    #[cfg(test)]
    Abort(SyncSender<()>),
}

/// State shared between the writer and the admission side.
pub struct WriterState {
    /// Bytes of objects queued and not yet written.
    pub queued: AtomicU64,
    /// Admission is refused until this time (ms since the epoch) after an I/O error.
    pub suspended_until: AtomicU64,
}

struct Active {
    region: u32,
    seq: u64,
    /// Offset within the region of `buf[0]` (block aligned).
    buf_start: u64,
    /// Offset within the region up to which write-back has been started.
    writeback_from: u64,
}

pub struct Writer {
    engine: Arc<Engine>,
    shared: Arc<WriterState>,
    bans: Arc<BanList>,
    /// Generation of the ban list last written.
    ban_generation: u64,
    books: Vec<RegionBook>,
    next_seq: u64,
    active: Option<Active>,
    buf: Vec<u8>,
    /// Entries in `buf` not yet fully written: indexed once their last byte is on disk.
    pending: Vec<(EntryInfo, u64)>,
    last_error_log: Option<Instant>,
}

impl Writer {
    pub fn new(
        engine: Arc<Engine>,
        shared: Arc<WriterState>,
        bans: Arc<BanList>,
        ban_generation: u64,
        books: Vec<RegionBook>,
        next_seq: u64,
    ) -> Writer {
        Writer {
            engine,
            shared,
            bans,
            ban_generation,
            books,
            next_seq,
            active: None,
            buf: Vec::with_capacity(WRITE_BATCH + BLOCK as usize),
            pending: Vec::new(),
            last_error_log: None,
        }
    }

    /// The thread body: runs until `Close` or until every sender is gone.
    pub fn run(mut self, rx: Receiver<Cmd>) {
        loop {
            let cmd = match rx.try_recv() {
                Ok(cmd) => Ok(cmd),
                Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => self.next_when_empty(&rx),
            };
            match cmd {
                Ok(Cmd::Put(key, object, weight)) => {
                    self.shared.queued.fetch_sub(weight, Ordering::Relaxed);
                    if self.suspended() {
                        self.engine.counters.disk_reject.inc();
                    } else {
                        self.put(&key, &object);
                    }
                }
                Ok(Cmd::Remove(key)) => {
                    if !self.suspended() {
                        self.tombstone(&key);
                    }
                }
                Ok(Cmd::Flush(ack)) => {
                    self.flush();
                    let _ = ack.send(());
                }
                Ok(Cmd::Ban(ban, ack)) => {
                    let _ = ack.send(self.persist_ban(&ban));
                }
                Ok(Cmd::RetireBans(before, oldest, ack)) => {
                    let _ = ack.send(self.retire_bans(before, oldest));
                }
                Ok(Cmd::Close(ack)) => {
                    self.close();
                    let _ = ack.send(());
                    return;
                }
                #[cfg(test)]
                Ok(Cmd::Abort(ack)) => {
                    let _ = ack.send(());
                    return;
                }
                Err(RecvTimeoutError::Timeout) => self.flush(),
                Err(RecvTimeoutError::Disconnected) => {
                    self.close();
                    return;
                }
            }
        }
    }

    /// The queue is empty: nap in [`NAP`] steps, so that what is admitted meanwhile is queued
    /// without waking this thread and taken in one go; after [`FLUSH_AFTER`] of quiet, time
    /// out (a partly filled batch is then written), or block if nothing is buffered.
    fn next_when_empty(&self, rx: &Receiver<Cmd>) -> Result<Cmd, RecvTimeoutError> {
        let quiet = Instant::now();
        while quiet.elapsed() < FLUSH_AFTER {
            std::thread::sleep(NAP);
            match rx.try_recv() {
                Ok(cmd) => return Ok(cmd),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
        }
        if self.buf.is_empty() {
            rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            Err(RecvTimeoutError::Timeout)
        }
    }

    /// Positions `ban` at the current end of the write stream (entries written before it are
    /// the ones it covers; later ones were checked against it in [`Writer::put`]) and writes
    /// the ban list. Not done in place of admission: bans are persisted even while admission is
    /// suspended.
    fn persist_ban(&mut self, ban: &Ban) -> Result<(), BanError> {
        let pos = match (&self.active, self.cursor()) {
            (Some(a), Some(cursor)) => format::stream_pos(a.seq, cursor),
            _ => format::stream_pos(self.next_seq, 0),
        };
        ban.set_pos(pos);
        match self.write_bans() {
            Ok(()) => Ok(()),
            Err(BanWriteError::Full) => {
                // Not applied: a ban that cannot be persisted would block every later one.
                self.bans.remove(ban.id);
                self.engine.counters.ban_persist_full.inc();
                Err(BanError::PersistFull(BAN_SLOT))
            }
            Err(BanWriteError::Io(e)) => {
                // Still applied in this process (and written with the next list that succeeds).
                self.engine.counters.disk_io_error.inc();
                tracing::error!(error = %e, "cannot persist the ban list");
                Err(BanError::NotDurable(e.to_string()))
            }
        }
    }

    /// Writes every positioned ban (a new generation of the list).
    fn write_bans(&mut self) -> Result<(), BanWriteError> {
        let records: Vec<BanRecord> = self
            .bans
            .snapshot()
            .iter()
            .filter(|b| b.pos() != NOT_PERSISTED)
            .map(|b| BanRecord {
                pos: b.pos(),
                created_ms: b.created_ms,
                expr: b.expr.clone(),
            })
            .collect();
        self.ban_generation += 1;
        let n = self.engine.write_bans(self.ban_generation, &records)?;
        self.engine.counters.disk_bytes_written.add(n);
        Ok(())
    }

    /// Retires bans created before `before` whose position is before the oldest region still
    /// holding an unexpired indexed object: nothing on disk older than them can be served any
    /// more, and whatever was queued before this command has been written (or dropped) by now.
    fn retire_bans(&mut self, before: Instant, oldest_in_memory: Instant) -> usize {
        // Entries of the open region not yet written are not indexed: they count too.
        let open = match &self.active {
            Some(a) if !self.pending.is_empty() => format::stream_pos(a.seq, 0),
            _ => u64::MAX,
        };
        let oldest = self.engine.oldest_live_pos(&self.books).min(open);
        let retired = self.bans.retire_where(|b| {
            b.created < before
                    && b.pos() != NOT_PERSISTED
                    && b.pos() <= oldest
                    // A ban on the request's fields was checked by no sweep: it goes only
                    // once nothing older than it is left in memory either.
                    && (!b.needs_request || b.created < oldest_in_memory)
        });
        if retired > 0
            && let Err(BanWriteError::Io(e)) = self.write_bans()
        {
            // The retired bans come back at the next start and are dropped there again.
            self.engine.counters.disk_io_error.inc();
            tracing::warn!(error = %e, "cannot rewrite the ban list after retiring bans");
        }
        retired
    }

    fn suspended(&self) -> bool {
        self.shared.suspended_until.load(Ordering::Relaxed) > now_ms()
    }

    fn close(&mut self) {
        self.flush();
        self.seal();
    }

    /// Appends one object.
    fn put(&mut self, key: &CacheKey, object: &Object) {
        let Body::Memory(chunks) = &object.body else {
            // Only objects with their body in memory are written (disk-backed ones are there).
            return;
        };
        // Every object written after a ban's position has been checked against it here: that
        // is what lets a ban cover only the entries before its position.
        if self.bans.is_banned(key, object) {
            self.engine.counters.ban_objects.inc();
            return;
        }
        let key_bytes = format::encode_key(key);
        let hash = format::key_hash(key);
        let stored_ms = now_ms().saturating_sub(object.stored_at.elapsed().as_millis() as u64);
        let meta = Meta {
            status: object.status,
            headers: object.headers.to_map(),
            vary: object.vary().to_vec(),
            initial_age_ms: object.initial_age.millis(),
            ttl_ms: object.ttl.millis(),
            stored_ms,
            stale_ok: object.stale_ok,
            prefetch: object.prefetch,
            grace_ms: object.grace.millis(),
            keep_ms: object.keep.millis(),
            stale_if_error_ms: object.stale_if_error.get().map(|d| d.as_millis() as u64),
            chunk_hashes: chunk_hashes(chunks, object.body_len),
        };
        let meta_bytes = meta.encode();
        // Usable (fresh, in grace, or stale but kept for revalidation / stale-if-error) until
        // then; the index forgets it after that.
        let extra = (object.grace.get() + object.keep.get())
            .max(object.stale_if_error.get().unwrap_or_default());
        let lifetime = (object.ttl.get() + extra).saturating_sub(object.initial_age.get());
        // A variant's key and Vary names, and a tagged object's surrogate keys, go into the
        // summary too, so the URL's variant list and the tag index are rebuilt at recovery
        // without reading the entry. Encoded now with entry index 0, patched when appended.
        let names: Vec<http::HeaderName> = if key.variant != 0 {
            object.vary().iter().map(|(n, _)| n.clone()).collect()
        } else {
            Vec::new()
        };
        let tags = crate::cache::tags::tags_of(&object.headers);
        let mut key_record = Vec::new();
        let flags = if KeyRecord::encode_into(0, &key_bytes, &names, &tags, &mut key_record) {
            FLAG_KEY_RECORD
        } else {
            0
        };
        let header = EntryHeader {
            kind: KIND_OBJECT,
            flags,
            seq: 0,
            hash,
            key_len: key_bytes.len() as u32,
            meta_len: meta_bytes.len() as u32,
            body_len: object.body_len,
            expires_ms: stored_ms.saturating_add(lifetime.as_millis() as u64),
            meta_hash: meta_checksum(&key_bytes, &meta_bytes),
        };
        let total = header.total_len();
        if total > self.engine.max_entry() {
            self.engine.counters.disk_reject.inc();
            return;
        }
        let Some(seq) = self.make_room(total, key_record.len() as u64) else {
            self.engine.counters.disk_reject.inc();
            return;
        };
        let header = EntryHeader { seq, ..header };
        let Some(start) = self.cursor() else {
            return;
        };
        self.buf.extend_from_slice(&header.encode());
        self.buf.extend_from_slice(&key_bytes);
        self.buf.extend_from_slice(&meta_bytes);
        for chunk in chunks {
            let mut rest = &chunk[..];
            while !rest.is_empty() {
                let room = WRITE_BATCH
                    .saturating_sub(self.buf.len())
                    .max(BLOCK as usize);
                let take = room.min(rest.len());
                self.buf.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if self.buf.len() >= WRITE_BATCH && !self.write_full_blocks() {
                    return;
                }
            }
        }
        let end = start + total;
        if let Some(cursor) = self.cursor() {
            self.buf.resize(self.buf.len() + (end - cursor) as usize, 0);
        }
        let info = EntryInfo {
            hash,
            offset: start as u32,
            len: total as u32,
            expires_ms: header.expires_ms,
            kind: KIND_OBJECT,
        };
        if !key_record.is_empty()
            && let Some(a) = &self.active
        {
            let book = &mut self.books[a.region as usize];
            key_record[..4].copy_from_slice(&(book.entries.len() as u32).to_le_bytes());
            book.vary.extend_from_slice(&key_record);
        }
        self.record(info);
        self.pending.push((info, end));
        self.engine.counters.disk_admit.inc();
        self.engine
            .counters
            .disk_bytes_admitted
            .add(key_bytes.len() as u64 + meta_bytes.len() as u64 + object.body_len);
        if self.buf.len() >= WRITE_BATCH {
            self.write_full_blocks();
        }
    }

    /// Appends a tombstone so a removal survives a restart.
    fn tombstone(&mut self, key: &CacheKey) {
        let key_bytes = format::encode_key(key);
        let hash = format::key_hash(key);
        // A queued copy of the object written before this point must not be indexed after it.
        self.pending
            .retain(|(e, _)| !(e.hash == hash && e.kind == KIND_OBJECT));
        self.engine.index_remove(hash);
        let header = EntryHeader {
            kind: KIND_TOMBSTONE,
            flags: 0,
            seq: 0,
            hash,
            key_len: key_bytes.len() as u32,
            meta_len: 0,
            body_len: 0,
            expires_ms: 0,
            meta_hash: meta_checksum(&key_bytes, &[]),
        };
        let total = header.total_len();
        let Some(seq) = self.make_room(total, 0) else {
            return;
        };
        let Some(start) = self.cursor() else {
            return;
        };
        self.buf
            .extend_from_slice(&EntryHeader { seq, ..header }.encode());
        self.buf.extend_from_slice(&key_bytes);
        self.buf.resize(
            self.buf.len() + (total as usize - format::ENTRY_HEADER - key_bytes.len()),
            0,
        );
        self.record(EntryInfo {
            hash,
            offset: start as u32,
            len: total as u32,
            expires_ms: 0,
            kind: KIND_TOMBSTONE,
        });
    }

    fn record(&mut self, info: EntryInfo) {
        if let Some(a) = &self.active {
            let book = &mut self.books[a.region as usize];
            if info.kind == KIND_TOMBSTONE {
                book.tombstones += 1;
            } else {
                book.hashes.push(info.hash);
                book.max_expires_ms = book.max_expires_ms.max(info.expires_ms);
            }
            book.entries.push(info);
        }
    }

    /// Write position within the active region.
    fn cursor(&self) -> Option<u64> {
        self.active
            .as_ref()
            .map(|a| a.buf_start + self.buf.len() as u64)
    }

    /// Makes sure an entry of `total` bytes (and `record_len` more bytes of summary) fits the
    /// active region (sealing it and opening the next one if not); returns the active region's
    /// incarnation.
    fn make_room(&mut self, total: u64, record_len: u64) -> Option<u64> {
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
    fn choose_victim(&self) -> u32 {
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

    fn open_next(&mut self) -> Option<()> {
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
    fn write_full_blocks(&mut self) -> bool {
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
    fn flush(&mut self) {
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
    fn seal(&mut self) {
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

    /// An I/O error: stop admitting for [`SUSPEND_FOR`], drop what is buffered, leave the
    /// region as it is (recovery scans it up to the last good entry). Logged once per interval.
    fn fail(&mut self, e: io::Error) {
        self.engine.counters.disk_io_error.inc();
        let dropped = self.pending.len() as u64;
        self.engine.counters.disk_reject.add(dropped);
        self.pending.clear();
        self.buf.clear();
        self.active = None;
        let until = now_ms() + SUSPEND_FOR.as_millis() as u64;
        self.shared.suspended_until.store(until, Ordering::Relaxed);
        if self
            .last_error_log
            .is_none_or(|t| t.elapsed() >= SUSPEND_FOR)
        {
            self.last_error_log = Some(Instant::now());
            tracing::error!(error = %e, "disk cache write failed; not admitting to disk for {}s (serving continues)", SUSPEND_FOR.as_secs());
        }
    }
}

fn meta_checksum(key: &[u8], meta: &[u8]) -> u64 {
    let mut h = Xxh3::new();
    h.update(key);
    h.update(meta);
    h.digest()
}

/// Checksums of each [`BODY_CHUNK`] of a body held as arbitrary pieces.
fn chunk_hashes(chunks: &[bytes::Bytes], len: u64) -> Vec<u64> {
    let mut out = Vec::with_capacity(format::chunk_count(len));
    let mut h = Xxh3::new();
    let mut filled = 0u64;
    for chunk in chunks {
        let mut rest = &chunk[..];
        while !rest.is_empty() {
            let take = ((BODY_CHUNK - filled) as usize).min(rest.len());
            h.update(&rest[..take]);
            filled += take as u64;
            rest = &rest[take..];
            if filled == BODY_CHUNK {
                out.push(h.digest());
                h.reset();
                filled = 0;
            }
        }
    }
    if filled > 0 || out.is_empty() {
        out.push(h.digest());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_hashes_do_not_depend_on_framing() {
        let data: Vec<u8> = (0..(BODY_CHUNK as usize * 2 + 10))
            .map(|i| i as u8)
            .collect();
        let one = chunk_hashes(&[bytes::Bytes::from(data.clone())], data.len() as u64);
        let many: Vec<bytes::Bytes> = data
            .chunks(1000)
            .map(bytes::Bytes::copy_from_slice)
            .collect();
        assert_eq!(one, chunk_hashes(&many, data.len() as u64));
        assert_eq!(one.len(), 3);
        assert_eq!(one[2], format::checksum(&data[2 * BODY_CHUNK as usize..]));
        assert_eq!(chunk_hashes(&[], 0), vec![format::checksum(b"")]);
    }
}
