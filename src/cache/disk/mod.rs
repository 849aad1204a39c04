//! The persistent disk tier: a [`Storage`] over a focused log-structured engine.
//!
//! - `format.rs`: the on-disk layout (superblock, regions, entries, summaries, trailers).
//! - `engine.rs`: the data file, the in-memory index, reads and lazily read bodies.
//! - `recover.rs`: rebuilding the index, the ban list and the variant lists at start-up.
//! - `readahead.rs`: what that rebuild reads, asked of the device ahead of the reads.
//! - `ahead.rs`: that recovery started on a thread of its own early in start-up.
//! - `writer.rs`: the background writer thread (batched aligned writes, sealing, reclaim).
//!
//! The request path only ever does an in-memory index probe, a read on the blocking pool
//! (`spawn_blocking`) for a disk hit, and a `try_send` to the writer's bounded queue.

mod ahead;
mod bans;
mod engine;
pub mod format;
mod readahead;
mod recover;
mod writer;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;

pub use crate::cache::disk_body::{DiskBody, ReadError};
pub use ahead::open_ahead;
pub use engine::INLINE_MAX;
use engine::{Engine, Recovered, now_ms};
use writer::{Cmd, Writer, WriterState};

use super::ban::{Ban, BanError, BanList};
use super::{CacheKey, Object, RecoveredIndex, Storage, StorageStats};
use crate::config::{DISK_REGION_OVERHEAD, DiskConfig};
use crate::stats::Counters;

/// Objects waiting for the writer, at most (beyond: rejected, counted in `disk_reject`).
const QUEUE_LEN: usize = 4096;
/// Bytes of objects waiting for the writer, at most.
const QUEUE_BYTES: u64 = 128 << 20;

/// The disk tier.
pub struct DiskStorage {
    engine: Arc<Engine>,
    /// The cache's ban list: read back at start-up, persisted on change, checked on disk reads.
    bans: Arc<BanList>,
    /// Variant lists and tags found at recovery, until the cache takes them.
    recovered: Mutex<RecoveredIndex>,
    tx: SyncSender<Cmd>,
    shared: Arc<WriterState>,
    thread: Mutex<Option<JoinHandle<()>>>,
    max_object: u64,
    last_read_error_log: Mutex<Option<Instant>>,
}

impl DiskStorage {
    /// Opens the data file (creating and preallocating it if needed), rebuilds the index
    /// (counted in `disk_recovered_objects`, `disk_recovery_ms`), puts the persisted bans back
    /// into `bans` and starts the writer thread.
    /// Errors: the file cannot be created, locked (another process uses it), preallocated
    /// (no space) or read.
    /// Each object carries its own keep window (stale objects stay usable that long past
    /// TTL + grace).
    pub fn open(
        config: &DiskConfig,
        counters: Arc<Counters>,
        bans: Arc<BanList>,
    ) -> io::Result<DiskStorage> {
        let (engine, mut rec, waited) = ahead::open(config, &counters)?;
        let engine = Arc::new(engine);
        let mut ban_generation = rec.ban_generation;
        if restore_bans(&engine, &rec, &bans, &counters) {
            // Write back what is left, so retired bans are not read again.
            let records: Vec<format::BanRecord> = bans
                .snapshot()
                .iter()
                .map(|b| format::BanRecord {
                    pos: b.pos(),
                    created_ms: b.created_ms,
                    expr: b.expr.clone(),
                })
                .collect();
            ban_generation += 1;
            match engine.write_bans(ban_generation, &records) {
                Ok(n) => counters.disk_bytes_written.add(n),
                Err(e) => tracing::warn!(error = ?e, "cannot rewrite the disk cache ban list"),
            }
        }
        let recovered = RecoveredIndex {
            variants: std::mem::take(&mut rec.variants),
            tagged: std::mem::take(&mut rec.tagged),
        };
        counters
            .disk_recovered_variants
            .add(recovered.variants.len() as u64);
        counters
            .disk_recovered_tagged
            .add(recovered.tagged.len() as u64);
        rec.objects = engine.objects();
        counters.disk_recovered_objects.add(rec.objects);
        counters
            .disk_recovery_ms
            .add(rec.elapsed.as_millis() as u64);
        tracing::info!(
            path = %config.path.display(),
            objects = rec.objects,
            variants = recovered.variants.len(),
            tagged = recovered.tagged.len(),
            bans = bans.len(),
            ms = rec.elapsed.as_millis() as u64,
            waited_ms = waited.as_millis() as u64,
            "disk cache ready"
        );
        let shared = Arc::new(WriterState {
            queued: AtomicU64::new(0),
            suspended_until: AtomicU64::new(0),
        });
        let (tx, rx) = sync_channel(QUEUE_LEN);
        let writer = Writer::new(
            engine.clone(),
            shared.clone(),
            bans.clone(),
            ban_generation,
            rec.books,
            rec.next_seq,
        );
        let thread = std::thread::Builder::new()
            .name("shellac-disk-writer".into())
            .spawn(move || writer.run(rx))?;
        Ok(DiskStorage {
            max_object: config.region_size.0.saturating_sub(DISK_REGION_OVERHEAD),
            engine,
            bans,
            recovered: Mutex::new(recovered),
            tx,
            shared,
            thread: Mutex::new(Some(thread)),
            last_read_error_log: Mutex::new(None),
        })
    }

