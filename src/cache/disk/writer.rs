//! The disk writer: one background thread that turns admitted objects into large, sequential,
//! block-aligned writes, seals full regions (summary + trailer) and reclaims whole regions.
//! Nothing here runs on the request path; the request path only `try_send`s to its queue.

mod entries;
mod regions;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

use super::engine::{BanWriteError, Engine, RegionBook, now_ms};
use super::format::{self, BAN_SLOT, BLOCK, BanRecord, EntryInfo};
use crate::cache::ban::{Ban, BanError, BanList, NOT_PERSISTED};
use crate::cache::{CacheKey, Object};

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
