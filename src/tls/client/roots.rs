//! Trust anchors for every TLS client Shellac makes: an operator's CA file, or the operating
//! system's trust store (rustls-native-certs reads `/etc/ssl/certs` and the files OpenSSL
//! would; no network). Every error is one sentence naming the file or the setting to give.

use std::path::Path;

use rustls::RootCertStore;

use crate::tls::certs;

/// Whom a client trusts.
#[derive(Clone, Copy, Debug)]
pub enum Trust<'a> {
    /// The CA certificates of this PEM file (a private CA, a test CA).
    File(&'a Path),
    /// The system's trust store; `instead` names the setting that gives a CA file, for the
    /// error when the store is empty (``"`ca`"``, `"tls.acme.ca_root"`).
    System { instead: &'a str },
}

impl<'a> Trust<'a> {
    /// `ca` when given, else the system's store (`instead` as for [`Trust::System`]).
    pub fn file_or_system(ca: Option<&'a Path>, instead: &'a str) -> Trust<'a> {
        match ca {
            Some(path) => Trust::File(path),
            None => Trust::System { instead },
        }
    }

    /// The trust anchors.
    pub fn roots(&self) -> Result<RootCertStore, String> {
        match self {
            Trust::File(path) => ca_file(path),
            Trust::System { instead } => system(instead),
        }
    }
}

/// The certificates of the CA file at `path` as trust anchors; every one must be usable.
pub fn ca_file(path: &Path) -> Result<RootCertStore, String> {
    ca_pem(path, &certs::read(path, "certificate")?)
}

/// As [`ca_file`], for `pem` already read from `path` (a client that takes the file's bytes
/// checks them with this).
pub fn ca_pem(path: &Path, pem: &[u8]) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in certs::parse_certs(path, pem)? {
        roots
            .add(cert)
            .map_err(|e| format!("{}: not a usable CA certificate ({e})", path.display()))?;
    }
    Ok(roots)
}

/// The system's trust store as it was read: the certificates that parse (one odd certificate
/// must not stop the rest), and the first of its files that could not be read, if any.
pub struct SystemStore {
    pub roots: RootCertStore,
    pub unreadable: Option<String>,
}

/// Reads the system's trust store.
pub fn system_store() -> SystemStore {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    SystemStore {
        roots,
        unreadable: found.errors.first().map(ToString::to_string),
    }
}

/// The system's trust store, which must hold at least one certificate (`instead` names the
/// setting that gives a CA file instead).
pub fn system(instead: &str) -> Result<RootCertStore, String> {
    let store = system_store();
    if store.roots.is_empty() {
        return Err(format!(
            "no CA certificates in the system's trust store (install ca-certificates, or give {instead})"
        ));
    }
    Ok(store.roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA file's problems name the file; a usable one gives its certificates.
    #[test]
    fn a_ca_file_is_checked_and_named() {
        let dir = std::env::temp_dir().join(format!("shellac-roots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let e = Trust::File(&missing).roots().unwrap_err();
        assert!(e.contains("missing.pem: no such file"), "{e}");
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let e = ca_file(&junk).unwrap_err();
        assert!(e.contains("junk.pem: holds no certificate"), "{e}");

        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).unwrap();
        let good = dir.join("ca.pem");
        std::fs::write(&good, ca.pem()).unwrap();
        let roots = Trust::file_or_system(Some(&good), "`ca`").roots().unwrap();
        assert_eq!(roots.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
