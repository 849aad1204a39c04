//! The client request's body as the steps see it: read ahead of vcl_recv (step `ReadBody`,
//! kept in a [`HeldBody`]), its length, and whether a backend request may still send it.

use bytes::BytesMut;
use http::StatusCode;
use http_body_util::BodyExt;

use super::held::HeldBody;
use super::txn::{Step, Txn};
use crate::backend::{BodyPace, BodyTooLarge, BodyTooSlow, RequestBody};

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
        self.held_body = Some(HeldBody::read(buf.freeze(), rest));
        Step::Recv
    }

    /// Whether Recv must first read the body (a program that calls `std.cache_req_body()`,
    /// a body not read yet): the most to read.
    pub(super) fn body_to_read(&self) -> Option<u64> {
        let cap = self.policy.body_to_read(self)?;
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
            Some(held) => held.sent(),
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
