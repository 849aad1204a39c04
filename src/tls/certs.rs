//! Certificates and keys from PEM files, checked the way an operator needs them checked: every
//! problem is one sentence naming the file (missing, unreadable, not PEM, expired, not yet
//! valid, a key that is not the certificate's).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::der::{self, CertFacts};

/// A certificate chain with its key, ready for handshakes, and what it says about itself.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub key: Arc<CertifiedKey>,
    pub facts: CertFacts,
    /// The key's algorithm, in words (`ECDSA`, `RSA`, `Ed25519`).
    pub algorithm: &'static str,
}

/// Seconds since the epoch, now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A time (seconds since the epoch) as an HTTP date, for messages and the admin API.
pub fn format_time(secs: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(secs.max(0) as u64);
    httpdate::fmt_http_date(t)
}

/// The certificates of a PEM file, in order (an error names the file).
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    parse_certs(path, &read(path, "certificate")?)
}

/// The certificates of `pem`, the contents of the file at `path` (an error names the file).
pub fn parse_certs(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem).collect();
    let certs = certs.map_err(|e| format!("{}: not a valid PEM file ({e})", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{}: holds no certificate (a PEM block `-----BEGIN CERTIFICATE-----`)",
            path.display()
        ));
    }
    Ok(certs)
}

pub(super) fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            std::io::ErrorKind::PermissionDenied => {
                "permission denied (Shellac's user must be able to read it)".to_string()
            }
            _ => e.to_string(),
        };
        format!("cannot read {what} file {}: {why}", path.display())
    })
}

/// Loads a certificate chain and its private key, and checks that the key is the
/// certificate's and that the certificate is valid at `now` (seconds since the epoch).
pub fn load(
    cert: &Path,
    key: &Path,
    provider: &CryptoProvider,
    now: i64,
) -> Result<Loaded, String> {
    let chain = read_certs(cert)?;
    let key_pem = read(key, "key")?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => format!(
            "{}: holds no private key (a PEM block `-----BEGIN PRIVATE KEY-----`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`)",
            key.display()
        ),
        e => format!("{}: not a valid PEM key file ({e})", key.display()),
    })?;
    let signing = provider
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| format!("{}: unusable private key ({e})", key.display()))?;
    let algorithm = match signing.algorithm() {
        rustls::SignatureAlgorithm::ECDSA => "ECDSA",
        rustls::SignatureAlgorithm::RSA => "RSA",
        rustls::SignatureAlgorithm::ED25519 => "Ed25519",
        _ => "other",
    };
    let facts = der::parse(&chain[0]).map_err(|e| format!("{}: {e}", cert.display()))?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|_| {
        format!(
            "the key in {} does not belong to the certificate in {} (its public key differs)",
            key.display(),
            cert.display()
        )
    })?;
    check_validity(&facts, cert, now)?;
    Ok(Loaded {
        key: Arc::new(certified),
        facts,
        algorithm,
    })
}

/// An expired or not yet valid certificate is an error naming the file.
pub fn check_validity(facts: &CertFacts, file: &Path, now: i64) -> Result<(), String> {
    if now > facts.not_after {
        return Err(format!(
            "{}: the certificate for {} expired on {}",
            file.display(),
            facts.names_text(),
            format_time(facts.not_after)
        ));
    }
    if now < facts.not_before {
        return Err(format!(
            "{}: the certificate for {} is not valid before {} (is the clock right?)",
            file.display(),
            facts.names_text(),
            format_time(facts.not_before)
        ));
    }
    Ok(())
}

impl CertFacts {
    /// The names, for messages: `a.example, *.b.example` (or the subject when there are none).
    pub fn names_text(&self) -> String {
        let mut names: Vec<String> = self.dns_names.clone();
        names.extend(self.ip_addresses.iter().map(|ip| ip.to_string()));
        if names.is_empty() {
            format!("`{}`", self.subject)
        } else {
            names.join(", ")
        }
    }
}

/// Where a certificate came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `[[tls.certificate]]` files.
    Files { cert: PathBuf, key: PathBuf },
    /// Installed at run time through [`super::store::CertStore::install`] (ACME), by whom.
    Installed(String),
}
