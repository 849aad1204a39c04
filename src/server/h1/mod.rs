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

mod answers;
mod clocks;
mod conn;
mod gate_io;
mod http10;
mod interim;
mod lean;
mod scan;
mod sendfile;
mod service;
mod session;
mod splice;
mod stop;
#[cfg(test)]
mod tests;
mod transport;

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Context;

use std::collections::VecDeque;

use bytes::Bytes;
use smallvec::SmallVec;
use tokio::sync::oneshot;

use crate::clock::DATE_LINE_LEN;
use crate::http::strict::{Limits, Parts, Scanner, Violation};
use crate::proxy::{FastAnswer, ResponseBody};
use crate::stats::Counters;

pub(super) use conn::{ConnState, PHASE_HEAD, PHASE_IDLE};
use conn::{PollClock, UPGRADE_REFUSED, UPGRADE_TUNNEL};
pub(super) use scan::count_violation;
pub(super) use session::serve_session;
pub(crate) use transport::Quiet;

/// Lingering close after a refusal (here and at `max_connections`): how long, and how many
/// bytes, to read and discard.
pub(super) const LINGER_TIME: std::time::Duration = std::time::Duration::from_secs(2);
pub(super) const LINGER_BYTES: usize = 64 * 1024;

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
/// `parts` says where the head's parts are, as the gate's strict parser found them.
pub(crate) trait Answerer: Send + Sync {
    fn answer(&mut self, head: &[u8], parts: &Parts) -> Option<FastAnswer>;
}

/// Body chunks a fast answer holds without a heap allocation: a stored body of up to 256 KiB
/// (`cache::body::STORE_CHUNK` pieces). With one, the two chunks of bench/ab2009.sh's 69,478-byte
/// phpcached page spilled to the heap on every hit (a malloc and a free, ~230 instructions,
/// callgrind).
const INLINE_CHUNKS: usize = 4;

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
    /// written): up to `GATHER_CHUNKS` / `GATHER_BYTES` (`answers.rs`) go out in one vectored write.
    /// Up to [`INLINE_CHUNKS`] without an allocation.
    chunks: SmallVec<[Bytes; INLINE_CHUNKS]>,
    body_done: bool,
}

/// How far a run of the scanner over some bytes got.
pub(super) enum Outcome {
    /// Everything up to the end is valid (a trailing partial head starts at `held_from`).
    Valid { held_from: usize },
    /// Refuse the request whose head starts at `cut` (nothing from it reaches hyper).
    RefuseRequest { cut: usize, violation: Violation },
    /// Fail the body in flight after `cut` valid bytes.
    FailBody { cut: usize, violation: Violation },
}

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
    /// File regions standing behind placeholders in hyper's writes (`sendfile.rs`); `None`
    /// until the session asks for them (a transport that sends files).
    regions: Option<Arc<crate::backend::Regions>>,
    /// Written bytes of stored bodies still in the connection's pipe (`splice.rs`): sent before
    /// anything else.
    splice: splice::Splice,
    /// The coarse clock as this poll first read it (`conn::PollClock`).
    clock: PollClock,
}

/// Whether the gate is parsing HTTP, waiting for the answer to an upgrade request, or passing
/// a tunnel's bytes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Scan,
    AwaitUpgrade,
    Tunnel,
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
            regions: None,
            splice: splice::Splice::default(),
            clock: PollClock::default(),
        }
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
            // Bytes of the last response still in the connection's pipe (`splice.rs`).
            || self.splice.holds()
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
