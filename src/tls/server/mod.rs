//! TLS termination for client listeners: each `[[tls]]` table becomes a [`Frontend`] (a
//! rustls server configuration over its [`CertStore`], here); its certificates and client
//! verifier come from its files (`load.rs`); handshakes run under a timeout and every failure
//! is counted by its reason ([`Reason`], `reason.rs`); an established connection's facts
//! ([`ConnTls`], `conn_tls.rs`: version, cipher, server name, protocol, client certificate)
//! travel with each of its requests; `view.rs` is what the admin API shows of the listeners.

mod conn_tls;
mod load;
mod reason;
mod view;

use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConnection;
use rustls::server::ServerConfig;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{NoServerSessionStorage, ProducesTickets, ServerSessionMemoryCache};

pub use self::conn_tls::{ConnTls, Session};
pub use self::load::{ClientVerifier, client_verifier, load_certificates};
pub use self::reason::Reason;
pub use self::view::CertView;
use super::stamps::Stamps;
use super::store::CertStore;
use super::{crl, provider, ticket};
use crate::config::acme::Challenge;
use crate::config::tls::{TlsConfig, TlsVersion};

/// One `[[tls]]` listener group, ready for handshakes.
pub struct Frontend {
    pub name: Arc<str>,
    pub config: Arc<ServerConfig>,
    pub handshake_timeout: Duration,
    pub store: Arc<CertStore>,
    /// The settings it was built from.
    pub settings: TlsConfig,
    /// The in-memory ticket rotator, kept across reloads (None with key files or tickets off).
    rotator: Option<Arc<dyn ProducesTickets>>,
    /// The files it read and what they looked like then (for the watcher).
    pub(super) stamps: Stamps,
    /// The client certificate revocation lists in force (`client_crl`), for the admin API.
    pub crls: Vec<crl::Crl>,
    /// The verifier of client certificates in force, for resumed sessions
    /// ([`Frontend::recheck_resumed`]).
    client_verifier: Option<Arc<dyn ClientCertVerifier>>,
}

impl std::fmt::Debug for Frontend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frontend")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Every TLS frontend of a configuration.
#[derive(Debug, Default)]
pub struct Frontends {
    list: Vec<Arc<Frontend>>,
}