    /// Largest object (key, headers, body as weighed by [`Object::weight`]) the tier accepts.
    pub fn max_object(&self) -> u64 {
        self.max_object
    }

    /// Queues `object` for writing; never blocks. False (and counted in `disk_reject`) when the
    /// tier is suspended after an I/O error, the queue is full, or the object is too large.
    pub fn admit(&self, key: CacheKey, object: Arc<Object>) -> bool {
        let counters = &self.engine.counters;
        let weight = object.weight();
        if weight > self.max_object
            || self.shared.suspended_until.load(Ordering::Relaxed) > now_ms()
            || self.shared.queued.load(Ordering::Relaxed) + weight > QUEUE_BYTES
        {
            counters.disk_reject.inc();
            return false;
        }
        self.shared.queued.fetch_add(weight, Ordering::Relaxed);
        match self.tx.try_send(Cmd::Put(key, object, weight)) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.shared.queued.fetch_sub(weight, Ordering::Relaxed);
                counters.disk_reject.inc();
                false
            }
        }
    }

    /// Forgets (durably) the copy of `key` on disk, if there is one: a newer response stored
    /// only in memory must not be shadowed later by the older one on disk.
    pub fn supersede(&self, key: &CacheKey) {
        if self.engine.index_get(format::key_hash(key)).is_some() {
            self.remove(key);
        }
    }

    /// Variant keys (with their `Vary` names, oldest first) and tagged URLs indexed at
    /// recovery; taken once.
    pub fn take_index(&self) -> RecoveredIndex {
        std::mem::take(&mut *self.recovered.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Persists `ban` (already in the ban list): answers once the list holding it is synced
    /// to disk. Blocking; at most 30 s.
    pub fn persist_ban(&self, ban: Arc<Ban>) -> Result<(), BanError> {
        let (ack, done) = sync_channel(1);
        if self.tx.send(Cmd::Ban(ban, ack)).is_err() {
            return Err(BanError::NotDurable("the disk writer has stopped".into()));
        }
        done.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| {
                Err(BanError::NotDurable(
                    "the disk writer did not answer".into(),
                ))
            })
    }

    /// Retires bans created before `before` (the memory tier was swept completely since) that
    /// nothing servable on disk is older than (a ban on the request's fields: nor anything in
    /// memory, whose oldest object is `oldest_in_memory`). Blocking; returns how many.
    pub fn retire_bans(&self, before: Instant, oldest_in_memory: Instant) -> usize {
        let (ack, done) = sync_channel(1);
        if self
            .tx
            .send(Cmd::RetireBans(before, oldest_in_memory, ack))
            .is_err()
        {
            return 0;
        }
        done.recv_timeout(Duration::from_secs(30)).unwrap_or(0)
    }

    /// Waits (blocking, at most `timeout`) until everything queued so far is written.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (ack, done) = sync_channel(1);
        self.tx.send(Cmd::Flush(ack)).is_ok() && done.recv_timeout(timeout).is_ok()
    }

    async fn read(&self, key: &CacheKey) -> Option<Arc<Object>> {
        let hash = format::key_hash(key);
        let loc = self.engine.index_get(hash)?;
        if loc.expires_ms <= now_ms() {
            // Past TTL, grace and keep: never used again; the space goes with its region.
            self.engine.index_remove_exact(hash, &loc);
            return None;
        }
        let (engine, k) = (self.engine.clone(), key.clone());
        let read = tokio::task::spawn_blocking(move || engine.read_object(&k, hash, loc)).await;
        match read {
            Ok(Ok(Some(object)))
                if self.bans.is_banned_on_disk(
                    format::stream_pos(loc.seq, loc.offset as u64),
                    key,
                    &object,
                ) =>
            {
                // Written before a ban that matches it. No tombstone: the ban itself stays
                // persisted for as long as anything this old is on disk.
                self.engine.index_remove_exact(hash, &loc);
                self.engine.counters.ban_objects.inc();
                None
            }
            Ok(Ok(object)) => object.map(Arc::new),
            Ok(Err(ReadError::Corrupt(what))) => {
                self.engine.drop_corrupt(hash, &loc, what);
                None
            }
            Ok(Err(ReadError::Io(e))) => {
                self.engine.counters.disk_io_error.inc();
                let mut last = self
                    .last_read_error_log
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                if last.is_none_or(|t| t.elapsed() >= writer::SUSPEND_FOR) {
                    *last = Some(Instant::now());
                    tracing::error!(error = %e, "disk cache read failed; fetching from the backend");
                }
                None
            }
            Ok(Err(ReadError::Gone)) | Err(_) => None,
        }
    }

    #[cfg(test)]
    fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Stops the writer without sealing anything, as a crash would (tests).
    #[cfg(test)]
    fn crash(self) {
        let (ack, done) = sync_channel(1);
        if self.tx.send(Cmd::Abort(ack)).is_ok() {
            let _ = done.recv_timeout(Duration::from_secs(10));
        }
        self.engine.unlock();
    }
}

