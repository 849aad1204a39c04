//! Backends: one origin server each, with a keep-alive connection pool, a connection limit with
//! a bounded queue, health state, and the fetch timeouts (connect, first byte, between bytes).
//!
//! Architecture invariant: only this module opens connections to origins.

mod body;
mod conn;
pub(crate) mod connector;
pub mod director;
pub mod health;
mod mux;
pub mod probe;
pub mod saint;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use body::{BackendBody, BodyOutcome, BodyPace, BodyTooLarge, BodyTooSlow, RequestBody};
use conn::{Conn, HeadLimited};
use health::Health;

use crate::config::{BackendConfig, Config, ProbeConfig, ProbeRef};
use crate::stats::{BackendCounters, Counters};

/// Why a backend fetch failed; decides the status Shellac answers with and whether another
/// backend may be tried.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("connection to backend {0} failed: {1}")]
    Connect(String, std::io::Error),
    #[error("connection to backend {0} timed out")]
    ConnectTimeout(String),
    #[error("backend {0} is at max_connections and its queue is full")]
    Busy(String),
    #[error("backend {0} sent no response within first_byte_timeout")]
    FirstByteTimeout(String),
    #[error("backend {0} failed: {1}")]
    Failed(String, hyper::Error),
    #[error("backend {0} sent an invalid response: {1}")]
    Invalid(String, &'static str),
}

impl FetchError {
    /// 503 when the backend is unreachable or busy, 504 when it is too slow, 502 when it
    /// misbehaves.
    pub fn status(&self) -> StatusCode {
        match self {
            FetchError::Connect(..) | FetchError::ConnectTimeout(_) | FetchError::Busy(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            FetchError::FirstByteTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            FetchError::Failed(..) | FetchError::Invalid(..) => StatusCode::BAD_GATEWAY,
        }
    }

    /// Word for `Cache-Status` detail and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            FetchError::Connect(..) => "backend-connect-failed",
            FetchError::ConnectTimeout(_) => "backend-connect-timeout",
            FetchError::Busy(_) => "backend-busy",
            FetchError::FirstByteTimeout(_) => "backend-first-byte-timeout",
            FetchError::Failed(..) => "backend-error",
            FetchError::Invalid(..) => "backend-invalid-response",
        }
    }

    /// True when the backend certainly did not start answering, so an idempotent request may
    /// be tried on another backend.
    pub fn before_response(&self) -> bool {
        match self {
            FetchError::Connect(..) | FetchError::ConnectTimeout(_) | FetchError::Busy(_) => true,
            FetchError::FirstByteTimeout(_) | FetchError::Invalid(..) => false,
            FetchError::Failed(_, e) => is_stale_connection(e),
        }
    }
}

struct Idle {
    conn: Conn,
    since: Instant,
}

/// Timeouts of one backend request that replace the backend's own (VCL's
/// `bereq.connect_timeout`, `bereq.first_byte_timeout`, `bereq.between_bytes_timeout`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestTimeouts {
    pub connect: Option<Duration>,
    pub first_byte: Option<Duration>,
    pub between_bytes: Option<Duration>,
}

/// VCL's `bereq.retry_connect = false`, in a backend request's extensions: a request that
/// fails on a reused connection is not tried again on a new one.
#[derive(Clone, Copy, Debug)]
pub struct NoConnectRetry;

/// One origin server, its pool, limit and health.
pub struct Backend {
    pub config: BackendConfig,
    pub probe: Option<ProbeConfig>,
    pub health: Health,
    /// Objects VCL's saint mode holds this backend off for (`saint.rs`).
    pub saint: saint::Saint,
    pub stats: BackendCounters,
    pub(crate) counters: Arc<Counters>,
    tcp_nodelay: bool,
    /// TCP or TLS (`connector.rs`).
    pub(crate) connector: connector::Connector,
    /// `server.max_response_header_size`: every response head is held to it exactly
    /// (`conn::HeadLimited`, 502 beyond it); also hyper's read buffer bound.
    max_response_head: usize,
    idle: Mutex<Vec<Idle>>,
    limit: Option<Arc<Semaphore>>,
    queued: AtomicUsize,
    in_flight: AtomicI64,
    /// `protocol = "h2"`: the multiplexed connections (`mux.rs`); the pool above stays empty.
    mux: Option<mux::Mux>,
}

