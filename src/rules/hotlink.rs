//! Hotlink protection, two rule actions (issue 31): nginx's `valid_referers` — the request's
//! `Referer` must be absent (`none`), stripped of its scheme by a firewall (`blocked`), one of
//! the request's own host or its site's names (`server_names`), a host pattern with an optional path prefix
//! (`*.example.com`, `www.example.*`, `example.org/galleries/`) or match a `~regex`, else 403 —
//! and signed expiring links (`secure_link`): an HMAC-SHA256 of the expiry time and the path
//! under the operator's secret (Shellac's form), or nginx's `secure_link_md5` expression
//! (its `$uri` nginx's: the path decoded, `rewrite_uri.rs`);
//! a wrong or missing signature is 403, a valid one past its time 410.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::StatusCode;
use regex::Regex;

use super::rewrite_uri::Subject;
use crate::config::rules::SecureLinkConfig;
use crate::http::server_name::Names;

/// One `valid_referers` entry that is a host pattern.
struct HostPattern {
    /// Lower case; `*.` prefix or `.*` suffix kept.
    host: String,
    /// What the referer's path must start with (empty: anything).
    prefix: String,
}

/// `valid_referers`, compiled.
pub(crate) struct Referers {
    none: bool,
    blocked: bool,
    server_names: bool,
    hosts: Vec<HostPattern>,
    regexes: Vec<Regex>,
}

impl Referers {
    /// `None` for an empty list (no check). Entries were checked with the configuration
    /// (`config/rules.rs`); a regex that does not compile is skipped.
    pub fn compile(entries: &[String]) -> Option<Referers> {
        if entries.is_empty() {
            return None;
        }
        let mut r = Referers {
            none: false,
            blocked: false,
            server_names: false,
            hosts: Vec::new(),
            regexes: Vec::new(),
        };
        for e in entries {
            match e.as_str() {
                "none" => r.none = true,
                "blocked" => r.blocked = true,
                "server_names" => r.server_names = true,
                _ => {
                    if let Some(re) = e.strip_prefix('~') {
                        if let Ok(re) = Regex::new(&format!("(?i){re}")) {
                            r.regexes.push(re);
                        }
                    } else {
                        let (host, prefix) = match e.find('/') {
                            Some(i) => (&e[..i], &e[i..]),
                            None => (e.as_str(), ""),
                        };
                        r.hosts.push(HostPattern {
                            host: host.to_ascii_lowercase(),
                            prefix: prefix.to_string(),
                        });
                    }
                }
            }
        }
        Some(r)
    }

    /// Whether a request to `host` (lower case, no port) with this `Referer` is allowed;
    /// `site_names`: the `server_name`s of the request's `[[site]]`, which `server_names`
    /// takes besides the request's own host.
    pub fn allows(
        &self,
        referer: Option<&[u8]>,
        host: &str,
        site_names: Option<&Names<()>>,
    ) -> bool {
        let Some(referer) = referer else {
            return self.none;
        };
        let Ok(text) = std::str::from_utf8(referer) else {
            return false;
        };
        let lower = text.to_ascii_lowercase();
        let rest = if lower.starts_with("http://") {
            &text[7..]
        } else if lower.starts_with("https://") {
            &text[8..]
        } else {
            return self.blocked;
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let ref_host = authority
            .rsplit_once('@')
            .map_or(authority, |(_, h)| h)
            .split(':')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if self.server_names
            && !ref_host.is_empty()
            && (ref_host == host || site_names.is_some_and(|n| n.find(&ref_host).is_some()))
        {
            return true;
        }
        self.hosts
            .iter()
            .any(|p| host_matches(&p.host, &ref_host) && path.starts_with(&p.prefix))
            || self.regexes.iter().any(|re| re.is_match(rest))
    }
}

/// nginx's host patterns: exact, `*.example.com` (any sub-domain), `www.example.*`.
fn host_matches(pattern: &str, host: &str) -> bool {
    if let Some(domain) = pattern.strip_prefix("*.") {
        host.len() > domain.len() + 1 && host.ends_with(domain) && {
            let cut = host.len() - domain.len();
            host.as_bytes()[cut - 1] == b'.'
        }
    } else if let Some(start) = pattern.strip_suffix(".*") {
        host.len() > start.len() + 1
            && host.starts_with(start)
            && host.as_bytes()[start.len()] == b'.'
    } else {
        host == pattern
    }
}

/// `secure_link`, compiled.
pub(crate) struct SecureLink {
    form: Form,
    signature: String,
    expires: String,
}

enum Form {
    Hmac(ring::hmac::Key),
    /// nginx's `secure_link_md5` expression.
    Md5(String),
}

/// What the request brings for the check.
pub(crate) struct Link<'a> {
    pub path: &'a str,
    pub query: &'a str,
    pub host: &'a str,
    pub client: Option<std::net::IpAddr>,
    /// Seconds since the epoch.
    pub now: u64,
}

