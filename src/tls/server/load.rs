//! What a `[[tls]]` listener's files give: its certificates, loaded and checked, and the
//! verifier of client certificates with the revocation lists it checks (`shellac check` and
//! preflight run these too). Every problem names its file.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;

use crate::config::tls::{ClientAuth, TlsConfig};
use crate::tls::certs::{self, Source};
use crate::tls::crl;
use crate::tls::store::Entry;

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
    let roots = crate::tls::client::roots::ca_file(ca)?;
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
