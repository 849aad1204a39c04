//! Per-connection state shared by the gate, the service and the timer: the phase and the
//! idle / header-read / body / send clocks, request numbers, the refusal and upgrade marks,
//! the 1xx heads waiting for the gate.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::task::Waker;

use bytes::Bytes;

use crate::clock::now_ms;
use crate::http::strict::Violation;
use crate::server::sess_clocks::SessClocks;

const NONE: u64 = u64::MAX;

pub(in crate::server) const PHASE_IDLE: u8 = 0;
pub(in crate::server) const PHASE_HEAD: u8 = 1;
pub(in crate::server) const PHASE_BUSY: u8 = 2;

/// Per-connection state shared by the gate (socket side), the service (request side) and the
/// connection's timer. Everything is relaxed atomics: all three run on the connection's task.
pub(in crate::server) struct ConnState {
    /// What the connection is doing, for the idle and header-read timeouts.
    pub phase: AtomicU8,
    pub since_ms: AtomicU64,
    pub(super) in_flight: AtomicUsize,
    /// Requests the service has seen.
    pub(super) requests: AtomicU64,
    /// The number of the request that stands in for a refused one, and why.
    pub(super) reject_at: AtomicU64,
    pub(super) reject: AtomicU8,
    /// The refused request's line when it was complete and valid (for the access log).
    pub(super) refused_line: OnceLock<Box<[u8]>>,
    /// A violation found in the body of the request in flight (0: none).
    pub(super) body_error: AtomicU8,
    /// The service answered an error with `Connection: close`: linger when closing.
    pub(super) linger: AtomicBool,
    /// Slow-body bookkeeping: since when hyper has been waiting for body bytes (0: not
    /// waiting), total time waited, body bytes received.
    pub(super) body_wait_since: AtomicU64,
    pub(super) body_waited_ms: AtomicU64,
    pub(super) body_bytes: AtomicU64,
    /// Since when a write to the client has made no progress (0: not blocked).
    pub(super) write_blocked_since: AtomicU64,
    /// When the response being sent wrote its first byte (0: none written yet), for
    /// `send_total_timeout`. A new response (hyper's or a fast answer) starts it again.
    pub(super) send_started: AtomicU64,
    /// The number of a request that asked to switch protocols; the gate reads nothing after
    /// it until the service decides (`UPGRADE_*`), and the waker to call then.
    pub(super) upgrade_at: AtomicU64,
    pub(super) upgrade: AtomicU8,
    pub(super) upgrade_waker: Mutex<Option<Waker>>,
    /// The timer asks the gate to hand the socket back at the next idle read (`idle_release`).
    pub(super) release: AtomicBool,
    /// The timeouts VCL set for this session (`sess.*`).
    pub(super) sess: SessClocks,
    /// The session is shutting down (hyper's graceful shutdown): no more fast answers.
    pub(super) closing: AtomicBool,
    /// 1xx heads (103 Early Hints, ...) the request in flight got from its backend, with the
    /// number of that request: the gate writes them before hyper's first byte for it
    /// (`Gate::poll_interim`). hyper's server cannot send 1xx responses itself.
    pub(super) interim: Mutex<InterimQueue>,
    pub(super) interim_queued: AtomicBool,
}

/// 1xx heads waiting for the gate, and how many the latest request has queued in all.
#[derive(Default)]
pub(super) struct InterimQueue {
    pub(super) heads: VecDeque<(u64, Bytes)>,
    pub(super) request: u64,
    pub(super) queued: usize,
}

pub(super) const UPGRADE_PENDING: u8 = 0;
pub(super) const UPGRADE_REFUSED: u8 = 1;
pub(super) const UPGRADE_TUNNEL: u8 = 2;

/// What the service learns when hyper dispatches a request.
pub(in crate::server) struct Begin {
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
            send_started: AtomicU64::new(0),
            upgrade_at: AtomicU64::new(NONE),
            upgrade: AtomicU8::new(UPGRADE_PENDING),
            upgrade_waker: Mutex::new(None),
            release: AtomicBool::new(false),
            sess: SessClocks::default(),
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