impl SecureLink {
    pub fn compile(c: &SecureLinkConfig) -> Option<SecureLink> {
        let form = match (&c.secret, &c.md5) {
            (Some(secret), None) => Form::Hmac(ring::hmac::Key::new(
                ring::hmac::HMAC_SHA256,
                secret.as_bytes(),
            )),
            (None, Some(expr)) => Form::Md5(expr.clone()),
            _ => return None,
        };
        let default_sig = if c.md5.is_some() { "md5" } else { "sig" };
        Some(SecureLink {
            form,
            signature: c.signature.clone().unwrap_or_else(|| default_sig.into()),
            expires: c.expires.clone(),
        })
    }

    /// `Ok` for a valid link still in its time; 403 for a missing or wrong signature, 410
    /// for one past its expiry.
    pub fn check(&self, link: &Link) -> Result<(), StatusCode> {
        let sig = arg(link.query, &self.signature).ok_or(StatusCode::FORBIDDEN)?;
        let sig = URL_SAFE_NO_PAD
            .decode(sig.trim_end_matches('='))
            .map_err(|_| StatusCode::FORBIDDEN)?;
        let expires = arg(link.query, &self.expires).unwrap_or("");
        let valid = match &self.form {
            Form::Hmac(key) => {
                let message = format!("{expires}{}", link.path);
                ring::hmac::verify(key, message.as_bytes(), &sig).is_ok()
            }
            Form::Md5(expr) => {
                let text = expr
                    .replace("$secure_link_expires", expires)
                    .replace(
                        "$remote_addr",
                        &link.client.map(|a| a.to_string()).unwrap_or_default(),
                    )
                    .replace("$host", link.host)
                    .replace("$uri", &Subject::of(link.path).text);
                let digest = super::md5::digest(text.as_bytes());
                sig.len() == digest.len()
                    && sig
                        .iter()
                        .zip(digest)
                        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                        == 0
            }
        };
        if !valid {
            return Err(StatusCode::FORBIDDEN);
        }
        if !expires.is_empty() {
            // nginx: an expiry that is not a time after the epoch makes the link invalid.
            let at: u64 = expires
                .parse()
                .ok()
                .filter(|&at| at > 0)
                .ok_or(StatusCode::FORBIDDEN)?;
            if link.now > at {
                return Err(StatusCode::GONE);
            }
        }
        Ok(())
    }
}