/// Held while a request is in flight on a backend: the connection-limit permit, the
/// in-flight gauge and, over HTTP/2, the stream slot. Released when the response body is
/// finished or dropped.
pub(crate) struct Lease {
    backend: Arc<Backend>,
    _permit: Option<OwnedSemaphorePermit>,
    slot: Option<mux::Slot>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.backend.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Backend {
    pub fn new(config: BackendConfig, whole: &Config, counters: Arc<Counters>) -> Arc<Backend> {
        let mux = (config.protocol == crate::config::BackendProtocol::H2)
            .then(|| mux::Mux::new(config.max_streams));
        let probe = match &config.probe {
            Some(ProbeRef::Inline(p)) => Some(p.clone()),
            Some(ProbeRef::Named(name)) => whole.probes.iter().find(|p| &p.name == name).cloned(),
            None => None,
        };
        Arc::new(Backend {
            tcp_nodelay: config.tcp_nodelay.unwrap_or(whole.server.tcp_nodelay),
            connector: connector::Connector::for_backend(&config),
            max_response_head: response_head_limit(whole),
            health: Health::new(
                probe.as_ref(),
                config.passive_failures,
                config.passive_cooldown.0,
            ),
            saint: saint::Saint::default(),
            limit: (config.max_connections > 0)
                .then(|| Arc::new(Semaphore::new(config.max_connections))),
            probe,
            config,
            stats: BackendCounters::default(),
            counters,
            idle: Mutex::new(Vec::new()),
            queued: AtomicUsize::new(0),
            in_flight: AtomicI64::new(0),
            mux,
        })
    }

    /// Whether `config` (within `whole`) would build a backend identical to this one. The
    /// `weight` is left out: it is the directors' (which read it from the configuration they
    /// are built from, not from the backend), so a reload that changes only a weight — a VCL
    /// that adds the backend to a weighted director — keeps the pool, as Varnish keeps a
    /// backend's connections across `vcl.use`.
    pub fn same_setup(&self, config: &BackendConfig, whole: &Config) -> bool {
        let config = &BackendConfig {
            weight: self.config.weight,
            ..config.clone()
        };
        let probe = match &config.probe {
            Some(ProbeRef::Inline(p)) => Some(p.clone()),
            Some(ProbeRef::Named(name)) => whole.probes.iter().find(|p| &p.name == name).cloned(),
            None => None,
        };
        let nodelay = config.tcp_nodelay.unwrap_or(whole.server.tcp_nodelay);
        let head = response_head_limit(whole);
        // The config types carry no PartialEq; their Debug form lists every field.
        format!(
            "{:?}",
            (
                &self.config,
                &self.probe,
                self.tcp_nodelay,
                self.max_response_head
            )
        ) == format!("{:?}", (config, &probe, nodelay, head))
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Idle pooled connections right now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().map(|i| i.len()).unwrap_or(0)
    }

    /// Requests in flight right now.
    pub fn in_flight(&self) -> i64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Requests waiting for a connection slot right now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// `Host` for probes and for requests without one: `host_header` if set, else the host,
    /// with the port unless it is 80.
    pub fn host_header(&self) -> String {
        if let Some(h) = &self.config.host_header {
            return h.clone();
        }
        let host = if self.config.host.contains(':') {
            format!("[{}]", self.config.host)
        } else {
            self.config.host.clone()
        };
        if self.config.port == 80 {
            host
        } else {
            format!("{host}:{}", self.config.port)
        }
    }

    /// Sends `req` and returns the response head; the body streams with the between-bytes
    /// timeout and returns its connection to the pool when read to the end. A
    /// [`RequestTimeouts`] in the request's extensions (VCL's `bereq.*_timeout`) replaces the
    /// backend's own timeouts for this request.
    ///
    /// A request whose body is held in memory (none, or one VCL kept) that fails on a reused
    /// connection before any response byte is retried once on a fresh connection (the origin
    /// may have closed the idle connection), unless its extensions hold [`NoConnectRetry`].
    pub async fn send(
        self: &Arc<Self>,
        req: Request<RequestBody>,
    ) -> Result<Response<BackendBody>, FetchError> {
        let lease = self.lease().await?;
        self.counters.backend_req.inc();
        self.stats.req.inc();
        if let Some(mux) = &self.mux {
            return self.send_h2(mux, lease, req).await;
        }
        let connect_timeout = req
            .extensions()
            .get::<RequestTimeouts>()
            .and_then(|t| t.connect)
            .unwrap_or(self.config.connect_timeout.0);
        let retry_copy = req
            .extensions()
            .get::<NoConnectRetry>()
            .is_none()
            .then(|| req.body().try_clone())
            .flatten()
            .map(|body| clone_head(&req).map(|_| body));
        let (conn, reused) = match self.checkout().await {
            Some(c) => (c, true),
            None => (self.connect(connect_timeout).await?, false),
        };
        match self.exchange(conn, req).await {
            Err(FetchError::Failed(_, e))
                if reused && retry_copy.is_some() && is_stale_connection(&e) =>
            {
                self.counters.backend_retry.inc();
                let conn = self.connect(connect_timeout).await?;
                let req = retry_copy.expect("checked above");
                self.exchange(conn, req).await
            }
            other => other,
        }
        .map(|resp| resp.map(|body| body.with_lease(lease)))
    }

    /// [`Backend::send`] over HTTP/2: a stream on a shared connection (a new connection
    /// when every one is full), the request in HTTP/2's form.
    async fn send_h2(
        self: &Arc<Self>,
        mux: &mux::Mux,
        mut lease: Lease,
        req: Request<RequestBody>,
    ) -> Result<Response<BackendBody>, FetchError> {
        let slot = match mux.take() {
            Some(slot) => slot,
            None => {
                // One connection opened at a time; those waiting take its streams.
                let _opening = mux.opening.lock().await;
                match mux.take() {
                    Some(slot) => slot,
                    None => self.connect_h2(mux).await?,
                }
            }
        };
        if slot.reused() {
            self.counters.backend_reuse.inc();
            self.stats.reuse.inc();
        }
        let req = self.h2_form(req);
        let mut sender = slot.sender();
        let timeout = self.config.first_byte_timeout.0;
        let sent = tokio::time::timeout(timeout, async {
            sender.ready().await?;
            sender.send_request(req).await
        });
        let resp = match sent.await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => {
                self.counters.backend_error.inc();
                self.stats.error.inc();
                return Err(FetchError::Failed(self.config.name.clone(), e));
            }
            Err(_) => {
                self.counters.backend_timeout.inc();
                self.stats.error.inc();
                return Err(FetchError::FirstByteTimeout(self.config.name.clone()));
            }
        };
        if let Err(why) = check_response(&resp, false) {
            self.counters.backend_invalid.inc();
            self.stats.error.inc();
            return Err(FetchError::Invalid(self.config.name.clone(), why));
        }
        lease.slot = Some(slot);
        Ok(resp.map(|incoming| {
            BackendBody::new(
                incoming,
                self.config.between_bytes_timeout.0,
                None,
                self.counters.clone(),
            )
            .with_lease(lease)
        }))
    }

