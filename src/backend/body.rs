//! Bodies on the backend side: the request body forwarded to a backend, and the response body
//! read from it with the between-bytes timeout and pool check-in at the end.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use super::origin::{BoxError, BoxStream, Release, Source};
use crate::stats::Counters;

/// Body of a request sent to a backend: nothing, bytes held in memory (a body VCL's
/// `std.cache_req_body()` kept), or the client's body streamed through (after the bytes read
/// ahead of it, if any).
pub struct RequestBody {
    /// Bytes sent before anything of `inner`.
    head: Option<Bytes>,
    inner: Option<Incoming>,
    counters: Option<Arc<Counters>>,
    /// Bytes the body may still bring (`server.max_body_size`); past it the body fails and
    /// the backend request is aborted. HTTP/1.1 bodies were bounded by the gate already;
    /// this bounds HTTP/2 bodies sent without `Content-Length`.
    allowed: u64,
    /// `body_timeout` / `body_min_rate` for an HTTP/2 body (the HTTP/1.1 gate applies them to
    /// its connections itself).
    pacer: Option<Box<Pacer>>,
}

/// A client body that passed `server.max_body_size` while streaming to a backend.
#[derive(Debug, thiserror::Error)]
#[error("request body larger than server.max_body_size")]
pub struct BodyTooLarge;

/// A client body that came slower than `body_timeout` / `body_min_rate` allow.
#[derive(Debug, thiserror::Error)]
#[error("request body too slow (server.body_timeout, server.body_min_rate)")]
pub struct BodyTooSlow;

/// How an HTTP/2 request's body is paced, and what became of it: put on the request (an
/// extension) by server/h2, taken by the backend request that streams the body, read back by
/// server/h2 to answer `413` / `408` in place of the failed fetch's answer.
#[derive(Clone, Debug)]
pub struct BodyPace {
    /// `server.body_timeout` (ms): the longest wait for body bytes in one stretch, and the
    /// allowance before `min_rate` applies.
    pub timeout_ms: u64,
    /// `server.body_min_rate` (bytes/s; 0: no rate check).
    pub min_rate: u64,
    pub outcome: Arc<BodyOutcome>,
}

/// Why a paced body failed, if it did.
#[derive(Debug, Default)]
pub struct BodyOutcome {
    too_large: AtomicBool,
    too_slow: AtomicBool,
}

impl BodyOutcome {
    /// The body went over `server.max_body_size`.
    pub fn too_large(&self) -> bool {
        self.too_large.load(Ordering::Relaxed)
    }

    /// The body came too slowly.
    pub fn too_slow(&self) -> bool {
        self.too_slow.load(Ordering::Relaxed)
    }
}

/// The HTTP/1.1 gate's body clock (server/h1/conn.rs `body_too_slow`) for one body: only time
/// spent waiting on the client counts (not time the backend took to take the bytes); too slow
/// is one wait longer than `timeout_ms`, or waits adding up to more than `timeout_ms` plus one
/// second per `min_rate` bytes received.
struct Pacer {
    pace: BodyPace,
    bytes: u64,
    waited_ms: u64,
    /// The wait in progress began then (the client had nothing for us).
    since: Option<Instant>,
    sleep: Option<Pin<Box<Sleep>>>,
}

/// How long the wait that starts now may last (ms): `timeout_ms` in one stretch, and no more
/// than what is left of `timeout_ms` plus one second per `min_rate` bytes received after the
/// `waited_ms` already spent waiting (0: no rate check).
fn allowance(timeout_ms: u64, min_rate: u64, bytes: u64, waited_ms: u64) -> u64 {
    match bytes.saturating_mul(1000).checked_div(min_rate) {
        Some(earned) => timeout_ms.min(timeout_ms.saturating_add(earned).saturating_sub(waited_ms)),
        None => timeout_ms,
    }
}

impl Pacer {
    fn received(&mut self, n: u64) {
        if let Some(since) = self.since.take() {
            self.waited_ms = self
                .waited_ms
                .saturating_add(since.elapsed().as_millis() as u64);
        }
        self.bytes = self.bytes.saturating_add(n);
    }

    /// The client has nothing for us: whether the wait is over its allowance now (else the
    /// timer is armed to wake this body when it will be).
    fn waiting(&mut self, cx: &mut Context<'_>) -> bool {
        let since = *self.since.get_or_insert_with(Instant::now);
        let allowed = allowance(
            self.pace.timeout_ms,
            self.pace.min_rate,
            self.bytes,
            self.waited_ms,
        );
        let deadline = since + Duration::from_millis(allowed.saturating_add(1));
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.deadline() != deadline {
            sleep.as_mut().reset(deadline);
        }
        sleep.as_mut().poll(cx).is_ready()
    }
}

impl RequestBody {
    pub fn empty() -> RequestBody {
        RequestBody {
            head: None,
            inner: None,
            counters: None,
            allowed: 0,
            pacer: None,
        }
    }

    /// The client's `body`, at most `max` bytes of it, paced by `pace` (HTTP/2) if given.
    pub fn stream(
        body: Incoming,
        counters: Arc<Counters>,
        max: u64,
        pace: Option<BodyPace>,
    ) -> RequestBody {
        RequestBody {
            head: None,
            inner: Some(body),
            counters: Some(counters),
            allowed: max,
            pacer: pace.map(|pace| {
                Box::new(Pacer {
                    pace,
                    bytes: 0,
                    waited_ms: 0,
                    since: None,
                    sleep: None,
                })
            }),
        }
    }

