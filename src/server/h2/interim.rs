//! 1xx responses from a backend (103 Early Hints, 102 Processing) to an HTTP/2 client: each a
//! HEADERS frame without END_STREAM on the request's stream, ahead of the final response's
//! HEADERS (RFC 9113 §8.1), never after them.
//!
//! hyper's HTTP/2 server keeps each stream's `SendResponse` to itself, so the patched h2
//! (vendor/h2/PATCHES.md §11) hands the session a connection-wide handle with its first
//! request ([`take_handle`]); a request that waits for its backend gets its stream from it by
//! its number on the connection. A hit never waits: it touches none of this.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use http::{Request, Response};
use hyper::body::Incoming;

use crate::proxy::{InterimHead, InterimSink, MAX_INTERIM};
use crate::stats::Counters;

/// The connection's handle, from the request that carries it (the first one, normally).
pub(super) fn take_handle(req: &mut Request<Incoming>) -> Option<h2::server::Interim> {
    req.extensions_mut().remove::<h2::server::Interim>()
}

/// Where the 1xx heads of one request on an HTTP/2 connection go.
pub(super) struct StreamInterim {
    /// `None`: the request's stream could not be told apart (h2's count of streams and the
    /// session's count of requests disagree): every head is dropped, none misdirected.
    stream: Option<h2::server::InterimStream>,
    sent: AtomicUsize,
    counters: Arc<Counters>,
}

impl StreamInterim {
    /// The sink for the `nth` request (from 1) the session was given on the connection.
    pub(super) fn new(
        conn: Option<&h2::server::Interim>,
        nth: u64,
        counters: Arc<Counters>,
    ) -> StreamInterim {
        StreamInterim {
            stream: conn.and_then(|c| c.stream(nth)),
            sent: AtomicUsize::new(0),
            counters,
        }
    }
}

impl InterimSink for StreamInterim {
    /// Queues the head on the stream (h2 writes it before the final response, which the
    /// fetch has not handed over yet); `false` (dropped) past [`MAX_INTERIM`] for the request,
    /// or when the stream was reset or already answered.
    fn send(&self, head: InterimHead) -> bool {
        let Some(stream) = &self.stream else {
            return false;
        };
        if self.sent.fetch_add(1, Ordering::Relaxed) >= MAX_INTERIM {
            return false;
        }
        let mut resp = Response::new(());
        *resp.status_mut() = head.status;
        *resp.headers_mut() = head.fields;
        // The filtering the final response gets (`finish`): nothing connection-specific.
        super::response::strip_connection_specific(resp.headers_mut());
        match stream.send_informational(resp) {
            Ok(()) => {
                self.counters.client_interim.inc();
                true
            }
            Err(e) => {
                tracing::debug!(stream = ?stream.stream_id(), error = %e, "1xx not sent");
                false
            }
        }
    }
}
