//! What the admin API, `/metrics` and the dashboard show of the TLS listeners: each
//! certificate ([`CertView`]) and `GET /tls` (each listener's settings in brief, its
//! revocation lists and certificates).

use super::Frontends;
use crate::config::tls::{ClientAuth, TlsVersion};
use crate::tls::certs::{self, Source};

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
}
