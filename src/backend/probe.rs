//! Active health probes: one background task per probed backend, never on the request path.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::Backend;
use super::health::Transition;
use crate::config::ProbeConfig;

/// Longest status line read from a probe response.
const MAX_STATUS_LINE: usize = 1024;

/// Runs `probe` against `backend` every `interval` until `shutdown` fires.
pub async fn run(backend: Arc<Backend>, probe: ProbeConfig, mut shutdown: watch::Receiver<bool>) {
    let request = request_bytes(&probe, &backend);
    loop {
        let (passed, detail) = match tokio::time::timeout(probe.timeout.0, once(&backend, &request))
            .await
        {
            Ok(Ok(status)) if status == probe.expected_status => (true, format!("HTTP {status}")),
            Ok(Ok(status)) => (
                false,
                format!("HTTP {status}, expected {}", probe.expected_status),
            ),
            Ok(Err(e)) => (false, e),
            Err(_) => (false, format!("no answer within {:?}", probe.timeout.0)),
        };
        backend.counters.backend_probe.inc();
        if !passed {
            backend.counters.backend_probe_fail.inc();
        }
        if let Some(t) = backend.health.record_probe(passed, detail.clone()) {
            let (good, window, threshold) = backend.health.probe_score().unwrap_or((0, 0, 0));
            match t {
                Transition::BecameHealthy => tracing::info!(
                    backend = backend.name(),
                    "backend healthy: {good} of the last {window} probes passed (threshold {threshold}); last: {detail}"
                ),
                Transition::BecameSick => tracing::warn!(
                    backend = backend.name(),
                    "backend sick: {good} of the last {window} probes passed (threshold {threshold}); last: {detail}"
                ),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(probe.interval.0) => {}
            _ = shutdown.changed() => return,
        }
    }
}

fn request_bytes(probe: &ProbeConfig, backend: &Backend) -> Vec<u8> {
    match &probe.request {
        Some(lines) => {
            let mut text = lines.join("\r\n");
            text.push_str("\r\n\r\n");
            text.into_bytes()
        }
        None => format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nUser-Agent: shellac-probe\r\n\r\n",
            probe.url.as_deref().unwrap_or("/"),
            backend.host_header()
        )
        .into_bytes(),
    }
}

/// One probe: connect, send, read the status line. Returns the status code.
async fn once(backend: &Backend, request: &[u8]) -> Result<u16, String> {
    // TCP or TLS, as requests connect (the probe's own timeout bounds it).
    let stream = backend
        .connector
        .connect(
            &backend.config.host,
            backend.config.port,
            std::time::Duration::MAX,
            true,
            &backend.counters,
        )
        .await
        .map_err(|e| match e {
            super::connector::ConnectError::Io(e) => format!("connect: {e}"),
            super::connector::ConnectError::Timeout => "connect: timed out".to_string(),
        })?;
    if backend.config.protocol == crate::config::BackendProtocol::H2 {
        return once_h2(backend, stream, request).await;
    }
    let mut stream = stream;
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

/// A probe over HTTP/2 (`protocol = "h2"`): the probe's request (its first line's method and
/// target, its field lines) sent as an HTTP/2 request on a connection of its own.
async fn once_h2(
    backend: &Backend,
    stream: super::connector::Transport,
    request: &[u8],
) -> Result<u16, String> {
    let text = String::from_utf8_lossy(request);
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("GET");
    let target = first.next().unwrap_or("/");
    let mut authority = backend.host_header();
    let mut fields = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("host") {
            authority = value.to_string();
        } else if !name.eq_ignore_ascii_case("connection") {
            fields.push((name.to_string(), value.to_string()));
        }
    }
    let scheme = if backend.config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("{scheme}://{authority}{target}"))
        .version(http::Version::HTTP_2);
    for (name, value) in &fields {
        req = req.header(name.as_str(), value.as_str());
    }
    let req = req
        .body(super::RequestBody::empty())
        .map_err(|e| format!("probe request: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    let task = tokio::spawn(conn);
    let answer = sender.send_request(req).await;
    task.abort();
    answer
        .map(|r| r.status().as_u16())
        .map_err(|e| format!("HTTP/2: {e}"))
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
