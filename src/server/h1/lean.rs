//! The lean loop: a session starts with the gate owning its socket and no hyper at all.
//! While every request is a fast hit, each wake-up is read → scan → answer → write through
//! the gate's own machinery (`Gate::poll_read`, which writes queued fast answers before it
//! reads again); hyper's connection — its dispatcher, read buffer and the polls of its read,
//! write and flush halves on every wake-up (~800 instructions of a ~7,200-instruction
//! static6k hit, bench/RESULTS.md "twelfth stop: loop") — is built only when the gate has
//! bytes that hyper must read: a head the fast path declined, a partial head that arrived
//! after a held one, a refusal's stand-in. From then on the session is hyper's, as before,
//! until it ends or is released (a released connection starts lean again).
//!
//! Nothing else changes: the same scanner, answers, counters and records; the session's
//! timer keeps the idle, header-read and send timeouts on the same `ConnState`, and a graceful
//! close (idle timeout, shutdown) writes the queued answers and shuts the socket as hyper does
//! for an idle connection.

use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use crate::clock::now_ms;
use crate::stats::Counters;

use super::clocks::{Armed, Clocks, Tick};
use super::stop::Stop;
use super::{ConnState, Gate, Quiet};

/// Bytes read from the socket at once in the lean loop (hyper's first read buffer is as
/// large). A longer head is held by the gate across reads, as under hyper.
const READ_BYTES: usize = 8192;

/// How a turn of the lean loop ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Turn {
    /// The gate queued bytes hyper must read (`Gate::pending`): hand it to hyper.
    Hyper,
    /// The client closed, or the gate handed its socket back (`idle_release`).
    Ended,
}

impl<T: AsyncRead + AsyncWrite + Unpin + Quiet> Gate<T> {
    /// Reads, scans and answers fast hits until hyper is needed or the stream ends. The bytes
    /// for hyper (`Gate::poll_read`'s output) go in front of what the gate still queues for
    /// it, so hyper reads them in order.
    ///
    /// The bytes a fast answer left in the connection's pipe (`splice.rs`: a write is done once
    /// its bytes are in the pipe, and the socket may not have taken them yet) are sent before
    /// anything more is read, and again after a read that waits: under hyper its flush on every
    /// turn sent them; here nothing else would, and the end of a large hit stayed in the pipe
    /// until the send timeout cut the body.
    pub(super) fn poll_lean(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Turn>> {
        self.clock.clear();
        ready!(self.poll_drain(cx))?;
        let mut space = [MaybeUninit::<u8>::uninit(); READ_BYTES];
        let mut buf = ReadBuf::uninit(&mut space);
        if Pin::new(&mut *self).poll_read(cx, &mut buf)?.is_pending() {
            // The read waits; what the answers just put in the pipe must not.
            ready!(self.poll_drain(cx))?;
            return Poll::Pending;
        }
        let read = buf.filled();
        if read.is_empty() {
            return Poll::Ready(Ok(Turn::Ended));
        }
        let mut pending = Vec::with_capacity(read.len() + self.pending.len() - self.pending_pos);
        pending.extend_from_slice(read);
        pending.extend_from_slice(&self.pending[self.pending_pos..]);
        self.pending = pending;
        self.pending_pos = 0;
        Poll::Ready(Ok(Turn::Hyper))
    }
}

/// How the lean loop ended.
pub(super) enum Lean {
    /// hyper takes the session from here (the gate queues its first bytes).
    Hyper,
    /// Shutdown reached the session while a request was arriving, or before the first: hyper
    /// answers it with `Connection: close` ([`ConnState::on_stop`]); the stop signal is spent.
    Stopped,
    /// The stream ended cleanly (the socket shut, or handed back by a release).
    Ended,
    /// A timeout (counted) or an error ended the connection.
    End,
}

/// What the lean loop needs of its session.
pub(super) struct LeanLoop<'s> {
    pub state: &'s ConnState,
    pub counters: &'s Counters,
    pub clocks: &'s Clocks,
    pub peer: SocketAddr,
}

impl LeanLoop<'_> {
    /// Runs the lean loop on `gate` with the session's timer and shutdown signal (both go on
    /// to hyper's loop when this returns [`Lean::Hyper`]). An idle timeout or a shutdown
    /// closes the connection as hyper's graceful shutdown closes an idle one: the queued
    /// answers written, then the socket shut; so does the end of the client's stream.
    pub(super) async fn run<T>(
        &self,
        gate: &mut Gate<T>,
        (mut timer, armed): (Pin<&mut Sleep>, &mut Armed),
        mut stop: Pin<&mut Stop>,
    ) -> Lean
    where
        T: AsyncRead + AsyncWrite + Unpin + Quiet,
    {
        // Shutting the socket (the stream ended or the session is closing).
        let mut shutting = false;
        loop {
            let shut = shutting;
            let gate = &mut *gate;
            tokio::select! {
                // The socket first: the timer and the stop signal only matter when it waits.
                biased;
                turn = std::future::poll_fn(move |cx| {
                    if shut {
                        Pin::new(&mut *gate).poll_shutdown(cx).map_ok(|()| Turn::Ended)
                    } else {
                        gate.poll_lean(cx)
                    }
                }) => match turn {
                    Ok(Turn::Hyper) => return Lean::Hyper,
                    Ok(Turn::Ended) if shut => return Lean::Ended,
                    // hyper shuts the socket when its stream ends: so does this loop.
                    Ok(Turn::Ended) => shutting = true,
                    Err(e) => {
                        tracing::debug!(peer = %self.peer, error = %e, "client connection ended with error");
                        return Lean::End;
                    }
                },
                _ = std::future::poll_fn(|cx| armed.poll(timer.as_mut(), cx)) => {
                    let now = now_ms();
                    let at = match self.clocks.check(self.state, self.counters, now, shut) {
                        Tick::End => return Lean::End,
                        Tick::IdleClose(at) => {
                            shutting = true;
                            self.state.closing();
                            at
                        }
                        Tick::Next(at) => at,
                    };
                    armed.reset(
                        timer.as_mut(),
                        tokio::time::Instant::now() + Duration::from_millis(at - now),
                    );
                }
                _ = stop.as_mut(), if !shut => {
                    if !self.state.on_stop() {
                        // A request is arriving (or the first is still due): hyper answers it,
                        // with `Connection: close`.
                        return Lean::Stopped;
                    }
                    shutting = true;
                }
            }
        }
    }
}