    /// A body held in memory, counted in `s_req_bytes` as it is sent.
    pub fn bytes(bytes: Bytes, counters: Arc<Counters>) -> RequestBody {
        RequestBody {
            head: Some(bytes),
            inner: None,
            counters: Some(counters),
            allowed: u64::MAX,
            pacer: None,
        }
    }

    /// This body with `head` sent before it (bytes read ahead of the rest).
    pub fn after(mut self, head: Bytes) -> RequestBody {
        self.head = Some(head);
        self
    }

    /// This body, its bytes counted in `s_req_bytes` as they are sent or not (`None`: read
    /// ahead for VCL, not forwarded yet).
    pub fn counted(mut self, counters: Option<Arc<Counters>>) -> RequestBody {
        self.counters = counters;
        self
    }

    /// True when there is certainly nothing to send.
    pub fn is_empty(&self) -> bool {
        self.head.as_ref().is_none_or(|h| h.is_empty())
            && self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }

    /// A copy to send again (a retry on a new connection), when everything it sends is held
    /// in memory: nothing of a stream can be sent twice.
    pub fn try_clone(&self) -> Option<RequestBody> {
        if self.inner.as_ref().is_some_and(|b| !b.is_end_stream()) {
            return None;
        }
        Some(RequestBody {
            head: self.head.clone(),
            inner: None,
            counters: self.counters.clone(),
            allowed: self.allowed,
            pacer: None,
        })
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Some(head) = this.head.take()
            && !head.is_empty()
        {
            if let Some(c) = &this.counters {
                c.s_req_bytes.add(head.len() as u64);
            }
            return Poll::Ready(Some(Ok(Frame::data(head))));
        }
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = match Pin::new(inner).poll_frame(cx) {
            Poll::Ready(polled) => polled,
            Poll::Pending => {
                if let Some(p) = this.pacer.as_mut()
                    && p.waiting(cx)
                {
                    p.pace.outcome.too_slow.store(true, Ordering::Relaxed);
                    this.inner = None;
                    return Poll::Ready(Some(Err(Box::new(BodyTooSlow))));
                }
                return Poll::Pending;
            }
        };
        if let Some(p) = this.pacer.as_mut() {
            let n = match &polled {
                Some(Ok(frame)) => frame.data_ref().map_or(0, |d| d.len() as u64),
                _ => 0,
            };
            p.received(n);
        }
        if let Some(Ok(frame)) = &polled
            && let Some(data) = frame.data_ref()
        {
            let n = data.len() as u64;
            if n > this.allowed {
                if let Some(p) = &this.pacer {
                    p.pace.outcome.too_large.store(true, Ordering::Relaxed);
                }
                this.inner = None;
                return Poll::Ready(Some(Err(Box::new(BodyTooLarge))));
            }
            this.allowed -= n;
            if let Some(c) = &this.counters {
                c.s_req_bytes.add(n);
            }
        }
        Poll::Ready(polled.map(|r| r.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        let head = self.head.as_ref().map_or(0, |h| h.len() as u64);
        let rest = self
            .inner
            .as_ref()
            .map(|b| b.size_hint())
            .unwrap_or_else(|| SizeHint::with_exact(0));
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower().saturating_add(head));
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper.saturating_add(head));
        }
        hint
    }
}

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

/// A backend response body, whatever the origin kind (`origin::Source`). When read to the
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
    lease: Option<super::Lease>,
    /// Frames read ahead by [`BackendBody::buffer`] (VCL's `beresp.do_stream = false`),
    /// handed out before the rest. Empty (no allocation) otherwise.
    ahead: VecDeque<Frame<Bytes>>,
    /// A files origin's switch to sendfile (`files/zero_copy.rs`).
    zero_copy: Option<Arc<super::ZeroCopy>>,
}

impl BackendBody {
    pub(super) fn new(source: Source, timeout: Duration, counters: Arc<Counters>) -> BackendBody {
        let mut body = BackendBody {
            source,
            timeout,
            sleep: None,
            armed: false,
            counters,
            lease: None,
            ahead: VecDeque::new(),
            zero_copy: None,
        };
        if body.source_ended() {
            body.release();
        }
        body
    }

    /// A body of any origin kind produced as a stream of frames (`origin::BoxStream`), read
    /// with the between-bytes `timeout` like hyper's.
    pub fn from_stream(stream: BoxStream, timeout: Duration, counters: Arc<Counters>) -> Self {
        BackendBody::new(Source::Stream(stream), timeout, counters)
    }

    pub(super) fn with_zero_copy(mut self, zero_copy: Option<Arc<super::ZeroCopy>>) -> Self {
        self.zero_copy = zero_copy;
        self
    }

    /// The switch that makes this body's file parts go out by sendfile(2), for the session
    /// to throw when this body reaches hyper unchanged on a connection that sends files.
    pub(crate) fn zero_copy(&self) -> Option<&Arc<super::ZeroCopy>> {
        self.zero_copy.as_ref()
    }

    pub(super) fn with_lease(mut self, lease: super::Lease) -> BackendBody {
        let pooled = matches!(
            self.source,
            Source::Hyper {
                release: Release::Pool(..),
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
                Release::Pool(backend, conn) => backend.checkin(conn),
                Release::Slot { .. } | Release::Nothing => {}
            }
        }
        self.lease = None;
    }

    /// The body failed: its connection is closed, never reused.
    fn discard(&mut self) {
        if let Source::Hyper { release, .. } = &mut self.source
            && let Release::Pool(..) = release
        {
            *release = Release::Nothing;
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
                this.discard();
                this.counters.backend_error.inc();
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
                        this.discard();
                        this.counters.backend_body_timeout.inc();
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
