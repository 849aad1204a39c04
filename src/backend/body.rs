//! The response body read from a backend ([`BackendBody`]), whatever the origin kind: the
//! between-bytes timeout, the read-ahead of `beresp.do_stream = false`, and at its end the
//! connection given back (to the pool, or its stream slot) and the lease released.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

use super::body_words::{self, Failure, Framing};
use super::error::BoxError;
use super::files::zero_copy::ZeroCopy;
use super::limit::Lease;
use super::source::{BoxStream, Release, Source};
use crate::stats::Counters;
use crate::txlog::vsl::Current;

/// The longest body of an unused response read to its end to keep its connection
/// ([`BackendBody::drain`]): an error page's size, not a download's.
const DRAIN_LIMIT: u64 = 64 * 1024;

/// The longest that reading it may take: the restart or error waits for it, so only a body
/// already on its way (in the read that brought the head, or right behind it) is read.
const DRAIN_WITHIN: Duration = Duration::from_millis(100);

/// Errors while reading a backend response body.
#[derive(Debug, thiserror::Error)]
pub enum BackendBodyError {
    #[error("backend sent nothing for between_bytes_timeout")]
    Timeout,
    #[error("backend body failed: {0}")]
    Hyper(#[from] hyper::Error),
    #[error("backend body failed: {0}")]
    Stream(BoxError),
}

/// A backend response body, whatever the origin kind (`source::Source`). When read to the
/// end its connection is given back (to the pool, or its stream slot); dropped early, the
/// connection is closed (it may still carry unread body bytes).
pub struct BackendBody {
    source: Source,
    timeout: Duration,
    /// Allocated on the first wait, then re-armed; `armed` says whether it runs now.
    sleep: Option<Pin<Box<Sleep>>>,
    armed: bool,
    counters: Arc<Counters>,
    /// Connection-limit slot, released when the body is finished or dropped.
    lease: Option<Lease>,
    /// Frames read ahead by [`BackendBody::buffer`] (VCL's `beresp.do_stream = false`),
    /// handed out before the rest. Empty (no allocation) otherwise.
    ahead: VecDeque<Frame<Bytes>>,
    /// A files origin's switch to sendfile (`files/zero_copy.rs`).
    zero_copy: Option<Arc<ZeroCopy>>,
    /// A pooled HTTP/1.1 connection's switch that keeps it out of the pool (`close_after`),
    /// also once the body ended and the connection went back.
    retire: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// How the body is delimited, for the words of a failure's `FetchError` records.
    framing: Framing,
    /// The backend request's Varnish-style records, where a failure's `FetchError` records go
    /// for a body that is not a pooled HTTP/1.1 connection's (whose connection logs them).
    vsl: Option<Current>,
}

impl Drop for BackendBody {
    /// A complete body nobody read to its end (a 304's, a HEAD's, one known empty) gives its
    /// connection back now.
    fn drop(&mut self) {
        if self.source_ended() {
            self.release();
        }
    }
}

impl BackendBody {
    pub(super) fn new(source: Source, timeout: Duration, counters: Arc<Counters>) -> BackendBody {
        let retire = match &source {
            Source::Hyper {
                release: Release::Pool { conn, .. },
                ..
            } => Some(conn.retired_flag()),
            _ => None,
        };
        // A body already complete (no bytes, or all read with the head) gives its connection
        // back when it is read or dropped — after the policy had its say on the response
        // (`close_after`), so a connection VCL closes is never counted as recycled.
        BackendBody {
            source,
            timeout,
            sleep: None,
            armed: false,
            counters,
            lease: None,
            ahead: VecDeque::new(),
            zero_copy: None,
            retire,
            framing: Framing::default(),
            vsl: None,
        }
    }

    /// The backend request's records (`log.vsl_records`), for a failure's `FetchError`.
    pub(super) fn with_vsl(mut self, vsl: Option<Current>) -> Self {
        self.vsl = vsl;
        self
    }

    /// A body of any origin kind produced as a stream of frames (`source::BoxStream`), read
    /// with the between-bytes `timeout` like hyper's.
    pub fn from_stream(stream: BoxStream, timeout: Duration, counters: Arc<Counters>) -> Self {
        BackendBody::new(Source::Stream(stream), timeout, counters)
    }

