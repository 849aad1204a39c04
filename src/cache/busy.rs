//! Request coalescing: one fetch per key, streamed to every waiting client as it arrives.
//!
//! The first request for a missing key becomes the *leader* and gets a [`LeaderGuard`]; later
//! requests for the same key get the [`BusyObject`] and wait for its head. Once the head is known
//! the response is either shared (readers follow the body chunk by chunk while it streams in) or
//! *abandoned* (uncacheable: waiters are released at once and fetch on their own).
//!
//! Memory: a busy object keeps its chunks because they become the cached object. If the body
//! outgrows `max_object_size` the object switches to *trimming*: chunks every reader has passed
//! are dropped and the fetch waits (back-pressure) while more than [`TRIM_WINDOW`] bytes are
//! unread, so an oversized response never sits whole in memory.

mod table;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

pub use table::{BusyTable, Join, LeaderGuard};

/// Unread bytes allowed in a trimming busy object before the fetch waits for readers.
pub const TRIM_WINDOW: usize = 1 << 20;

/// The response head shared with waiters.
#[derive(Debug)]
pub struct BusyHead {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// Known body length (Content-Length), if any.
    pub content_length: Option<u64>,
    /// The leader's request values for the response's `Vary` fields; a waiter whose request
    /// differs must not share this response.
    pub vary: super::VarySelection,
    /// The fields every coalesced waiter sends (built by the first one, cloned by the rest:
    /// proxy/hit.rs).
    pub delivered: std::sync::OnceLock<HeaderMap>,
    /// Under a 4.x VCL program, the object the fill stores, without its body: what vcl_hit
    /// of a waiter reads as `obj` (Varnish's waiting list looks the busy object up again and
    /// runs vcl_hit on it). `None` otherwise.
    pub object: Option<std::sync::Arc<super::Object>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Pending,
    Streaming,
    Complete,
    /// Uncacheable: waiters must fetch on their own.
    Abandoned,
    /// The fetch failed before or while streaming.
    Failed,
}

struct Inner {
    state: State,
    failure: Option<(StatusCode, &'static str)>,
    head: Option<Arc<BusyHead>>,
    chunks: VecDeque<Bytes>,
    /// Index of `chunks[0]` in the whole body.
    first: usize,
    unread_bytes: usize,
    /// Body bytes pushed so far.
    received: u64,
    trimming: bool,
    /// Cursor (chunk index) per registered reader; `None` for free slots.
    cursors: Vec<Option<usize>>,
    wakers: Vec<Waker>,
    writer: Option<Waker>,
}

/// A fetch in progress that other requests may follow.
pub struct BusyObject {
    inner: Mutex<Inner>,
    /// Its URL was purged while it was fetched: what it stores is removed again (a fill that
    /// raced a purge never outlives it).
    purged: std::sync::atomic::AtomicBool,
    /// When the leader's fetch began (before its request went out): whatever that fetch
    /// stores was validated by the origin after it, for every request that waited on it.
    pub started: std::time::Instant,
}

/// What a waiter learns once the leader has a response head.
pub enum HeadOutcome {
    /// Follow the leader's response.
    Shared(Arc<BusyHead>, BusyReader),
    /// The leader's response is not shareable (uncacheable, leader gone): look up again.
    Retry,
    /// The leader's fetch failed with this status; waiters answer the same way rather than
    /// piling onto a backend that just failed.
    Failed(StatusCode, &'static str),
}

impl BusyObject {
    /// A busy object not in any table (a hit-for-miss fill nobody else waits on).
    pub fn new() -> Arc<BusyObject> {
        Arc::new(BusyObject {
            inner: Mutex::new(Inner {
                state: State::Pending,
                failure: None,
                head: None,
                chunks: VecDeque::new(),
                first: 0,
                unread_bytes: 0,
                received: 0,
                trimming: false,
                cursors: Vec::new(),
                wakers: Vec::new(),
                writer: None,
            }),
            purged: std::sync::atomic::AtomicBool::new(false),
            started: std::time::Instant::now(),
        })
    }

