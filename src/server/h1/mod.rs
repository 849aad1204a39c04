//! The client socket as hyper sees it: every byte passes `http::strict` first.
//!
//! - A request head reaches hyper only once it is complete and valid; a partial head is held
//!   here (bounded by `max_header_size`), so hyper never dispatches what we did not check.
//! - A refused request never reaches hyper either. In its place hyper reads a fixed stand-in
//!   request, and the service answers that request (its number is recorded here) with the
//!   violation's status and `Connection: close`. Responses to earlier pipelined requests go out
//!   first, in order, and nothing after the refused request is ever parsed.
//! - A violation inside a body whose head hyper already has (a malformed chunk arriving later)
//!   fails the body with an I/O error: hyper stops reading, the backend request is aborted
//!   mid-body (never completed), and the service answers 400/413 with `Connection: close`.
//!   When the head and the bad body bytes arrive together, the whole request is refused as above
//!   and nothing reaches a backend.
//! - After a bodiless request that asks to `Upgrade`, nothing more is read until the service
//!   decides: a backend 101 makes the rest of the connection a tunnel (bytes pass through
//!   unread); anything else and parsing goes on with the bytes that followed.
//! - It also keeps the per-connection clocks for the idle, header-read, body and send timeouts.
//! - An idle connection can be *released* (`idle_release`): asked by the connection's timer,
//!   the gate hands its socket back to the server through a channel and shows hyper an end of
//!   stream, so hyper's connection ends cleanly and its buffers are freed while the socket
//!   stays open. Only at a request boundary with nothing held, queued or in flight.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll, Waker, ready};

use std::collections::VecDeque;

use bytes::{Buf, Bytes};
use http_body::Body as _;
use smallvec::SmallVec;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

use crate::clock::{DATE_LINE_LEN, date_line, now_ms};
use crate::http::strict::{Class, Framing, Limits, Scan, Scanner, Violation, valid_request_line};
use crate::proxy::{FastAnswer, ResponseBody};
use crate::stats::Counters;

/// What hyper parses in place of a refused request. The service recognises it by its number,
/// never by its content.
const STAND_IN: &[u8] = b"GET / HTTP/1.1\r\nhost: refused.invalid\r\n\r\n";

/// The stand-in for a refused `HEAD` request: hyper then sends the refusal's head without its
/// body (RFC 9110 §9.3.2), as for any other answer to HEAD.
const STAND_IN_HEAD: &[u8] = b"HEAD / HTTP/1.1\r\nhost: refused.invalid\r\n\r\n";

const NONE: u64 = u64::MAX;

/// Lingering close after a refusal (here and at `max_connections`): how long, and how many
/// bytes, to read and discard.
pub(super) const LINGER_TIME: std::time::Duration = std::time::Duration::from_secs(2);
pub(super) const LINGER_BYTES: usize = 64 * 1024;

pub(super) const PHASE_IDLE: u8 = 0;
pub(super) const PHASE_HEAD: u8 = 1;
pub(super) const PHASE_BUSY: u8 = 2;

/// Per-connection state shared by the gate (socket side), the service (request side) and the
/// connection's timer. Everything is relaxed atomics: all three run on the connection's task.
pub(super) struct ConnState {
    /// What the connection is doing, for the idle and header-read timeouts.
    pub phase: AtomicU8,
    pub since_ms: AtomicU64,
    in_flight: AtomicUsize,
    /// Requests the service has seen.
    requests: AtomicU64,
    /// The number of the request that stands in for a refused one, and why.
    reject_at: AtomicU64,
    reject: AtomicU8,
    /// The refused request's line when it was complete and valid (for the access log).
    refused_line: OnceLock<Box<[u8]>>,
    /// A violation found in the body of the request in flight (0: none).
    body_error: AtomicU8,
    /// The service answered an error with `Connection: close`: linger when closing.
    linger: AtomicBool,
    /// Slow-body bookkeeping: since when hyper has been waiting for body bytes (0: not
    /// waiting), total time waited, body bytes received.
    body_wait_since: AtomicU64,
    body_waited_ms: AtomicU64,
    body_bytes: AtomicU64,
    /// Since when a write to the client has made no progress (0: not blocked).
    write_blocked_since: AtomicU64,
    /// The number of a request that asked to switch protocols; the gate reads nothing after
    /// it until the service decides (`UPGRADE_*`), and the waker to call then.
    upgrade_at: AtomicU64,
    upgrade: AtomicU8,
    upgrade_waker: Mutex<Option<Waker>>,
    /// The timer asks the gate to hand the socket back at the next idle read (`idle_release`).
    release: AtomicBool,
    /// The idle timeout VCL set for this session (`sess.timeout_idle`, ms; 0: the
    /// configured one).
    idle_override_ms: AtomicU64,
    /// The session is shutting down (hyper's graceful shutdown): no more fast answers.
    closing: AtomicBool,
    /// 1xx heads (103 Early Hints, ...) the request in flight got from its backend, with the
    /// number of that request: the gate writes them before hyper's first byte for it
    /// (`Gate::poll_interim`). hyper's server cannot send 1xx responses itself.
    interim: Mutex<InterimQueue>,
    interim_queued: AtomicBool,
}

/// 1xx heads waiting for the gate, and how many the latest request has queued in all.
#[derive(Default)]
struct InterimQueue {
    heads: VecDeque<(u64, Bytes)>,
    request: u64,
    queued: usize,
}

/// 1xx heads forwarded per request at most; more are dropped (the same bound over HTTP/2).
const MAX_INTERIM: usize = crate::proxy::MAX_INTERIM;