    /// The HTTP/1.1-shaped backend request in HTTP/2's form: the target absolute (its
    /// authority the request's `Host`, which becomes `:authority`), version 2, no field that
    /// is connection-specific in HTTP/2.
    fn h2_form(&self, mut req: Request<RequestBody>) -> Request<RequestBody> {
        let authority = req
            .headers_mut()
            .remove(http::header::HOST)
            .and_then(|h| h.to_str().ok().map(str::to_owned))
            .unwrap_or_else(|| self.host_header());
        let scheme = if self.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let path = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        if let Ok(uri) = format!("{scheme}://{authority}{path}").parse() {
            *req.uri_mut() = uri;
        }
        *req.version_mut() = http::Version::HTTP_2;
        let headers = req.headers_mut();
        for name in [
            http::header::CONNECTION,
            http::header::TRANSFER_ENCODING,
            http::header::UPGRADE,
            http::header::HeaderName::from_static("keep-alive"),
            http::header::HeaderName::from_static("proxy-connection"),
        ] {
            headers.remove(name);
        }
        if headers
            .get(http::header::TE)
            .is_some_and(|v| v.as_bytes() != b"trailers")
        {
            headers.remove(http::header::TE);
        }
        req
    }

    /// Opens an HTTP/2 connection (TCP with prior knowledge, or TLS with ALPN `h2`) and adds
    /// it to the mux; its task closes it after `idle_timeout` without a request.
    async fn connect_h2(self: &Arc<Self>, mux: &mux::Mux) -> Result<mux::Slot, FetchError> {
        let name = &self.config.name;
        let stream = self.open_transport(self.config.connect_timeout.0).await?;
        let (sender, conn) =
            hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                .max_header_list_size(u32::try_from(self.max_response_head).unwrap_or(u32::MAX))
                .handshake(TokioIo::new(stream))
                .await
                .map_err(|e| FetchError::Failed(name.clone(), e))?;
        self.counters.backend_conn.inc();
        self.counters.backend_h2_conn.inc();
        self.stats.conn.inc();
        let (slot, busy) = mux.add(sender);
        let name = name.clone();
        let idle = self.config.idle_timeout.0;
        tokio::spawn(async move {
            let conn = std::pin::pin!(conn);
            let mut conn = conn;
            let mut idle_since: Option<Instant> = None;
            loop {
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!(backend = %name, error = %e, "backend HTTP/2 connection closed");
                        }
                        return;
                    }
                    _ = tokio::time::sleep(idle.min(Duration::from_secs(1))) => {
                        if busy.streams() > 0 {
                            idle_since = None;
                        } else if idle_since.get_or_insert_with(Instant::now).elapsed() >= idle {
                            return; // dropping the connection closes it
                        }
                    }
                }
            }
        });
        Ok(slot)
    }

    /// Waits for a connection slot under `max_connections` (bounded queue, bounded wait).
    async fn lease(self: &Arc<Self>) -> Result<Lease, FetchError> {
        let permit = match &self.limit {
            None => None,
            Some(sem) => match sem.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    let waiting = self.queued.fetch_add(1, Ordering::Relaxed);
                    let got = if waiting >= self.config.max_queue {
                        None
                    } else {
                        tokio::time::timeout(
                            self.config.connect_timeout.0,
                            sem.clone().acquire_owned(),
                        )
                        .await
                        .ok()
                        .and_then(Result::ok)
                    };
                    self.queued.fetch_sub(1, Ordering::Relaxed);
                    match got {
                        Some(p) => Some(p),
                        None => {
                            self.counters.backend_busy.inc();
                            self.stats.busy.inc();
                            return Err(FetchError::Busy(self.config.name.clone()));
                        }
                    }
                }
            },
        };
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        Ok(Lease {
            backend: self.clone(),
            _permit: permit,
            slot: None,
        })
    }

    async fn exchange(
        self: &Arc<Self>,
        mut conn: Conn,
        req: Request<RequestBody>,
    ) -> Result<Response<BackendBody>, FetchError> {
        let timeouts = req.extensions().get::<RequestTimeouts>().copied();
        let timeout = timeouts
            .and_then(|t| t.first_byte)
            .unwrap_or(self.config.first_byte_timeout.0);
        let between_bytes = timeouts
            .and_then(|t| t.between_bytes)
            .unwrap_or(self.config.between_bytes_timeout.0);
        let upgrade = req.headers().contains_key(http::header::UPGRADE);
        conn.expect_head();
        let resp = match tokio::time::timeout(timeout, conn.sender.send_request(req)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) if conn::is_head_too_large(&e) => {
                self.counters.backend_invalid.inc();
                self.stats.error.inc();
                return Err(FetchError::Invalid(
                    self.config.name.clone(),
                    "response head larger than max_response_header_size",
                ));
            }
            Ok(Err(e)) => {
                self.counters.backend_error.inc();
                self.stats.error.inc();
                return Err(FetchError::Failed(self.config.name.clone(), e));
            }
            Err(_) => {
                self.counters.backend_timeout.inc();
                self.stats.error.inc();
                return Err(FetchError::FirstByteTimeout(self.config.name.clone()));
            }
        };
        if let Err(why) = check_response(&resp, upgrade) {
            // Dropping the response and the sender closes the connection: never pooled.
            self.counters.backend_invalid.inc();
            self.stats.error.inc();
            return Err(FetchError::Invalid(self.config.name.clone(), why));
        }
        // A connection that switched protocols belongs to the tunnel, never to the pool.
        let keep = self.config.max_idle > 0 && resp.status() != StatusCode::SWITCHING_PROTOCOLS;
        Ok(resp.map(|incoming| {
            BackendBody::new(
                incoming,
                between_bytes,
                keep.then(|| (self.clone(), conn)),
                self.counters.clone(),
            )
        }))
    }

    /// Takes a usable idle connection (LIFO: the warmest one), dropping stale ones.
    async fn checkout(&self) -> Option<Conn> {
        loop {
            let idle = self.idle.lock().ok()?.pop()?;
            if idle.since.elapsed() > self.config.idle_timeout.0 || idle.conn.sender.is_closed() {
                continue;
            }
            let mut conn = idle.conn;
            // The connection task may still be finishing the previous exchange.
            match tokio::time::timeout(Duration::from_millis(100), conn.sender.ready()).await {
                Ok(Ok(())) => {
                    self.counters.backend_reuse.inc();
                    self.stats.reuse.inc();
                    return Some(conn);
                }
                _ => continue,
            }
        }
    }

    /// Returns a connection whose last response was read to the end.
    pub(crate) fn checkin(&self, conn: Conn) {
        if conn.sender.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            let now = Instant::now();
            let max_idle = self.config.idle_timeout.0;
            idle.retain(|i| now.duration_since(i.since) < max_idle && !i.conn.sender.is_closed());
            if idle.len() < self.config.max_idle {
                idle.push(Idle { conn, since: now });
                self.counters.backend_recycle.inc();
                self.stats.recycle.inc();
            }
        }
    }

    async fn connect(&self, timeout: Duration) -> Result<Conn, FetchError> {
        let name = &self.config.name;
        let stream = self.open_transport(timeout).await?;
        let watch = Arc::new(AtomicBool::new(false));
        let stream = HeadLimited::new(stream, self.max_response_head, watch.clone());
        // hyper's buffer must hold a head at the limit; the exact bound is `HeadLimited`'s.
        let (sender, conn) = http1::Builder::new()
            .max_buf_size(self.max_response_head.max(8192).saturating_add(8192))
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| FetchError::Failed(name.clone(), e))?;
        self.counters.backend_conn.inc();
        self.stats.conn.inc();
        let name = name.clone();
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(backend = %name, error = %e, "backend connection closed");
            }
        });
        Ok(Conn::new(sender, watch))
    }

    /// A connection to the backend, TCP or TLS (`connector.rs`), within `connect_timeout`;
    /// a failure counts against the backend's health.
    async fn open_transport(&self, timeout: Duration) -> Result<connector::Transport, FetchError> {
        let name = &self.config.name;
        let opened = self
            .connector
            .connect(
                &self.config.host,
                self.config.port,
                timeout,
                self.tcp_nodelay,
                &self.counters,
            )
            .await;
        match opened {
            Ok(s) => {
                self.health.connect_ok();
                Ok(s)
            }
            Err(connector::ConnectError::Io(e)) => {
                self.connect_failed(&e.to_string());
                Err(FetchError::Connect(name.clone(), e))
            }
            Err(connector::ConnectError::Timeout) => {
                self.connect_failed("connect timeout");
                Err(FetchError::ConnectTimeout(name.clone()))
            }
        }
    }

    fn connect_failed(&self, why: &str) {
        self.counters.backend_fail.inc();
        self.stats.fail.inc();
        if self.health.connect_failed() {
            tracing::warn!(
                backend = self.name(),
                "backend sick for {:?}: {} consecutive connection failures, last: {why}",
                self.config.passive_cooldown.0,
                self.config.passive_failures
            );
        }
    }

    /// The backend's address, for display.
    pub fn address(&self) -> String {
        match self.config.host.parse::<std::net::IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, self.config.port).to_string(),
            Err(_) => format!("{}:{}", self.config.host, self.config.port),
        }
    }

    /// `/backends` entry.
    pub fn describe(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "name": self.name(),
            "address": self.address(),
            "healthy": self.health.is_healthy(),
            "in_flight": self.in_flight(),
            "queued": self.queued(),
            "idle": self.idle_count(),
            "max_connections": self.config.max_connections,
            "weight": self.config.weight,
            "passive_sick_ms": self.health.passive_sick_ms(),
        });
        if let Some((good, window, threshold)) = self.health.probe_score() {
            v["probe"] = serde_json::json!({
                "good": good,
                "window": window,
                "threshold": threshold,
                "history": self.health.history(),
                "last": self.health.last_probe(),
            });
        }
        for (name, value) in self.stats.snapshot() {
            v[name] = value.into();
        }
        v
    }
}