    /// Whether its URL was purged since the fetch started.
    pub fn is_purged(&self) -> bool {
        self.purged.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The fetch ended with nothing for a waiter to follow or share: abandoned, or failed
    /// without a status for its waiters (mid-body). A waiter would only be told to look up
    /// again ([`HeadOutcome::Retry`]), so the busy table no longer counts it as in progress.
    fn is_over(&self) -> bool {
        let inner = self.lock();
        match inner.state {
            State::Abandoned => true,
            State::Failed => inner.failure.is_none(),
            _ => false,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave Inner half-updated in a way readers
        // misinterpret, so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the leader's response head.
    pub async fn wait_head(self: &Arc<Self>) -> HeadOutcome {
        poll_fn(|cx| {
            let mut inner = self.lock();
            match inner.state {
                State::Pending => {
                    inner.wakers.push(cx.waker().clone());
                    Poll::Pending
                }
                State::Failed => Poll::Ready(match inner.failure {
                    Some((status, detail)) => HeadOutcome::Failed(status, detail),
                    None => HeadOutcome::Retry,
                }),
                State::Abandoned => Poll::Ready(HeadOutcome::Retry),
                State::Streaming | State::Complete if inner.first > 0 => {
                    Poll::Ready(HeadOutcome::Retry)
                }
                // The whole body is here and being stored: wait for the store, then look the
                // object up (a request right after a fill is a hit, as in Varnish: it runs
                // vcl_hit, and a conditional request gets its 304).
                State::Streaming if whole_body_received(&inner) => {
                    inner.wakers.push(cx.waker().clone());
                    Poll::Pending
                }
                State::Complete if !inner.trimming => Poll::Ready(HeadOutcome::Retry),
                State::Streaming | State::Complete => {
                    let head = inner.head.clone().expect("head set when streaming");
                    let slot = register(&mut inner);
                    Poll::Ready(HeadOutcome::Shared(
                        head,
                        BusyReader {
                            object: self.clone(),
                            slot,
                        },
                    ))
                }
            }
        })
        .await
    }

    /// Leader side: a reader for the leader's own client.
    pub fn reader(self: &Arc<Self>) -> BusyReader {
        let slot = register(&mut self.lock());
        BusyReader {
            object: self.clone(),
            slot,
        }
    }

    /// Publishes the response head; waiters start following the body.
    pub fn set_head(&self, head: BusyHead) {
        let mut inner = self.lock();
        inner.head = Some(Arc::new(head));
        inner.state = State::Streaming;
        wake_all(&mut inner);
    }

    /// The response is not shareable: release waiters so they fetch on their own.
    pub fn abandon(&self) {
        let mut inner = self.lock();
        inner.state = State::Abandoned;
        wake_all(&mut inner);
    }

    /// Appends a body chunk and wakes readers.
    pub fn push(&self, chunk: Bytes) {
        let mut inner = self.lock();
        inner.unread_bytes += chunk.len();
        inner.received += chunk.len() as u64;
        inner.chunks.push_back(chunk);
        if inner.trimming {
            trim(&mut inner);
        }
        wake_all(&mut inner);
    }

    /// Stops keeping the whole body: from now on chunks every reader has passed are dropped.
    pub fn start_trimming(&self) {
        let mut inner = self.lock();
        inner.trimming = true;
        trim(&mut inner);
    }

    /// In trimming mode, waits until readers have caught up enough. Returns false when no reader
    /// is left (the fetch may stop).
    pub async fn writable(&self) -> bool {
        poll_fn(|cx| {
            let mut inner = self.lock();
            if !inner.trimming {
                return Poll::Ready(true);
            }
            if inner.cursors.iter().all(Option::is_none) {
                return Poll::Ready(false);
            }
            if inner.unread_bytes <= TRIM_WINDOW {
                return Poll::Ready(true);
            }
            inner.writer = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Waits until the fill has settled: the body complete (and the object stored), or the
    /// fetch failed or was abandoned.
    pub async fn settled(&self) {
        poll_fn(|cx| {
            let mut inner = self.lock();
            if matches!(inner.state, State::Pending | State::Streaming) && !inner.trimming {
                inner.wakers.push(cx.waker().clone());
                return Poll::Pending;
            }
            Poll::Ready(())
        })
        .await
    }

    /// The body is complete.
    pub fn finish(&self) {
        let mut inner = self.lock();
        inner.state = State::Complete;
        wake_all(&mut inner);
    }

    /// The fetch failed before a response head: waiters answer with `status`.
    pub fn fail_with(&self, status: StatusCode, detail: &'static str) {
        let mut inner = self.lock();
        inner.failure = Some((status, detail));
        inner.state = State::Failed;
        wake_all(&mut inner);
    }

    /// The fetch failed while streaming; readers see an error.
    pub fn fail(&self) {
        let mut inner = self.lock();
        if inner.state != State::Complete {
            inner.state = State::Failed;
        }
        wake_all(&mut inner);
    }

    /// Whole body so far, for building the cached object. Only meaningful when not trimming.
    pub fn chunks(&self) -> Vec<Bytes> {
        self.lock().chunks.iter().cloned().collect()
    }
}

fn register(inner: &mut Inner) -> usize {
    let first = inner.first;
    match inner.cursors.iter().position(Option::is_none) {
        Some(i) => {
            inner.cursors[i] = Some(first);
            i
        }
        None => {
            inner.cursors.push(Some(first));
            inner.cursors.len() - 1
        }
    }
}

/// Whether every byte of a body of known length has been pushed (and it is kept whole).
fn whole_body_received(inner: &Inner) -> bool {
    !inner.trimming
        && inner
            .head
            .as_ref()
            .and_then(|h| h.content_length)
            .is_some_and(|n| n == inner.received)
}

fn wake_all(inner: &mut Inner) {
    for w in inner.wakers.drain(..) {
        w.wake();
    }
}

/// Drops chunks that every reader has passed.
fn trim(inner: &mut Inner) {
    let min = inner
        .cursors
        .iter()
        .flatten()
        .copied()
        .min()
        .unwrap_or(inner.first + inner.chunks.len());
    while inner.first < min {
        match inner.chunks.pop_front() {
            Some(c) => {
                inner.unread_bytes = inner.unread_bytes.saturating_sub(c.len());
                inner.first += 1;
            }
            None => break,
        }
    }
    if let Some(w) = inner.writer.take() {
        w.wake();
    }
}

/// Follows a busy object's body from the start.
pub struct BusyReader {
    object: Arc<BusyObject>,
    slot: usize,
}

/// A reader's view of the next piece of body.
pub enum ChunkPoll {
    Chunk(Bytes),
    End,
    Failed,
}

impl BusyReader {
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<ChunkPoll> {
        self.poll_chunk_settled(cx, None)
    }

    /// [`BusyReader::poll_chunk`] for a body of which `remaining` bytes are still to come:
    /// the chunk that completes them is handed out only once the fill has settled (the
    /// object stored, or given up). A client that has read the whole body and asks again —
    /// a conditional request, a `hash_always_miss` refetch followed by a plain request —
    /// then finds the new object stored instead of the copy it replaces (or none). The wait
    /// is the fill's last step after the backend's last byte: no I/O.
    pub fn poll_chunk_settled(
        &mut self,
        cx: &mut Context<'_>,
        remaining: Option<u64>,
    ) -> Poll<ChunkPoll> {
        let mut inner = self.object.lock();
        let Some(cursor) = inner.cursors.get(self.slot).copied().flatten() else {
            return Poll::Ready(ChunkPoll::Failed);
        };
        if cursor < inner.first + inner.chunks.len() {
            let chunk = &inner.chunks[cursor - inner.first];
            if remaining.is_some_and(|r| chunk.len() as u64 >= r)
                && !inner.trimming
                && matches!(inner.state, State::Pending | State::Streaming)
            {
                inner.wakers.push(cx.waker().clone());
                return Poll::Pending;
            }
            let chunk = chunk.clone();
            inner.cursors[self.slot] = Some(cursor + 1);
            if inner.trimming {
                trim(&mut inner);
            }
            return Poll::Ready(ChunkPoll::Chunk(chunk));
        }
        match inner.state {
            State::Complete => Poll::Ready(ChunkPoll::End),
            State::Failed | State::Abandoned => Poll::Ready(ChunkPoll::Failed),
            State::Pending | State::Streaming => {
                inner.wakers.push(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for BusyReader {
    fn drop(&mut self) {
        let mut inner = self.object.lock();
        if let Some(c) = inner.cursors.get_mut(self.slot) {
            *c = None;
        }
        if inner.trimming {
            trim(&mut inner);
        }
        if let Some(w) = inner.writer.take() {
            w.wake();
        }
    }
}
