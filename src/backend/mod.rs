//! Backends: one origin each, of one kind (`origin.rs`: HTTP/1.1, HTTP/2, static files,
//! FastCGI), with what every
//! kind shares around it: a connection limit with a bounded queue, health state, counters, the
//! fetch timeouts (connect, first byte, between bytes) and the retry on a stale connection.
//!
//! Architecture invariant: only this module opens connections to origins.

mod body;
mod conn;
pub(crate) mod connector;
pub mod director;
mod fastcgi;
mod files;
mod h2;
pub mod health;
mod http1;
mod kind;
mod mux;
mod origin;
pub mod probe;
pub mod saint;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use body::{BackendBody, BodyOutcome, BodyPace, BodyTooLarge, BodyTooSlow, RequestBody};
pub(crate) use files::TryNext;
pub(crate) use files::zero_copy::{Region, Regions, ZeroCopy, placeholder_offset};
use health::Health;
pub use origin::{BoxError, BoxStream};

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
    Failed(String, BoxError),
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
            FetchError::Failed(_, e) => is_stale_connection(&**e),
        }
    }
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

/// Who asked, in a backend request's extensions (put there by the proxy): what a FastCGI
/// application reads as REMOTE_ADDR, HTTPS, SERVER_ADDR and SERVER_PROTOCOL.
#[derive(Clone, Copy, Debug)]
pub struct ClientInfo {
    /// The client (after trusted proxies).
    pub addr: SocketAddr,
    /// The request came over TLS.
    pub https: bool,
    /// The address the connection was accepted on, when the session knows it.
    pub local: Option<SocketAddr>,
    /// "HTTP/1.1", "HTTP/2.0", "HTTP/1.0".
    pub protocol: &'static str,
}

/// A site's document root (`[[site]] root`), in a backend request's extensions: what a
/// `files` or `fastcgi` backend serves or runs scripts from instead of its own `root`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocRoot {
    /// The root as configured, without a trailing `/` (DOCUMENT_ROOT).
    pub written: Arc<str>,
    /// Its real path (links resolved; as written when it cannot be resolved): what
    /// containment checks compare with.
    pub real: Arc<std::path::Path>,
}

impl DocRoot {
    /// The root `path` as a request carries it (resolves links: blocking, at configuration).
    pub fn new(path: &std::path::Path) -> DocRoot {
        let written = path.to_string_lossy().trim_end_matches('/').to_string();
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        DocRoot {
            written: written.into(),
            real: real.into(),
        }
    }
}

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
    /// `server.max_response_header_size` (the kinds hold responses to it).
    max_response_head: usize,
    /// `server.max_response_headers` (HTTP/1.1: hyper's table; checked here for every kind).
    max_response_fields: usize,
    /// `server.max_response_field_size` (HTTP/1.1: `HeadLimited` holds each field line to it).
    max_response_field: usize,
    limit: Option<Arc<Semaphore>>,
    queued: AtomicUsize,
    in_flight: AtomicI64,
    /// What the origin is and how it is spoken to (`origin.rs`).
    kind: kind::Kind,
}