    /// Shutdown reached the session: no more fast answers, and every response from now on
    /// says `Connection: close` (`service::respond`). Returns whether to close now (hyper's
    /// graceful shutdown: closes a connection it sees idle, ends one after the response in
    /// flight): not while a request head is arriving or a new connection's first is due
    /// (`PHASE_HEAD`). hyper would close such a connection unread, losing a request the client
    /// has sent (or sends a moment later, on a connection accepted just before the stop) and
    /// cannot tell from one never sent; it is answered instead, within
    /// `header_read_timeout` and `shutdown_grace`.
    pub fn on_stop(&self) -> bool {
        self.closing();
        self.phase.load(Ordering::Relaxed) != PHASE_HEAD
    }

    /// Called by the service for each request hyper dispatches.
    pub fn begin_request(&self) -> Begin {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.phase.store(PHASE_BUSY, Ordering::Relaxed);
        self.response_begins();
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
    pub(super) fn idle(&self) -> bool {
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

    pub(super) fn bytes_arrived(&self, clock: &mut PollClock) {
        if self.phase.load(Ordering::Relaxed) == PHASE_IDLE {
            self.since_ms.store(clock.ms(), Ordering::Relaxed);
            self.phase.store(PHASE_HEAD, Ordering::Relaxed);
        }
    }

    pub(super) fn body_started(&self) {
        self.body_wait_since.store(0, Ordering::Relaxed);
        self.body_waited_ms.store(0, Ordering::Relaxed);
        self.body_bytes.store(0, Ordering::Relaxed);
    }

    pub(super) fn body_waiting(&self) {
        if self.body_wait_since.load(Ordering::Relaxed) == 0 {
            self.body_wait_since
                .store(now_ms().max(1), Ordering::Relaxed);
        }
    }

    pub(super) fn body_received(&self, n: usize) {
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

    /// A new response is to be written: `send_total_timeout` counts from its first byte.
    pub(super) fn response_begins(&self) {
        self.send_started.store(0, Ordering::Relaxed);
    }

    /// Whether a write is blocked now and the response being sent started more than
    /// `total_ms` ago (`send_total_timeout`; 0: no limit). As Varnish checks its
    /// `send_timeout`: only when the client does not take what is written.
    pub fn send_too_long(&self, now: u64, total_ms: u64) -> bool {
        let started = self.send_started.load(Ordering::Relaxed);
        total_ms > 0
            && started != 0
            && self.write_blocked_since.load(Ordering::Relaxed) != 0
            && now.saturating_sub(started) > total_ms
    }
}

/// Keeps the send clock: since when a write to the client has been blocked (0: it is not).
pub(super) fn note_write(state: &ConnState, blocked: bool, clock: &mut PollClock) {
    if state.send_started.load(Ordering::Relaxed) == 0 {
        state.send_started.store(clock.ms(), Ordering::Relaxed);
    }
    let since = &state.write_blocked_since;
    if blocked {
        if since.load(Ordering::Relaxed) == 0 {
            since.store(clock.ms(), Ordering::Relaxed);
        }
    } else if since.load(Ordering::Relaxed) != 0 {
        since.store(0, Ordering::Relaxed);
    }
}

/// The coarse clock ([`now_ms`]) read at most once per poll of the gate. The marks a fast hit
/// sets — its head arriving (`bytes_arrived`), its answer's first write (`note_write`), the
/// connection idle again (`Gate::poll_answers`) — fall in one wake-up: one read instead of
/// three (each ~30 instructions, bench/RESULTS.md "fourteenth stop: user"). Cleared when a
/// poll of the gate begins (`Gate::poll_read`, the writes, the lean loop's turn), so a mark is
/// never older than the poll that sets it.
#[derive(Debug, Default)]
pub(super) struct PollClock(u64);

impl PollClock {
    /// A new poll: the next mark reads the clock again.
    pub(super) fn clear(&mut self) {
        self.0 = 0;
    }

    /// The clock as of this poll's first mark (never 0: the marks use 0 for "unset").
    pub(super) fn ms(&mut self) -> u64 {
        if self.0 == 0 {
            self.0 = now_ms().max(1);
        }
        self.0
    }
}
