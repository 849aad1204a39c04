//! `[[tls.acme]]`: certificates a TLS listener obtains and renews itself from an ACME server
//! (RFC 8555), and the checks the file alone can make. Whether the state directory is
//! writable and the CA file readable is `src/preflight/`'s (it needs the disk); the protocol is
//! `src/acme/`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::lists;
use super::units::Dur;

/// Let's Encrypt's production directory: the default ACME server.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// `[[tls.acme]]`: one certificate, for `names`, obtained and renewed automatically.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AcmeConfig {
    /// DNS names the certificate covers (its subject alternative names), at least one.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub names: Vec<String>,
    /// How the ACME server checks that we control the names. Default `"tls-alpn-01"`.
    #[serde(default)]
    pub challenge: Challenge,
    /// The ACME server's directory URL (https). Default Let's Encrypt's production server.
    #[serde(default = "default_directory")]
    pub directory: String,
    /// Contact e-mail addresses registered with the account. Default: none.
    #[serde(default, deserialize_with = "lists::one_or_many")]
    pub contact: Vec<String>,
    /// PEM file of the CA certificates that the ACME server's HTTPS certificate must chain to
    /// (a test CA such as pebble's). Default: the system's CA store.
    #[serde(default)]
    pub ca_root: Option<PathBuf>,
    /// Where the account key, certificates and their keys are kept. Default
    /// `/var/lib/shellac/acme`.
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// The certificate's key. Default `"ecdsa-p256"`.
    #[serde(default)]
    pub key_type: KeyType,
    /// Renew when the certificate has less than this left. Default: a third of its lifetime.
    #[serde(default)]
    pub renew_before: Option<Dur>,
    /// First wait after a failed attempt; it doubles after each failure in a row. Default
    /// `1m`.
    #[serde(default = "default_retry_min")]
    pub retry_min: Dur,
    /// Longest wait between failed attempts. Default `1h`.
    #[serde(default = "default_retry_max")]
    pub retry_max: Dur,
    /// External account binding (RFC 8555 §7.3.4): the key identifier the CA gave for the
    /// account (ZeroSSL, Google Trust Services, Sectigo, ... require one). Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eab_kid: Option<String>,
    /// With `eab_kid`: the HMAC key the CA gave, base64url as CAs print it. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eab_hmac_key: Option<String>,
}

/// An `eab_hmac_key` as bytes: base64url (padding and the standard alphabet's `+` `/`
/// tolerated, as CAs and tools print both), at least 16 bytes.
pub fn eab_key_bytes(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    let normal: String = text
        .trim()
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(normal.as_bytes())
        .map_err(|_| {
            "is not base64url text (the HMAC key exactly as the CA shows it)".to_string()
        })?;
    if bytes.len() < 16 {
        return Err(format!(
            "is {} bytes once decoded; a CA's HMAC key is at least 16 (is it the whole key?)",
            bytes.len()
        ));
    }
    Ok(bytes)
}

/// The challenge type (RFC 8555 §8).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
pub enum Challenge {
    /// RFC 8737: the ACME server connects to port 443 with ALPN `acme-tls/1`.
    #[default]
    #[serde(rename = "tls-alpn-01")]
    TlsAlpn01,
    /// The ACME server fetches `http://NAME/.well-known/acme-challenge/TOKEN` (port 80).
    #[serde(rename = "http-01")]
    Http01,
}

impl Challenge {
    pub fn as_str(self) -> &'static str {
        match self {
            Challenge::TlsAlpn01 => "tls-alpn-01",
            Challenge::Http01 => "http-01",
        }
    }
}

/// The key of an ACME certificate.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum KeyType {
    #[default]
    EcdsaP256,
    EcdsaP384,
}

impl KeyType {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyType::EcdsaP256 => "ecdsa-p256",
            KeyType::EcdsaP384 => "ecdsa-p384",
        }
    }
}

fn default_directory() -> String {
    LETS_ENCRYPT.into()
}

fn default_state_dir() -> PathBuf {
    PathBuf::from("/var/lib/shellac/acme")
}

fn default_retry_min() -> Dur {
    Dur(Duration::from_secs(60))
}

fn default_retry_max() -> Dur {
    Dur(Duration::from_secs(3600))
}

/// Why `name` cannot be asked for with HTTP-01 or TLS-ALPN-01, if it cannot.
pub fn name_problem(name: &str) -> Option<String> {
    if name.starts_with("*.") {
        return Some(format!(
            "`{name}`: a wildcard name can only be validated with the DNS-01 challenge, which Shellac does not do; list the names instead"
        ));
    }
    if name.parse::<std::net::IpAddr>().is_ok() {
        return Some(format!(
            "`{name}`: certificates for IP addresses are not supported; use a DNS name"
        ));
    }
    if name.is_empty() || name.len() > 253 {
        return Some(format!("`{name}` is not a DNS name (1 to 253 characters)"));
    }
    if name != name.to_ascii_lowercase() {
        return Some(format!("`{name}`: write DNS names in lower case"));
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Some(format!(
                "`{name}` is not a DNS name (labels of letters, digits and inner hyphens, at most 63 characters; internationalised names in their xn-- form)"
            ));
        }
    }
    None
}