/// The value of the query argument `name` (the first), as written.
fn arg<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn referers(list: &[&str]) -> Referers {
        Referers::compile(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn valid_referers_as_nginx_reads_them() {
        let r = referers(&[
            "none",
            "blocked",
            "server_names",
            "*.example.com",
            "example.org/galleries/",
            "www.partner.*",
            "~\\.google\\.",
        ]);
        let ok = |v: Option<&str>| r.allows(v.map(str::as_bytes), "mysite.net", None);
        assert!(ok(None), "none");
        assert!(ok(Some("XXXXXXXXXXXX")), "blocked: no scheme");
        assert!(ok(Some("https://mysite.net/page")), "server_names");
        assert!(
            ok(Some("http://MySite.net:8080/")),
            "server_names, any port and case"
        );
        assert!(ok(Some("http://a.b.example.com/x")));
        assert!(
            !ok(Some("http://example.com/x")),
            "*.example.com is sub-domains"
        );
        assert!(!ok(Some("http://evilexample.com/x")));
        assert!(ok(Some("http://example.org/galleries/1")));
        assert!(!ok(Some("http://example.org/other")));
        assert!(ok(Some("http://www.partner.de/")));
        assert!(ok(Some("https://www.GOOGLE.de/search")));
        assert!(!ok(Some("http://evil.test/")));
        assert!(!ok(Some("http://mysite.net.evil.test/")));
        let strict = referers(&["server_names"]);
        assert!(!strict.allows(None, "mysite.net", None));
        assert!(!strict.allows(Some(b"garbage"), "mysite.net", None));
    }

    /// nginx's `server_names` is the server's names: under a `[[site]]`, a `Referer` naming
    /// any of its `server_name`s (exact, wildcard, regex) is the site's own.
    #[test]
    fn server_names_are_the_sites_names() {
        use crate::http::server_name::Pattern;
        let mut names = Names::new();
        for written in ["www.mysite.net", ".mysite.org", "~^m\\d+\\.mysite\\.com$"] {
            names.add(&Pattern::parse(written).unwrap(), ()).unwrap();
        }
        let r = referers(&["server_names"]);
        let ok = |v: &str| r.allows(Some(v.as_bytes()), "www.mysite.net", Some(&names));
        assert!(ok("https://www.mysite.net/page"), "the request's own host");
        assert!(ok("https://mysite.org/"), "another name of the site");
        assert!(ok("https://img.mysite.org/a"), "its wildcard");
        assert!(
            ok("http://M7.mysite.com:8080/"),
            "its regex, any port and case"
        );
        assert!(!ok("http://mysite.net/"), "not one of its names");
        assert!(!ok("http://m7.mysite.com.evil.test/"));
        assert!(!r.allows(Some(b"https://mysite.org/"), "www.mysite.net", None));
    }

    fn link<'a>(path: &'a str, query: &'a str, now: u64) -> Link<'a> {
        Link {
            path,
            query,
            host: "h",
            client: Some("192.0.2.7".parse().unwrap()),
            now,
        }
    }

    #[test]
    fn hmac_links_are_checked_then_timed() {
        let c = SecureLinkConfig {
            secret: Some("k3y".into()),
            ..SecureLinkConfig::default()
        };
        let s = SecureLink::compile(&c).unwrap();
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"k3y");
        let sig = URL_SAFE_NO_PAD.encode(ring::hmac::sign(&key, b"2000/v/a.flv").as_ref());
        let q = format!("expires=2000&sig={sig}");
        assert_eq!(s.check(&link("/v/a.flv", &q, 1999)), Ok(()));
        assert_eq!(s.check(&link("/v/a.flv", &q, 2001)), Err(StatusCode::GONE));
        assert_eq!(
            s.check(&link("/v/b.flv", &q, 1999)),
            Err(StatusCode::FORBIDDEN)
        );
        let later = format!("expires=9999&sig={sig}");
        assert_eq!(
            s.check(&link("/v/a.flv", &later, 1999)),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            s.check(&link("/v/a.flv", "expires=2000", 1999)),
            Err(StatusCode::FORBIDDEN)
        );
    }

    /// nginx's documented form: `secure_link $arg_md5,$arg_expires;
    /// secure_link_md5 "$secure_link_expires$uri$remote_addr secret";`, the link made with
    /// `echo -n '2147483647/s/link192.0.2.7 secret' | openssl md5 -binary | openssl base64 |
    /// tr +/ -_ | tr -d =`.
    #[test]
    fn nginx_md5_links() {
        let c = SecureLinkConfig {
            md5: Some("$secure_link_expires$uri$remote_addr secret".into()),
            ..SecureLinkConfig::default()
        };
        let s = SecureLink::compile(&c).unwrap();
        let digest = crate::rules::md5::digest(b"2147483647/s/link192.0.2.7 secret");
        let sig = URL_SAFE_NO_PAD.encode(digest);
        let q = format!("md5={sig}&expires=2147483647");
        assert_eq!(s.check(&link("/s/link", &q, 1_800_000_000)), Ok(()));
        let other = Link {
            client: Some("192.0.2.8".parse().unwrap()),
            ..link("/s/link", &q, 1_800_000_000)
        };
        assert_eq!(
            s.check(&other),
            Err(StatusCode::FORBIDDEN),
            "another address"
        );
        // `$uri` is nginx's, decoded: a link to `/s/a b é` is signed over those characters,
        // whatever escapes the client's path has (secure_link.t signs `secret$uri`).
        let decoded = crate::rules::md5::digest("2147483647/s/a b é192.0.2.7 secret".as_bytes());
        let q = format!("md5={}&expires=2147483647", URL_SAFE_NO_PAD.encode(decoded));
        assert_eq!(
            s.check(&link("/s/a%20b%20%C3%A9", &q, 1_800_000_000)),
            Ok(())
        );
        // An expiry of 0 (or not a number) is no valid link (nginx: `$secure_link` empty).
        let zero = crate::rules::md5::digest(b"0/s/link192.0.2.7 secret");
        let q = format!("md5={}&expires=0", URL_SAFE_NO_PAD.encode(zero));
        assert_eq!(
            s.check(&link("/s/link", &q, 1_800_000_000)),
            Err(StatusCode::FORBIDDEN)
        );
    }
}