    /// How the body is delimited (`Framing::of` its response head).
    pub(super) fn with_framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    pub(super) fn with_zero_copy(mut self, zero_copy: Option<Arc<ZeroCopy>>) -> Self {
        self.zero_copy = zero_copy;
        self
    }

    /// The switch that makes this body's file parts go out by sendfile(2), for the session
    /// to throw when this body reaches hyper unchanged on a connection that sends files.
    pub(crate) fn zero_copy(&self) -> Option<&Arc<ZeroCopy>> {
        self.zero_copy.as_ref()
    }

    pub(super) fn with_lease(mut self, lease: Lease) -> BackendBody {
        let pooled = matches!(
            self.source,
            Source::Hyper {
                release: Release::Pool { .. },
                ..
            }
        );
        if pooled || !self.source_ended() {
            self.lease = Some(lease);
        }
        self
    }

    /// The data read ahead by [`BackendBody::buffer`], in order (a check over a whole
    /// buffered body: `proxy/fetch/exchange.rs` tests a gzip body before delivery).
    pub fn buffered(&self) -> impl Iterator<Item = &Bytes> {
        self.ahead.iter().filter_map(Frame::data_ref)
    }

    /// Reads the body ahead (VCL's `beresp.do_stream = false`: the whole body before the
    /// response goes out), with the between-bytes timeout, until its end or until more than
    /// `limit` bytes came: `Some(length)` when it ended, `None` when it is longer than `limit`
    /// (the rest then streams after what was read). A failure is the fetch's: the response
    /// was not delivered yet.
    pub async fn buffer(&mut self, limit: u64) -> Result<Option<u64>, BackendBodyError> {
        let mut total: u64 = 0;
        loop {
            match std::future::poll_fn(|cx| Pin::new(&mut *self).poll_inner(cx)).await {
                None => return Ok(Some(total)),
                Some(Err(e)) => return Err(e),
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        total = total.saturating_add(data.len() as u64);
                    }
                    self.ahead.push_back(frame);
                    if total > limit {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// A body the fetch will not use (VCL restarted, retried or abandoned on the response's
    /// head; a director's `restart_on` moved on): read to its end and thrown away when it
    /// is at most `limit` bytes and ends within `within`, so its keep-alive connection goes
    /// back to the pool instead of being closed under the unread bytes (Varnish 2.1 reuses
    /// it: varnishtest 2.1.5/b00019). Only a pooled HTTP/1.1 connection's body is read (an
    /// HTTP/2 stream is reset for nothing, other kinds have no connection to keep), and one
    /// already complete goes back as it is dropped. Counted: `backend_drained` when the
    /// connection went back, `backend_drain_closed` when the body was too long or too slow.
    /// [`BackendBody::drain`] with Shellac's bounds.
    pub async fn drain(self) {
        self.drain_within(DRAIN_LIMIT, DRAIN_WITHIN).await;
    }

    async fn drain_within(mut self, limit: u64, within: Duration) {
        let pooled = matches!(
            self.source,
            Source::Hyper {
                release: Release::Pool { .. },
                ..
            }
        );
        if !pooled || self.source_ended() {
            return;
        }
        let mut read: u64 = self
            .ahead
            .iter()
            .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
            .sum();
        // A length declared over the limit is not waited for.
        let declared = self.size_hint().lower();
        let drained = declared <= limit
            && tokio::time::timeout(within, async {
                loop {
                    match std::future::poll_fn(|cx| Pin::new(&mut self).poll_inner(cx)).await {
                        // The end: `poll_inner` gave the connection back.
                        None => return true,
                        Some(Err(_)) => return false,
                        Some(Ok(frame)) => {
                            read += frame.data_ref().map_or(0, |d| d.len() as u64);
                            if read > limit {
                                return false;
                            }
                        }
                    }
                }
            })
            .await
            .unwrap_or(false);
        if drained {
            self.counters.backend_drained.inc();
        } else {
            self.counters.backend_drain_closed.inc();
        }
    }

    fn source_ended(&self) -> bool {
        match &self.source {
            Source::Hyper { body, .. } => body.is_end_stream(),
            Source::Stream(s) => s.is_end_stream(),
        }
    }

    /// The body ended: its connection goes back, its lease is released.
    fn release(&mut self) {
        if let Source::Hyper { release, .. } = &mut self.source {
            match std::mem::replace(release, Release::Nothing) {
                Release::Pool {
                    pool,
                    endpoint,
                    conn,
                } => pool.checkin(&endpoint, conn),
                Release::Slot { .. } | Release::Nothing => {}
            }
        }
        self.lease = None;
    }

    /// Its connection serves no other request once this body is read (the response said
    /// `Connection: close`, or VCL's `beresp.http.connection` did).
    pub fn close_after(&mut self) {
        self.discard(None);
        if let Some(r) = &self.retire {
            r.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The body failed (`failure`, when it did): logged as Varnish's `FetchError` records on
    /// the backend request's (`log.vsl_records`) — by a pooled HTTP/1.1 connection, which
    /// serves that request, else here, whatever the origin kind (HTTP/2, FastCGI, files) —
    /// and its connection closed, never reused.
    fn discard(&mut self, failure: Option<Failure<'_>>) {
        if let Some(f) = failure {
            let words = body_words::words(self.framing, f);
            match &self.source {
                Source::Hyper {
                    release: Release::Pool { conn, .. },
                    ..
                } => conn.log_fetch_error(&words),
                _ => {
                    if let Some(v) = &self.vsl {
                        for w in words {
                            v.0.log("FetchError", w);
                        }
                    }
                }
            }
        }
        if let Source::Hyper { release, .. } = &mut self.source
            && let Release::Pool { .. } = release
            && let Release::Pool {
                endpoint, mut conn, ..
            } = std::mem::replace(release, Release::Nothing)
        {
            conn.log_close(&endpoint.config.name, false);
        }
    }
}

impl Body for BackendBody {
    type Data = Bytes;
    type Error = BackendBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BackendBodyError>>> {
        if let Some(frame) = self.ahead.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        self.poll_inner(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.ahead.is_empty() && self.source_ended()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = match &self.source {
            Source::Hyper { body, .. } => body.size_hint(),
            Source::Stream(s) => s.size_hint(),
        };
        if self.ahead.is_empty() {
            return inner;
        }
        let ahead: u64 = self
            .ahead
            .iter()
            .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
            .sum();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(ahead));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(ahead));
        }
        hint
    }
}

impl BackendBody {
    /// The next frame from the origin, with the between-bytes timeout.
    fn poll_inner(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BackendBodyError>>> {
        let this = self.get_mut();
        let polled = match &mut this.source {
            Source::Hyper { body, .. } => Pin::new(body)
                .poll_frame(cx)
                .map(|f| f.map(|r| r.map_err(BackendBodyError::Hyper))),
            Source::Stream(s) => s
                .as_mut()
                .poll_frame(cx)
                .map(|f| f.map(|r| r.map_err(BackendBodyError::Stream))),
        };
        match polled {
            Poll::Ready(None) => {
                this.armed = false;
                this.release();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                this.armed = false;
                if this.source_ended() {
                    this.release();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let failure = match &e {
                    BackendBodyError::Hyper(h) => {
                        body_words::io_error(h).map_or(Failure::Other, Failure::Io)
                    }
                    BackendBodyError::Stream(_) | BackendBodyError::Timeout => Failure::Other,
                };
                this.discard(Some(failure));
                this.counters.backend_error.inc();
                // The fetch failed after its head (Varnish counts it as `fetch_failed`).
                this.counters.fetch_failed.inc();
                Poll::Ready(Some(Err(e)))
            }
            Poll::Pending => {
                let deadline = tokio::time::Instant::now() + this.timeout;
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if !this.armed {
                    sleep.as_mut().reset(deadline);
                    this.armed = true;
                }
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.discard(Some(Failure::Timeout));
                        this.counters.backend_body_timeout.inc();
                        this.counters.fetch_failed.inc();
                        Poll::Ready(Some(Err(BackendBodyError::Timeout)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
