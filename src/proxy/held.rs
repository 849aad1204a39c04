//! A request body read before vcl_recv, so that VCL's `std.cache_req_body(size)` can keep it
//! for every backend request of the request (a restart, a VCL retry, a retry on a new
//! connection) — Varnish's cached `req.body`. Only a program that calls the function reads
//! bodies ahead, and only up to the largest size it names; a body that is longer, or that
//! vcl_recv does not keep, is sent once as it would have been (what was read ahead, then the
//! rest from the client).

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http_body_util::BodyExt;

use super::txn::{Step, Txn};
use crate::backend::{BodyPace, BodyTooLarge, BodyTooSlow, RequestBody};

/// What was read of a request body before vcl_recv.
pub(super) struct HeldBody {
    /// The bytes read: the whole body when `rest` is `None`.
    bytes: Bytes,
    /// The rest of a body longer than the program keeps, still to come from the client.
    rest: Option<RequestBody>,
    /// `std.cache_req_body()` kept it: every backend request sends a copy.
    kept: bool,
    /// Not kept, and a backend request took it (sent or dropped it): nothing is left.
    consumed: bool,
    /// Not kept, and a backend request sent (some of) it.
    sent: bool,
}

impl HeldBody {
    /// The body's length, when all of it is here to be kept (`std.cache_req_body()`).
    pub(super) fn whole_len(&self) -> Option<u64> {
        (self.rest.is_none() && !self.consumed).then_some(self.bytes.len() as u64)
    }

    /// Whether a backend request would send something.
    pub(super) fn has_bytes(&self) -> bool {
        !self.consumed && (!self.bytes.is_empty() || self.rest.is_some())
    }

    /// Whether it can be sent again (kept, or nothing to send).
    pub(super) fn resendable(&self) -> bool {
        self.kept || !self.has_bytes()
    }

    /// Nothing of it is left for a backend request (taken, and not kept).
    pub(super) fn gone(&self) -> bool {
        self.consumed
    }

    /// Marks it kept, once `std.cache_req_body()` said so; true the first time.
    pub(super) fn keep(&mut self) -> bool {
        let first = !self.kept && self.whole_len().is_some();
        self.kept |= first;
        first
    }

    pub(super) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The body for one backend request: a copy when kept; else, the first time, what was
    /// read ahead and the rest from the client (`send` false drops them: a GET's body, or
    /// `unset bereq.body`), and nothing after that.
    pub(super) fn take_for(
        &mut self,
        send: bool,
        counters: &std::sync::Arc<crate::stats::Counters>,
    ) -> RequestBody {
        if self.kept {
            return if send {
                RequestBody::bytes(self.bytes.clone(), counters.clone())
            } else {
                RequestBody::empty()
            };
        }
        if self.consumed {
            return RequestBody::empty();
        }
        self.consumed = true;
        let rest = self.rest.take();
        let bytes = std::mem::take(&mut self.bytes);
        if !send {
            return RequestBody::empty();
        }
        self.sent = !bytes.is_empty() || rest.is_some();
        match rest {
            Some(rest) => rest.counted(Some(counters.clone())).after(bytes),
            None => RequestBody::bytes(bytes, counters.clone()),
        }
    }
}

impl Txn {
    /// Reads the request body ahead of vcl_recv, up to `cap` bytes (the largest size the
    /// program's `std.cache_req_body()` calls name) and stops there; then vcl_recv runs. A
    /// body that fails on the way is answered here, and the connection closed: 413 past
    /// `server.max_body_size`, 408 too slow, 400 cut short.
    pub(super) async fn read_body(&mut self, cap: u64) -> Step {
        let Some(incoming) = self.body.take() else {
            return Step::Recv;
        };
        let pace = self.req.extensions.get::<BodyPace>().cloned();
        let mut stream = RequestBody::stream(
            incoming,
            self.proxy.counters.clone(),
            self.proxy.config.server.max_body_size.0,
            pace,
        )
        .counted(None);
        let mut buf = BytesMut::new();
        let rest = loop {
            if buf.len() as u64 > cap {
                break Some(stream);
            }
            match stream.frame().await {
                None => break None,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => {
                    self.close = true;
                    let (status, why) = if e.is::<BodyTooLarge>() {
                        (StatusCode::PAYLOAD_TOO_LARGE, "body-too-large")
                    } else if e.is::<BodyTooSlow>() {
                        (StatusCode::REQUEST_TIMEOUT, "body-too-slow")
                    } else {
                        (StatusCode::BAD_REQUEST, "body-failed")
                    };
                    tracing::debug!(error = %e, "request body failed while read for vcl_recv");
                    return Step::Synth(status, why);
                }
            }
        };
        self.held_body = Some(HeldBody {
            bytes: buf.freeze(),
            rest,
            kept: false,
            consumed: false,
            sent: false,
        });
        Step::Recv
    }

    /// Whether Recv must first read the body (a program that calls `std.cache_req_body()`,
    /// a body not read yet): the most to read.
    pub(super) fn body_to_read(&self) -> Option<u64> {
        let cap = self.proxy.vcl.as_ref()?.program.req_body_keep?;
        let pending = self.held_body.is_none()
            && self.body.as_ref().is_some_and(|b| {
                use http_body::Body as _;
                !b.is_end_stream()
            });
        pending.then_some(cap)
    }

    /// The length `std.cache_req_body()` compares with its size: the body's when it is all
    /// here (0 without one), `None` when longer than the program reads or already taken.
    pub(super) fn body_whole_len(&self) -> Option<u64> {
        match &self.held_body {
            Some(held) => held.whole_len(),
            None => {
                use http_body::Body as _;
                self.body
                    .as_ref()
                    .is_some_and(|b| b.is_end_stream())
                    .then_some(0)
            }
        }
    }

    /// Whether a backend request of this request would send a body.
    pub(super) fn has_body(&self) -> bool {
        use http_body::Body as _;
        match &self.held_body {
            Some(held) => held.has_bytes(),
            None => self.body.as_ref().is_some_and(|b| !b.is_end_stream()),
        }
    }

    /// Whether a backend request can be sent again with the same body.
    pub(super) fn body_resendable(&self) -> bool {
        match &self.held_body {
            Some(held) => held.resendable(),
            None => !self.has_body(),
        }
    }

    /// A backend request that would send a body (`send`) after an earlier one sent the
    /// client's, which VCL did not keep: it cannot be sent twice (Varnish: "Uncached req.body
    /// can only be consumed once"), so that request fails rather than go without it.
    pub(super) fn body_spent(&self, send: bool) -> bool {
        send && match &self.held_body {
            Some(held) => held.sent,
            None => self.body_sent,
        }
    }

    /// Nothing of the client's body is left for a backend request: a backend request took it
    /// and VCL did not keep it.
    pub(super) fn body_gone(&self) -> bool {
        match &self.held_body {
            Some(held) => held.gone(),
            None => self.body.is_none(),
        }
    }
}
