//! TLS termination for client listeners: each `[[tls]]` table becomes a [`Frontend`] (a
//! rustls server configuration over its [`CertStore`]); handshakes run under a timeout and
//! every failure is counted by its reason ([`Reason`]); an established connection's facts
//! ([`ConnTls`]: version, cipher, server name, protocol, client certificate) travel with each
//! of its requests.

use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{NoServerSessionStorage, ProducesTickets, ServerSessionMemoryCache};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::{ProtocolVersion, ServerConnection};

use super::certs::{self, Source};
use super::stamps::Stamps;
use super::store::{CertStore, Entry};
use super::stream::HandshakeError;
use super::{crl, provider, ticket};
use crate::config::acme::Challenge;
use crate::config::tls::{ClientAuth, TlsConfig, TlsVersion};
use crate::stats::Counters;

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

/// One certificate as the admin API, `/metrics` and the dashboard show it.
#[derive(Clone, Debug)]
pub struct CertView {
    pub listener: String,
    pub names: Vec<String>,
    pub subject: String,
    pub issuer: String,
    pub algorithm: &'static str,
    pub not_before: i64,
    pub not_after: i64,
    /// `files: CERT` or `installed: WHO`.
    pub source: String,
}

impl Frontends {
    /// Every certificate of every listener.
    pub fn certificates(&self) -> Vec<CertView> {
        let mut out = Vec::new();
        for f in &self.list {
            for e in f.store.entries() {
                let facts = &e.loaded.facts;
                let mut names = facts.dns_names.clone();
                names.extend(facts.ip_addresses.iter().map(|ip| ip.to_string()));
                out.push(CertView {
                    listener: f.name.to_string(),
                    names,
                    subject: facts.subject.clone(),
                    issuer: facts.issuer.clone(),
                    algorithm: e.loaded.algorithm,
                    not_before: facts.not_before,
                    not_after: facts.not_after,
                    source: match &e.source {
                        Source::Files { cert, .. } => format!("file {}", cert.display()),
                        Source::Installed(by) => format!("installed by {by}"),
                    },
                });
            }
        }
        out
    }

