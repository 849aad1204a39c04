//! The ACME state directory (`tls.acme.state_dir`): what is kept, where, and how it is
//! written.
//!
//! ```text
//! state_dir/                                  0700
//!   accounts/<server>/account.key             0600  the account's P-256 key (PKCS#8 PEM)
//!   accounts/<server>/account.json            0600  its URL, directory and contacts
//!   certificates/<first name>/certificate.pem 0600  the chain, then the certificate's key
//!   certificates/<first name>/meta.json       0600  names, directory, when it was issued
//! ```
//!
//! `<server>` is the directory URL's host, port and path in file-name characters. Every file
//! is written whole to a temporary file (mode 0600 from its creation), synced and renamed
//! over the old one, and the directory synced, so a crash leaves the old file or the new one.
//! The chain and its key share one file so that they can never disagree.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use serde::{Deserialize, Serialize};

use crate::tls::certs::Loaded;

/// The directory of the account for ACME server `directory`.
pub fn account_dir(state_dir: &Path, directory: &str) -> PathBuf {
    state_dir.join("accounts").join(slug(directory))
}

/// The directory of the certificate whose first name is `first`.
pub fn cert_dir(state_dir: &Path, first: &str) -> PathBuf {
    state_dir.join("certificates").join(first)
}

/// A directory URL in file-name characters: `https://acme-v02.api.letsencrypt.org/directory`
/// → `acme-v02.api.letsencrypt.org_directory`.
pub fn slug(directory: &str) -> String {
    let rest = directory
        .strip_prefix("https://")
        .or_else(|| directory.strip_prefix("http://"))
        .unwrap_or(directory);
    let mut out: String = rest
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    while out.ends_with('_') {
        out.pop();
    }
    if out.is_empty() || out.starts_with('.') {
        out.insert(0, '_');
    }
    out.truncate(200);
    out
}

/// Creates `dir` and its missing parents with mode 0700.
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Writes `bytes` to `path` whole: a 0600 temporary file beside it, synced, renamed over
/// `path`, the directory synced. Creates the directory (0700) if needed.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_dir(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        // A file left by an older run may have other permissions: these are the ones.
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// What is known about a stored certificate besides its PEM.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct Meta {
    /// The names it was ordered for.
    pub names: Vec<String>,
    /// The ACME server that issued it.
    pub directory: String,
    /// When it was issued (seconds since the epoch).
    pub issued_at: i64,
}

/// A certificate from the state directory.
pub struct Stored {
    pub loaded: Loaded,
    /// None when meta.json is missing or unreadable.
    pub meta: Option<Meta>,
}

