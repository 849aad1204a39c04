//! The certificates of one TLS listener and how a handshake picks one (SNI).
//!
//! A [`CertStore`] is the listener's `ResolvesServerCert`: the table it reads is swapped
//! whole (an `ArcSwap`), so a reload, a file change or an ACME client replaces certificates
//! while handshakes run, and connections already established keep theirs.
//!
//! Selection, for the name a client sends: an exact name, then a wildcard `*.rest` for a name
//! one label longer than `rest`; among the certificates for that name the first whose key can
//! sign with a scheme the client offers (an RSA and an ECDSA certificate for one name: each
//! client gets one it can use). No name, or a name nothing covers: the default certificate
//! (the first configured) or, with `unknown_name = "refuse"`, no certificate (the handshake
//! fails: `tls_handshake_fail_no_certificate`).
//!
//! For an ACME client: [`CertStore::install`] adds or replaces a certificate for the names it
//! covers (it wins over configured files for those names), [`CertStore::uninstall`] removes
//! it; installed certificates survive reloads and file changes. While an ACME server validates
//! a name with TLS-ALPN-01 (RFC 8737), [`CertStore::set_challenge`] holds the one-off
//! certificate a client offering only ALPN `acme-tls/1` gets for that name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::certs::{Loaded, Source};
use crate::config::tls::UnknownName;

/// The ALPN protocol of TLS-ALPN-01 challenges (RFC 8737 §6.2).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// One certificate in a store.
#[derive(Debug)]
pub struct Entry {
    pub loaded: Loaded,
    pub source: Source,
}

/// What handshakes read: built once per change.
#[derive(Debug, Default)]
struct Table {
    exact: HashMap<String, Vec<Arc<Entry>>>,
    /// Keyed by what follows `*.`.
    wildcard: HashMap<String, Vec<Arc<Entry>>>,
    default: Option<Arc<Entry>>,
    refuse_unknown: bool,
    /// TLS-ALPN-01 challenge certificates by name, answered only to `acme-tls/1` clients.
    challenges: HashMap<String, Arc<CertifiedKey>>,
}

/// The certificates of a listener: from its files, and installed at run time.
#[derive(Debug)]
pub struct CertStore {
    table: ArcSwap<Table>,
    /// The sources of truth the table is built from (changes are rare; handshakes never lock).
    inner: Mutex<Sources>,
}

#[derive(Debug, Default)]
struct Sources {
    files: Vec<Arc<Entry>>,
    installed: Vec<Arc<Entry>>,
    unknown_name: UnknownName,
    challenges: HashMap<String, Arc<CertifiedKey>>,
}

impl Sources {
    fn table(&self) -> Table {
        let mut t = Table {
            refuse_unknown: self.unknown_name == UnknownName::Refuse,
            ..Table::default()
        };
        // Installed certificates first: they win for the names they cover.
        for e in self.installed.iter().chain(&self.files) {
            for name in &e.loaded.facts.dns_names {
                match name.strip_prefix("*.") {
                    Some(rest) => t
                        .wildcard
                        .entry(rest.to_string())
                        .or_default()
                        .push(e.clone()),
                    None => t.exact.entry(name.clone()).or_default().push(e.clone()),
                }
            }
        }
        t.default = self.files.first().or(self.installed.first()).cloned();
        t.challenges = self.challenges.clone();
        t
    }
}

impl CertStore {
    pub fn new(files: Vec<Arc<Entry>>, unknown_name: UnknownName) -> CertStore {
        let sources = Sources {
            files,
            installed: Vec::new(),
            unknown_name,
            challenges: HashMap::new(),
        };
        CertStore {
            table: ArcSwap::from_pointee(sources.table()),
            inner: Mutex::new(sources),
        }
    }

