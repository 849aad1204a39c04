//! Backends: one origin each, of one kind (`origin.rs`: HTTP/1.1, HTTP/2, static files,
//! FastCGI), with what every kind shares around it: a connection limit with a bounded queue
//! (`limit.rs`), health state, counters and the connector (`endpoint.rs`), the fetch timeouts
//! (connect, first byte, between bytes) and the retry on a stale connection (here).
//!
//! Inside the module the files point down: `Backend` (this file) → `kind.rs` → the kinds
//! (`http1.rs`, `h2.rs`, `files/`, `fastcgi/`) → `origin.rs` (their interface) → what every
//! kind shares (`endpoint.rs`, `source.rs`, `request_body.rs`, `error.rs`, `extensions.rs`).
//! A kind never sees `Backend`; `body.rs` (the response body) holds a `limit::Lease` and gives
//! an HTTP/1.1 connection back to the kind's pool (`idle.rs`), not to `Backend`.
//!
//! Architecture invariant: only this module opens connections to origins.

mod body;
pub(crate) mod body_words;
mod conn;
pub(crate) mod connector;
pub mod director;
mod endpoint;
mod error;
mod extensions;
mod fastcgi;
mod files;
mod framing;
mod h2;
pub mod health;
mod http1;
mod idle;
mod kind;
mod limit;
mod mux;
mod origin;
mod pace;
pub mod probe;
mod request_body;
pub mod saint;
mod source;

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};

pub use body::BackendBody;
pub use endpoint::Endpoint;
pub use error::{BoxError, FetchError};
pub use extensions::{
    AnyThreeDigitStatus, Autoindex, ClientInfo, DocRoot, NoConnectRetry, RequestTimeouts,
};
pub(crate) use fastcgi::ScriptRefusal;
pub(crate) use files::zero_copy::{Region, Regions, ZeroCopy, placeholder_offset};
pub(crate) use files::{Refusal, Refused, TryNext};
pub use framing::check_response;
pub use pace::{BodyOutcome, BodyPace, BodyTooLarge, BodyTooSlow};
pub use request_body::RequestBody;
pub use source::BoxStream;

use crate::config::{BackendConfig, Config, ProbeRef};
use crate::stats::{BackendCounters, Counters};
use connector::Relayed;

/// One origin server: what every kind shares (its [`Endpoint`], which `Backend` derefs to:
/// `backend.config`, `backend.health`, `backend.stats`), its limit and its kind.
pub struct Backend {
    endpoint: Arc<Endpoint>,
    /// `server.max_response_header_size` (the kinds hold responses to it).
    max_response_head: usize,
    /// `server.max_response_headers` (HTTP/1.1: hyper's table; checked here for every kind).
    max_response_fields: usize,
    /// `server.max_response_field_size` (HTTP/1.1: `HeadLimited` holds each field line to it).
    max_response_field: usize,
    limit: Arc<limit::Limit>,
    /// What the origin is and how it is spoken to (`origin.rs`).
    kind: kind::Kind,
}

impl Deref for Backend {
    type Target = Endpoint;

