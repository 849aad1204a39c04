//! A request body read before vcl_recv, so that VCL's `std.cache_req_body(size)` can keep it
//! for every backend request of the request (a restart, a VCL retry, a retry on a new
//! connection) — Varnish's cached `req.body`. Only a program that calls the function reads
//! bodies ahead, and only up to the largest size it names; a body that is longer, or that
//! vcl_recv does not keep, is sent once as it would have been (what was read ahead, then the
//! rest from the client).

use bytes::Bytes;

use crate::backend::RequestBody;

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
    /// What was read ahead: `bytes`, and the rest of the body still to come, if any.
    pub(super) fn read(bytes: Bytes, rest: Option<RequestBody>) -> HeldBody {
        HeldBody {
            bytes,
            rest,
            kept: false,
            consumed: false,
            sent: false,
        }
    }

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

    /// A backend request sent (some of) it, and it was not kept.
    pub(super) fn sent(&self) -> bool {
        self.sent
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
