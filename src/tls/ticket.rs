//! Session-ticket keys: made in memory and rotated (rustls's rotator), or read from files a
//! fleet shares (`tls.ticket_key_file`), so that any node resumes a session another made.
//!
//! A key file holds 80 random bytes (`openssl rand 80`, nginx's format; 48 work too): the
//! first 16 name the key, the rest are stretched (HKDF-SHA256) into an AES-256-GCM key. A
//! ticket is `name (16) ‖ nonce (12) ‖ AES-256-GCM(state)`, authenticated with the name. The
//! first file's key encrypts; every file's key decrypts.

use std::path::PathBuf;
use std::sync::Arc;

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf;
use ring::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;

/// How long a ticket is good for (what clients are told), in seconds: 6 hours, the rotation
/// period of in-memory keys.
const LIFETIME: u32 = 6 * 3600;

const NAME_LEN: usize = 16;

struct Key {
    name: [u8; NAME_LEN],
    aead: LessSafeKey,
}

/// Tickets sealed with keys from files.
pub struct FileTicketer {
    keys: Vec<Key>,
    rng: SystemRandom,
    files: Vec<PathBuf>,
}

impl std::fmt::Debug for FileTicketer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileTicketer")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

struct Len32;
impl hkdf::KeyType for Len32 {
    fn len(&self) -> usize {
        32
    }
}

impl FileTicketer {
    /// Reads every file (an error names the file and says what is wrong with it).
    pub fn load(files: &[PathBuf]) -> Result<FileTicketer, String> {
        let mut keys = Vec::new();
        for path in files {
            let bytes = std::fs::read(path)
                .map_err(|e| format!("cannot read ticket key file {}: {e}", path.display()))?;
            keys.push(key_from(&bytes).map_err(|e| format!("{}: {e}", path.display()))?);
        }
        if keys.is_empty() {
            return Err("no ticket key file".into());
        }
        Ok(FileTicketer {
            keys,
            rng: SystemRandom::new(),
            files: files.to_vec(),
        })
    }
}

fn key_from(bytes: &[u8]) -> Result<Key, String> {
    if bytes.len() != 80 && bytes.len() != 48 {
        return Err(format!(
            "a ticket key file holds 80 random bytes (make one with `openssl rand 80 > FILE`); this one has {}",
            bytes.len()
        ));
    }
    let mut name = [0u8; NAME_LEN];
    name.copy_from_slice(&bytes[..NAME_LEN]);
    let salt = hkdf::Salt::new(hkdf::HKDF_SHA256, b"shellac session ticket key");
    let prk = salt.extract(&bytes[NAME_LEN..]);
    let mut secret = [0u8; 32];
    prk.expand(&[b"aes-256-gcm"], Len32)
        .and_then(|okm| okm.fill(&mut secret))
        .map_err(|_| "cannot derive the key".to_string())?;
    let unbound = UnboundKey::new(&AES_256_GCM, &secret).map_err(|_| "bad key".to_string())?;
    Ok(Key {
        name,
        aead: LessSafeKey::new(unbound),
    })
}

impl ProducesTickets for FileTicketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let key = self.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(NAME_LEN + NONCE_LEN + plain.len() + 16);
        out.extend_from_slice(&key.name);
        out.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        key.aead
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&key.name),
                &mut sealed,
            )
            .ok()?;
        out.extend_from_slice(&sealed);
        Some(out)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        if ticket.len() < NAME_LEN + NONCE_LEN + 16 {
            return None;
        }
        let (name, rest) = ticket.split_at(NAME_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let key = self.keys.iter().find(|k| k.name[..] == *name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = key
            .aead
            .open_in_place(nonce, Aad::from(&key.name), &mut buf)
            .ok()?;
        let n = plain.len();
        buf.truncate(n);
        Some(buf)
    }
}

/// The ticketer for a listener: from files, or rustls's in-memory rotator (`reuse`: the one
/// the running configuration has, so a reload does not invalidate every ticket).
pub fn ticketer(
    files: &[PathBuf],
    reuse: Option<Arc<dyn ProducesTickets>>,
) -> Result<Arc<dyn ProducesTickets>, String> {
    if !files.is_empty() {
        return Ok(Arc::new(FileTicketer::load(files)?));
    }
    if let Some(t) = reuse {
        return Ok(t);
    }
    rustls::crypto::ring::Ticketer::new()
        .map_err(|e| format!("cannot make session-ticket keys: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn first_key_encrypts_every_key_decrypts() {
        let dir = std::env::temp_dir().join(format!("shellac-ticket-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let old = write(&dir, "old", &[1u8; 80]);
        let new = write(&dir, "new", &[2u8; 48]);
        let before = FileTicketer::load(std::slice::from_ref(&old)).unwrap();
        let ticket = before.encrypt(b"session state").unwrap();
        // Another node (or after rotation) with the new key first and the old one second.
        let after = FileTicketer::load(&[new.clone(), old.clone()]).unwrap();
        assert_eq!(
            after.decrypt(&ticket).as_deref(),
            Some(&b"session state"[..])
        );
        let fresh = after.encrypt(b"x").unwrap();
        assert_eq!(&fresh[..16], &[2u8; 16]);
        // Without the old key, its tickets are not accepted; a damaged ticket never is.
        let only_new = FileTicketer::load(std::slice::from_ref(&new)).unwrap();
        assert_eq!(only_new.decrypt(&ticket), None);
        let mut bad = fresh.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(after.decrypt(&bad), None);
        assert_eq!(after.decrypt(&fresh[..20]), None);
        let short = write(&dir, "short", &[3u8; 10]);
        let err = FileTicketer::load(&[short]).unwrap_err();
        assert!(err.contains("80 random bytes"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