    fn deref(&self) -> &Endpoint {
        &self.endpoint
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
        let probe = probe_of(&config, whole);
        Arc::new(Backend {
            limit: Arc::new(limit::Limit::new(config.max_connections)),
            endpoint: Arc::new(Endpoint {
                tcp_nodelay: config.tcp_nodelay.unwrap_or(whole.server.tcp_nodelay),
                connector: connector::Connector::for_backend(&config, kind.alpn()),
                health: health::Health::new(
                    probe.as_ref(),
                    config.passive_failures,
                    config.passive_cooldown.0,
                ),
                saint: saint::Saint::default(),
                probe,
                stats: BackendCounters::default(),
                counters,
                config,
            }),
            max_response_head,
            max_response_fields,
            max_response_field,
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
        let probe = probe_of(config, whole);
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

    /// A files backend's refusals by reason (the `reason` word, the count); none for other
    /// kinds.
    pub fn files_refused(&self) -> Vec<(&'static str, u64)> {
        self.kind.files_refused()
    }

    /// Idle pooled connections right now.
    pub fn idle_count(&self) -> usize {
        self.kind.idle()
    }

    /// Requests in flight right now.
    pub fn in_flight(&self) -> i64 {
        self.limit.in_flight()
    }

    /// Requests waiting for a connection slot right now.
    pub fn queued(&self) -> usize {
        self.limit.queued()
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
        let lease = self.limit.lease(&self.endpoint).await?;
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
        // A body that fails logs its `FetchError` records there (a pooled HTTP/1.1
        // connection's own records say it for it).
        let vsl = req
            .extensions()
            .get::<crate::txlog::vsl::Current>()
            .cloned();
        let statuses = framing::Statuses {
            upgrade: req.headers().contains_key(http::header::UPGRADE),
            any_three_digit: req.extensions().get::<AnyThreeDigitStatus>().is_some(),
        };
        // `proxy_protocol`: a new connection naming this request's client, used once.
        let (conn, reused) = match self.config.proxy_protocol {
            Some(_) => {
                let client = req.extensions().get::<ClientInfo>().map(|c| Relayed {
                    client: c.addr,
                    server: c.server,
                });
                (
                    self.kind.proxied(&self.endpoint, connect, client).await?,
                    false,
                )
            }
            None => self.connection(connect, false).await?,
        };
        let resp = match self.request(conn, req, first_byte, statuses).await {
            Err(FetchError::Failed(_, e))
                if reused && retry_copy.is_some() && error::is_stale_connection(&*e) =>
            {
                self.counters.backend_retry.inc();
                let (conn, _) = self.connection(connect, true).await?;
                let req = retry_copy.expect("checked above");
                self.request(conn, req, first_byte, statuses).await
            }
            other => other,
        }?;
        let (mut parts, source) = resp.into_parts();
        let zero_copy = parts.extensions.remove::<Arc<ZeroCopy>>();
        let body = BackendBody::new(source, between_bytes, self.counters.clone())
            .with_framing(body_words::Framing::of(&parts.headers))
            .with_lease(lease)
            .with_zero_copy(zero_copy)
            .with_vsl(vsl);
        Ok(Response::from_parts(parts, body))
    }

    /// A connection from the kind (`fresh`: a new one), reuse counted.
    async fn connection(
        self: &Arc<Self>,
        connect: Duration,
        fresh: bool,
    ) -> Result<(kind::Conn, bool), FetchError> {
        let (conn, reused) = self.kind.connection(&self.endpoint, connect, fresh).await?;
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
        statuses: framing::Statuses,
    ) -> Result<Response<source::Source>, FetchError> {
        let sent = std::time::Instant::now();
        let resp =
            match tokio::time::timeout(first_byte, self.kind.request(&self.endpoint, conn, req))
                .await
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
            check_response(&resp, statuses)
        };
        if let Err(why) = checked {
            // Dropping the response drops its connection with it: never pooled.
            self.counters.backend_invalid.inc();
            self.stats.error.inc();
            return Err(FetchError::Invalid(self.config.name.clone(), why));
        }
        Ok(resp)
    }

    /// A health probe of the backend's kind (`probe.rs` runs it on its schedule).
    pub(crate) async fn probe_once(&self, request: &[u8]) -> Result<u16, String> {
        self.kind.probe(&self.endpoint, request).await
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

/// The backend's probe: its own, or the `[[probe]]` it names.
fn probe_of(config: &BackendConfig, whole: &Config) -> Option<crate::config::ProbeConfig> {
    match &config.probe {
        Some(ProbeRef::Inline(p)) => Some(p.clone()),
        Some(ProbeRef::Named(name)) => whole.probes.iter().find(|p| &p.name == name).cloned(),
        None => None,
    }
}