/// Why `contact` is not an e-mail address an ACME server takes, if it is not.
fn contact_problem(contact: &str) -> Option<String> {
    let address = contact.strip_prefix("mailto:").unwrap_or(contact);
    let valid = address.split_once('@').is_some_and(|(user, domain)| {
        !user.is_empty()
            && domain.contains('.')
            && !domain.starts_with('.')
            && !domain.ends_with('.')
            && !domain.contains('@')
            && !address.contains([' ', ',', '<', '>', '\t', '\n'])
    });
    (!valid).then(|| format!("`{contact}` is not an e-mail address such as \"admin@example.com\""))
}

/// (key path below `[[tls]]` number `i`, problem) for every `[[tls.acme]]` problem the file
/// alone shows; `cleartext`: whether `server.listen` has an address (HTTP-01 is answered
/// there).
pub(super) fn validate(
    i: usize,
    acme: &[AcmeConfig],
    cleartext: bool,
) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let at = |j: usize, rest: &[&str]| {
        let mut p = vec![
            "tls".to_string(),
            i.to_string(),
            "acme".to_string(),
            j.to_string(),
        ];
        p.extend(rest.iter().map(|s| s.to_string()));
        p
    };
    for (j, a) in acme.iter().enumerate() {
        if a.names.is_empty() {
            out.push((at(j, &["names"]), "at least one name is required".into()));
        }
        for (k, name) in a.names.iter().enumerate() {
            let here = at(j, &["names", &k.to_string()]);
            if let Some(problem) = name_problem(name) {
                out.push((here, problem));
            } else if a.names[..k].contains(name) {
                out.push((here, format!("`{name}` is listed twice")));
            } else if let Some(other) = acme[..j].iter().position(|o| o.names.contains(name)) {
                out.push((
                    here,
                    format!("`{name}` is already in this listener's acme certificate {other}"),
                ));
            }
        }
        match a.directory.strip_prefix("https://") {
            Some(rest) if !rest.is_empty() && a.directory.parse::<http::Uri>().is_ok() => {}
            _ => out.push((
                at(j, &["directory"]),
                format!(
                    "`{}` is not an https:// URL (ACME servers are reached over HTTPS; Let's Encrypt's is {LETS_ENCRYPT})",
                    a.directory
                ),
            )),
        }
        for (k, c) in a.contact.iter().enumerate() {
            if let Some(problem) = contact_problem(c) {
                out.push((at(j, &["contact", &k.to_string()]), problem));
            }
        }
        if a.challenge == Challenge::Http01 && !cleartext {
            out.push((
                at(j, &["challenge"]),
                "\"http-01\" is answered on a cleartext listener, and `server.listen` has none (the ACME server connects to port 80); add one or use \"tls-alpn-01\"".into(),
            ));
        }
        if a.retry_max < a.retry_min {
            out.push((
                at(j, &["retry_max"]),
                format!(
                    "must be at least retry_min ({})",
                    super::units::format_duration(a.retry_min.0)
                ),
            ));
        }
        if a.state_dir.as_os_str().is_empty() {
            out.push((at(j, &["state_dir"]), "a directory path is required".into()));
        }
        match (&a.eab_kid, &a.eab_hmac_key) {
            (Some(_), None) => out.push((
                at(j, &["eab_kid"]),
                "needs `eab_hmac_key` (the HMAC key the CA gave with the key identifier)".into(),
            )),
            (None, Some(_)) => out.push((
                at(j, &["eab_hmac_key"]),
                "needs `eab_kid` (the key identifier the CA gave with the HMAC key)".into(),
            )),
            (Some(kid), Some(key)) => {
                if kid.trim().is_empty() {
                    out.push((at(j, &["eab_kid"]), "is empty".into()));
                }
                if let Err(e) = eab_key_bytes(key) {
                    out.push((at(j, &["eab_hmac_key"]), e));
                }
            }
            (None, None) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_names_without_wildcards_or_addresses() {
        assert_eq!(name_problem("example.com"), None);
        assert_eq!(name_problem("www.shellac.test"), None);
        assert_eq!(name_problem("localhost"), None);
        assert_eq!(name_problem("xn--bcher-kva.example"), None);
        assert!(name_problem("*.example.com").unwrap().contains("DNS-01"));
        assert!(name_problem("192.0.2.1").unwrap().contains("IP addresses"));
        assert!(name_problem("Example.com").unwrap().contains("lower case"));
        assert!(name_problem("a..b").is_some());
        assert!(name_problem("-a.b").is_some());
        assert!(name_problem("a_b.c").is_some());
        assert!(name_problem("").is_some());
    }

    #[test]
    fn eab_hmac_keys_decode_as_cas_print_them() {
        let key = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W";
        assert_eq!(eab_key_bytes(key).unwrap().len(), 48);
        // Padded, or in the standard alphabet: the same bytes.
        let standard = key.replace('-', "+").replace('_', "/");
        assert_eq!(eab_key_bytes(&standard), eab_key_bytes(key));
        assert_eq!(eab_key_bytes("AAAAAAAAAAAAAAAAAAAAAA=="), Ok(vec![0; 16]));
        assert!(
            eab_key_bytes("not base64!")
                .unwrap_err()
                .contains("base64url")
        );
        assert!(eab_key_bytes("AAAA").unwrap_err().contains("3 bytes"));
    }

    #[test]
    fn contacts_are_mail_addresses() {
        assert_eq!(contact_problem("admin@example.com"), None);
        assert_eq!(contact_problem("mailto:admin@example.com"), None);
        assert!(contact_problem("admin").is_some());
        assert!(contact_problem("a@b").is_some());
        assert!(contact_problem("a b@example.com").is_some());
        assert!(contact_problem("a@b@example.com").is_some());
    }
}
