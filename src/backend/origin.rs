//! Origin kinds: the one interface through which a backend asks its origin for a response.
//! HTTP/1.1 (`http1.rs`), HTTP/2 (`h2.rs`), static files (`files/`) and FastCGI (`fastcgi/`)
//! implement it. What every kind shares lives once, around it, in `Backend` (mod.rs): the
//! connection limit and its queue (`limit.rs`), the counters, the connect / first-byte /
//! between-bytes timeouts, passive health and the retry of a request that failed on a stale
//! connection; probes' schedule and health bookkeeping (`probe.rs`), directors, retries on
//! another backend and restarts (proxy/) are above it and never ask which kind a backend is.
//!
//! A kind is given the backend's [`Endpoint`] (configuration, connector, health, counters),
//! never the `Backend` that holds it. A request goes through a kind in two steps, so the
//! timeouts can run around them: [`Origin::connection`] (an idle or shared connection, or a
//! new one opened with `Endpoint::open_transport`, which applies the connect timeout and
//! counts connect failures against health) and [`Origin::request`] (the request sent, the
//! response head read: the first-byte timeout runs around it). The body comes back as a
//! [`Source`] (`source.rs`), which `BackendBody` wraps with the between-bytes timeout and the
//! connection-limit lease. `kind.rs` holds the kinds a backend can be.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};

use super::endpoint::Endpoint;
use super::error::FetchError;
use super::request_body::RequestBody;
use super::source::Source;

/// One kind of origin: how a request reaches it and its answer comes back.
pub(crate) trait Origin: Send + Sync {
    /// A connection (or a stream on a shared one) that carries one request.
    type Conn: Send;

    /// The ALPN protocol offered when the backend is reached over TLS.
    fn alpn(&self) -> &'static [u8];

    /// A connection for one request and whether it was open already (`reused`): an idle or
    /// shared one unless `fresh`, else a new one opened with
    /// [`Endpoint::open_transport`] within `connect`.
    async fn connection(
        &self,
        endpoint: &Arc<Endpoint>,
        connect: Duration,
        fresh: bool,
    ) -> Result<(Self::Conn, bool), FetchError>;

    /// Sends `req` on `conn` and resolves with the response head once it came
    /// ([`FetchError::Failed`] or [`FetchError::Invalid`] otherwise; the first-byte timeout,
    /// the counters and the framing checks are the caller's).
    async fn request(
        &self,
        endpoint: &Arc<Endpoint>,
        conn: Self::Conn,
        req: Request<RequestBody>,
    ) -> Result<Response<Source>, FetchError>;

    /// Whether a request that failed on a reused connection before any response byte is sent
    /// again on a fresh one (when its body is held in memory).
    fn retries_stale(&self) -> bool;

    /// One health probe: `request` is the probe's HTTP/1.1 request text (its request line,
    /// its fields); resolves with the status code answered. The probe's timeout, schedule
    /// and health window are `probe.rs`'s.
    async fn probe(&self, endpoint: &Endpoint, request: &[u8]) -> Result<u16, String>;

    /// Idle connections kept for reuse right now (`/backends`).
    fn idle(&self) -> usize;
}