/// The service hands a request's 1xx heads to the connection (`proxy/interim.rs`).
impl crate::proxy::InterimSink for ConnState {
    fn send(&self, head: crate::proxy::InterimHead) -> bool {
        let request = self.requests.load(Ordering::Relaxed);
        let Ok(mut queue) = self.interim.lock() else {
            return false;
        };
        if queue.request != request {
            queue.request = request;
            queue.queued = 0;
        }
        if queue.queued >= MAX_INTERIM {
            return false;
        }
        queue.queued += 1;
        queue
            .heads
            .push_back((request, crate::proxy::serialise_interim(&head)));
        self.interim_queued.store(true, Ordering::Release);
        true
    }
}

const UPGRADE_PENDING: u8 = 0;
const UPGRADE_REFUSED: u8 = 1;
const UPGRADE_TUNNEL: u8 = 2;

/// What the service learns when hyper dispatches a request.
pub(super) struct Begin {
    /// The request is the stand-in for one the gate refused, for this reason.
    pub refused: Option<Violation>,
    /// The request asked to switch protocols: the service must call `decide_upgrade`.
    pub upgrade: bool,
}

/// A response body ends its request when it is finished or dropped.
impl crate::proxy::body::OnDone for ConnState {
    fn done(&self) {
        self.end_request();
    }
}

impl ConnState {
    /// The idle timeout VCL set for this session (ms; 0: the configured one).
    pub fn idle_override(&self) -> u64 {
        self.idle_override_ms.load(Ordering::Relaxed)
    }

    /// VCL's `sess.timeout_idle` from now on (`None`: back to the configured one).
    pub fn set_idle(&self, idle: Option<std::time::Duration>) {
        let ms = idle.map_or(0, |d| (d.as_millis() as u64).max(1));
        self.idle_override_ms.store(ms, Ordering::Relaxed);
    }

    pub fn new() -> ConnState {
        ConnState {
            phase: AtomicU8::new(PHASE_HEAD),
            since_ms: AtomicU64::new(now_ms()),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            reject_at: AtomicU64::new(NONE),
            reject: AtomicU8::new(0),
            refused_line: OnceLock::new(),
            body_error: AtomicU8::new(0),
            linger: AtomicBool::new(false),
            body_wait_since: AtomicU64::new(0),
            body_waited_ms: AtomicU64::new(0),
            body_bytes: AtomicU64::new(0),
            write_blocked_since: AtomicU64::new(0),
            upgrade_at: AtomicU64::new(NONE),
            upgrade: AtomicU8::new(UPGRADE_PENDING),
            upgrade_waker: Mutex::new(None),
            release: AtomicBool::new(false),
            idle_override_ms: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            interim: Mutex::new(InterimQueue::default()),
            interim_queued: AtomicBool::new(false),
        }
    }

