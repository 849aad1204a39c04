//! The per-worker queues the writer thread drains ([`Shards`]), the live subscribers'
//! broadcast and the `shellac top` rankings: what the recorder and the writer share.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crossbeam_queue::ArrayQueue;
use tokio::sync::broadcast;

use super::record::Record;
use super::top::Top;
use super::wire;
use crate::stats::Counters;

/// A chunk is also handed over once it holds this many bytes (long URLs or headers).
pub(super) const CHUNK_BYTES: usize = 16 * 1024;

/// Shards drained by the writer thread, plus the live subscribers.
pub(super) struct Shards {
    /// Finished records per worker, encoded in chunks of up to `PUSH_BATCH` (recorder.rs).
    pub(super) queues: Box<[ArrayQueue<wire::Chunk>]>,
    /// Chunk buffers the writer is done with, per worker, for reuse.
    pub(super) empties: Box<[ArrayQueue<Vec<u8>>]>,
    pub(super) counters: Arc<Counters>,
    pub(super) live: broadcast::Sender<Arc<Record>>,
    /// Rankings for `shellac top`, updated by the writer once per pass while wanted.
    pub(super) top: Mutex<Top>,
    /// `clock::now_ms` until which `shellac top` (or the dashboard) wants rankings.
    pub(super) top_until_ms: AtomicU64,
    /// `top_until_ms` is still ahead: set by a lease, cleared by the writer when it runs out,
    /// so the request path reads one flag instead of the clock.
    pub(super) top_active: AtomicBool,
    /// The writer thread, to wake it when a queue fills up.
    pub(super) writer: OnceLock<std::thread::Thread>,
}

impl Shards {
    /// Hands a chunk of finished records to shard `i`'s queue; a full queue drops the chunk
    /// and counts its records in `log_dropped` (the request path never waits for the log).
    pub(super) fn push_chunk(&self, i: usize, chunk: wire::Chunk) {
        if chunk.records == 0 {
            return;
        }
        let queue = &self.queues[i % self.queues.len()];
        if let Err(dropped) = queue.push(chunk) {
            self.counters.log_dropped.add(u64::from(dropped.records));
        }
        // A queue half full wakes the writer early: after an idle spell it may be in its
        // longest pause while load starts. Unparking a running thread is one atomic swap.
        if queue.len() * 2 >= queue.capacity()
            && let Some(writer) = self.writer.get()
        {
            writer.unpark();
        }
    }

    /// A buffer for a new chunk of shard `i`: one the writer handed back, else a new one.
    pub(super) fn chunk_buffer(&self, i: usize) -> Vec<u8> {
        self.empties[i % self.empties.len()]
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(CHUNK_BYTES + 1024))
    }

    #[inline]
    pub(super) fn top_wanted(&self) -> bool {
        self.top_active.load(Ordering::Relaxed)
    }

    /// Called by the writer every pass.
    pub(super) fn expire_top_lease(&self) {
        if self.top_active.load(Ordering::Relaxed)
            && crate::clock::now_ms() >= self.top_until_ms.load(Ordering::Relaxed)
        {
            self.top_active.store(false, Ordering::Relaxed);
        }
    }
}
