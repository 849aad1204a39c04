//! The ACME account (RFC 8555 §7.3) for one ACME server: its key is made here and written to
//! the state directory (0600) *before* the server hears of it, so a crash can never leave an
//! account whose key is lost; then the key is registered (or, if the server knows it
//! already, found: newAccount is idempotent per key) and its contacts brought up to date.
//! Its URL and contacts are kept beside the key so that a restart needs no request at all.
//!
//! With external account binding (`eab_kid`, RFC 8555 §7.3.4) the key is made by instant-acme
//! as it registers the account (its API binds only keys it makes), and written the moment the
//! server answers: a crash in those milliseconds would leave an account without its key, and a
//! single-use binding spent.

use std::path::Path;
use std::sync::Arc;

use instant_acme::{Account, ExternalAccountKey, Key, NewAccount};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde::{Deserialize, Serialize};

use super::failure::Failure;
use super::files;
use super::http::{AcmeHttp, Client};

/// What account.json holds.
#[derive(Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
struct Saved {
    url: String,
    directory: String,
    contact: Vec<String>,
}

/// One account set-up at a time in this process: two certificates starting together must
/// not each make a key for the same server.
static OPENING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `mailto:` URLs of the configured contacts.
fn mailtos(contact: &[String]) -> Vec<String> {
    contact
        .iter()
        .map(|c| match c.strip_prefix("mailto:") {
            Some(_) => c.clone(),
            None => format!("mailto:{c}"),
        })
        .collect()
}

