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
mod conn;
mod http10;
mod interim;
mod scan;
mod sendfile;
mod session;
#[cfg(test)]
mod tests;

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};

use std::collections::VecDeque;

use bytes::Bytes;
use smallvec::SmallVec;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

use crate::clock::DATE_LINE_LEN;
use crate::http::strict::{Limits, Scanner, Violation};
use crate::proxy::{FastAnswer, ResponseBody};
use crate::stats::Counters;

pub(super) use conn::{ConnState, PHASE_HEAD, PHASE_IDLE};
use conn::{UPGRADE_REFUSED, UPGRADE_TUNNEL, note_write};
pub(super) use scan::count_violation;
pub(super) use session::serve_session;

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

/// A transport the gate can hand back for parking: `quiet` says nothing is buffered inside
/// it (no decrypted bytes unread, nothing unwritten), so the socket's readiness tells all.
pub(crate) trait Quiet {
    fn quiet(&mut self) -> bool;

    /// Whether the transport sends files itself ([`Quiet::poll_send_file`]): a plain socket.
    fn sends_files() -> bool
    where
        Self: Sized,
    {
        false
    }

    /// Sends `len` bytes at `offset` of `region`'s file (sendfile(2)); how many went.
    fn poll_send_file(
        &mut self,
        _cx: &mut Context<'_>,
        _region: &crate::backend::Region,
        _offset: u64,
        _len: usize,
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Err(io::ErrorKind::Unsupported.into()))
    }
}

/// Answers a request without hyper from its validated, bodiless head (server.rs: fast hits,
/// `Proxy::fast_hit`), or declines and hyper gets the request.
pub(crate) trait Answerer: Send + Sync {
    fn answer(&self, head: &[u8]) -> Option<FastAnswer>;
}

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
    chunks: SmallVec<[Bytes; 1]>,
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

impl<T: AsyncRead + AsyncWrite + Unpin + Quiet> AsyncWrite for Gate<T> {
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
        if self.regions.as_ref().is_some_and(|r| r.pending()) {
            return self.poll_write_regions(cx, &[io::IoSlice::new(buf)]);
        }
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
        if self.regions.as_ref().is_some_and(|r| r.pending()) {
            return self.poll_write_regions(cx, bufs);
        }
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
