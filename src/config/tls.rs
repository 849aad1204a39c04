//! `[[tls]]`: TLS listeners (addresses, certificates, protocol versions, resumption, client
//! certificates) and their checks across settings. What the files hold is checked by
//! `src/preflight/` (through `tls::certs`), since that needs the disk.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::lists;
use super::units::Dur;

/// `[[tls]]`: one TLS listener group — the addresses it accepts on and how it terminates TLS.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// Name in logs, stats and the admin API. Default `tls<N>` (N: its position).
    #[serde(default)]
    pub name: String,
    /// Addresses to accept TLS connections on. Required, at least one.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub listen: Vec<SocketAddr>,
    /// Certificates (chain and key); the first is the default. At least one, unless `acme`
    /// obtains them.
    #[serde(rename = "certificate", default)]
    pub certificates: Vec<CertificateConfig>,
    /// Certificates obtained and renewed from an ACME server (`[[tls.acme]]`,
    /// config/acme.rs). Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acme: Vec<super::acme::AcmeConfig>,
    /// A client that sends no server name, or one no certificate covers: answered with the
    /// first certificate (`"default"`) or refused (`"refuse"`). Default `"default"`.
    #[serde(default)]
    pub unknown_name: UnknownName,
    /// Lowest protocol version accepted: `"1.2"` or `"1.3"`. Default `"1.2"`.
    #[serde(default)]
    pub min_version: TlsVersion,
    /// Application protocols offered by ALPN, in order of preference. Default
    /// `["h2", "http/1.1"]`.
    #[serde(default = "default_alpn", deserialize_with = "lists::one_or_many")]
    pub alpn: Vec<String>,
    /// Longest time from accept to the end of the handshake. Default `10s`.
    #[serde(default = "default_handshake_timeout")]
    pub handshake_timeout: Dur,
    /// Stateless resumption with session tickets. Default true.
    #[serde(default = "yes")]
    pub session_tickets: bool,
    /// Files with the ticket keys (80 random bytes each, `openssl rand 80`), shared by a fleet
    /// so that any node resumes another's sessions; the first encrypts new tickets, all
    /// decrypt. Default: none (keys made in memory, rotated every 6 hours).
    #[serde(default, deserialize_with = "lists::one_or_many")]
    pub ticket_key_file: Vec<PathBuf>,
    /// Sessions kept in memory for resumption by session ID (TLS 1.2) and stateful tickets;
    /// 0: none. Default 4096.
    #[serde(default = "default_session_cache")]
    pub session_cache: usize,
    /// CA certificates (PEM) that client certificates must chain to. Default: none (no
    /// client certificates asked for).
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: whether a client certificate is `"required"` or `"optional"`
    /// (verified when given). Default `"required"`.
    #[serde(default)]
    pub client_auth: ClientAuth,
    /// With `client_ca`: PEM files of certificate revocation lists; a client certificate a
    /// list revokes is refused. Default: none (no revocation check).
    #[serde(default, deserialize_with = "lists::one_or_many")]
    pub client_crl: Vec<PathBuf>,
    /// How often the certificate, key, CA and ticket-key files are checked for changes (a
    /// change reloads them, as a reload does); `"0s"`: never. Default `"5s"`.
    #[serde(default = "default_watch_interval")]
    pub watch_interval: Dur,
}

/// `[[tls.certificate]]`: a certificate chain and its private key.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CertificateConfig {
    /// PEM file: the certificate first, then its intermediates.
    pub cert: PathBuf,
    /// PEM file: the private key (PKCS#8, PKCS#1 RSA or SEC1 EC).
    pub key: PathBuf,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownName {
    #[default]
    Default,
    Refuse,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    #[default]
    #[serde(rename = "1.2")]
    V12,
    #[serde(rename = "1.3")]
    V13,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ClientAuth {
    #[default]
    Required,
    Optional,
}

fn default_alpn() -> Vec<String> {
    vec!["h2".into(), "http/1.1".into()]
}

fn default_handshake_timeout() -> Dur {
    Dur(Duration::from_secs(10))
}

fn default_watch_interval() -> Dur {
    Dur(Duration::from_secs(5))
}

fn default_session_cache() -> usize {
    4096
}

fn yes() -> bool {
    true
}

/// Application protocols a TLS listener can serve (ALPN names). Only what a session exists
/// for: never advertise a protocol that cannot be served.
pub const SERVABLE_ALPN: &[&str] = &["h2", "http/1.1"];

/// (key path, problem) for every `[[tls]]` problem the file alone shows.
pub(super) fn validate(tls: &[TlsConfig]) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let at = |i: usize, rest: &[&str]| {
        let mut p = vec!["tls".to_string(), i.to_string()];
        p.extend(rest.iter().map(|s| s.to_string()));
        p
    };
    for (i, t) in tls.iter().enumerate() {
        if tls[..i].iter().any(|o| o.name == t.name) {
            out.push((
                at(i, &["name"]),
                format!("`{}` names two [[tls]] listeners", t.name),
            ));
        }
        if t.listen.is_empty() {
            out.push((
                at(i, &["listen"]),
                "at least one listen address is required".into(),
            ));
        }
        if t.certificates.is_empty() && t.acme.is_empty() {
            out.push((
                at(i, &["listen"]),
                "a TLS listener needs at least one [[tls.certificate]] (cert and key files) or [[tls.acme]]".into(),
            ));
        }
        if t.alpn.is_empty() {
            out.push((
                at(i, &["alpn"]),
                format!(
                    "at least one protocol is required ({})",
                    SERVABLE_ALPN.join(", ")
                ),
            ));
        }
        for (j, p) in t.alpn.iter().enumerate() {
            if !SERVABLE_ALPN.contains(&p.as_str()) {
                let why = format!("Shellac serves only {}", SERVABLE_ALPN.join(", "));
                out.push((
                    at(i, &["alpn", &j.to_string()]),
                    format!("`{p}` cannot be offered: {why}"),
                ));
            } else if t.alpn[..j].contains(p) {
                out.push((
                    at(i, &["alpn", &j.to_string()]),
                    format!("`{p}` is listed twice"),
                ));
            }
        }
        if t.client_ca.is_none() && t.client_auth != ClientAuth::default() {
            out.push((
                at(i, &["client_auth"]),
                "needs `client_ca` (the CA file client certificates must chain to)".into(),
            ));
        }
        if t.client_ca.is_none() && !t.client_crl.is_empty() {
            out.push((
                at(i, &["client_crl"]),
                "needs `client_ca` (revocation lists apply to verified client certificates)".into(),
            ));
        }
        if !t.ticket_key_file.is_empty() && !t.session_tickets {
            out.push((
                at(i, &["ticket_key_file"]),
                "session tickets are off (`session_tickets = false`): the key files would not be used".into(),
            ));
        }
    }
    out
}

impl TlsConfig {
    /// Every file this listener reads (certificates, keys, client CA and revocation lists,
    /// ticket keys).
    pub fn files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for c in &self.certificates {
            out.push(c.cert.clone());
            out.push(c.key.clone());
        }
        out.extend(self.client_ca.iter().cloned());
        out.extend(self.client_crl.iter().cloned());
        out.extend(self.ticket_key_file.iter().cloned());
        out
    }
}
