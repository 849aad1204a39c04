//! Active health probes: one background task per probed backend, never on the request path.

use std::sync::Arc;

use tokio::sync::watch;

use super::Backend;
use super::health::Transition;
use crate::config::ProbeConfig;

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

/// One probe, as the backend's origin kind sends it (`origin.rs`). Returns the status code.
async fn once(backend: &Backend, request: &[u8]) -> Result<u16, String> {
    backend.kind.probe(backend, request).await
}