    /// The session is closing: every request from now on goes to hyper, which answers with
    /// `Connection: close`.
    pub fn closing(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    /// Called by the service for each request hyper dispatches.
    pub fn begin_request(&self) -> Begin {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.phase.store(PHASE_BUSY, Ordering::Relaxed);
        let refused = if self.reject_at.load(Ordering::Relaxed) == n {
            Violation::from_code(self.reject.load(Ordering::Relaxed))
        } else {
            None
        };
        Begin {
            refused,
            upgrade: self.upgrade_at.load(Ordering::Relaxed) == n,
        }
    }

    /// The service's answer to an upgrade request: `tunnel` once the backend switched
    /// protocols (the gate then passes bytes through unread), else the gate goes on parsing.
    pub fn decide_upgrade(&self, tunnel: bool) {
        let decision = if tunnel {
            UPGRADE_TUNNEL
        } else {
            UPGRADE_REFUSED
        };
        self.upgrade.store(decision, Ordering::Release);
        let waker = self.upgrade_waker.lock().ok().and_then(|mut w| w.take());
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Asks the gate to release the connection the next time hyper reads while it is idle.
    pub fn want_release(&self) {
        self.release.store(true, Ordering::Relaxed);
    }

    /// Whether the connection is between requests: none in flight, none started.
    fn idle(&self) -> bool {
        self.phase.load(Ordering::Relaxed) == PHASE_IDLE
            && self.in_flight.load(Ordering::Relaxed) == 0
    }

    pub fn end_request(&self) {
        if self.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.since_ms.store(now_ms(), Ordering::Relaxed);
            self.phase.store(PHASE_IDLE, Ordering::Relaxed);
        }
    }

    /// The response is an error followed by a close: the client may still be sending (a body,
    /// pipelined requests), so the close lingers as after a refusal.
    pub fn linger_on_close(&self) {
        self.linger.store(true, Ordering::Relaxed);
    }

    /// The request line of the refused request, if it was complete and valid.
    pub fn refused_line(&self) -> Option<&[u8]> {
        self.refused_line.get().map(|l| &l[..])
    }

    /// A violation in the body of the request in flight, if any.
    pub fn body_error(&self) -> Option<Violation> {
        Violation::from_code(self.body_error.load(Ordering::Relaxed))
    }

    fn bytes_arrived(&self) {
        if self.phase.load(Ordering::Relaxed) == PHASE_IDLE {
            self.since_ms.store(now_ms(), Ordering::Relaxed);
            self.phase.store(PHASE_HEAD, Ordering::Relaxed);
        }
    }

    fn body_started(&self) {
        self.body_wait_since.store(0, Ordering::Relaxed);
        self.body_waited_ms.store(0, Ordering::Relaxed);
        self.body_bytes.store(0, Ordering::Relaxed);
    }

    fn body_waiting(&self) {
        if self.body_wait_since.load(Ordering::Relaxed) == 0 {
            self.body_wait_since
                .store(now_ms().max(1), Ordering::Relaxed);
        }
    }

    fn body_received(&self, n: usize) {
        let since = self.body_wait_since.swap(0, Ordering::Relaxed);
        if since != 0 {
            self.body_waited_ms
                .fetch_add(now_ms().saturating_sub(since), Ordering::Relaxed);
        }
        self.body_bytes.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Whether the client is sending its body too slowly: hyper has waited for body bytes for
    /// longer than `timeout_ms` in one stretch, or in total for longer than `timeout_ms` plus
    /// one second per `min_rate` bytes received (0: no rate check). Only time spent waiting on
    /// the client counts, not time the backend took to accept the body.
    pub fn body_too_slow(&self, now: u64, timeout_ms: u64, min_rate: u64) -> bool {
        let since = self.body_wait_since.load(Ordering::Relaxed);
        if since == 0 {
            return false;
        }
        let current = now.saturating_sub(since);
        if current > timeout_ms {
            return true;
        }
        if min_rate == 0 {
            return false;
        }
        let waited = self.body_waited_ms.load(Ordering::Relaxed) + current;
        let earned = self.body_bytes.load(Ordering::Relaxed).saturating_mul(1000) / min_rate;
        waited > timeout_ms.saturating_add(earned)
    }

    /// Whether a write to the client has been blocked for longer than `timeout_ms`.
    pub fn send_stalled(&self, now: u64, timeout_ms: u64) -> bool {
        let since = self.write_blocked_since.load(Ordering::Relaxed);
        since != 0 && now.saturating_sub(since) > timeout_ms
    }
}

/// What the gate does once the bytes queued for hyper are gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    Continue,
    /// Fail the body hyper is reading, then stop.
    BodyError(Violation),
    /// Nothing more is read from this connection.
    Stop,
}

/// Answers a request without hyper from its validated, bodiless head (server.rs: fast hits,
/// `Proxy::fast_hit`), or declines and hyper gets the request.
pub(super) trait Answerer: Send + Sync {
    fn answer(&self, head: &[u8]) -> Option<FastAnswer>;
}

/// A transport the gate can hand back for parking: `quiet` says nothing is buffered inside
/// it (no decrypted bytes unread, nothing unwritten), so the socket's readiness tells all.
pub(crate) trait Quiet {
    fn quiet(&mut self) -> bool;
}

impl Quiet for tokio::net::TcpStream {
    fn quiet(&mut self) -> bool {
        true
    }
}

/// Fast answers queued at most; a later request goes to hyper (whose writes wait for these).
const MAX_ANSWERS: usize = 16;

/// A fast answer being written: head, `Date` line (if the head has none), then the body's
/// chunks.
struct Outgoing {
    head: Bytes,
    date: [u8; DATE_LINE_LEN],
    /// Bytes of `date` to send: all or none.
    date_len: usize,
    /// Bytes of `head` and `date` written so far.
    written: usize,
    body: ResponseBody,
    /// Body chunks taken from `body` and not yet written (the first one may be partly
    /// written): up to [`GATHER_CHUNKS`] / [`GATHER_BYTES`] go out in one vectored write.
    chunks: SmallVec<[Bytes; 1]>,
    body_done: bool,
}

/// Body chunks gathered into one vectored write at most (a 21 MB object from memory is 336
/// chunks of 64 KiB: one system call per chunk cost a round through the body and the gate
/// each, and small writes to the socket).
const GATHER_CHUNKS: usize = 16;

/// Bytes gathered into one vectored write at most (what a loopback or LAN socket buffer takes
/// at once; more only waits in the slice list).
const GATHER_BYTES: usize = 1 << 20;

/// The strict gate around a client socket.
pub(super) struct Gate<T> {
    /// The socket; `None` once handed back by a release.
    inner: Option<T>,
    /// Where a release hands the socket (`Gate::releasable`).
    hand_back: Option<oneshot::Sender<T>>,
    state: Arc<ConnState>,
    counters: Arc<Counters>,
    scanner: Scanner,
    /// `limits.max_request_line`: how much of a refused request's line the log may show.
    max_request_line: usize,
    /// A partial, not yet validated head (and what arrived after it).
    held: Vec<u8>,
    /// Validated bytes (or the stand-in request) waiting for room in hyper's buffer.
    pending: Vec<u8>,
    pending_pos: usize,
    after: After,
    /// Heads handed to hyper so far (stand-in included).
    heads: u64,
    mode: Mode,
    /// Held bytes must be scanned again without waiting for more (an upgrade was refused).
    rescan: bool,
    /// Lingering close after a refusal: write side shut, deadline, bytes discarded.
    shut: bool,
    linger: Option<Pin<Box<tokio::time::Sleep>>>,
    lingered: usize,
    /// Answers requests hyper then never sees (fast hits); `None`: everything goes to hyper.
    answerer: Option<Box<dyn Answerer>>,
    /// Fast answers not yet completely written, in request order. Written before anything
    /// hyper writes, and nothing more is read until they are out.
    out: VecDeque<Outgoing>,
    /// `ConnState::requests` when hyper last flushed with no request in flight (`u64::MAX`
    /// after a write it has not flushed yet): while it is the current count, hyper holds no
    /// response bytes, and a fast answer written now cannot overtake one of hyper's.
    flushed_at: u64,
    /// The 1xx head being written (what is left of it).
    interim: Bytes,
}

/// Whether the gate is parsing HTTP, waiting for the answer to an upgrade request, or passing
/// a tunnel's bytes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Scan,
    AwaitUpgrade,
    Tunnel,
}

/// How far a run of the scanner over some bytes got.
enum Outcome {
    /// Everything up to the end is valid (a trailing partial head starts at `held_from`).
    Valid { held_from: usize },
    /// Refuse the request whose head starts at `cut` (nothing from it reaches hyper).
    RefuseRequest { cut: usize, violation: Violation },
    /// Fail the body in flight after `cut` valid bytes.
    FailBody { cut: usize, violation: Violation },
}

impl<T> Gate<T> {
    pub fn new(inner: T, state: Arc<ConnState>, counters: Arc<Counters>, limits: Limits) -> Self {
        Gate {
            inner: Some(inner),
            hand_back: None,
            state,
            counters,
            scanner: Scanner::new(limits),
            max_request_line: limits.max_request_line,
            held: Vec::new(),
            pending: Vec::new(),
            pending_pos: 0,
            after: After::Continue,
            heads: 0,
            mode: Mode::Scan,
            rescan: false,
            shut: false,
            linger: None,
            lingered: 0,
            answerer: None,
            out: VecDeque::new(),
            flushed_at: 0,
            interim: Bytes::new(),
        }
    }

