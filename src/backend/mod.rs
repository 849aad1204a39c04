//! Backends: one origin server each, with a keep-alive connection pool and the fetch timeouts
//! (connect, first byte, between bytes).
//!
//! Architecture invariant: only this module opens connections to origins.

mod body;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

pub use body::{BackendBody, RequestBody};

use crate::config::BackendConfig;
use crate::stats::Counters;

/// Why a backend fetch failed; decides the status Shellac answers with.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("connection to backend {0} failed: {1}")]
    Connect(String, std::io::Error),
    #[error("connection to backend {0} timed out")]
    ConnectTimeout(String),
    #[error("backend {0} sent no response within first_byte_timeout")]
    FirstByteTimeout(String),
    #[error("backend {0} failed: {1}")]
    Failed(String, hyper::Error),
}

impl FetchError {
    /// 503 when the backend is unreachable, 504 when it is too slow, 502 when it misbehaves.
    pub fn status(&self) -> StatusCode {
        match self {
            FetchError::Connect(..) | FetchError::ConnectTimeout(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            FetchError::FirstByteTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            FetchError::Failed(..) => StatusCode::BAD_GATEWAY,
        }
    }

    /// Word for `Cache-Status` detail and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            FetchError::Connect(..) => "backend-connect-failed",
            FetchError::ConnectTimeout(_) => "backend-connect-timeout",
            FetchError::FirstByteTimeout(_) => "backend-first-byte-timeout",
            FetchError::Failed(..) => "backend-error",
        }
    }
}

struct Idle {
    sender: SendRequest<RequestBody>,
    since: Instant,
}

/// One origin server and its connection pool.
pub struct Backend {
    pub config: BackendConfig,
    tcp_nodelay: bool,
    idle: Mutex<Vec<Idle>>,
    counters: Arc<Counters>,
}

impl Backend {
    pub fn new(
        config: BackendConfig,
        default_nodelay: bool,
        counters: Arc<Counters>,
    ) -> Arc<Backend> {
        Arc::new(Backend {
            tcp_nodelay: config.tcp_nodelay.unwrap_or(default_nodelay),
            config,
            idle: Mutex::new(Vec::new()),
            counters,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Idle pooled connections right now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().map(|i| i.len()).unwrap_or(0)
    }

    /// Sends `req` and returns the response head; the body streams with the between-bytes
    /// timeout and returns its connection to the pool when read to the end.
    ///
    /// A request without a body that fails on a reused connection before any response byte is
    /// retried once on a fresh connection (the origin may have closed the idle connection).
    pub async fn send(
        self: &Arc<Self>,
        req: Request<RequestBody>,
    ) -> Result<Response<BackendBody>, FetchError> {
        self.counters.backend_req.inc();
        let retry_copy = req.body().is_empty().then(|| clone_head(&req));
        let (sender, reused) = match self.checkout().await {
            Some(s) => (s, true),
            None => (self.connect().await?, false),
        };
        match self.exchange(sender, req).await {
            Err(FetchError::Failed(_, e))
                if reused && retry_copy.is_some() && is_stale_connection(&e) =>
            {
                self.counters.backend_retry.inc();
                let sender = self.connect().await?;
                let req = retry_copy.expect("checked above");
                self.exchange(sender, req).await
            }
            other => other,
        }
    }

    async fn exchange(
        self: &Arc<Self>,
        mut sender: SendRequest<RequestBody>,
        req: Request<RequestBody>,
    ) -> Result<Response<BackendBody>, FetchError> {
        let timeout = self.config.first_byte_timeout.0;
        let resp = match tokio::time::timeout(timeout, sender.send_request(req)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => {
                self.counters.backend_error.inc();
                return Err(FetchError::Failed(self.config.name.clone(), e));
            }
            Err(_) => {
                self.counters.backend_timeout.inc();
                return Err(FetchError::FirstByteTimeout(self.config.name.clone()));
            }
        };
        let keep = self.config.max_idle > 0;
        Ok(resp.map(|incoming| {
            BackendBody::new(
                incoming,
                self.config.between_bytes_timeout.0,
                keep.then(|| (self.clone(), sender)),
                self.counters.clone(),
            )
        }))
    }

    /// Takes a usable idle connection (LIFO: the warmest one), dropping stale ones.
    async fn checkout(&self) -> Option<SendRequest<RequestBody>> {
        loop {
            let idle = self.idle.lock().ok()?.pop()?;
            if idle.since.elapsed() > self.config.idle_timeout.0 || idle.sender.is_closed() {
                continue;
            }
            let mut sender = idle.sender;
            // The connection task may still be finishing the previous exchange.
            match tokio::time::timeout(Duration::from_millis(100), sender.ready()).await {
                Ok(Ok(())) => {
                    self.counters.backend_reuse.inc();
                    return Some(sender);
                }
                _ => continue,
            }
        }
    }

    /// Returns a connection whose last response was read to the end.
    pub(crate) fn checkin(&self, sender: SendRequest<RequestBody>) {
        if sender.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            let now = Instant::now();
            let max_idle = self.config.idle_timeout.0;
            idle.retain(|i| now.duration_since(i.since) < max_idle && !i.sender.is_closed());
            if idle.len() < self.config.max_idle {
                idle.push(Idle { sender, since: now });
            }
        }
    }

    async fn connect(&self) -> Result<SendRequest<RequestBody>, FetchError> {
        let name = &self.config.name;
        let target = (self.config.host.as_str(), self.config.port);
        let stream =
            match tokio::time::timeout(self.config.connect_timeout.0, TcpStream::connect(target))
                .await
            {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    self.counters.backend_fail.inc();
                    return Err(FetchError::Connect(name.clone(), e));
                }
                Err(_) => {
                    self.counters.backend_fail.inc();
                    return Err(FetchError::ConnectTimeout(name.clone()));
                }
            };
        let _ = stream.set_nodelay(self.tcp_nodelay);
        let (sender, conn) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| FetchError::Failed(name.clone(), e))?;
        self.counters.backend_conn.inc();
        let name = name.clone();
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(backend = %name, error = %e, "backend connection closed");
            }
        });
        Ok(sender)
    }

    /// The backend's address, for display.
    pub fn address(&self) -> String {
        match self.config.host.parse::<std::net::IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, self.config.port).to_string(),
            Err(_) => format!("{}:{}", self.config.host, self.config.port),
        }
    }
}

fn clone_head(req: &Request<RequestBody>) -> Request<RequestBody> {
    let mut copy = Request::new(RequestBody::empty());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    copy
}

/// Errors that mean "the pooled connection was already dead", not "the backend answered badly".
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
