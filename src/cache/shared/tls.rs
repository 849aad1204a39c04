//! TLS to the Redis Cluster (`[storage.shared] tls`): the CA, client certificate and key
//! files read and checked once, the same way for `shellac check` and for `serve`, then handed
//! to redis-rs's rustls client (which makes every node's connection from them; the trust
//! anchors are checked by `tls::client::roots`, as every other client's are).
//!
//! What the client can and cannot do decides the settings: it verifies each node's
//! certificate for the address the cluster announces for that node (an IP address unless the
//! nodes announce host names), or — `verify_name = false` — the chain only; it has no way to
//! check one fixed name instead, so there is no `server_name`. There is no "accept anything"
//! mode either: a cluster's own CA in `ca` is always possible, and an unverified connection
//! would hand the cache (and every purge) to whoever is on the path.

use std::path::Path;

use redis::{ClientTlsConfig, TlsCertificates};

use crate::config::SharedTls;
use crate::tls::client::roots;
use crate::tls::{certs, provider};

/// A problem with one of the files: the `tls` key it is at (`ca`, `cert`, `key`) and what is
/// wrong, naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    pub key: &'static str,
    pub message: String,
}

/// Reads and checks `t`'s files: the CA file holds usable CA certificates (or, without one,
/// the system's trust store holds some); the client certificate is valid now and the key is
/// its key.
pub fn load(t: &SharedTls) -> Result<TlsCertificates, FileError> {
    let fail = |key: &'static str| move |message: String| FileError { key, message };
    let system = roots::system_store();
    let root_cert = match &t.ca {
        Some(ca) => Some(ca_file(ca).map_err(fail("ca"))?),
        None => {
            if system.roots.is_empty() {
                return Err(fail("ca")(
                    "no CA certificates in the system's trust store (install ca-certificates, or give `ca`: the cluster's CA file)"
                        .into(),
                ));
            }
            None
        }
    };
    // The client reads the system's store on every connection, even with `ca`, and refuses to
    // connect when a file of it cannot be read: say so now rather than at every retry.
    if let Some(e) = system.unreadable {
        return Err(fail("ca")(format!(
            "the system's trust store has a file that cannot be read ({e}); the Redis client reads it on every connection, even with `ca`: fix or remove that file"
        )));
    }
    let client_tls = match (&t.cert, &t.key) {
        (Some(cert), Some(key)) => {
            certs::load(cert, key, &provider(), certs::unix_now()).map_err(|e| {
                let at = if e.contains(&key.display().to_string())
                    && !e.contains(&cert.display().to_string())
                {
                    "key"
                } else {
                    "cert"
                };
                fail(at)(e)
            })?;
            Some(ClientTlsConfig {
                client_cert: read(cert).map_err(fail("cert"))?,
                client_key: read(key).map_err(fail("key"))?,
            })
        }
        _ => None,
    };
    Ok(TlsCertificates {
        client_tls,
        root_cert,
    })
}

/// The CA file's bytes, once every certificate in it is known to be a usable trust anchor.
fn ca_file(ca: &Path) -> Result<Vec<u8>, String> {
    let pem = read(ca)?;
    roots::ca_pem(ca, &pem)?;
    Ok(pem)
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            std::io::ErrorKind::PermissionDenied => {
                "permission denied (Shellac's user must be able to read it)".to_string()
            }
            _ => e.to_string(),
        };
        format!("cannot read {}: {why}", path.display())
    })
}

/// Whether a connection failure reads as a TLS one (handshake, certificate), for the log's
/// hint: the client's errors carry rustls's words, not its types.
pub fn looks_like_tls(error: &str) -> bool {
    let e = error.to_ascii_lowercase();
    [
        "certificate",
        "tls",
        "handshake",
        "alert",
        "unknownissuer",
        "notvalidforname",
    ]
    .iter()
    .any(|w| e.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls(ca: Option<&Path>, cert: Option<&Path>, key: Option<&Path>) -> SharedTls {
        SharedTls {
            ca: ca.map(Path::to_path_buf),
            cert: cert.map(Path::to_path_buf),
            key: key.map(Path::to_path_buf),
            verify_name: true,
        }
    }

    /// Each file's problem is put at its key, naming the file.
    #[test]
    fn a_bad_file_is_named_at_its_key() {
        let dir = std::env::temp_dir().join(format!("shellac-shared-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let e = load(&tls(Some(&missing), None, None)).unwrap_err();
        assert_eq!(e.key, "ca");
        assert!(e.message.contains("missing.pem: no such file"), "{e:?}");

        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let e = load(&tls(Some(&junk), None, None)).unwrap_err();
        assert_eq!(e.key, "ca");
        assert!(e.message.contains("holds no certificate"), "{e:?}");

        // A usable CA (made here), then a client certificate whose key file is missing.
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).unwrap();
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        assert!(load(&tls(Some(&ca_file), None, None)).is_ok());
        let e = load(&tls(Some(&ca_file), Some(&ca_file), Some(&missing))).unwrap_err();
        assert_eq!(e.key, "key");
        assert!(e.message.contains("missing.pem"), "{e:?}");
        // A key that is not the certificate's.
        let other = dir.join("other.key");
        std::fs::write(&other, rcgen::KeyPair::generate().unwrap().serialize_pem()).unwrap();
        let e = load(&tls(Some(&ca_file), Some(&ca_file), Some(&other))).unwrap_err();
        assert!(e.message.contains("does not belong"), "{e:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tls_failures_are_recognised() {
        assert!(looks_like_tls("invalid peer certificate: UnknownIssuer"));
        assert!(looks_like_tls("received fatal alert: CertificateRequired"));
        assert!(!looks_like_tls("Connection refused (os error 111)"));
    }
}
