//! The transaction recorder: hands out records to fill, queues finished ones from each
//! worker thread into its shard (lock-free, batched per worker), starts and steers the writer
//! thread, and serves live subscribers and `shellac top`.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crossbeam_queue::ArrayQueue;
use tokio::sync::broadcast;

use super::record::{Record, RecordHead, Sink};
use super::shards::{CHUNK_BYTES, Shards};
use super::top::{self, Dimension, Top};
use super::wire;
use super::writer::{self, Control, LogOutput};
use crate::stats::Counters;

/// Records kept for reuse. Boxed on purpose: a record also travels alone (to live readers,
/// inside a response body), and moving pointers beats moving ~330 bytes.
#[allow(clippy::vec_box)]
type Batch = Vec<Box<Record>>;

/// The transaction recorder: per-worker bounded queues, a writer thread, live subscribers.
pub struct Recorder {
    shards: Arc<Shards>,
    subscribers: Arc<AtomicUsize>,
    control: Mutex<mpsc::Sender<Control>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    closed: AtomicBool,
}

/// Capacity of the live broadcast to `shellac log` readers; a slower reader loses records
/// and is told how many.
pub const LIVE_CAPACITY: usize = 4096;

/// Records a worker keeps for reuse (per thread): finished records are encoded for the writer
/// and reused at once, so a few suffice; the last ones used are taken first (warm in cache).
const SPARES_PER_THREAD: usize = 64;

/// Records a worker encodes into one chunk before handing it to the writer (one queue
/// operation per chunk instead of per record: a per-record push walked a ring of `log.buffer`
/// slots and missed the cache on nearly every push; perf: 60% of `Record::finish` was the
/// slot's stamp load).
const PUSH_BATCH: usize = 64;

/// Chunk buffers kept for reuse per worker.
const EMPTIES_PER_SHARD: usize = 16;

/// How long one `/top` query keeps records flowing with the access log off.
pub const TOP_LEASE: Duration = Duration::from_secs(60);

/// The writer's pause between two passes while records flow (unless a queue held a full
/// batch, or one filled up to half and woke it): records reach the log within about this
/// long. Each wake-up of the writer costs the worker it shares a core with far more than the
/// pass itself (`CONNS=100 bench/access_log_paired.sh`, combined log, median CPU per request
/// off/on over 5 runs: 1 ms 92.6%, 5 ms 94.2%, 20 ms 95.7%, 50 ms with 64 spare chunks
/// 95.7%), so it wakes at most ~50 times a second under load; 20 ms is still well below what
/// anyone reading the log can notice.
const BUSY_PAUSE: Duration = Duration::from_millis(20);

/// The longest pause: with no records the pause doubles up to this (an idle proxy's writer
/// wakes ~20 times a second, not 1,000).
const IDLE_PAUSE: Duration = Duration::from_millis(50);

thread_local! {
    static SHARD: Cell<Option<usize>> = const { Cell::new(None) };
    /// This thread's records for reuse (at most [`SPARES_PER_THREAD`]).
    static SPARES: RefCell<Batch> = const { RefCell::new(Vec::new()) };
    /// This worker's finished records not handed to the writer yet.
    static OUTBOX: RefCell<Outbox> = const { RefCell::new(Outbox { to: None, shard: 0, chunk: None }) };
    /// Set by [`worker_parks`]: this thread's runtime calls it whenever the thread goes idle,
    /// so records may wait in [`OUTBOX`] until then.
    static FLUSHED_WHEN_IDLE: Cell<bool> = const { Cell::new(false) };
}

/// A worker's chunk of finished records and the recorder (and shard) it goes to.
struct Outbox {
    to: Option<Arc<Shards>>,
    shard: usize,
    chunk: Option<wire::Chunk>,
}

impl Outbox {
    fn flush(&mut self) {
        if let (Some(shards), Some(chunk)) = (&self.to, self.chunk.take()) {
            shards.push_chunk(self.shard, chunk);
        }
    }
}

impl Drop for Outbox {
    /// A worker thread that exits hands over what it still holds.
    fn drop(&mut self) {
        self.flush();
    }
}

/// Hands this thread's pending records to the writer. Install as the runtime's
/// `on_thread_park` hook: a worker then batches records while busy and flushes them whenever
/// it goes idle, so at low load every record reaches the writer at once. Threads that never
/// call this queue each record immediately.
pub fn worker_parks() {
    FLUSHED_WHEN_IDLE.set(true);
    let _ = OUTBOX.try_with(|o| o.borrow_mut().flush());
}

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

fn shard_index() -> usize {
    SHARD.with(|s| match s.get() {
        Some(i) => i,
        None => {
            let i = NEXT_SHARD.fetch_add(1, Ordering::Relaxed);
            s.set(Some(i));
            i
        }
    })
}