impl Storage for DiskStorage {
    fn name(&self) -> &'static str {
        "disk"
    }

    /// Always `None`: the disk tier answers through [`Storage::lookup_io`].
    fn lookup(&self, _key: &CacheKey) -> Option<Arc<Object>> {
        None
    }

    fn lookup_ref(&self, _key: crate::cache::KeyRef<'_>) -> Option<Arc<Object>> {
        None
    }

    fn has_io(&self) -> bool {
        true
    }

    fn lookup_io<'a>(
        &'a self,
        key: &'a CacheKey,
    ) -> Pin<Box<dyn Future<Output = Option<Arc<Object>>> + Send + 'a>> {
        Box::pin(self.read(key))
    }

    /// The copy on disk, read and verified like a lookup (nothing is promoted or counted).
    fn inspect<'a>(&'a self, key: &'a CacheKey) -> super::InspectFuture<'a> {
        Box::pin(async move {
            self.read(key)
                .await
                .map(|o| ("disk", o))
                .into_iter()
                .collect()
        })
    }

    fn insert(&self, key: CacheKey, object: Arc<Object>) {
        self.admit(key, object);
    }

    /// Forgets `key` at once and queues a tombstone so the removal survives a restart.
    fn remove(&self, key: &CacheKey) -> bool {
        let found = self.engine.index_remove(format::key_hash(key)).is_some();
        // Even if not indexed, a copy may still be queued for writing: the tombstone follows it.
        let _ = self.tx.try_send(Cmd::Remove(key.clone()));
        found
    }

    fn stats(&self) -> StorageStats {
        StorageStats {
            objects: self.engine.objects(),
            bytes: self.engine.live_bytes(),
            capacity: self.engine.capacity(),
        }
    }

    /// Writes what is queued, seals the open region and stops the writer (clean shutdown: the
    /// next start reads summaries only).
    fn close(&self) {
        let (ack, done) = sync_channel(1);
        if self.tx.send(Cmd::Close(ack)).is_ok() {
            let _ = done.recv_timeout(Duration::from_secs(30));
        }
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        self.engine.unlock();
    }
}

