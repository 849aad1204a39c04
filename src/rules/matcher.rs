//! One compiled rule and its matchers: header and cookie patterns, the host, the request
//! target as the matchers see it, and a redirect's `$1` / `$host` expansion.

use http::Method;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use regex::Regex;

use super::conn::Limit;
use super::hotlink;
use super::rewrite_uri::Subject;
use crate::config::rules::{RateKey, RuleConfig, reference};

/// A header matcher: the field must be present and (if given) its value match.
pub(super) struct FieldMatch {
    pub(super) name: HeaderName,
    pub(super) value: Option<Regex>,
}

impl FieldMatch {
    pub(super) fn compile(map: &std::collections::BTreeMap<String, String>) -> Vec<FieldMatch> {
        map.iter()
            .filter_map(|(name, re)| {
                let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
                let value = if re.is_empty() {
                    None
                } else {
                    Regex::new(re).ok()
                };
                Some(FieldMatch { name, value })
            })
            .collect()
    }

    pub(super) fn matches(&self, headers: &HeaderMap) -> bool {
        headers.get_all(&self.name).iter().any(|v| {
            self.value
                .as_ref()
                .is_none_or(|re| v.to_str().is_ok_and(|s| re.is_match(s)))
        })
    }
}

pub(super) struct Rule {
    pub(super) cfg: RuleConfig,
    pub(super) path: Option<Regex>,
    pub(super) url: Option<Regex>,
    pub(super) cookie: Option<Regex>,
    pub(super) client_cert: Option<Regex>,
    pub(super) request_headers: Vec<FieldMatch>,
    pub(super) response_headers: Vec<FieldMatch>,
    pub(super) set_request: Vec<(HeaderName, HeaderValue)>,
    pub(super) unset_request: Vec<HeaderName>,
    pub(super) set_response: Vec<(HeaderName, HeaderValue)>,
    pub(super) unset_response: Vec<HeaderName>,
    pub(super) rate_limit: Option<(RateKey, Limit)>,
    pub(super) referers: Option<hotlink::Referers>,
    pub(super) secure_link: Option<hotlink::SecureLink>,
}

impl Rule {
    /// The request-phase actions that change a hit (`Rules::change_a_hit`). Stripping the
    /// request's cookies counts only where cookies matter to a hit (`cookies_matter`).
    pub(super) fn acts_on_request(&self, cookies_matter: bool, seeking: bool) -> bool {
        let c = &self.cfg;
        ((c.flv || c.mp4) && seeking)
            || c.pass
            || c.synth.is_some()
            || c.redirect.is_some()
            || self.rate_limit.is_some()
            || self.referers.is_some()
            || self.secure_link.is_some()
            || (c.strip_request_cookies && cookies_matter)
            || !self.set_request.is_empty()
            || !self.unset_request.is_empty()
    }
}

pub(super) fn pairs(
    map: &std::collections::BTreeMap<String, String>,
) -> Vec<(HeaderName, HeaderValue)> {
    map.iter()
        .filter_map(|(k, v)| {
            Some((
                HeaderName::from_bytes(k.as_bytes()).ok()?,
                HeaderValue::from_str(v).ok()?,
            ))
        })
        .collect()
}

pub(super) fn names(list: &[String]) -> Vec<HeaderName> {
    list.iter()
        .filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok())
        .collect()
}

/// A request target as the rules' matchers see it: which path and URL patterns matched (by
/// rule index) and the host without port, lower case.
pub(super) struct Target {
    pub(super) path_hit: Vec<bool>,
    pub(super) url_hit: Vec<bool>,
    pub(super) host: String,
    /// The client certificate's subject (empty: none).
    pub(super) client_cert: String,
    /// The request came over TLS.
    pub(super) https: bool,
}

impl Target {
    /// Whether rule `i`'s request matchers all match (`headers` as they are now).
    pub(super) fn matches(
        &self,
        i: usize,
        rule: &Rule,
        method: &Method,
        headers: &HeaderMap,
    ) -> bool {
        let c = &rule.cfg;
        (c.path.is_none() || self.path_hit[i])
            && (c.url.is_none() || self.url_hit[i])
            && (c.host.0.is_empty() || c.host.0.iter().any(|h| host_matches(h, &self.host)))
            && (c.method.0.is_empty() || c.method.0.iter().any(|m| m == method.as_str()))
            && rule.request_headers.iter().all(|f| f.matches(headers))
            && rule
                .cookie
                .as_ref()
                .is_none_or(|re| cookie_names(headers).any(|n| re.is_match(n)))
            && rule
                .client_cert
                .as_ref()
                .is_none_or(|re| re.is_match(&self.client_cert))
            && rule
                .cfg
                .scheme
                .as_deref()
                .is_none_or(|s| (s == "https") == self.https)
    }
}

/// `www.example.com` exactly, or `*.example.com` for any subdomain (and the domain itself).
fn host_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(domain) => host == domain || host.ends_with(&format!(".{domain}")),
        None => host == pattern,
    }
}

fn cookie_names(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.split('=').next().map(str::trim))
}

/// Expands a redirect's `to`: `$1` / `${1}` and `$name` / `${name}` are the captures of the
/// rule's path (or url) regex; a name no group has is one of nginx's variables (`VARIABLES`,
/// as a rewrite reads them: `$scheme`, `$host` — the request's, lower case, no port —
/// `$request_uri` and `$args` as sent, `$uri` decoded and escaped again); `$$` is a `$`.
/// One pass: what a capture or variable brings is never expanded again.
pub(super) fn expand(rule: &Rule, target: &Target, path_and_query: &str, to: &str) -> String {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let caps = match (&rule.path, &rule.url) {
        (Some(re), _) => re.captures(path),
        (None, Some(re)) => re.captures(path_and_query),
        _ => None,
    };
    let mut out = String::with_capacity(to.len() + path_and_query.len());
    let mut rest = to;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        let Some((name, after)) = reference(rest) else {
            if let Some(r) = rest.strip_prefix('$') {
                rest = r;
            }
            out.push('$');
            continue;
        };
        rest = after;
        let group = match (&caps, name.parse::<usize>()) {
            (Some(c), Ok(n)) => c.get(n),
            (Some(c), Err(_)) => c.name(name),
            (None, _) => None,
        };
        if let Some(m) = group {
            out.push_str(m.as_str());
            continue;
        }
        match name {
            "scheme" => out.push_str(if target.https { "https" } else { "http" }),
            "host" => out.push_str(&target.host),
            "request_uri" => out.push_str(path_and_query),
            "args" | "query_string" => out.push_str(query),
            "uri" => {
                let subject = Subject::of(path);
                subject.put(&mut out, &subject.text);
            }
            _ => {}
        }
    }
    out.push_str(rest);
    out
}