/// Held while a request is in flight on a backend: the connection-limit permit and the
/// in-flight gauge. Released when the response body is finished or dropped.
pub(crate) struct Lease {
    backend: Arc<Backend>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.backend.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One request waiting for a connection slot, counted in `Backend::queued` while it lives.
struct InQueue<'a>(&'a AtomicUsize);

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Backend {
    pub fn new(config: BackendConfig, whole: &Config, counters: Arc<Counters>) -> Arc<Backend> {
        let max_response_head = response_head_limit(whole);
        let max_response_fields = whole.server.max_response_headers;
        let max_response_field = response_field_limit(whole);
        let kind = kind::Kind::for_backend(
            &config,
            max_response_head,
            max_response_fields,
            max_response_field,
        );
        let probe = match &config.probe {
            Some(ProbeRef::Inline(p)) => Some(p.clone()),
            Some(ProbeRef::Named(name)) => whole.probes.iter().find(|p| &p.name == name).cloned(),
            None => None,
        };
        Arc::new(Backend {
            tcp_nodelay: config.tcp_nodelay.unwrap_or(whole.server.tcp_nodelay),
            connector: connector::Connector::for_backend(&config, kind.alpn()),
            max_response_head,
            max_response_fields,
            max_response_field,
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
            queued: AtomicUsize::new(0),
            in_flight: AtomicI64::new(0),
            kind,
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
        let fields = whole.server.max_response_headers;
        // The config types carry no PartialEq; their Debug form lists every field.
        format!(
            "{:?}",
            (
                &self.config,
                &self.probe,
                self.tcp_nodelay,
                self.max_response_head,
                self.max_response_fields,
                self.max_response_field,
            )
        ) == format!(
            "{:?}",
            (
                config,
                &probe,
                nodelay,
                head,
                fields,
                response_field_limit(whole)
            )
        )
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Idle pooled connections right now.
    pub fn idle_count(&self) -> usize {
        self.kind.idle()
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
    /// timeout and gives its connection back (to the pool, or its stream slot) when read to
    /// the end. A [`RequestTimeouts`] in the request's extensions (VCL's `bereq.*_timeout`)
    /// replaces the backend's own timeouts for this request.
    ///
    /// The same for every origin kind (`origin.rs`): the connection-limit lease, the
    /// counters, the connect timeout (in `open_transport`), the first-byte timeout around the
    /// kind's request and the framing checks on its answer. A request whose body is held in
    /// memory (none, or one VCL kept) that fails on a reused connection before any response
    /// byte is retried once on a fresh connection (the origin may have closed the idle
    /// connection) when the kind allows it, unless its extensions hold [`NoConnectRetry`].
    pub async fn send(
        self: &Arc<Self>,
        req: Request<RequestBody>,
    ) -> Result<Response<BackendBody>, FetchError> {
        let lease = self.lease().await?;
        self.counters.backend_req.inc();
        self.stats.req.inc();
        let timeouts = req.extensions().get::<RequestTimeouts>().copied();
        let connect = timeouts
            .and_then(|t| t.connect)
            .unwrap_or(self.config.connect_timeout.0);
        let first_byte = timeouts
            .and_then(|t| t.first_byte)
            .unwrap_or(self.config.first_byte_timeout.0);
        let between_bytes = timeouts
            .and_then(|t| t.between_bytes)
            .unwrap_or(self.config.between_bytes_timeout.0);
        let retry_copy = (self.kind.retries_stale()
            && req.extensions().get::<NoConnectRetry>().is_none())
        .then(|| req.body().try_clone())
        .flatten()
        .map(|body| clone_head(&req).map(|_| body));
        let upgrade = req.headers().contains_key(http::header::UPGRADE);
        // `proxy_protocol`: a new connection naming this request's client, used once.
        let (conn, reused) = match self.config.proxy_protocol {
            Some(_) => {
                let client = req.extensions().get::<ClientInfo>().map(|c| c.addr);
                (self.kind.proxied(self, connect, client).await?, false)
            }
            None => self.connection(connect, false).await?,
        };
        let resp = match self.request(conn, req, first_byte, upgrade).await {
            Err(FetchError::Failed(_, e))
                if reused && retry_copy.is_some() && is_stale_connection(&*e) =>
            {
                self.counters.backend_retry.inc();
                let (conn, _) = self.connection(connect, true).await?;
                let req = retry_copy.expect("checked above");
                self.request(conn, req, first_byte, upgrade).await
            }
            other => other,
        }?;
        let (mut parts, source) = resp.into_parts();
        let zero_copy = parts.extensions.remove::<Arc<ZeroCopy>>();
        let body = BackendBody::new(source, between_bytes, self.counters.clone())
            .with_lease(lease)
            .with_zero_copy(zero_copy);
        Ok(Response::from_parts(parts, body))
    }

    /// A connection from the kind (`fresh`: a new one), reuse counted.
    async fn connection(
        self: &Arc<Self>,
        connect: Duration,
        fresh: bool,
    ) -> Result<(kind::Conn, bool), FetchError> {
        let (conn, reused) = self.kind.connection(self, connect, fresh).await?;
        if reused {
            self.counters.backend_reuse.inc();
            self.stats.reuse.inc();
        }
        Ok((conn, reused))
    }

    /// The kind's request within `first_byte`, its failures counted, its answer checked.
    async fn request(
        self: &Arc<Self>,
        conn: kind::Conn,
        req: Request<RequestBody>,
        first_byte: Duration,
        upgrade: bool,
    ) -> Result<Response<origin::Source>, FetchError> {
        let sent = std::time::Instant::now();
        let resp = match tokio::time::timeout(first_byte, self.kind.request(self, conn, req)).await
        {
            Ok(Ok(resp)) => {
                self.stats.ttfb.observe(sent.elapsed());
                resp
            }
            Ok(Err(e)) => {
                if matches!(e, FetchError::Invalid(..)) {
                    self.counters.backend_invalid.inc();
                } else {
                    self.counters.backend_error.inc();
                }
                self.stats.error.inc();
                return Err(e);
            }
            Err(_) => {
                self.counters.backend_timeout.inc();
                self.stats.error.inc();
                return Err(FetchError::FirstByteTimeout(self.config.name.clone()));
            }
        };
        let checked = if resp.headers().len() > self.max_response_fields {
            // HTTP/1.1 heads were held to it by hyper; an HTTP/2 head is decoded whole first.
            Err("response head with more fields than max_response_headers")
        } else {
            check_response(&resp, upgrade)
        };
        if let Err(why) = checked {
            // Dropping the response drops its connection with it: never pooled.
            self.counters.backend_invalid.inc();
            self.stats.error.inc();
            return Err(FetchError::Invalid(self.config.name.clone(), why));
        }
        Ok(resp)
    }

    /// Waits for a connection slot under `max_connections` (bounded queue, bounded wait).
    async fn lease(self: &Arc<Self>) -> Result<Lease, FetchError> {
        let permit = match &self.limit {
            None => None,
            Some(sem) => match sem.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    let waiting = self.queued.fetch_add(1, Ordering::Relaxed);
                    // Leaves the queue however the wait ends: also when the request is
                    // dropped while it waits (its client went away).
                    let _in_queue = InQueue(&self.queued);
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
                    drop(_in_queue);
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
        })
    }

    /// Gives back a connection whose last response was read to the end (HTTP/1.1's pool).
    pub(crate) fn checkin(&self, conn: conn::Conn) {
        if let Some(http1) = self.kind.http1() {
            http1.checkin(self, conn);
        }
    }

    /// A connection for a health probe, TCP or TLS as requests connect (the probe's own
    /// timeout bounds it); it does not count against the backend's passive health.
    pub(crate) async fn probe_transport(&self) -> Result<connector::Transport, String> {
        self.connector
            .connect(
                &self.config.host,
                self.config.port,
                Duration::MAX,
                true,
                &self.counters,
                None,
            )
            .await
            .map_err(|e| match e {
                connector::ConnectError::Io(e) => format!("connect: {e}"),
                connector::ConnectError::Timeout => "connect: timed out".to_string(),
            })
    }

    /// A connection to the backend, TCP or TLS (`connector.rs`), within `connect_timeout`;
    /// a failure counts against the backend's health.
    pub(crate) async fn open_transport(
        &self,
        timeout: Duration,
    ) -> Result<connector::Transport, FetchError> {
        self.open_transport_for(timeout, None).await
    }

    /// [`Self::open_transport`] for one client: a backend with `proxy_protocol` names it in
    /// the header it sends first.
    pub(crate) async fn open_transport_for(
        &self,
        timeout: Duration,
        client: Option<SocketAddr>,
    ) -> Result<connector::Transport, FetchError> {
        let name = &self.config.name;
        let opened = self
            .connector
            .connect(
                &self.config.host,
                self.config.port,
                timeout,
                self.tcp_nodelay,
                &self.counters,
                client,
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
        if let Some(address) = &self.config.address {
            return address.clone();
        }
        if let Some(root) = &self.config.root {
            return format!("files:{}", root.display());
        }
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
            "admin_health": self.health.forced().as_str(),
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
        self.kind.describe(&mut v);
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

/// `server.max_response_field_size` in bytes.
fn response_field_limit(whole: &Config) -> usize {
    usize::try_from(whole.server.max_response_field_size.0).unwrap_or(usize::MAX)
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

/// Errors that mean "the connection died before an answer", not "the backend answered badly":
/// hyper's canceled, incomplete and closed, or an I/O error under the failure.
fn is_stale_connection(e: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(h) = e.downcast_ref::<hyper::Error>()
        && (h.is_canceled() || h.is_incomplete_message() || h.is_closed())
    {
        return true;
    }
    let mut source = Some(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}
