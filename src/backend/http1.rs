//! The HTTP/1.1 origin kind (`[[backend]] protocol = "http1"`, the default): hyper's HTTP/1
//! client on a connection from the connector, a LIFO pool of idle keep-alive connections
//! (`max_idle`, `idle_timeout`), every response head held to `max_response_header_size`
//! (`conn.rs`) and `max_response_headers` (hyper's field table), and probes written as raw
//! HTTP/1.1.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::conn::{self, HeadLimited, Http1Conn};
use super::endpoint::Endpoint;
use super::error::FetchError;
use super::idle::KeepAlive;
use super::origin::Origin;
use super::request_body::RequestBody;
use super::source::{Release, Source};

/// Longest status line read from a probe response.
const MAX_STATUS_LINE: usize = 1024;

/// HTTP/1.1 to one backend: its idle connections.
pub(crate) struct Http1 {
    idle: Arc<KeepAlive>,
    /// `server.max_response_header_size`: every response head is held to it exactly
    /// (`conn::HeadLimited`, 502 beyond it); also hyper's read buffer bound.
    max_response_head: usize,
    /// `server.max_response_headers`: hyper's field table (502 beyond it).
    max_response_fields: usize,
    /// `server.max_response_field_size`: every field line of a response head is held to it
    /// (`conn::HeadLimited`, 502 beyond it).
    max_response_field: usize,
}

impl Http1 {
    pub(super) fn new(
        max_response_head: usize,
        max_response_fields: usize,
        max_response_field: usize,
    ) -> Http1 {
        Http1 {
            idle: Arc::default(),
            max_response_head,
            max_response_fields,
            max_response_field,
        }
    }

    /// A new connection; `client`: whom its PROXY protocol header names (`proxy_protocol`).
    pub(super) async fn connect(
        &self,
        endpoint: &Endpoint,
        timeout: Duration,
        client: Option<super::connector::Relayed>,
    ) -> Result<Http1Conn, FetchError> {
        let name = &endpoint.config.name;
        let stream = endpoint.open_transport_for(timeout, client).await?;
        let watch = Arc::new(AtomicBool::new(false));
        let stream = HeadLimited::new(
            stream,
            self.max_response_head,
            self.max_response_field,
            watch.clone(),
        );
        // hyper's buffer must hold a head at the limit; the exact bound is `HeadLimited`'s.
        let mut builder = http1::Builder::new();
        builder.max_buf_size(self.max_response_head.max(8192).saturating_add(8192));
        // hyper's default table is 100 fields on the stack; another size is on the heap.
        if self.max_response_fields != 100 {
            builder.max_headers(self.max_response_fields);
        }
        let (sender, conn) = builder
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| FetchError::Failed(name.clone(), e.into()))?;
        endpoint.counters.backend_conn.inc();
        endpoint.stats.conn.inc();
        let name = name.clone();
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(backend = %name, error = %e, "backend connection closed");
            }
        });
        Ok(Http1Conn::new(sender, watch))
    }
}

impl Origin for Http1 {
    type Conn = Http1Conn;

    fn alpn(&self) -> &'static [u8] {
        b"http/1.1"
    }

    async fn connection(
        &self,
        endpoint: &Arc<Endpoint>,
        connect: Duration,
        fresh: bool,
    ) -> Result<(Http1Conn, bool), FetchError> {
        if !fresh && let Some(conn) = self.idle.checkout(endpoint).await {
            return Ok((conn, true));
        }
        Ok((self.connect(endpoint, connect, None).await?, false))
    }

    async fn request(
        &self,
        endpoint: &Arc<Endpoint>,
        mut conn: Http1Conn,
        req: Request<RequestBody>,
    ) -> Result<Response<Source>, FetchError> {
        conn.expect_head();
        conn.serving(
            req.extensions()
                .get::<crate::txlog::vsl::Current>()
                .cloned(),
        );
        // A request saying `Connection: close` (VCL's `bereq.http.connection`) ends its
        // connection: it never goes back to the pool, nor counts in `backend_recycle`, however
        // soon after the response the backend's close arrives.
        if crate::http::headers::connection_close(req.headers()) {
            conn.retired_flag()
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let resp = conn.sender.send_request(req).await.map_err(|e| {
            if let Some(what) = conn::head_too_large(&e) {
                FetchError::Invalid(endpoint.config.name.clone(), what)
            } else if e.is_parse_too_large() {
                // Not the byte limit (`HeadLimited` holds heads to it before hyper's larger
                // buffer fills): more field lines than hyper's table.
                FetchError::Invalid(
                    endpoint.config.name.clone(),
                    "response head with more fields than max_response_headers",
                )
            } else {
                FetchError::Failed(endpoint.config.name.clone(), e.into())
            }
        })?;
        // A connection that switched protocols belongs to the tunnel, never to the pool; one
        // whose PROXY protocol header named a client serves no other.
        let keep = endpoint.config.max_idle > 0
            && endpoint.config.proxy_protocol.is_none()
            && resp.status() != StatusCode::SWITCHING_PROTOCOLS;
        let release = if keep {
            Release::Pool {
                pool: self.idle.clone(),
                endpoint: endpoint.clone(),
                conn,
            }
        } else {
            conn.log_close(&endpoint.config.name, false);
            Release::Nothing
        };
        Ok(resp.map(|body| Source::Hyper { body, release }))
    }

    fn retries_stale(&self) -> bool {
        true
    }

    /// Connect, send the request text, read the status line.
    async fn probe(&self, endpoint: &Endpoint, request: &[u8]) -> Result<u16, String> {
        let mut stream = endpoint.probe_transport().await?;
        stream
            .write_all(request)
            .await
            .map_err(|e| format!("send: {e}"))?;
        let mut buf = Vec::with_capacity(128);
        let mut chunk = [0u8; 256];
        while !buf.contains(&b'\n') {
            let n = stream
                .read(&mut chunk)
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("connection closed before a status line".into());
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.len() > MAX_STATUS_LINE {
                return Err("status line too long".into());
            }
        }
        parse_status(&buf).ok_or_else(|| "malformed status line".into())
    }

    fn idle(&self) -> usize {
        self.idle.len()
    }
}

fn parse_status(buf: &[u8]) -> Option<u16> {
    let line = buf.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let mut parts = line.splitn(3, ' ');
    let version = parts.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    let code = parts.next()?;
    (code.len() == 3).then(|| code.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(parse_status(b"HTTP/1.1 200 OK\r\n"), Some(200));
        assert_eq!(
            parse_status(b"HTTP/1.0 503 Service Unavailable\r\n"),
            Some(503)
        );
        assert_eq!(parse_status(b"HTTP/1.1 20 OK\r\n"), None);
        assert_eq!(parse_status(b"SSH-2.0-OpenSSH\r\n"), None);
    }
}
