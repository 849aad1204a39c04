//! Bodies on the backend side: the request body forwarded to a backend, and the response body
//! read from it with the between-bytes timeout and pool check-in at the end.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::Sleep;

use super::Backend;
use crate::stats::Counters;

/// Body of a request sent to a backend: nothing, or the client's body streamed through.
pub struct RequestBody {
    inner: Option<Incoming>,
    counters: Option<Arc<Counters>>,
    /// Bytes the body may still bring (`server.max_body_size`); past it the body fails and
    /// the backend request is aborted. HTTP/1.1 bodies were bounded by the gate already;
    /// this bounds HTTP/2 bodies sent without `Content-Length`.
    allowed: u64,
}

/// A client body that passed `server.max_body_size` while streaming to a backend.
#[derive(Debug, thiserror::Error)]
#[error("request body larger than server.max_body_size")]
pub struct BodyTooLarge;

impl RequestBody {
    pub fn empty() -> RequestBody {
        RequestBody {
            inner: None,
            counters: None,
            allowed: 0,
        }
    }

    /// The client's `body`, at most `max` bytes of it.
    pub fn stream(body: Incoming, counters: Arc<Counters>, max: u64) -> RequestBody {
        RequestBody {
            inner: Some(body),
            counters: Some(counters),
            allowed: max,
        }
    }

    /// True when there is certainly nothing to send.
    pub fn is_empty(&self) -> bool {
        self.inner.as_ref().is_none_or(|b| b.is_end_stream())
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
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = std::task::ready!(Pin::new(inner).poll_frame(cx));
        if let Some(Ok(frame)) = &polled
            && let Some(data) = frame.data_ref()
        {
            let n = data.len() as u64;
            if n > this.allowed {
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
        self.inner
            .as_ref()
            .map(|b| b.size_hint())
            .unwrap_or_else(|| SizeHint::with_exact(0))
    }
}

/// Errors while reading a backend response body.
#[derive(Debug, thiserror::Error)]
pub enum BackendBodyError {
    #[error("backend sent nothing for between_bytes_timeout")]
    Timeout,
    #[error("backend body failed: {0}")]
    Hyper(#[from] hyper::Error),
}

/// A backend response body. When read to the end its connection goes back to the pool;
/// dropped early, the connection is closed (it may still carry unread body bytes).
pub struct BackendBody {
    inner: Incoming,
    timeout: Duration,
    /// Allocated on the first wait, then re-armed; `armed` says whether it runs now.
    sleep: Option<Pin<Box<Sleep>>>,
    armed: bool,
    pool: Option<(Arc<Backend>, super::Conn)>,
    counters: Arc<Counters>,
    /// Connection-limit slot, released when the body is finished or dropped.
    lease: Option<super::Lease>,
}

impl BackendBody {
    pub(super) fn new(
        inner: Incoming,
        timeout: Duration,
        pool: Option<(Arc<Backend>, super::Conn)>,
        counters: Arc<Counters>,
    ) -> BackendBody {
        let mut body = BackendBody {
            inner,
            timeout,
            sleep: None,
            armed: false,
            pool,
            counters,
            lease: None,
        };
        if body.inner.is_end_stream() {
            body.release();
        }
        body
    }

    pub(super) fn with_lease(mut self, lease: super::Lease) -> BackendBody {
        if self.pool.is_some() || !self.inner.is_end_stream() {
            self.lease = Some(lease);
        }
        self
    }

    fn release(&mut self) {
        if let Some((backend, conn)) = self.pool.take() {
            backend.checkin(conn);
        }
        self.lease = None;
    }
}

impl Body for BackendBody {
    type Data = Bytes;
    type Error = BackendBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BackendBodyError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                this.armed = false;
                this.release();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                this.armed = false;
                if this.inner.is_end_stream() {
                    this.release();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.pool = None;
                this.counters.backend_error.inc();
                Poll::Ready(Some(Err(e.into())))
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
                        this.pool = None;
                        this.counters.backend_body_timeout.inc();
                        Poll::Ready(Some(Err(BackendBodyError::Timeout)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
