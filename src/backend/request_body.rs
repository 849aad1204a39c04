//! The body of a request sent to a backend ([`RequestBody`]): nothing, bytes held in memory,
//! or the client's body streamed through — held to `server.max_body_size`, paced
//! (`pace.rs`) when it comes over HTTP/2, its bytes counted in `s_req_bytes`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::pace::{BodyPace, BodyTooLarge, BodyTooSlow, Pacer};
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
            pacer: pace.map(|pace| Box::new(Pacer::new(pace))),
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
                    p.too_slow();
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
                    p.too_large();
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