impl Recorder {
    /// Starts the writer thread. `shards` is the number of worker threads; each gets a queue of
    /// `per_shard` records.
    pub fn start(
        shards: usize,
        per_shard: usize,
        output: Option<LogOutput>,
        counters: Arc<Counters>,
    ) -> std::io::Result<Arc<Recorder>> {
        let queues = (0..shards.max(1))
            .map(|_| ArrayQueue::new((per_shard / PUSH_BATCH).max(1)))
            .collect();
        let empties = (0..shards.max(1))
            .map(|_| ArrayQueue::new(EMPTIES_PER_SHARD))
            .collect();
        wire::anchor();
        let (live, _) = broadcast::channel(LIVE_CAPACITY);
        let shards = Arc::new(Shards {
            queues,
            empties,
            counters,
            live,
            top: Mutex::new(Top::default()),
            top_until_ms: AtomicU64::new(0),
            top_active: AtomicBool::new(false),
            writer: OnceLock::new(),
        });
        let (tx, rx) = mpsc::channel();
        let weak = Arc::downgrade(&shards);
        let thread = std::thread::Builder::new()
            .name("shellac-log".into())
            .spawn(move || writer::run(weak, rx, output, BUSY_PAUSE..=IDLE_PAUSE))?;
        let _ = shards.writer.set(thread.thread().clone());
        Ok(Arc::new(Recorder {
            shards,
            subscribers: Arc::new(AtomicUsize::new(0)),
            control: Mutex::new(tx),
            thread: Mutex::new(Some(thread)),
            closed: AtomicBool::new(false),
        }))
    }

    /// True while `shellac top` or the dashboard wants rankings (the user agent is then
    /// recorded too).
    #[inline]
    pub fn top_wanted(&self) -> bool {
        self.shards.top_wanted()
    }

    /// True when somebody reads live records or rankings; the request path then records even
    /// with the access log off. Two relaxed loads.
    #[inline]
    pub fn wants_records(&self) -> bool {
        self.subscribers.load(Ordering::Relaxed) > 0 || self.shards.top_wanted()
    }

    /// Live readers now.
    pub fn subscriber_count(&self) -> usize {
        self.subscribers.load(Ordering::Relaxed)
    }

    /// Keeps records flowing into the rankings for [`TOP_LEASE`] from now. Returns whether
    /// they were already flowing for `shellac top` (false: the rankings start now).
    pub fn lease_top(&self) -> bool {
        let now = crate::clock::now_ms();
        let before = self
            .shards
            .top_until_ms
            .swap(now + TOP_LEASE.as_millis() as u64, Ordering::Relaxed);
        self.shards.top_active.store(true, Ordering::Relaxed);
        before > now
    }

    /// The `n` keys of `by` ranked by `sort` over the last `window` seconds, among all
    /// requests or (`site`) those one `[[site]]` answered.
    pub fn top(
        &self,
        by: Dimension,
        sort: fn(&top::Counts) -> u64,
        window: u64,
        n: usize,
        site: Option<&str>,
    ) -> Vec<(String, top::Counts)> {
        match self.shards.top.lock() {
            Ok(t) => t.rank(by, sort, window, n, SystemTime::now(), site),
            Err(_) => Vec::new(),
        }
    }

    /// A record to fill: a spare one of this worker's if there is one, else a new one.
    pub fn record(&self, head: RecordHead, capacity: usize) -> Box<Record> {
        match SPARES
            .try_with(|spares| spares.borrow_mut().pop())
            .ok()
            .flatten()
        {
            Some(mut r) => {
                r.reset(head, capacity);
                r
            }
            None => Box::new(Record::new(head, capacity)),
        }
    }

    fn send(&self, c: Control) {
        if let Ok(tx) = self.control.lock() {
            let _ = tx.send(c);
        }
        if let Ok(t) = self.thread.lock()
            && let Some(t) = t.as_ref()
        {
            t.thread().unpark();
        }
    }

    /// Replaces the access-log output (None: off). Records already queued are written to the
    /// new output if they carry a format.
    pub fn set_output(&self, output: Option<LogOutput>) {
        self.send(Control::Output(output));
    }

    /// Reopens the access-log file (after logrotate moved it): SIGUSR1, reload.
    pub fn reopen(&self) {
        self.send(Control::Reopen);
    }

    /// Drains every queue, flushes and stops the writer (shutdown). Waits at most `timeout`.
    pub fn close(&self, timeout: Duration) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let (tx, rx) = mpsc::channel();
        self.send(Control::Close(tx));
        if rx.recv_timeout(timeout).is_ok()
            && let Ok(mut t) = self.thread.lock()
            && let Some(t) = t.take()
        {
            let _ = t.join();
        }
    }

    /// Subscribes to live records (for `shellac log`). While a subscription exists, every
    /// request is recorded.
    pub fn subscribe(&self) -> Subscription {
        let rx = self.shards.live.subscribe();
        self.subscribers.fetch_add(1, Ordering::Relaxed);
        Subscription {
            rx,
            count: self.subscribers.clone(),
        }
    }
}