    /// `GET /tls`: each listener (name, addresses, settings in brief) with its certificates.
    pub fn describe(&self, listening: &[(String, std::net::SocketAddr)]) -> serde_json::Value {
        let now = certs::unix_now();
        let certificates = self.certificates();
        let listeners: Vec<serde_json::Value> = self
            .list
            .iter()
            .map(|f| {
                let c = &f.settings;
                serde_json::json!({
                    "name": &*f.name,
                    "listening": listening.iter().filter(|(n, _)| *n == *f.name).map(|(_, a)| a.to_string()).collect::<Vec<_>>(),
                    "min_version": match c.min_version { TlsVersion::V12 => "1.2", TlsVersion::V13 => "1.3" },
                    "alpn": c.alpn,
                    "unknown_name": match c.unknown_name { crate::config::tls::UnknownName::Default => "default", crate::config::tls::UnknownName::Refuse => "refuse" },
                    "session_tickets": c.session_tickets,
                    "shared_ticket_keys": !c.ticket_key_file.is_empty(),
                    "client_auth": c.client_ca.as_ref().map(|_| match c.client_auth { ClientAuth::Required => "required", ClientAuth::Optional => "optional" }),
                    "client_crls": f.crls.iter().map(|l| serde_json::json!({
                        "file": l.file.display().to_string(),
                        "issuer": l.facts.issuer,
                        "revoked": l.facts.revoked,
                        "this_update": certs::format_time(l.facts.this_update),
                        "next_update": l.facts.next_update.map(certs::format_time),
                        "next_update_in_days": l.facts.next_update.map(|t| (t - now).div_euclid(86_400)),
                    })).collect::<Vec<_>>(),
                    "certificates": certificates.iter().filter(|v| v.listener == *f.name).map(|v| serde_json::json!({
                        "names": v.names,
                        "subject": v.subject,
                        "issuer": v.issuer,
                        "key": v.algorithm,
                        "not_before": certs::format_time(v.not_before),
                        "not_after": certs::format_time(v.not_after),
                        "expires_in_days": (v.not_after - now).div_euclid(86_400),
                        "source": v.source,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        serde_json::json!({ "listeners": listeners })
    }

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

/// The certificates of `c`, loaded and checked (every problem, each naming its file).
pub fn load_certificates(
    c: &TlsConfig,
    provider: &CryptoProvider,
) -> Result<Vec<Arc<Entry>>, Vec<String>> {
    let now = certs::unix_now();
    let mut entries = Vec::new();
    let mut errors = Vec::new();
    for cert in &c.certificates {
        match certs::load(&cert.cert, &cert.key, provider, now) {
            Ok(loaded) => entries.push(Arc::new(Entry {
                loaded,
                source: Source::Files {
                    cert: cert.cert.clone(),
                    key: cert.key.clone(),
                },
            })),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(entries)
    } else {
        Err(errors)
    }
}

/// A listener's verifier of client certificates and the revocation lists it checks.
pub type ClientVerifier = (Arc<dyn ClientCertVerifier>, Vec<crl::Crl>);

/// The verifier of client certificates for `c` (`client_ca`, `client_auth`, `client_crl`) and
/// the revocation lists it checks; `None` when the listener asks for no client certificate.
/// Every problem names its file (`shellac check` runs this too).
pub fn client_verifier(
    c: &TlsConfig,
    provider: &Arc<CryptoProvider>,
) -> Result<Option<ClientVerifier>, String> {
    let Some(ca) = &c.client_ca else {
        return Ok(None);
    };
    let roots = super::client::roots::ca_file(ca)?;
    let crls = crl::load_all(&c.client_crl, certs::unix_now())?;
    let mut verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
    if let ClientAuth::Optional = c.client_auth {
        verifier = verifier.allow_unauthenticated();
    }
    if !crls.is_empty() {
        // As nginx's `ssl_crl` (OpenSSL's CRL_CHECK_ALL): every certificate of the chain
        // below the trust anchor is checked, one whose issuer has no list here is refused,
        // and a list past its next update refuses what it covers.
        verifier = verifier
            .with_crls(crls.iter().map(|l| l.der.clone()))
            .enforce_revocation_expiration();
    }
    let verifier = verifier.build().map_err(|e| {
        let file = match e {
            rustls::server::VerifierBuilderError::InvalidCrl(_) => c
                .client_crl
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            _ => ca.display().to_string(),
        };
        format!("{file}: cannot verify clients with it ({e})")
    })?;
    Ok(Some((verifier, crls)))
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

/// What is known about an established client TLS connection; each of its requests carries it
/// (request extensions) for rules, logs and `X-Forwarded-Proto`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnTls {
    /// `TLSv1.2`, `TLSv1.3`.
    pub version: &'static str,
    /// IANA name: `TLS13_AES_128_GCM_SHA256`.
    pub cipher: &'static str,
    /// The server name the client sent.
    pub sni: Option<Box<str>>,
    /// The negotiated application protocol.
    pub alpn: Option<Box<str>>,
    /// The verified client certificate's subject (RFC 4514).
    pub client: Option<Box<str>>,
    pub resumed: bool,
}

/// Request extension: the request arrived over TLS.
#[derive(Clone, Debug)]
pub struct Session(pub Arc<ConnTls>);

impl ConnTls {
    pub fn of(conn: &ServerConnection) -> ConnTls {
        let version = match conn.protocol_version() {
            Some(ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "unknown",
        };
        let cipher = conn
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .unwrap_or("unknown");
        let client = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|c| super::der::parse(c).ok())
            .map(|f| f.subject.into_boxed_str());
        ConnTls {
            version,
            cipher,
            sni: conn.server_name().map(Into::into),
            alpn: conn
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned().into_boxed_str()),
            client,
            resumed: matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
        }
    }
}

/// Why a handshake failed, as counted (`tls_handshake_fail_<reason>`) and logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// `handshake_timeout` passed.
    Timeout,
    /// The client closed the connection.
    Eof,
    /// The first bytes were not a TLS handshake (plain HTTP to a TLS port, a scanner).
    NotTls,
    /// No protocol version in common (`min_version`, an old client).
    Version,
    /// No cipher suite, key exchange group or signature scheme in common.
    Cipher,
    /// ALPN offered without a protocol this listener serves.
    Alpn,
    /// No certificate for the server name (`unknown_name = "refuse"`) or for the client's
    /// signature schemes.
    NoCertificate,
    /// A client certificate missing (required) or not verifiable.
    ClientCert,
    /// A client certificate a revocation list (`client_crl`) revokes.
    ClientCertRevoked,
    /// The client sent an alert (it refused our certificate, or gave up).
    PeerAlert,
    /// Anything else the peer did wrong.
    Protocol,
    /// A transport error.
    Io,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Timeout => "timeout",
            Reason::Eof => "eof",
            Reason::NotTls => "not_tls",
            Reason::Version => "version",
            Reason::Cipher => "cipher",
            Reason::Alpn => "alpn",
            Reason::NoCertificate => "no_certificate",
            Reason::ClientCert => "client_cert",
            Reason::ClientCertRevoked => "client_cert_revoked",
            Reason::PeerAlert => "peer_alert",
            Reason::Protocol => "protocol",
            Reason::Io => "io",
        }
    }

    pub fn of(e: &HandshakeError) -> Reason {
        use rustls::{Error, PeerIncompatible as P, PeerMisbehaved as M};
        match e {
            HandshakeError::Eof => Reason::Eof,
            HandshakeError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Reason::Eof,
            HandshakeError::Io(_) => Reason::Io,
            HandshakeError::Tls(e) => match e {
                Error::InvalidMessage(_) => Reason::NotTls,
                Error::PeerIncompatible(p) => match p {
                    P::NoCipherSuitesInCommon
                    | P::NoKxGroupsInCommon
                    | P::NoSignatureSchemesInCommon
                    | P::NoEcPointFormatsInCommon
                    | P::UncompressedEcPointsRequired => Reason::Cipher,
                    P::SupportedVersionsExtensionRequired
                    | P::Tls12NotOffered
                    | P::Tls12NotOfferedOrEnabled
                    | P::ServerDoesNotSupportTls12Or13 => Reason::Version,
                    _ => Reason::Protocol,
                },
                Error::PeerMisbehaved(M::IllegalTlsInnerPlaintext) => Reason::Protocol,
                Error::NoApplicationProtocol => Reason::Alpn,
                Error::InvalidCertificate(rustls::CertificateError::Revoked) => {
                    Reason::ClientCertRevoked
                }
                Error::NoCertificatesPresented | Error::InvalidCertificate(_) => Reason::ClientCert,
                Error::AlertReceived(_) => Reason::PeerAlert,
                Error::General(m) if m == "no server certificate chain resolved" => {
                    Reason::NoCertificate
                }
                _ => Reason::Protocol,
            },
        }
    }

    /// Counts a failure with this reason (and in the total).
    pub fn count(self, c: &Counters) {
        c.tls_handshake_fail.inc();
        let counter = match self {
            Reason::Timeout => &c.tls_handshake_fail_timeout,
            Reason::Eof => &c.tls_handshake_fail_eof,
            Reason::NotTls => &c.tls_handshake_fail_not_tls,
            Reason::Version => &c.tls_handshake_fail_version,
            Reason::Cipher => &c.tls_handshake_fail_cipher,
            Reason::Alpn => &c.tls_handshake_fail_alpn,
            Reason::NoCertificate => &c.tls_handshake_fail_no_certificate,
            Reason::ClientCert => &c.tls_handshake_fail_client_cert,
            Reason::ClientCertRevoked => &c.tls_handshake_fail_client_cert_revoked,
            Reason::PeerAlert => &c.tls_handshake_fail_peer_alert,
            Reason::Protocol => &c.tls_handshake_fail_protocol,
            Reason::Io => &c.tls_handshake_fail_io,
        };
        counter.inc();
    }
}