/// Stores a certificate chain and its key (PEM) with `meta`.
pub fn store(state_dir: &Path, chain_pem: &str, key_pem: &str, meta: &Meta) -> Result<(), String> {
    let first = meta.names.first().map_or("", String::as_str);
    let dir = cert_dir(state_dir, first);
    let mut pem = String::with_capacity(chain_pem.len() + key_pem.len() + 1);
    pem.push_str(chain_pem.trim_end());
    pem.push('\n');
    pem.push_str(key_pem);
    let json = serde_json::to_vec_pretty(meta).map_err(|e| e.to_string())?;
    let file = dir.join("certificate.pem");
    write_private(&file, pem.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let file = dir.join("meta.json");
    write_private(&file, &json).map_err(|e| format!("cannot write {}: {e}", file.display()))
}

/// The certificate stored for `first` (its first name), if there is one; an error names the
/// file that could not be used.
pub fn load(state_dir: &Path, first: &str) -> Result<Option<Stored>, String> {
    let dir = cert_dir(state_dir, first);
    let file = dir.join("certificate.pem");
    let pem = match fs::read(&file) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
    };
    let loaded = from_pem(&pem, &pem).map_err(|e| format!("{}: {e}", file.display()))?;
    let meta = fs::read(dir.join("meta.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    Ok(Some(Stored { loaded, meta }))
}

/// A certificate chain and its key from PEM (the same text may hold both), checked to belong
/// together. Validity dates are not checked: an expired certificate is still the last one
/// there is, and the caller decides.
pub fn from_pem(chain: &[u8], key: &[u8]) -> Result<Loaded, String> {
    let certs: Result<Vec<CertificateDer<'static>>, _> =
        CertificateDer::pem_slice_iter(chain).collect();
    let certs = certs.map_err(|e| format!("not a valid PEM certificate chain ({e})"))?;
    if certs.is_empty() {
        return Err("holds no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| format!("holds no usable private key ({e})"))?;
    let signing = crate::tls::provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("unusable private key ({e})"))?;
    let algorithm = match signing.algorithm() {
        rustls::SignatureAlgorithm::ECDSA => "ECDSA",
        rustls::SignatureAlgorithm::RSA => "RSA",
        rustls::SignatureAlgorithm::ED25519 => "Ed25519",
        _ => "other",
    };
    let facts = crate::tls::der::parse(&certs[0])?;
    let key = CertifiedKey::new(certs, signing);
    key.keys_match()
        .map_err(|_| "the private key does not belong to the certificate".to_string())?;
    Ok(Loaded {
        key: Arc::new(key),
        facts,
        algorithm,
    })
}

/// Whether `dir` can be used as the state directory: it exists (or can be created) and files
/// can be created in it. Creates nothing that stays: a missing directory is judged by its
/// nearest existing parent.
pub fn writable(dir: &Path) -> Result<(), String> {
    let mut at = dir.to_path_buf();
    loop {
        match fs::metadata(&at) {
            Ok(m) if m.is_dir() => break,
            Ok(_) if at == dir => return Err(format!("{} is not a directory", at.display())),
            Ok(_) => {
                return Err(format!(
                    "{} cannot be created: {} is not a directory",
                    dir.display(),
                    at.display()
                ));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                match at.parent() {
                    Some(p) if !p.as_os_str().is_empty() => at = p.to_path_buf(),
                    _ => return Err(format!("{} cannot be created", dir.display())),
                }
            }
            Err(e) => return Err(format!("{}: {e}", at.display())),
        }
    }
    let probe = at.join(format!(".shellac-check.{}", std::process::id()));
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&probe)
    {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => {
            let why = match e.kind() {
                std::io::ErrorKind::PermissionDenied => {
                    "permission denied (Shellac's user must be able to write there)".to_string()
                }
                _ => e.to_string(),
            };
            if at == dir {
                Err(format!("cannot write in {}: {why}", dir.display()))
            } else {
                Err(format!(
                    "cannot create {} (in {}): {why}",
                    dir.display(),
                    at.display()
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shellac-acme-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(
            slug("https://acme-v02.api.letsencrypt.org/directory"),
            "acme-v02.api.letsencrypt.org_directory"
        );
        assert_eq!(slug("https://127.0.0.1:14000/dir"), "127.0.0.1_14000_dir");
        assert_eq!(slug("https://[::1]:14000/dir/"), "___1__14000_dir");
        assert_eq!(slug("https://../x"), "_.._x");
    }

    #[test]
    fn stored_certificates_come_back_with_private_modes() {
        let dir = temp("store");
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["a.example".to_string()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let meta = Meta {
            names: vec!["a.example".into()],
            directory: "https://acme.test/dir".into(),
            issued_at: 1,
        };
        store(&dir, &cert.pem(), &key.serialize_pem(), &meta).unwrap();
        let stored = load(&dir, "a.example").unwrap().unwrap();
        assert_eq!(stored.loaded.facts.dns_names, vec!["a.example".to_string()]);
        assert_eq!(stored.meta, Some(meta));
        for f in ["certificate.pem", "meta.json"] {
            let mode = fs::metadata(cert_dir(&dir, "a.example").join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
        let mode = fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(load(&dir, "b.example").unwrap().is_none());
        // A key that is not the certificate's is refused, naming the file.
        let other = rcgen::KeyPair::generate().unwrap();
        let file = cert_dir(&dir, "a.example").join("certificate.pem");
        fs::write(&file, format!("{}{}", cert.pem(), other.serialize_pem())).unwrap();
        let err = load(&dir, "a.example").err().unwrap();
        assert!(
            err.contains("certificate.pem") && err.contains("does not belong"),
            "{err}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn writability_is_judged_without_leaving_anything() {
        let dir = temp("writable");
        assert!(writable(&dir.join("a/b")).is_ok());
        assert!(!dir.exists());
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        fs::write(&file, "x").unwrap();
        assert!(writable(&file).unwrap_err().contains("not a directory"));
        assert!(
            writable(&file.join("sub"))
                .unwrap_err()
                .contains("not a directory")
        );
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        let _ = fs::remove_dir_all(&dir);
    }
}