    fn change(&self, f: impl FnOnce(&mut Sources)) {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut s);
        self.table.store(Arc::new(s.table()));
    }

    /// Replaces the certificates that came from files (a reload or a file change); installed
    /// ones stay.
    pub fn replace_files(&self, files: Vec<Arc<Entry>>, unknown_name: UnknownName) {
        self.change(|s| {
            s.files = files;
            s.unknown_name = unknown_name;
        });
    }

    /// Adds a certificate at run time (for an ACME client), replacing an installed one with
    /// exactly the same names. `by` says who installed it (`GET /tls` shows it). It answers
    /// for its names from the next handshake on, before any configured file that covers
    /// them.
    pub fn install(&self, loaded: Loaded, by: &str) {
        let entry = Arc::new(Entry {
            loaded,
            source: Source::Installed(by.to_string()),
        });
        self.change(|s| {
            let names = &entry.loaded.facts.dns_names;
            s.installed.retain(|e| &e.loaded.facts.dns_names != names);
            s.installed.push(entry.clone());
        });
    }

    /// Removes the installed certificate with exactly these names; whether there was one.
    pub fn uninstall(&self, names: &[String]) -> bool {
        let mut found = false;
        self.change(|s| {
            let before = s.installed.len();
            s.installed.retain(|e| e.loaded.facts.dns_names != names);
            found = s.installed.len() != before;
        });
        found
    }

    /// Sets (or with `None` removes) the TLS-ALPN-01 challenge certificate for `name`: what a
    /// client that offers only ALPN `acme-tls/1` and names `name` gets, from the next
    /// handshake on.
    pub fn set_challenge(&self, name: &str, cert: Option<Arc<CertifiedKey>>) {
        self.change(|s| match cert {
            Some(c) => {
                s.challenges.insert(name.to_string(), c);
            }
            None => {
                s.challenges.remove(name);
            }
        });
    }

    /// Every certificate, installed ones first (for the admin API and metrics).
    pub fn entries(&self) -> Vec<Arc<Entry>> {
        let s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.installed.iter().chain(&s.files).cloned().collect()
    }

    /// The certificate a client naming `sni` (lower-cased) gets, if any, among those whose key
    /// `usable` accepts.
    fn pick(
        &self,
        sni: Option<&str>,
        usable: impl Fn(&CertifiedKey) -> bool,
    ) -> Option<Arc<CertifiedKey>> {
        let t = self.table.load();
        let first = |list: Option<&Vec<Arc<Entry>>>| {
            list.and_then(|l| l.iter().find(|e| usable(&e.loaded.key)))
                .map(|e| e.loaded.key.clone())
        };
        if let Some(name) = sni {
            if let Some(k) = first(t.exact.get(name)) {
                return Some(k);
            }
            if let Some((_, rest)) = name.split_once('.')
                && let Some(k) = first(t.wildcard.get(rest))
            {
                return Some(k);
            }
            if t.refuse_unknown {
                return None;
            }
        } else if t.refuse_unknown {
            return None;
        }
        t.default.as_ref().map(|e| e.loaded.key.clone())
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let sni = hello.server_name().map(|n| n.to_ascii_lowercase());
        // An ACME server validating TLS-ALPN-01 offers `acme-tls/1` alone (RFC 8737 §3): it
        // gets the challenge certificate for its name or nothing, never a real one.
        let mut offered = hello.alpn().into_iter().flatten().peekable();
        if offered.peek().is_some() && offered.all(|p| p == ACME_TLS_ALPN) {
            let t = self.table.load();
            return sni.and_then(|n| t.challenges.get(&n).cloned());
        }
        let schemes = hello.signature_schemes();
        self.pick(sni.as_deref(), |k| k.key.choose_scheme(schemes).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::der::CertFacts;

    fn entry(names: &[&str], tag: &str) -> Arc<Entry> {
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.self_signed(&key).unwrap();
        let provider = rustls::crypto::ring::default_provider();
        let der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        let signing = provider.key_provider.load_private_key(der).unwrap();
        let loaded = Loaded {
            key: Arc::new(CertifiedKey::new(vec![cert.der().clone()], signing)),
            facts: CertFacts {
                dns_names: names.iter().map(|n| n.to_string()).collect(),
                ip_addresses: vec![],
                subject: tag.into(),
                issuer: tag.into(),
                not_before: 0,
                not_after: i64::MAX,
            },
            algorithm: "ECDSA",
        };
        Arc::new(Entry {
            loaded,
            source: Source::Installed(tag.into()),
        })
    }

    fn picked(store: &CertStore, sni: Option<&str>) -> Option<String> {
        let key = store.pick(sni, |_| true)?;
        let entries = store.entries();
        entries
            .iter()
            .find(|e| Arc::ptr_eq(&e.loaded.key, &key))
            .map(|e| e.loaded.facts.subject.clone())
    }

    #[test]
    fn exact_then_wildcard_then_default_or_refuse() {
        let store = CertStore::new(
            vec![
                entry(&["a.example"], "a"),
                entry(&["*.b.example", "b.example"], "b"),
            ],
            UnknownName::Default,
        );
        assert_eq!(picked(&store, Some("a.example")).as_deref(), Some("a"));
        assert_eq!(picked(&store, Some("x.b.example")).as_deref(), Some("b"));
        assert_eq!(picked(&store, Some("b.example")).as_deref(), Some("b"));
        // A wildcard covers one label only.
        assert_eq!(picked(&store, Some("y.x.b.example")).as_deref(), Some("a"));
        assert_eq!(picked(&store, None).as_deref(), Some("a"));
        store.replace_files(store.entries(), UnknownName::Refuse);
        assert_eq!(picked(&store, Some("nope.example")), None);
        assert_eq!(picked(&store, None), None);
        assert_eq!(picked(&store, Some("x.b.example")).as_deref(), Some("b"));
    }

    #[test]
    fn installed_certificates_win_and_survive_file_changes() {
        let store = CertStore::new(vec![entry(&["a.example"], "file")], UnknownName::Default);
        store.install(entry(&["a.example"], "acme").loaded.clone(), "acme");
        assert_eq!(picked(&store, Some("a.example")).as_deref(), Some("acme"));
        store.replace_files(vec![entry(&["a.example"], "file2")], UnknownName::Default);
        assert_eq!(picked(&store, Some("a.example")).as_deref(), Some("acme"));
        assert!(store.uninstall(&["a.example".to_string()]));
        assert_eq!(picked(&store, Some("a.example")).as_deref(), Some("file2"));
        assert!(!store.uninstall(&["a.example".to_string()]));
    }
}