    /// Lets `answerer` answer requests without hyper while hyper is idle ([`Answerer`]).
    pub fn answer_with(&mut self, answerer: Box<dyn Answerer>) {
        self.answerer = Some(answerer);
    }

    /// Whether a head at the start of the bytes about to be scanned may be answered without
    /// hyper: the gate is parsing, at a head, with nothing queued for hyper, and hyper has
    /// dispatched every head it was given, has none in flight and has flushed everything it
    /// wrote — so the answer cannot overtake one of hyper's, and hyper's request numbering
    /// (refusals, upgrades) is untouched. Not while the session is closing.
    fn may_answer(&self) -> bool {
        self.answerer.is_some()
            && self.mode == Mode::Scan
            && self.after == After::Continue
            && self.pending_pos >= self.pending.len()
            && self.scanner.at_head()
            && self.state.in_flight.load(Ordering::Relaxed) == 0
            && self.heads == self.state.requests.load(Ordering::Relaxed)
            && self.flushed_at == self.heads
            && !self.state.closing.load(Ordering::Relaxed)
    }

    /// Lets the connection be released while idle (`ConnState::want_release`): the socket
    /// then arrives on the returned channel and hyper reads an end of stream.
    pub fn releasable(&mut self) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        self.hand_back = Some(tx);
        rx
    }

    /// The socket, or `NotConnected` once it was handed back.
    fn io(&mut self) -> io::Result<Pin<&mut T>>
    where
        T: Unpin,
    {
        match self.inner.as_mut() {
            Some(io) => Ok(Pin::new(io)),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// Hands the socket back if a release was asked for and the connection is at a request
    /// boundary with nothing held or queued here and nothing in flight. Returns whether it did.
    fn try_release(&mut self) -> bool
    where
        T: Quiet,
    {
        // A plain load first: this runs on every read, the swap (a locked instruction) only
        // once a release was asked for.
        if !self.state.release.load(Ordering::Relaxed)
            || !self.state.release.swap(false, Ordering::Relaxed)
            || !self.held.is_empty()
            || !self.out.is_empty()
            || !self.scanner.at_head()
            || !self.state.idle()
            // hyper reads while it still flushes a response to a slow reader: the bytes it
            // holds need the socket.
            || self.state.write_blocked_since.load(Ordering::Relaxed) != 0
            // A TLS connection holding decrypted bytes or unsent records.
            || !self.inner.as_mut().is_some_and(|io| io.quiet())
        {
            return false;
        }
        match (self.hand_back.take(), self.inner.take()) {
            (Some(tx), Some(io)) => {
                // A dropped receiver (the connection is ending anyway) just closes the socket.
                let _ = tx.send(io);
                true
            }
            (tx, io) => {
                self.hand_back = tx;
                self.inner = io;
                false
            }
        }
    }

    /// Runs the scanner over `data`, which continues the stream where the last run stopped.
    /// With `answer` (`may_answer`), bodiless heads at the start of `data` are offered to the
    /// answerer one after the other until it declines one; the first number returned is how
    /// many bytes of `data` were answered that way (they must not reach hyper).
    fn scan(&mut self, data: &mut [u8], mut answer: bool) -> (usize, Outcome) {
        let mut answered = 0;
        let outcome = self.scan_from(data, &mut answer, &mut answered);
        (answered, outcome)
    }

    /// Offers the head `head` (bodiless, no upgrade) to the answerer; queues the answer.
    fn try_answer(&mut self, head: &[u8]) -> bool {
        if self.out.len() >= MAX_ANSWERS {
            return false;
        }
        let Some(a) = self.answerer.as_ref().and_then(|x| x.answer(head)) else {
            return false;
        };
        let (date, date_len) = if a.add_date {
            (date_line(), DATE_LINE_LEN)
        } else {
            ([0; DATE_LINE_LEN], 0)
        };
        self.out.push_back(Outgoing {
            head: a.head,
            date,
            date_len,
            written: 0,
            body: a.body,
            chunks: SmallVec::new(),
            body_done: false,
        });
        // Busy until written: the idle and header timeouts do not run, the send timeout does.
        self.state.phase.store(PHASE_BUSY, Ordering::Relaxed);
        true
    }

    fn scan_from(&mut self, data: &mut [u8], answer: &mut bool, answered: &mut usize) -> Outcome {
        let mut pos = 0;
        // Start of the last head found in `data` (its request not yet handed to hyper).
        let mut head_at: Option<usize> = None;
        while pos < data.len() {
            let scan = self.scanner.scan(&data[pos..]);
            // A later HTTP/1 minor version is read as HTTP/1.1, by the scanner and, rewritten
            // here before anything else sees the head, by the answerer and hyper alike.
            if let Scan::Head(n, head) = &scan
                && head.later_minor
            {
                crate::http::strict::as_http11(&mut data[pos..pos + n]);
            }
            match scan {
                // CONNECT is refused here, as a whole request: hyper hands the socket of a
                // CONNECT to its upgrade machinery instead of closing it, which would reset
                // the connection under the error response.
                Scan::Head(_, _) if data[pos..].starts_with(b"CONNECT ") => {
                    let violation = Violation::ConnectNotSupported;
                    self.count(violation);
                    return Outcome::RefuseRequest {
                        cut: pos,
                        violation,
                    };
                }
                Scan::Head(n, head)
                    if *answer
                        && pos == *answered
                        && head.framing == Framing::None
                        && !head.upgrade
                        && self.try_answer(&data[pos..pos + n]) =>
                {
                    pos += n;
                    *answered = pos;
                }
                Scan::Head(n, head) => {
                    *answer = false;
                    head_at = Some(pos);
                    self.heads += 1;
                    self.state.body_started();
                    pos += n;
                    if head.upgrade {
                        // What follows may not be HTTP: read on only once the service decided.
                        self.state.upgrade.store(UPGRADE_PENDING, Ordering::Relaxed);
                        self.state
                            .upgrade_at
                            .store(self.heads - 1, Ordering::Relaxed);
                        self.mode = Mode::AwaitUpgrade;
                        return Outcome::Valid { held_from: pos };
                    }
                }
                Scan::Body(n) => pos += n,
                Scan::Incomplete => return Outcome::Valid { held_from: pos },
                Scan::Reject(violation) => {
                    self.count(violation);
                    return if self.scanner.at_head() {
                        Outcome::RefuseRequest {
                            cut: pos,
                            violation,
                        }
                    } else if let Some(cut) = head_at {
                        // The bad body bytes came with their head: refuse the whole request.
                        self.heads -= 1;
                        Outcome::RefuseRequest { cut, violation }
                    } else {
                        Outcome::FailBody {
                            cut: pos,
                            violation,
                        }
                    };
                }
            }
        }
        Outcome::Valid {
            held_from: data.len(),
        }
    }

    fn count(&self, v: Violation) {
        count_violation(&self.counters, v);
    }

    /// Queues the stand-in request for `v`; nothing is read after it. `from` is the refused
    /// request's first bytes (its line is kept for the access log when it is valid).
    fn refuse(&mut self, v: Violation, from: &[u8]) {
        if let Some(line) = valid_request_line(from, self.max_request_line) {
            let _ = self.state.refused_line.set(line.into());
        }
        self.state.reject.store(v as u8, Ordering::Relaxed);
        self.state.reject_at.store(self.heads, Ordering::Relaxed);
        self.heads += 1;
        // The method is case-sensitive (RFC 9110 §9.1): only `HEAD` itself is a HEAD request.
        let stand_in = if from.starts_with(b"HEAD ") {
            STAND_IN_HEAD
        } else {
            STAND_IN
        };
        self.pending.extend_from_slice(stand_in);
        self.held = Vec::new();
        self.after = After::Stop;
    }

    fn fail_body(&mut self, v: Violation) {
        self.state.body_error.store(v as u8, Ordering::Relaxed);
        self.held = Vec::new();
        self.after = After::BodyError(v);
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin + Quiet> AsyncRead for Gate<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            // Fast answers first; nothing more is read until they are written.
            if !this.out.is_empty() {
                ready!(this.poll_answers(cx))?;
            }
            if this.pending_pos < this.pending.len() {
                let n = (this.pending.len() - this.pending_pos).min(buf.remaining());
                buf.put_slice(&this.pending[this.pending_pos..this.pending_pos + n]);
                this.pending_pos += n;
                if this.pending_pos == this.pending.len() {
                    this.pending.clear();
                    this.pending_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            match this.after {
                After::Continue => {}
                After::BodyError(v) => {
                    this.after = After::Stop;
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        v.as_str(),
                    )));
                }
                // hyper is answering the refused request with `Connection: close` and will
                // not need this side again.
                After::Stop => return Poll::Pending,
            }
            match this.mode {
                Mode::Scan => {}
                Mode::AwaitUpgrade => match this.upgrade_decision(cx) {
                    None => return Poll::Pending,
                    Some(true) => {
                        this.mode = Mode::Tunnel;
                        let held = std::mem::take(&mut this.held);
                        this.pending.extend_from_slice(&held);
                        continue;
                    }
                    Some(false) => {
                        this.mode = Mode::Scan;
                        this.rescan = !this.held.is_empty();
                    }
                },
                // A tunnel: bytes pass through unread.
                Mode::Tunnel => return this.io()?.poll_read(cx, buf),
            }
            if this.rescan {
                this.rescan = false;
                let held = std::mem::take(&mut this.held);
                this.scan_held(held);
                continue;
            }
            // Released (now or before): hyper sees the end of the stream and finishes cleanly.
            if this.inner.is_none() || this.try_release() {
                return Poll::Ready(Ok(()));
            }
            let in_body = !this.scanner.at_head();
            let start = buf.filled().len();
            match this.io()?.poll_read(cx, buf) {
                Poll::Pending => {
                    if in_body {
                        this.state.body_waiting();
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            let end = buf.filled().len();
            if end == start {
                // End of stream. A held partial head was never seen by hyper: it just sees EOF.
                return Poll::Ready(Ok(()));
            }
            this.state.bytes_arrived();
            if in_body {
                this.state.body_received(end - start);
            }
            if this.held.is_empty() {
                // Scanned in place in hyper's buffer.
                let answer = this.may_answer();
                let (answered, outcome) = this.scan(&mut buf.filled_mut()[start..end], answer);
                match outcome {
                    Outcome::Valid { held_from } => {
                        if held_from < end - start {
                            this.held
                                .extend_from_slice(&buf.filled()[start + held_from..end]);
                            buf.set_filled(start + held_from);
                        }
                    }
                    Outcome::RefuseRequest { cut, violation } => {
                        this.refuse(violation, &buf.filled()[start + cut..end]);
                        buf.set_filled(start + cut);
                    }
                    Outcome::FailBody { cut, violation } => {
                        buf.set_filled(start + cut);
                        this.fail_body(violation);
                    }
                }
                if answered > 0 {
                    // The answered requests leave hyper's buffer (they precede whatever the
                    // outcome kept: a held head, a refusal's cut).
                    let filled = buf.filled().len();
                    let from = (start + answered).min(filled);
                    buf.filled_mut().copy_within(from..filled, start);
                    buf.set_filled(filled - (from - start));
                }
                if buf.filled().len() > start {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            // A partial head is held: append what arrived and scan the held bytes again.
            this.held.extend_from_slice(&buf.filled()[start..end]);
            buf.set_filled(start);
            let held = std::mem::take(&mut this.held);
            this.scan_held(held);
        }
    }
}

impl<T> Gate<T> {
    /// Scans held bytes (a partial head and what followed it): the valid part is queued for
    /// hyper, an incomplete head stays held.
    fn scan_held(&mut self, mut held: Vec<u8>) {
        let answer = self.may_answer();
        let (answered, outcome) = self.scan(&mut held, answer);
        // The answered requests come first; hyper's bytes run from them to `to`.
        let hypers = |to: usize| &held[answered.min(to)..to];
        match outcome {
            Outcome::Valid { held_from } => {
                self.pending.extend_from_slice(hypers(held_from));
                self.held = held;
                self.held.drain(..held_from);
            }
            Outcome::RefuseRequest { cut, violation } => {
                self.pending.extend_from_slice(hypers(cut));
                self.refuse(violation, &held[cut..]);
            }
            Outcome::FailBody { cut, violation } => {
                self.pending.extend_from_slice(hypers(cut));
                self.fail_body(violation);
            }
        }
    }

    /// Writes the queued fast answers, in order: each one's head and `Date` line, then its
    /// body's chunks, in vectored writes. An answer is dropped once written (its body then
    /// completes the transaction record); when the last is out and hyper has nothing in
    /// flight, the connection is idle again (or waiting for the rest of a held head).
    fn poll_answers(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>
    where
        T: AsyncWrite + Unpin,
    {
        while let Some(o) = self.out.front_mut() {
            // Gather what the body has ready, up to one vectored write's worth.
            let mut gathered: usize = o.chunks.iter().map(Bytes::len).sum();
            while !o.body_done && o.chunks.len() < GATHER_CHUNKS && gathered < GATHER_BYTES {
                match Pin::new(&mut o.body).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => {
                        if let Ok(data) = frame.into_data()
                            && !data.is_empty()
                        {
                            gathered += data.len();
                            o.chunks.push(data);
                        }
                    }
                    Poll::Ready(Some(Err(e))) => {
                        return Poll::Ready(Err(io::Error::other(e.to_string())));
                    }
                    Poll::Ready(None) => o.body_done = true,
                    // Write what is there; the body wakes us when it has more.
                    Poll::Pending if !o.chunks.is_empty() => break,
                    Poll::Pending => return Poll::Pending,
                }
            }
            let head_len = o.head.len() + o.date_len;
            if o.written == head_len && o.chunks.is_empty() {
                if o.body_done {
                    self.out.pop_front();
                }
                continue;
            }
            let mut slices = [io::IoSlice::new(&[]); 2 + GATHER_CHUNKS];
            let mut k = 0;
            if o.written < o.head.len() {
                slices[k] = io::IoSlice::new(&o.head[o.written..]);
                k += 1;
            }
            if o.written < head_len {
                let at = o.written.saturating_sub(o.head.len());
                slices[k] = io::IoSlice::new(&o.date[at..o.date_len]);
                k += 1;
            }
            for c in &o.chunks {
                slices[k] = io::IoSlice::new(c);
                k += 1;
            }
            let Some(io) = self.inner.as_mut() else {
                return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
            };
            let polled = Pin::new(io).poll_write_vectored(cx, &slices[..k]);
            note_write(&self.state, polled.is_pending());
            let mut n = ready!(polled)?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            let of_head = (head_len - o.written).min(n);
            o.written += of_head;
            n -= of_head;
            let mut done = 0;
            for c in &mut o.chunks {
                let of_chunk = n.min(c.len());
                c.advance(of_chunk);
                n -= of_chunk;
                if !c.is_empty() {
                    break;
                }
                done += 1;
            }
            o.chunks.drain(..done);
        }
        let state = &self.state;
        if state.in_flight.load(Ordering::Relaxed) == 0
            && state.phase.load(Ordering::Relaxed) == PHASE_BUSY
        {
            state.since_ms.store(now_ms(), Ordering::Relaxed);
            let phase = if self.held.is_empty() {
                PHASE_IDLE
            } else {
                PHASE_HEAD
            };
            state.phase.store(phase, Ordering::Relaxed);
        }
        Poll::Ready(Ok(()))
    }

    /// Writes the 1xx heads queued for the request in flight, before any byte hyper writes for
    /// it. Only while hyper has written nothing since it flushed everything before this request
    /// (`flushed_at`): then every byte on the wire so far belongs to earlier responses and the
    /// next ones hyper writes are this request's final response. Otherwise (a pipelined
    /// request whose predecessor's bytes are still in hyper's buffer, hyper already writing the
    /// final response, a head left from an earlier request) a head is dropped: it could not go
    /// out in order. Counted in `client_interim` / `client_interim_dropped`.
    fn poll_interim(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>
    where
        T: AsyncWrite + Unpin,
    {
        loop {
            if self.interim.is_empty() {
                if !self.state.interim_queued.load(Ordering::Acquire) {
                    return Poll::Ready(Ok(()));
                }
                let next = match self.state.interim.lock() {
                    Ok(mut queue) => {
                        let next = queue.heads.pop_front();
                        if queue.heads.is_empty() {
                            self.state.interim_queued.store(false, Ordering::Release);
                        }
                        next
                    }
                    Err(_) => None,
                };
                let Some((request, head)) = next else {
                    return Poll::Ready(Ok(()));
                };
                let current = self.state.requests.load(Ordering::Relaxed);
                if request != current || self.flushed_at.wrapping_add(1) != current {
                    self.counters.client_interim_dropped.inc();
                    continue;
                }
                self.counters.client_interim.inc();
                self.interim = head;
            }
            let Some(io) = self.inner.as_mut() else {
                return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
            };
            let polled = Pin::new(io).poll_write(cx, &self.interim);
            note_write(&self.state, polled.is_pending());
            let n = ready!(polled)?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.interim.advance(n);
        }
    }

    /// The service's decision on the pending upgrade (`Some(true)`: tunnel), or None after
    /// registering to be woken when it comes.
    fn upgrade_decision(&self, cx: &mut Context<'_>) -> Option<bool> {
        let read = |s: &ConnState| match s.upgrade.load(Ordering::Acquire) {
            UPGRADE_TUNNEL => Some(true),
            UPGRADE_REFUSED => Some(false),
            _ => None,
        };
        if let Some(d) = read(&self.state) {
            return Some(d);
        }
        if let Ok(mut w) = self.state.upgrade_waker.lock() {
            *w = Some(cx.waker().clone());
        }
        // Decided between the first look and registering: do not miss the wake-up.
        read(&self.state)
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Gate<T> {
    /// hyper's writes go out after the fast answers queued before them.
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.out.is_empty() {
            ready!(self.poll_answers(cx))?;
        }
        ready!(self.poll_interim(cx))?;
        self.flushed_at = u64::MAX;
        let polled = self.io()?.poll_write(cx, buf);
        note_write(&self.state, polled.is_pending());
        polled
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if !self.out.is_empty() {
            ready!(self.poll_answers(cx))?;
        }
        ready!(self.poll_interim(cx))?;
        self.flushed_at = u64::MAX;
        let polled = self.io()?.poll_write_vectored(cx, bufs);
        note_write(&self.state, polled.is_pending());
        polled
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.as_ref().is_some_and(T::is_write_vectored)
    }
    /// hyper flushes its buffer into `poll_write` before it calls this: once it returns with
    /// no request in flight, hyper holds no response bytes (`flushed_at`).
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.out.is_empty() {
            ready!(self.poll_answers(cx))?;
        }
        ready!(self.poll_interim(cx))?;
        let this = &mut *self;
        let Some(io) = this.inner.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        ready!(Pin::new(io).poll_flush(cx))?;
        if this.state.in_flight.load(Ordering::Relaxed) == 0 {
            this.flushed_at = this.state.requests.load(Ordering::Relaxed);
        }
        Poll::Ready(Ok(()))
    }
    /// After a refusal, a body error, or an error answered with `Connection: close`, a lingering
    /// close: send FIN, then read and discard what the client still sends (at most
    /// `LINGER_BYTES`, `LINGER_TIME`) so that closing with unread bytes does not reset the
    /// connection and destroy the error response before the client read it.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        // Released: the socket lives on elsewhere and must not be shut down.
        if this.inner.is_none() {
            return Poll::Ready(Ok(()));
        }
        // Answers already queued go out before the FIN (a write error ends them).
        if !this.out.is_empty() && this.poll_answers(cx).is_pending() {
            return Poll::Pending;
        }
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        if !this.shut {
            ready!(Pin::new(&mut *inner).poll_shutdown(cx))?;
            this.shut = true;
        }
        if this.after == After::Continue && !this.state.linger.load(Ordering::Relaxed) {
            return Poll::Ready(Ok(()));
        }
        let linger = this
            .linger
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(LINGER_TIME)));
        let mut scratch = [0u8; 4096];
        loop {
            if linger.as_mut().poll(cx).is_ready() || this.lingered > LINGER_BYTES {
                return Poll::Ready(Ok(()));
            }
            let mut rb = ReadBuf::new(&mut scratch);
            match Pin::new(&mut *inner).poll_read(cx, &mut rb) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) if !rb.filled().is_empty() => {
                    this.lingered += rb.filled().len();
                }
                Poll::Ready(_) => return Poll::Ready(Ok(())),
            }
        }
    }
}

