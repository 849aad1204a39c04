//! What every origin kind of one backend shares and reaches its origin through: the
//! configuration, the connector (TCP or TLS, `connector.rs`), health, saint mode and the
//! counters. A kind gets the [`Endpoint`], never the `Backend` that holds the kind, so the
//! kinds sit below `Backend` (mod.rs) and `Backend` below nothing of theirs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::connector::{ConnectError, Connector, Transport};
use super::error::FetchError;
use super::health::Health;
use super::saint::Saint;
use crate::config::{BackendConfig, ProbeConfig};
use crate::stats::{BackendCounters, Counters};

/// One origin server as every kind reaches it: its configuration, connector, health and
/// counters (`Backend` derefs to it).
pub struct Endpoint {
    pub config: BackendConfig,
    pub probe: Option<ProbeConfig>,
    pub health: Health,
    /// Objects VCL's saint mode holds this backend off for (`saint.rs`).
    pub saint: Saint,
    pub stats: BackendCounters,
    pub(crate) counters: Arc<Counters>,
    pub(super) tcp_nodelay: bool,
    /// TCP or TLS (`connector.rs`).
    pub(crate) connector: Connector,
}

impl Endpoint {
    pub fn name(&self) -> &str {
        &self.config.name
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

    /// A connection for a health probe, TCP or TLS as requests connect (the probe's own
    /// timeout bounds it); it does not count against the backend's passive health.
    pub(crate) async fn probe_transport(&self) -> Result<Transport, String> {
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
                ConnectError::Io(e) => format!("connect: {e}"),
                ConnectError::Timeout => "connect: timed out".to_string(),
            })
    }

    /// A connection to the backend, TCP or TLS (`connector.rs`), within `connect_timeout`;
    /// a failure counts against the backend's health.
    pub(crate) async fn open_transport(&self, timeout: Duration) -> Result<Transport, FetchError> {
        self.open_transport_for(timeout, None).await
    }

    /// [`Self::open_transport`] for one client: a backend with `proxy_protocol` names it in
    /// the header it sends first.
    pub(crate) async fn open_transport_for(
        &self,
        timeout: Duration,
        client: Option<super::connector::Relayed>,
    ) -> Result<Transport, FetchError> {
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
            Err(ConnectError::Io(e)) => {
                self.connect_failed(&e.to_string());
                Err(FetchError::Connect(name.clone(), e))
            }
            Err(ConnectError::Timeout) => {
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
}