/// The account for `directory`, loaded from `state_dir` or created (and stored) there; a new
/// account is bound to `eab` when given.
pub async fn open(
    state_dir: &Path,
    directory: &str,
    contact: &[String],
    eab: Option<&ExternalAccountKey>,
    client: Arc<Client>,
) -> Result<Account, Failure> {
    let _one = OPENING.lock().await;
    let dir = files::account_dir(state_dir, directory);
    let key_file = dir.join("account.key");
    let json_file = dir.join("account.json");
    if eab.is_some() && key_file.exists() && !json_file.exists() {
        set_aside_if_unregistered(&key_file, directory, &client).await?;
    }
    if let Some(eab) = eab
        && !key_file.exists()
    {
        return register_bound(&dir, directory, contact, eab, client).await;
    }
    let pkcs8 = read_or_make_key(&key_file, directory)?;
    let key = || {
        Key::from_pkcs8_der(pkcs8.clone_key())
            .map_err(|e| Failure::Account(format!("{}: unusable key ({e})", key_file.display())))
    };
    let wanted = mailtos(contact);
    let saved: Option<Saved> = std::fs::read(&json_file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(|s: &Saved| s.directory == directory && !s.url.is_empty());
    let builder = || Account::builder_with_http(Box::new(AcmeHttp(client.clone())));
    let (account, mut contacts_known) = match saved {
        Some(s) => {
            let account = builder()
                .from_parts(s.url.clone(), pkcs8.clone_key(), directory.to_string())
                .await
                .map_err(Failure::from_acme)?;
            (account, Some(s.contact))
        }
        None => {
            let (account, _) = builder()
                .create_from_key(
                    (key()?, PrivateKeyDer::Pkcs8(pkcs8.clone_key())),
                    directory.to_string(),
                )
                .await
                .map_err(Failure::from_acme)?;
            tracing::info!(account = account.id(), %directory, "ACME account registered");
            (account, None)
        }
    };
    if contacts_known.as_ref() != Some(&wanted) {
        if contacts_known.is_some() || !wanted.is_empty() {
            let refs: Vec<&str> = wanted.iter().map(String::as_str).collect();
            account
                .update_contacts(&refs)
                .await
                .map_err(|e| Failure::from_acme(e).in_account())?;
        }
        contacts_known = Some(wanted.clone());
    }
    let saved = Saved {
        url: account.id().to_string(),
        directory: directory.to_string(),
        contact: contacts_known.unwrap_or_default(),
    };
    let current: Option<Saved> = std::fs::read(&json_file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if current.as_ref() != Some(&saved) {
        save(&json_file, &saved)?;
    }
    Ok(account)
}

/// A new account bound to `eab` (RFC 8555 §7.3.4): instant-acme makes its key as it registers
/// it, and the key and the account's URL are written the moment the server answers.
async fn register_bound(
    dir: &Path,
    directory: &str,
    contact: &[String],
    eab: &ExternalAccountKey,
    client: Arc<Client>,
) -> Result<Account, Failure> {
    let key_file = dir.join("account.key");
    let json_file = dir.join("account.json");
    let wanted = mailtos(contact);
    let refs: Vec<&str> = wanted.iter().map(String::as_str).collect();
    let (account, credentials) = Account::builder_with_http(Box::new(AcmeHttp(client)))
        .create(
            &NewAccount {
                contact: &refs,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            directory.to_string(),
            Some(eab),
        )
        .await
        .map_err(Failure::from_acme)?;
    let pem = pkcs8_pem(credentials.private_key())?;
    files::write_private(&key_file, pem.as_bytes()).map_err(|e| storage(e, &key_file))?;
    tracing::info!(account = account.id(), %directory, file = %key_file.display(), "ACME account registered with external account binding");
    let saved = Saved {
        url: account.id().to_string(),
        directory: directory.to_string(),
        contact: wanted,
    };
    save(&json_file, &saved)?;
    Ok(account)
}

/// The account key in `key_file`, or a new one made and written there (0600) before any
/// server hears of it.
fn read_or_make_key(
    key_file: &Path,
    directory: &str,
) -> Result<PrivatePkcs8KeyDer<'static>, Failure> {
    match std::fs::read(key_file) {
        Ok(pem) => PrivatePkcs8KeyDer::from_pem_slice(&pem).map_err(|e| {
            Failure::Account(format!(
                "{}: not a PKCS#8 PEM private key ({e}); move it away to make a new account",
                key_file.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let (_, pkcs8) = Key::generate_pkcs8()
                .map_err(|e| Failure::Account(format!("cannot make an account key: {e}")))?;
            let pem = pkcs8_pem(&pkcs8)?;
            files::write_private(key_file, pem.as_bytes()).map_err(|e| storage(e, key_file))?;
            tracing::info!(file = %key_file.display(), %directory, "ACME account key created");
            Ok(pkcs8)
        }
        Err(e) => Err(storage(e, key_file)),
    }
}

/// Writes account.json (0600).
fn save(json_file: &Path, saved: &Saved) -> Result<(), Failure> {
    let json = serde_json::to_vec_pretty(saved)
        .map_err(|e| Failure::Storage(format!("{}: {e}", json_file.display())))?;
    files::write_private(json_file, &json).map_err(|e| storage(e, json_file))
}

/// A storage failure on `file`.
fn storage(e: std::io::Error, file: &Path) -> Failure {
    Failure::Storage(format!("{}: {e}", file.display()))
}

/// With a binding to make: an account key that was made but never registered (a run without
/// `eab_kid` the CA refused, or a crash before the registration) cannot be bound — instant-acme
/// binds only keys it makes — so it is renamed aside (`account.key.unregistered-<time>`) and a
/// bound account made instead. A key the server does know stays and is used as it is.
async fn set_aside_if_unregistered(
    key_file: &Path,
    directory: &str,
    client: &Arc<Client>,
) -> Result<(), Failure> {
    let Ok(pem) = std::fs::read(key_file) else {
        return Ok(()); // the caller reports an unreadable key
    };
    let Ok(pkcs8) = PrivatePkcs8KeyDer::from_pem_slice(&pem) else {
        return Ok(());
    };
    let key = Key::from_pkcs8_der(pkcs8.clone_key())
        .map_err(|e| Failure::Account(format!("{}: unusable key ({e})", key_file.display())))?;
    let found = Account::builder_with_http(Box::new(AcmeHttp(client.clone())))
        .from_key((key, PrivateKeyDer::Pkcs8(pkcs8)), directory.to_string())
        .await;
    match found {
        Ok(_) => Ok(()),
        Err(instant_acme::Error::Api(p))
            if p.r#type
                .as_deref()
                .is_some_and(|t| t.ends_with(":accountDoesNotExist")) =>
        {
            let aside = key_file.with_extension(format!(
                "key.unregistered-{}",
                crate::tls::certs::unix_now()
            ));
            std::fs::rename(key_file, &aside).map_err(|e| storage(e, key_file))?;
            tracing::warn!(key = %aside.display(), %directory, "ACME account key never registered: set aside to register a bound account (eab_kid)");
            Ok(())
        }
        Err(e) => Err(Failure::from_acme(e).in_account()),
    }
}

/// A PKCS#8 key as PEM.
fn pkcs8_pem(pkcs8: &PrivatePkcs8KeyDer<'_>) -> Result<String, Failure> {
    rcgen::KeyPair::try_from(pkcs8.secret_pkcs8_der())
        .map(|k| k.serialize_pem())
        .map_err(|e| Failure::Account(format!("cannot encode the account key: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contacts_become_mailto_urls() {
        assert_eq!(
            mailtos(&["a@example.com".into(), "mailto:b@example.com".into()]),
            vec!["mailto:a@example.com", "mailto:b@example.com"]
        );
    }

    #[test]
    fn a_generated_key_survives_pem() {
        let (_, pkcs8) = Key::generate_pkcs8().unwrap();
        let pem = pkcs8_pem(&pkcs8).unwrap();
        let back = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes()).unwrap();
        assert_eq!(back.secret_pkcs8_der(), pkcs8.secret_pkcs8_der());
        assert!(Key::from_pkcs8_der(back).is_ok());
    }
}