/// Keeps the send clock: since when a write to the client has been blocked (0: it is not).
fn note_write(state: &ConnState, blocked: bool) {
    let since = &state.write_blocked_since;
    if blocked {
        if since.load(Ordering::Relaxed) == 0 {
            since.store(now_ms().max(1), Ordering::Relaxed);
        }
    } else if since.load(Ordering::Relaxed) != 0 {
        since.store(0, Ordering::Relaxed);
    }
}

/// Counts a refused request in its class's `client_reject_*` counter (and `client_req_400`).
pub(super) fn count_violation(c: &Counters, v: Violation) {
    match v.class() {
        Class::RequestLine => c.client_reject_request_line.inc(),
        Class::Header => c.client_reject_header.inc(),
        Class::Host => c.client_reject_host.inc(),
        Class::Framing => c.client_reject_framing.inc(),
        Class::HopByHop => c.client_reject_hop_by_hop.inc(),
        Class::Chunked => c.client_reject_chunked.inc(),
        Class::Limit => c.client_reject_limit.inc(),
    }
    if v.status() == 400 {
        c.client_req_400.inc();
    }
    tracing::debug!(violation = v.as_str(), "client request refused");
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Quiet for tokio::io::DuplexStream {
        fn quiet(&mut self) -> bool {
            true
        }
    }

    #[test]
    fn slow_body_allowance() {
        let s = ConnState::new();
        // Not waiting: never too slow.
        assert!(!s.body_too_slow(1_000_000, 1000, 100));
        s.body_wait_since.store(10_000, Ordering::Relaxed);
        // One stretch longer than the timeout.
        assert!(!s.body_too_slow(10_900, 1000, 0));
        assert!(s.body_too_slow(11_001, 1000, 0));
        // Total waiting beyond timeout + bytes/rate.
        s.body_waited_ms.store(1_500, Ordering::Relaxed);
        s.body_bytes.store(100, Ordering::Relaxed); // earns 1000 ms at 100 B/s
        assert!(!s.body_too_slow(10_400, 1000, 100)); // 1500 + 400 <= 1000 + 1000
        assert!(s.body_too_slow(10_600, 1000, 100)); // 1500 + 600 > 2000
        s.body_received(10);
        assert_eq!(s.body_wait_since.load(Ordering::Relaxed), 0);
    }

    /// An error answered with a close (`linger_on_close`): shutdown sends FIN, then reads what
    /// the client still sends until it closes. Without it, shutdown returns at once.
    #[tokio::test]
    async fn error_close_lingers_until_the_client_closes() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        for linger in [false, true] {
            let (server, mut client) = tokio::io::duplex(64);
            let state = Arc::new(ConnState::new());
            if linger {
                state.linger_on_close();
            }
            let counters = Arc::new(Counters::default());
            let mut gate = Gate::new(server, state, counters, Limits::default());
            // The client's request is still on its way when the answer ends with a close.
            client.write_all(&[b'x'; 64]).await.unwrap();
            client.shutdown().await.unwrap();
            gate.shutdown().await.unwrap();
            let mut end = [0u8; 1];
            assert_eq!(
                client.read(&mut end).await.unwrap(),
                0,
                "FIN after the answer"
            );
            if linger {
                assert_eq!(
                    gate.lingered, 64,
                    "read and discarded until the client closed"
                );
            } else {
                assert_eq!(gate.lingered, 0);
                assert!(gate.linger.is_none(), "no lingering without an error");
            }
        }
    }

    /// A release happens at an idle read only: never while a write to the client is blocked
    /// (hyper still holds response bytes) or a head is partly held; then the socket is handed
    /// back and the reader sees the end of the stream.
    #[tokio::test]
    async fn release_only_when_idle_and_nothing_is_unwritten() {
        use std::future::poll_fn;
        let (server, _client) = tokio::io::duplex(64);
        let state = Arc::new(ConnState::new());
        let counters = Arc::new(Counters::default());
        let mut gate = Gate::new(server, state.clone(), counters, Limits::default());
        let mut released = gate.releasable();
        let mut buf = [0u8; 16];
        let mut read_once = |gate: &mut Gate<_>| {
            let mut rb = ReadBuf::new(&mut buf);
            let mut cx = Context::from_waker(Waker::noop());
            let polled = Pin::new(gate).poll_read(&mut cx, &mut rb);
            (polled.is_ready(), rb.filled().len())
        };
        // A new connection waits for its first head: not idle.
        state.want_release();
        assert_eq!(read_once(&mut gate), (false, 0));
        assert!(released.try_recv().is_err());
        // Idle, but a response write is blocked.
        state.phase.store(PHASE_IDLE, Ordering::Relaxed);
        state.write_blocked_since.store(1, Ordering::Relaxed);
        state.want_release();
        assert_eq!(read_once(&mut gate), (false, 0));
        assert!(released.try_recv().is_err());
        // Idle with everything written: released, and hyper reads an end of stream.
        state.write_blocked_since.store(0, Ordering::Relaxed);
        state.want_release();
        assert_eq!(read_once(&mut gate), (true, 0));
        assert!(released.try_recv().is_ok(), "socket handed back");
        assert_eq!(
            read_once(&mut gate),
            (true, 0),
            "still the end of the stream"
        );
        // Shutting a released gate down leaves the socket alone.
        poll_fn(|cx| Pin::new(&mut gate).poll_shutdown(cx))
            .await
            .unwrap();
    }

    /// Answers every request with a fixed head and no body.
    struct Fixed;
    impl Answerer for Fixed {
        fn answer(&self, _head: &[u8]) -> Option<FastAnswer> {
            Some(FastAnswer {
                head: Bytes::from_static(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
                add_date: false,
                body: ResponseBody::empty(),
            })
        }
    }

    /// A fast answer is written only while hyper holds nothing: after hyper wrote without
    /// flushing, or while its request is in flight, the next head goes to hyper; once hyper
    /// flushed with nothing in flight, heads are answered again (and never reach hyper).
    #[tokio::test]
    async fn fast_answers_never_overtake_hyper() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: a\r\n\r\n";
        let (server, mut client) = tokio::io::duplex(4096);
        let state = Arc::new(ConnState::new());
        let counters = Arc::new(Counters::default());
        let mut gate = Gate::new(server, state.clone(), counters, Limits::default());
        gate.answer_with(Box::new(Fixed));
        let mut buf = [0u8; 256];
        let mut read_once = |gate: &mut Gate<_>| {
            let mut rb = ReadBuf::new(&mut buf);
            let mut cx = Context::from_waker(Waker::noop());
            let _ = Pin::new(gate).poll_read(&mut cx, &mut rb);
            rb.filled().len()
        };
        // Answered by the gate: hyper reads nothing, the client gets the answer.
        client.write_all(GET).await.unwrap();
        assert_eq!(read_once(&mut gate), 0);
        let mut got = [0u8; 38];
        client.read_exact(&mut got).await.unwrap();
        assert!(got.starts_with(b"HTTP/1.1 200 OK"));
        // hyper wrote something it has not flushed: the next head is hyper's.
        gate.write_all(b"x").await.unwrap();
        client.write_all(GET).await.unwrap();
        assert_eq!(read_once(&mut gate), GET.len(), "handed to hyper");
        let _ = state.begin_request();
        // hyper flushes while its request is still in flight: still hyper's turn.
        gate.flush().await.unwrap();
        client.write_all(GET).await.unwrap();
        assert_eq!(read_once(&mut gate), GET.len());
        let _ = state.begin_request();
        state.end_request();
        state.end_request();
        // Everything dispatched, nothing in flight, flushed: the gate answers again.
        gate.flush().await.unwrap();
        client.write_all(GET).await.unwrap();
        assert_eq!(read_once(&mut gate), 0);
        let mut x = [0u8; 1];
        client.read_exact(&mut x).await.unwrap();
        assert_eq!(&x, b"x", "hyper's byte first");
        client.read_exact(&mut got).await.unwrap();
        assert!(got.starts_with(b"HTTP/1.1 200 OK"));
    }

    #[test]
    fn stand_in_is_recognised_by_number() {
        let s = ConnState::new();
        s.reject
            .store(Violation::DuplicateHost as u8, Ordering::Relaxed);
        s.reject_at.store(1, Ordering::Relaxed);
        assert_eq!(s.begin_request().refused, None);
        assert_eq!(s.begin_request().refused, Some(Violation::DuplicateHost));
    }
}