/// Puts the persisted bans back into `bans`: those positioned at or before the oldest region
/// still holding an object cover nothing any more and are dropped (`ban_retired`); beyond
/// `invalidation.max_bans`, or no longer valid, a ban is replaced by dropping every object
/// written before it (`ban_recovered_folded`) — never by serving what it covered. True if the
/// list changed.
fn restore_bans(engine: &Engine, rec: &Recovered, bans: &BanList, counters: &Counters) -> bool {
    let oldest = engine.oldest_live_pos(&rec.books);
    let mut keep: Vec<&format::BanRecord> = Vec::new();
    let mut changed = false;
    for b in &rec.bans {
        if b.pos <= oldest {
            counters.ban_retired.inc();
            changed = true;
        } else {
            keep.push(b);
        }
    }
    let mut fold_to = 0;
    let over = keep.len().saturating_sub(bans.max());
    if over > 0 {
        fold_to = keep[over - 1].pos;
        keep.drain(..over);
        counters.ban_recovered_folded.add(over as u64);
        changed = true;
    }
    for b in keep {
        match bans.restore(&b.expr, b.created_ms, b.pos) {
            Ok(_) => counters.ban_recovered.inc(),
            Err(e) => {
                tracing::warn!(expr = %b.expr, error = %e, "persisted ban no longer valid; dropping every disk object it could cover");
                fold_to = fold_to.max(b.pos);
                counters.ban_recovered_folded.inc();
                changed = true;
            }
        }
    }
    if fold_to > 0 {
        let dropped = engine.drop_before(&rec.books, fold_to);
        tracing::warn!(
            dropped,
            "disk objects older than bans that could not be reloaded dropped"
        );
    }
    changed
}

/// Streams a [`DiskBody`] chunk by chunk: each read runs on the blocking pool and is verified
/// before its bytes are handed out. A failed check ends the stream with an error (the client
/// sees a truncated response, never wrong bytes) and drops the entry.
pub struct DiskReader {
    body: DiskBody,
    next: usize,
    inflight: Option<tokio::task::JoinHandle<Result<Bytes, ReadError>>>,
    done: bool,
}

impl DiskReader {
    pub fn new(body: DiskBody) -> DiskReader {
        DiskReader {
            body,
            next: 0,
            inflight: None,
            done: false,
        }
    }

    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, String>>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            if let Some(task) = &mut self.inflight {
                let result = match Pin::new(task).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(r) => r,
                };
                self.inflight = None;
                return Poll::Ready(Some(match result {
                    Ok(Ok(bytes)) => {
                        self.next += 1;
                        Ok(bytes)
                    }
                    Ok(Err(e)) => {
                        self.done = true;
                        self.body.report(&e);
                        Err(format!("disk cache read failed: {e:?}"))
                    }
                    Err(e) => {
                        self.done = true;
                        Err(format!("disk cache read task failed: {e}"))
                    }
                }));
            }
            if self.next >= self.body.chunks() {
                self.done = true;
                return Poll::Ready(None);
            }
            let (body, i) = (self.body.clone(), self.next);
            self.inflight = Some(tokio::task::spawn_blocking(move || body.read_chunk(i)));
        }
    }
}

#[cfg(test)]
mod keyed_tests;
#[cfg(test)]
mod persist_tests;
#[cfg(test)]
mod tail_tests;
#[cfg(test)]
mod tests;