impl Frontends {
    pub fn get(&self, name: &str) -> Option<Arc<Frontend>> {
        self.list.iter().find(|f| &*f.name == name).cloned()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Frontend>> {
        self.list.iter()
    }

    /// Builds every `[[tls]]` of a configuration, reading its files; `running`: the frontends
    /// in force, whose certificate stores (with certificates installed at run time) and
    /// in-memory ticket keys are kept for listeners of the same name. Every problem is
    /// reported, each naming its file; then nothing changes.
    pub fn build(
        configs: &[TlsConfig],
        running: Option<&Frontends>,
    ) -> Result<Frontends, Vec<String>> {
        let mut list = Vec::new();
        let mut errors = Vec::new();
        for c in configs {
            let previous = running.and_then(|r| r.get(&c.name));
            match Frontend::build(c, previous.as_deref()) {
                Ok(f) => list.push(Arc::new(f)),
                Err(e) => errors.extend(e.into_iter().map(|e| format!("[[tls]] {}: {e}", c.name))),
            }
        }
        if errors.is_empty() {
            Ok(Frontends { list })
        } else {
            Err(errors)
        }
    }
}

impl Frontends {
    /// The frontends with `name` built again from its files (which changed on disk); the
    /// others as they are.
    pub fn rebuilt(&self, name: &str) -> Result<Frontends, Vec<String>> {
        let mut list = Vec::with_capacity(self.list.len());
        for f in &self.list {
            if &*f.name == name {
                list.push(Arc::new(Frontend::build(&f.settings, Some(f))?));
            } else {
                list.push(f.clone());
            }
        }
        Ok(Frontends { list })
    }
}

impl Frontend {
    fn build(c: &TlsConfig, previous: Option<&Frontend>) -> Result<Frontend, Vec<String>> {
        let provider = provider();
        let stamps = Stamps::take(&c.files());
        let entries = load_certificates(c, &provider)?;
        let versions: &[&'static rustls::SupportedProtocolVersion] = match c.min_version {
            TlsVersion::V12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
            TlsVersion::V13 => &[&rustls::version::TLS13],
        };
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(|e| vec![format!("cannot set up TLS: {e}")])?;
        let (builder, crls, client_verifier) =
            match client_verifier(c, &provider).map_err(|e| vec![e])? {
                None => (builder.with_no_client_auth(), Vec::new(), None),
                Some((verifier, crls)) => (
                    builder.with_client_cert_verifier(verifier.clone()),
                    crls,
                    Some(verifier),
                ),
            };
        // Certificates installed at run time (ACME) stay; the files' ones are replaced.
        let store = match previous {
            Some(p) => {
                p.store.replace_files(entries, c.unknown_name);
                p.store.clone()
            }
            None => Arc::new(CertStore::new(entries, c.unknown_name)),
        };
        let mut config = builder.with_cert_resolver(store.clone());
        config.alpn_protocols = c.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        // TLS-ALPN-01: `acme-tls/1` last, chosen only by a client that offers nothing else.
        if c.acme.iter().any(|a| a.challenge == Challenge::TlsAlpn01) {
            config
                .alpn_protocols
                .push(super::store::ACME_TLS_ALPN.to_vec());
        }
        // The server's order of cipher suites (AES-GCM first where the CPU has AES
        // instructions), not the client's.
        config.ignore_client_order = true;
        // No 0-RTT: early data can be replayed.
        config.max_early_data_size = 0;
        config.session_storage = match c.session_cache {
            0 => Arc::new(NoServerSessionStorage {}),
            n => ServerSessionMemoryCache::new(n),
        };
        let mut rotator = None;
        if c.session_tickets {
            let reuse = previous
                .filter(|p| p.settings.session_tickets && p.settings.ticket_key_file.is_empty())
                .and_then(|p| p.rotator.clone());
            let t = ticket::ticketer(&c.ticket_key_file, reuse).map_err(|e| vec![e])?;
            if c.ticket_key_file.is_empty() {
                rotator = Some(t.clone());
            }
            config.ticketer = t;
            // One ticket per full handshake: a client resumes one connection with it.
            config.send_tls13_tickets = 1;
        } else {
            config.send_tls13_tickets = if c.session_cache > 0 { 1 } else { 0 };
        }
        Ok(Frontend {
            name: c.name.as_str().into(),
            config: Arc::new(config),
            handshake_timeout: c.handshake_timeout.0,
            store,
            settings: c.clone(),
            rotator,
            stamps,
            crls,
            client_verifier,
        })
    }

    /// A resumed session carries the client certificate verified when it began, perhaps
    /// hours ago, under the CA and revocation lists of then (a ticket outlives reloads and,
    /// with shared key files, the node). It is checked again against those in force now: a
    /// certificate revoked since, or a listener that now requires one, ends the connection
    /// as a full handshake would.
    pub fn recheck_resumed(&self, conn: &ServerConnection) -> Result<(), rustls::Error> {
        let Some(verifier) = &self.client_verifier else {
            return Ok(());
        };
        if !matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed)) {
            return Ok(());
        }
        match conn.peer_certificates() {
            Some([end_entity, intermediates @ ..]) => verifier
                .verify_client_cert(
                    end_entity,
                    intermediates,
                    rustls::pki_types::UnixTime::now(),
                )
                .map(|_| ()),
            _ if verifier.client_auth_mandatory() => Err(rustls::Error::NoCertificatesPresented),
            _ => Ok(()),
        }
    }

    /// A new server-side TLS connection for this listener.
    pub fn connection(&self) -> Result<ServerConnection, rustls::Error> {
        ServerConnection::new(self.config.clone())
    }
}
