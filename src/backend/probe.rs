//! Active health probes: one background task per probed backend, never on the request path;
//! and the one-off probe `shellac check --online` sends each backend.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::Backend;
use super::health::Transition;
use crate::config::{BackendProtocol, ProbeConfig};

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

/// How long `shellac check --online` waits for a backend without a probe: its
/// `connect_timeout` plus this much for the answer (a backend's `first_byte_timeout` is sized
/// for slow pages, not for a check run by hand).
const CHECK_ANSWER: Duration = Duration::from_secs(10);

/// What `shellac check --online` asks one backend before anything is served, as its origin
/// kind asks it: the backend's probe (its `request`, or `GET url`) when it has one, answered
/// with `expected_status` within the probe's `timeout`; else `HEAD /` with the backend's
/// `Host`, where any answer but a 5xx passes. A document root must be readable; a FastCGI
/// responder must accept a connection (no request is sent to it). Ok: what passed, in words.
pub async fn check(backend: &Backend) -> Result<String, String> {
    let config = &backend.config;
    let (request, asked, deadline) = match &backend.probe {
        Some(p) => (
            request_bytes(p, backend),
            match &p.request {
                Some(lines) => lines.first().cloned().unwrap_or_default(),
                None => format!("GET {}", p.url.as_deref().unwrap_or("/")),
            },
            p.timeout.0,
        ),
        None => (
            format!(
                "HEAD / HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nUser-Agent: shellac-check\r\n\r\n",
                backend.host_header()
            )
            .into_bytes(),
            "HEAD /".to_string(),
            config.connect_timeout.0 + CHECK_ANSWER.min(config.first_byte_timeout.0),
        ),
    };
    let status = match tokio::time::timeout(deadline, once(backend, &request)).await {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => {
            return Err(match e.strip_prefix("connect: ") {
                Some(why) => format!("cannot connect: {why}"),
                None => e,
            });
        }
        Err(_) => {
            return Err(format!(
                "no answer to {asked} within {}",
                crate::config::units::format_duration(deadline)
            ));
        }
    };
    match config.protocol {
        BackendProtocol::Files => return Ok("document root readable".into()),
        BackendProtocol::Fastcgi => return Ok("accepts connections (FastCGI)".into()),
        BackendProtocol::Http1 | BackendProtocol::H2 => {}
    }
    match &backend.probe {
        Some(p) if status != p.expected_status => Err(format!(
            "{asked} answered {status}; its probe expects {} (the backend would be marked sick)",
            p.expected_status
        )),
        None if status >= 500 => Err(format!("{asked} answered {status}")),
        _ => Ok(format!("{asked} answered {status}")),
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

/// One probe, as the backend's origin kind sends it (`origin.rs`). Returns the status code.
async fn once(backend: &Backend, request: &[u8]) -> Result<u16, String> {
    backend.probe_once(request).await
}