/// The framing and status rules hyper does not enforce on responses (RFC 9112 §6): a status
/// from 200 to 599, or 101 when the request asked to `upgrade` (hyper consumes other 1xx);
/// `Transfer-Encoding` exactly `chunked` (any other coding would reach clients undecoded,
/// since Shellac rebuilds framing) and never together with `Content-Length`; one valid
/// `Content-Length` (identical repeats allowed).
pub fn check_response<B>(resp: &Response<B>, upgrade: bool) -> Result<(), &'static str> {
    let status = resp.status().as_u16();
    if !((200..600).contains(&status) || (status == 101 && upgrade)) {
        return Err("status");
    }
    let headers = resp.headers();
    let mut te = headers.get_all(http::header::TRANSFER_ENCODING).iter();
    let has_te = match (te.next(), te.next()) {
        (None, _) => false,
        (Some(v), None) if v.as_bytes().trim_ascii().eq_ignore_ascii_case(b"chunked") => true,
        _ => return Err("transfer-encoding"),
    };
    let mut length: Option<&[u8]> = None;
    for v in headers.get_all(http::header::CONTENT_LENGTH) {
        for item in v.as_bytes().split(|b| *b == b',').map(<[u8]>::trim_ascii) {
            if item.is_empty() || item.len() > 19 || !item.iter().all(u8::is_ascii_digit) {
                return Err("content-length");
            }
            match length {
                Some(prev) if prev != item => return Err("content-length"),
                _ => length = Some(item),
            }
        }
    }
    if has_te && length.is_some() {
        return Err("content-length-and-transfer-encoding");
    }
    Ok(())
}

/// `server.max_response_header_size` in bytes.
fn response_head_limit(whole: &Config) -> usize {
    usize::try_from(whole.server.max_response_header_size.0).unwrap_or(usize::MAX)
}

fn clone_head(req: &Request<RequestBody>) -> Request<RequestBody> {
    let mut copy = Request::new(RequestBody::empty());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    // The 1xx callback (`hyper::ext::on_informational`) goes with the retry.
    *copy.extensions_mut() = req.extensions().clone();
    copy
}

/// Errors that mean "the connection died before an answer", not "the backend answered badly".
fn is_stale_connection(e: &hyper::Error) -> bool {
    e.is_canceled() || e.is_incomplete_message() || e.is_closed() || {
        let mut source = std::error::Error::source(e);
        let mut io = false;
        while let Some(s) = source {
            if s.downcast_ref::<std::io::Error>().is_some() {
                io = true;
                break;
            }
            source = s.source();
        }
        io
    }
}
