//! What Shellac shows an ACME server validating an order: HTTP-01 key authorizations by token
//! (answered on any listener, before rules, cache and backends: `proxy/fsm.rs` asks
//! [`Tokens::answer`]) and TLS-ALPN-01 certificates (RFC 8737: self-signed, for the one name,
//! with the critical acmeIdentifier extension holding the SHA-256 of the key authorization;
//! the listener's `CertStore` hands it to `acme-tls/1` clients). Both are published only
//! while an order waits for validation, and withdrawn when it ends whatever the outcome
//! ([`Published`]'s drop).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;

use crate::tls::store::CertStore;

/// Where HTTP-01 tokens are asked for.
pub const HTTP01_PREFIX: &str = "/.well-known/acme-challenge/";

/// HTTP-01 key authorizations by token, for every certificate this process is ordering.
#[derive(Debug, Default)]
pub struct Tokens {
    map: RwLock<HashMap<String, String>>,
}

impl Tokens {
    fn insert(&self, token: &str, key_authorization: &str) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.insert(token.to_string(), key_authorization.to_string());
    }

    fn remove(&self, token: &str) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.remove(token);
    }

    /// The key authorization to answer a request for `path` with, when `path` is
    /// `/.well-known/acme-challenge/TOKEN` for a token being validated now.
    pub fn answer(&self, path: &str) -> Option<String> {
        let token = path.strip_prefix(HTTP01_PREFIX)?;
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        if map.is_empty() {
            return None;
        }
        map.get(token).cloned()
    }
}

/// The TLS-ALPN-01 certificate for `name`: self-signed, a new P-256 key, the acmeIdentifier
/// extension (critical) over `digest`, the SHA-256 of the key authorization.
pub fn tls_alpn_certificate(name: &str, digest: &[u8]) -> Result<Arc<CertifiedKey>, String> {
    let fail = |e: rcgen::Error| format!("cannot make the TLS-ALPN-01 certificate for {name}: {e}");
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).map_err(fail)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .custom_extensions
        .push(rcgen::CustomExtension::new_acme_identifier(digest));
    let key = rcgen::KeyPair::generate().map_err(fail)?;
    let cert = params.self_signed(&key).map_err(fail)?;
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let signing = crate::tls::provider()
        .key_provider
        .load_private_key(der)
        .map_err(|e| format!("cannot use the TLS-ALPN-01 key for {name}: {e}"))?;
    Ok(Arc::new(CertifiedKey::new(
        vec![cert.der().clone()],
        signing,
    )))
}

/// The challenges one order published; withdrawn when dropped (the order ended, failed, timed
/// out or its task was stopped).
pub struct Published {
    tokens: Arc<Tokens>,
    store: Option<Arc<CertStore>>,
    http: Vec<String>,
    tls: Vec<String>,
}

impl Published {
    pub fn new(tokens: Arc<Tokens>, store: Option<Arc<CertStore>>) -> Published {
        Published {
            tokens,
            store,
            http: Vec::new(),
            tls: Vec::new(),
        }
    }

    /// Answers `/.well-known/acme-challenge/{token}` with `key_authorization`.
    pub fn http(&mut self, token: &str, key_authorization: &str) {
        self.tokens.insert(token, key_authorization);
        self.http.push(token.to_string());
    }

    /// Answers `acme-tls/1` handshakes for `name` with `cert`; false when the listener is
    /// gone.
    pub fn tls(&mut self, name: &str, cert: Arc<CertifiedKey>) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        store.set_challenge(name, Some(cert));
        self.tls.push(name.to_string());
        true
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        for token in &self.http {
            self.tokens.remove(token);
        }
        if let Some(store) = &self.store {
            for name in &self.tls {
                store.set_challenge(name, None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_answered_only_while_published() {
        let tokens = Arc::new(Tokens::default());
        assert_eq!(tokens.answer("/.well-known/acme-challenge/abc"), None);
        {
            let mut p = Published::new(tokens.clone(), None);
            p.http("abc", "abc.thumb");
            assert_eq!(
                tokens.answer("/.well-known/acme-challenge/abc").as_deref(),
                Some("abc.thumb")
            );
            assert_eq!(tokens.answer("/.well-known/acme-challenge/other"), None);
            assert_eq!(tokens.answer("/abc"), None);
        }
        assert_eq!(tokens.answer("/.well-known/acme-challenge/abc"), None);
    }

    #[test]
    fn the_tls_alpn_certificate_names_the_name_and_carries_the_digest() {
        let digest = [7u8; 32];
        let cert = tls_alpn_certificate("www.example.com", &digest).unwrap();
        let der = cert.cert[0].as_ref();
        let facts = crate::tls::der::parse(&cert.cert[0]).unwrap();
        assert_eq!(facts.dns_names, vec!["www.example.com".to_string()]);
        // id-pe-acmeIdentifier 1.3.6.1.5.5.7.1.31, critical, OCTET STRING of the digest.
        let oid = [0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x1f];
        let at = der
            .windows(oid.len())
            .position(|w| w == oid)
            .expect("acmeIdentifier extension");
        let rest = &der[at + oid.len()..];
        assert_eq!(&rest[..3], &[0x01, 0x01, 0xff], "critical");
        // extnValue OCTET STRING (34 bytes) wrapping OCTET STRING (32 bytes): the digest.
        assert_eq!(&rest[3..7], &[0x04, 0x22, 0x04, 0x20]);
        assert_eq!(&rest[7..39], &digest);
    }
}
