//! Origin kinds: the one interface through which a backend asks its origin for a response.
//! HTTP/1.1 (`http1.rs`) and HTTP/2 (`h2.rs`) are its two implementations today. What every
//! kind shares lives once, around it, in `Backend` (mod.rs): the connection limit and its
//! queue, the counters, the connect / first-byte / between-bytes timeouts, passive health and
//! the retry of a request that failed on a stale connection; probes' schedule and health
//! bookkeeping (`probe.rs`), directors, retries on another backend and restarts (proxy/) are
//! above it and never ask which kind a backend is.
//!
//! A request goes through a kind in two steps, so the timeouts can run around them:
//! [`Origin::connection`] (an idle or shared connection, or a new one opened with
//! `Backend::open_transport`, which applies the connect timeout and counts connect failures
//! against health) and [`Origin::request`] (the request sent, the response head read: the
//! first-byte timeout runs around it). The body comes back as a [`Source`], which
//! `BackendBody` wraps with the between-bytes timeout and the connection-limit lease.
//! `kind.rs` holds the kinds a backend can be.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;

use super::{Backend, FetchError, RequestBody};

/// The error type of a body stream from an origin kind that is not hyper's.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A body any origin kind can produce as a stream of frames (a file read in pieces, FastCGI
/// stdout records): `BackendBody::from_stream` wraps it like hyper's own.
pub type BoxStream = Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError> + Send>>;

/// One kind of origin: how a request reaches it and its answer comes back.
pub(crate) trait Origin: Send + Sync {
    /// A connection (or a stream on a shared one) that carries one request.
    type Conn: Send;

    /// The ALPN protocol offered when the backend is reached over TLS.
    fn alpn(&self) -> &'static [u8];

    /// A connection for one request and whether it was open already (`reused`): an idle or
    /// shared one unless `fresh`, else a new one opened with
    /// [`Backend::open_transport`] within `connect`.
    async fn connection(
        &self,
        backend: &Arc<Backend>,
        connect: Duration,
        fresh: bool,
    ) -> Result<(Self::Conn, bool), FetchError>;

    /// Sends `req` on `conn` and resolves with the response head once it came
    /// ([`FetchError::Failed`] or [`FetchError::Invalid`] otherwise; the first-byte timeout,
    /// the counters and the framing checks are the caller's).
    async fn request(
        &self,
        backend: &Arc<Backend>,
        conn: Self::Conn,
        req: Request<RequestBody>,
    ) -> Result<Response<Source>, FetchError>;

    /// Whether a request that failed on a reused connection before any response byte is sent
    /// again on a fresh one (when its body is held in memory).
    fn retries_stale(&self) -> bool;

    /// One health probe: `request` is the probe's HTTP/1.1 request text (its request line,
    /// its fields); resolves with the status code answered. The probe's timeout, schedule
    /// and health window are `probe.rs`'s.
    async fn probe(&self, backend: &Backend, request: &[u8]) -> Result<u16, String>;

    /// Idle connections kept for reuse right now (`/backends`).
    fn idle(&self) -> usize;
}

/// A response body as a kind produced it, with what goes back when it ends.
pub(crate) enum Source {
    /// hyper's body (HTTP/1.1, HTTP/2) and what is released once it was read to the end.
    Hyper { body: Incoming, release: Release },
    /// Any other kind's body; what it holds is released when it is dropped.
    Stream(BoxStream),
}

/// What a hyper body gives back at its end.
pub(crate) enum Release {
    Nothing,
    /// An HTTP/1.1 connection whose response was read to the end goes back to the pool.
    Pool(Arc<Backend>, super::conn::Conn),
    /// An HTTP/2 stream slot, held until the body ends or is dropped.
    Slot {
        _held: super::mux::Slot,
    },
}

/// A short plain-text answer a kind gives itself (`404 Not Found`, `403 Forbidden`, a
/// redirect's body): `Content-Type: text/plain` and a known length.
pub(crate) fn plain_response(status: http::StatusCode) -> Response<Source> {
    use http::header::{self, HeaderValue};
    use http_body_util::BodyExt;
    let text = format!(
        "{} {}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    let len = text.len();
    let body: BoxStream =
        Box::pin(http_body_util::Full::new(Bytes::from(text)).map_err(|never| match never {}));
    let mut resp = Response::new(Source::Stream(body));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    resp
}