impl Sink for Recorder {
    /// Queues a finished record: encoded into this thread's chunk, which goes to the writer
    /// when it holds [`PUSH_BATCH`] records or when the worker goes idle (see
    /// [`worker_parks`]); on other threads at once. The record is then kept for reuse.
    fn queue(self: Arc<Self>, mut record: Box<Record>) {
        let shards = &self.shards;
        let i = shard_index() % shards.queues.len();
        let new_chunk = || wire::Chunk {
            bytes: shards.chunk_buffer(i),
            records: 0,
            format: record.format.clone(),
        };
        if FLUSHED_WHEN_IDLE.get() {
            let _ = OUTBOX.try_with(|outbox| {
                let mut outbox = outbox.borrow_mut();
                let same_recorder = outbox.to.as_ref().is_some_and(|s| Arc::ptr_eq(s, shards));
                let same_format =
                    outbox
                        .chunk
                        .as_ref()
                        .is_none_or(|c| match (&c.format, &record.format) {
                            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                            (a, b) => a.is_none() && b.is_none(),
                        });
                if !same_recorder || !same_format {
                    outbox.flush();
                    if !same_recorder {
                        outbox.to = Some(shards.clone());
                    }
                    outbox.shard = i;
                }
                let chunk = outbox.chunk.get_or_insert_with(new_chunk);
                wire::encode(&record, &mut chunk.bytes);
                chunk.records += 1;
                if chunk.records as usize >= PUSH_BATCH || chunk.bytes.len() >= CHUNK_BYTES {
                    outbox.flush();
                }
            });
        } else {
            let mut chunk = new_chunk();
            wire::encode(&record, &mut chunk.bytes);
            chunk.records = 1;
            shards.push_chunk(i, chunk);
        }
        record.keep_sink(self);
        let _ = SPARES.try_with(|spares| {
            let mut spares = spares.borrow_mut();
            if spares.len() < SPARES_PER_THREAD {
                spares.push(record);
            }
        });
    }
}

/// A live reader of records; dropping it unsubscribes.
pub struct Subscription {
    pub rx: broadcast::Receiver<Arc<Record>>,
    count: Arc<AtomicUsize>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::time::Instant;

    use http::{Method, Version};

    use super::*;
    use crate::txlog::decision::{Decision, DecisionKind};

    #[test]
    fn written_records_are_reused_clean() {
        let counters = Arc::new(Counters::default());
        let rec = Recorder::start(1, 16, None, counters).unwrap();
        let mut r = Box::new(Record::sample());
        r.push_request_header(Some(b"x"));
        r.queue_to(&rec);
        r.finish(true);
        assert_eq!(
            SPARES.with_borrow(|s| s.len()),
            1,
            "a finished record is kept for reuse"
        );
        let head = RecordHead {
            client: IpAddr::from([127, 0, 0, 1]),
            method: Method::HEAD,
            version: Version::HTTP_10,
            status: 304,
            decision: Decision {
                kind: DecisionKind::Hit,
                reason: None,
            },
            started: Instant::now(),
            ttfb: Duration::ZERO,
        };
        let again = rec.record(head, 8);
        assert!(SPARES.with_borrow(|s| s.is_empty()));
        assert!(again.text.capacity() >= 20, "its buffer is kept");
        assert_eq!(
            (again.target(), again.host(), again.backend()),
            ("", "", None)
        );
        assert_eq!(again.request_header(0), None);
        assert_eq!((again.status, again.bytes, again.complete), (304, 0, false));
        assert!(!again.queued, "not queued until queue_to");
        rec.close(Duration::from_secs(5));
    }

    #[test]
    fn a_worker_batches_records_and_hands_them_over_when_idle() {
        let counters = Arc::new(Counters::default());
        let rec = Recorder::start(1, 1024, None, counters.clone()).unwrap();
        let mut live = rec.subscribe();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .on_thread_park(worker_parks)
            .build()
            .unwrap();
        // Three records, fewer than a batch: they reach the writer once the worker is idle.
        let recorder = rec.clone();
        rt.block_on(async move {
            tokio::spawn(async move {
                tokio::task::yield_now().await;
                for _ in 0..3 {
                    let mut r = Box::new(Record::sample());
                    r.queue_to(&recorder);
                    r.finish(true);
                }
            })
            .await
            .unwrap();
        });
        let mut seen = 0;
        let deadline = Instant::now() + Duration::from_secs(5);
        while seen < 3 && Instant::now() < deadline {
            match live.rx.try_recv() {
                Ok(_) => seen += 1,
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        assert_eq!(seen, 3, "an idle worker hands over its pending records");
        assert_eq!(counters.log_dropped.get(), 0);
        drop(rt);
        rec.close(Duration::from_secs(5));
    }

    #[test]
    fn full_shard_drops_and_counts() {
        let counters = Arc::new(Counters::default());
        // A writer that never drains: no output and the thread parked on a long pause is not
        // enough, so fill faster than it can possibly run by using a 1-slot queue.
        let rec = Recorder::start(1, 1, None, counters.clone()).unwrap();
        let mut dropped_seen = false;
        for _ in 0..10_000 {
            let mut r = Box::new(Record::sample());
            r.queue_to(&rec);
            r.finish(true);
            if counters.log_dropped.get() > 0 {
                dropped_seen = true;
                break;
            }
        }
        assert!(dropped_seen, "a 1-record queue must overflow");
        rec.close(Duration::from_secs(5));
    }
}
