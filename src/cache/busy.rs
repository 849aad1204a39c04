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

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use super::CacheKey;

/// Unread bytes allowed in a trimming busy object before the fetch waits for readers.
pub const TRIM_WINDOW: usize = 1 << 20;

const SHARDS: usize = 64;

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
    /// proxy/fsm.rs).
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
        })
    }

    /// Whether its URL was purged since the fetch started.
    pub fn is_purged(&self) -> bool {
        self.purged.load(std::sync::atomic::Ordering::SeqCst)
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

/// All busy objects, by key.
pub struct BusyTable {
    shards: Vec<Mutex<HashMap<CacheKey, Arc<BusyObject>>>>,
    hasher: std::collections::hash_map::RandomState,
}

/// Result of joining the busy table for a key.
pub enum Join {
    Leader(LeaderGuard),
    Waiter(Arc<BusyObject>),
}

impl Default for BusyTable {
    fn default() -> Self {
        BusyTable {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: Default::default(),
        }
    }
}

impl BusyTable {
    fn shard(&self, key: &CacheKey) -> MutexGuard<'_, HashMap<CacheKey, Arc<BusyObject>>> {
        let i = self.hasher.hash_one(key) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Becomes the leader for `key`, or a waiter on the current leader.
    pub fn join(self: &Arc<Self>, key: &CacheKey) -> Join {
        let mut shard = self.shard(key);
        if let Some(existing) = shard.get(key) {
            return Join::Waiter(existing.clone());
        }
        let object = BusyObject::new();
        shard.insert(key.clone(), object.clone());
        Join::Leader(LeaderGuard {
            table: self.clone(),
            key: key.clone(),
            object,
            released: false,
            ticket: None,
        })
    }

    /// Marks the fetch of `key` in progress, if any, as purged (see [`BusyObject::is_purged`])
    /// and takes it out of the table: requests after the purge start a fetch of their own
    /// instead of following one that started before it.
    pub fn mark_purged(&self, key: &CacheKey) {
        let removed = self.shard(key).remove(key);
        if let Some(object) = removed {
            object
                .purged
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Whether a fetch of `key` is in progress.
    pub fn contains(&self, key: &CacheKey) -> bool {
        self.shard(key).contains_key(key)
    }

    /// Fetches in progress.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map(|m| m.len()).unwrap_or(0))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn remove(&self, key: &CacheKey, object: &Arc<BusyObject>) {
        let mut shard = self.shard(key);
        if shard.get(key).is_some_and(|o| Arc::ptr_eq(o, object)) {
            shard.remove(key);
        }
    }
}

/// The leader's handle. Dropping it removes the key from the busy table and, if the fetch did
/// not finish, fails the object so no waiter hangs.
pub struct LeaderGuard {
    table: Arc<BusyTable>,
    key: CacheKey,
    object: Arc<BusyObject>,
    released: bool,
    /// The fleet lease on this fetch (`[storage.shared]`), released when the fetch ends.
    ticket: Option<super::shared::Ticket>,
}

impl LeaderGuard {
    pub fn object(&self) -> &Arc<BusyObject> {
        &self.object
    }

    /// Holds the fleet lease for this fetch.
    pub fn set_ticket(&mut self, ticket: Option<super::shared::Ticket>) {
        self.ticket = ticket;
    }

    /// The fleet lease, for the write that releases it (or to mark the URL uncacheable).
    pub fn take_ticket(&mut self) -> Option<super::shared::Ticket> {
        self.ticket.take()
    }

    /// Stops new requests from joining (the object was stored, abandoned or is trimming).
    pub fn release(&mut self) {
        if !self.released {
            self.released = true;
            self.table.remove(&self.key, &self.object);
        }
    }
}

impl Drop for LeaderGuard {
    fn drop(&mut self) {
        self.release();
        let state = self.object.lock().state;
        match state {
            // The leader went away before a response (its client disconnected): waiters retry.
            State::Pending => self.object.abandon(),
            State::Streaming => self.object.fail(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Poll;

    fn key() -> CacheKey {
        CacheKey::new("example.com", "/")
    }

    /// A purge during a fetch: the fetch is marked (what it stores is removed again) and later
    /// requests lead a fetch of their own.
    #[test]
    fn a_purge_detaches_the_fetch_in_progress() {
        let table = Arc::new(BusyTable::default());
        let Join::Leader(old) = table.join(&key()) else {
            panic!("first is leader")
        };
        table.mark_purged(&key());
        assert!(old.object().is_purged());
        let Join::Leader(new) = table.join(&key()) else {
            panic!("a request after the purge leads its own fetch")
        };
        drop(old);
        assert!(
            matches!(table.join(&key()), Join::Waiter(_)),
            "the old leader leaving keeps the new one"
        );
        assert!(!new.object().is_purged());
    }

    #[tokio::test]
    async fn waiter_follows_stream() {
        let table = Arc::new(BusyTable::default());
        let Join::Leader(leader) = table.join(&key()) else {
            panic!("first is leader")
        };
        let Join::Waiter(busy) = table.join(&key()) else {
            panic!("second waits")
        };
        let waiter = tokio::spawn(async move {
            let HeadOutcome::Shared(head, mut reader) = busy.wait_head().await else {
                panic!("shared")
            };
            assert_eq!(head.status, StatusCode::OK);
            let mut body = Vec::new();
            loop {
                match poll_fn(|cx| reader.poll_chunk(cx)).await {
                    ChunkPoll::Chunk(c) => body.extend_from_slice(&c),
                    ChunkPoll::End => break,
                    ChunkPoll::Failed => panic!("failed"),
                }
            }
            body
        });
        let obj = leader.object().clone();
        obj.set_head(BusyHead {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            content_length: None,
            vary: vec![],
            delivered: Default::default(),
            object: None,
        });
        obj.push(Bytes::from_static(b"hello "));
        tokio::task::yield_now().await;
        obj.push(Bytes::from_static(b"world"));
        obj.finish();
        drop(leader);
        assert_eq!(waiter.await.unwrap(), b"hello world");
        assert!(table.is_empty());
    }

    /// Regression (varnishtest c00008, c00026, m00057): a request arriving after the whole
    /// body was received but before the fill stored it followed the busy object (a 200 to a
    /// conditional request, no vcl_hit). It now waits for the store and looks up again.
    #[tokio::test]
    async fn a_waiter_after_the_whole_body_looks_up_the_stored_object() {
        let table = Arc::new(BusyTable::default());
        let Join::Leader(mut leader) = table.join(&key()) else {
            panic!("first is leader")
        };
        let obj = leader.object().clone();
        obj.set_head(BusyHead {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            content_length: Some(5),
            vary: vec![],
            delivered: Default::default(),
            object: None,
        });
        obj.push(Bytes::from_static(b"hello"));
        let Join::Waiter(busy) = table.join(&key()) else {
            panic!("second waits")
        };
        let mut wait = Box::pin(busy.wait_head());
        let pending = poll_fn(|cx| Poll::Ready(wait.as_mut().poll(cx).is_pending())).await;
        assert!(pending, "waits for the store");
        leader.release();
        obj.finish();
        assert!(matches!(wait.await, HeadOutcome::Retry));
        assert!(matches!(table.join(&key()), Join::Leader(_)));
        // Still streaming (a body of unknown length, or not all of it yet): followed.
        let Join::Leader(leader) = table.join(&CacheKey::new("example.com", "/b")) else {
            panic!()
        };
        leader.object().set_head(BusyHead {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            content_length: Some(5),
            vary: vec![],
            delivered: Default::default(),
            object: None,
        });
        leader.object().push(Bytes::from_static(b"hel"));
        let Join::Waiter(busy) = table.join(&CacheKey::new("example.com", "/b")) else {
            panic!()
        };
        assert!(matches!(busy.wait_head().await, HeadOutcome::Shared(..)));
    }

    #[tokio::test]
    async fn abandoned_and_dropped_leaders_release_waiters() {
        let table = Arc::new(BusyTable::default());
        let Join::Leader(leader) = table.join(&key()) else {
            panic!()
        };
        let Join::Waiter(busy) = table.join(&key()) else {
            panic!()
        };
        leader.object().abandon();
        assert!(matches!(busy.wait_head().await, HeadOutcome::Retry));
        drop(leader);
        let Join::Leader(leader) = table.join(&key()) else {
            panic!("key was released")
        };
        let Join::Waiter(busy) = table.join(&key()) else {
            panic!()
        };
        drop(leader);
        assert!(matches!(busy.wait_head().await, HeadOutcome::Retry));
        let Join::Leader(leader) = table.join(&key()) else {
            panic!("key was released")
        };
        let Join::Waiter(busy) = table.join(&key()) else {
            panic!()
        };
        leader
            .object()
            .fail_with(StatusCode::SERVICE_UNAVAILABLE, "x");
        assert!(matches!(
            busy.wait_head().await,
            HeadOutcome::Failed(StatusCode::SERVICE_UNAVAILABLE, "x")
        ));
    }

    #[test]
    fn trimming_drops_read_chunks() {
        let obj = BusyObject::new();
        obj.set_head(BusyHead {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            content_length: None,
            vary: vec![],
            delivered: Default::default(),
            object: None,
        });
        let mut r = obj.reader();
        obj.start_trimming();
        obj.push(Bytes::from_static(b"a"));
        obj.push(Bytes::from_static(b"b"));
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(matches!(
            r.poll_chunk(&mut cx),
            Poll::Ready(ChunkPoll::Chunk(_))
        ));
        assert_eq!(obj.lock().chunks.len(), 1);
        assert_eq!(obj.lock().first, 1);
    }

    /// Regression (varnishtest c00037, c00008): the chunk that completes a known length
    /// waits for the fill to settle, so a client that read the body and asks again finds
    /// the object stored, not the copy it replaces.
    #[test]
    fn the_last_chunk_waits_for_the_fill_to_settle() {
        let obj = BusyObject::new();
        obj.set_head(BusyHead {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            content_length: Some(2),
            vary: vec![],
            delivered: Default::default(),
            object: None,
        });
        let mut r = obj.reader();
        obj.push(Bytes::from_static(b"a"));
        obj.push(Bytes::from_static(b"b"));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(matches!(
            r.poll_chunk_settled(&mut cx, Some(2)),
            Poll::Ready(ChunkPoll::Chunk(_))
        ));
        assert!(r.poll_chunk_settled(&mut cx, Some(1)).is_pending());
        obj.finish();
        assert!(matches!(
            r.poll_chunk_settled(&mut cx, Some(1)),
            Poll::Ready(ChunkPoll::Chunk(_))
        ));
        assert!(matches!(
            r.poll_chunk_settled(&mut cx, Some(0)),
            Poll::Ready(ChunkPoll::End)
        ));
    }
}
