//! What hyper reads and writes through the gate (`AsyncRead`, `AsyncWrite`): fast answers and
//! 1xx heads first, scanned bytes only, the socket handed back on a release, a lingering
//! close.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::conn::note_write;
use super::{After, Gate, LINGER_BYTES, LINGER_TIME, Mode, Outcome, Quiet};

impl<T: AsyncRead + AsyncWrite + Unpin + Quiet> Gate<T> {
    /// Gives hyper as much of the pending bytes (validated, or the stand-in request) as its
    /// buffer takes.
    #[inline]
    fn give_pending(&mut self, buf: &mut ReadBuf<'_>) {
        let n = (self.pending.len() - self.pending_pos).min(buf.remaining());
        buf.put_slice(&self.pending[self.pending_pos..self.pending_pos + n]);
        self.pending_pos += n;
        if self.pending_pos == self.pending.len() {
            self.pending.clear();
            self.pending_pos = 0;
        }
    }

    /// Scans the bytes just read into hyper's buffer (`start..end`) in place: a partial head
    /// at the end is held back, a refused request and what follows it cut, requests answered
    /// here (fast hits) taken out. Whether hyper has bytes to read.
    #[inline]
    fn scan_in_place(&mut self, buf: &mut ReadBuf<'_>, start: usize, end: usize) -> bool {
        let answer = self.may_answer();
        let (answered, outcome) = self.scan(&mut buf.filled_mut()[start..end], answer);
        match outcome {
            Outcome::Valid { held_from } => {
                if held_from < end - start {
                    self.held
                        .extend_from_slice(&buf.filled()[start + held_from..end]);
                    buf.set_filled(start + held_from);
                }
            }
            Outcome::RefuseRequest { cut, violation } => {
                self.refuse(violation, &buf.filled()[start + cut..end]);
                buf.set_filled(start + cut);
            }
            Outcome::FailBody { cut, violation } => {
                buf.set_filled(start + cut);
                self.fail_body(violation);
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
        buf.filled().len() > start
    }
}

impl<T: Quiet> Gate<T> {
    /// Sends what the connection's pipe still holds (`splice.rs`) before anything else is
    /// written; ready once it is empty. Inline: asked up to three times a hit (the lean loop's
    /// turn, the answers' end), nearly always of an empty pipe (a call each was ~22
    /// instructions, callgrind).
    #[inline]
    pub(super) fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.splice.holds() {
            return Poll::Ready(Ok(()));
        }
        self.poll_drain_pipe(cx)
    }

    fn poll_drain_pipe(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(io) = self.inner.as_mut() else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        let polled = self.splice.poll_drain(io, cx);
        note_write(&self.state, polled.is_pending(), &mut self.clock);
        polled
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin + Quiet> AsyncRead for Gate<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        this.clock.clear();
        loop {
            // Fast answers first; nothing more is read until they are written.
            if !this.out.is_empty() {
                ready!(this.poll_answers(cx))?;
            }
            if this.pending_pos < this.pending.len() {
                this.give_pending(buf);
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
            this.state.bytes_arrived(&mut this.clock);
            if in_body {
                this.state.body_received(end - start);
            }
            if this.held.is_empty() {
                // Scanned in place in hyper's buffer.
                if this.scan_in_place(buf, start, end) {
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
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.clock.clear();
        if !self.out.is_empty() {
            ready!(self.poll_answers(cx))?;
        }
        ready!(self.poll_drain(cx))?;
        ready!(self.poll_interim(cx))?;
        self.flushed_at = u64::MAX;
        if self.regions.as_ref().is_some_and(|r| r.pending()) {
            return self.poll_write_regions(cx, bufs);
        }
        let this = &mut *self;
        let Some(io) = this.inner.as_mut() else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        let polled = this.splice.poll_write(io, cx, &this.counters, bufs);
        note_write(&this.state, polled.is_pending(), &mut this.clock);
        polled
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.as_ref().is_some_and(T::is_write_vectored)
    }
    /// hyper flushes its buffer into `poll_write` before it calls this: once it returns with
    /// no request in flight, hyper holds no response bytes (`flushed_at`).
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.clock.clear();
        if !self.out.is_empty() {
            ready!(self.poll_answers(cx))?;
        }
        ready!(self.poll_drain(cx))?;
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
        this.clock.clear();
        // Released: the socket lives on elsewhere and must not be shut down.
        if this.inner.is_none() {
            return Poll::Ready(Ok(()));
        }
        // Answers already queued go out before the FIN (a write error ends them).
        if !this.out.is_empty() && this.poll_answers(cx).is_pending() {
            return Poll::Pending;
        }
        // So do the bytes still in the connection's pipe (an error ends them too).
        if this.poll_drain(cx).is_pending() {
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
