//! `[[rule]]`: operator policy rules, evaluated in order. Request matchers (host, path, url,
//! method, request headers, cookies) select a rule; response matchers (status, response
//! headers) narrow it for response-phase actions. See docs/policy.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use super::rewrite::VARIABLES;
use super::units::Dur;

/// A string or a list of strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OneOrMany(pub Vec<String>);

impl Serialize for OneOrMany {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(String),
            Many(Vec<String>),
        }
        match Raw::deserialize(d) {
            Ok(Raw::One(s)) => Ok(OneOrMany(vec![s])),
            Ok(Raw::Many(v)) => Ok(OneOrMany(v)),
            Err(_) => Err(serde::de::Error::custom(
                "expected a string or a list of strings",
            )),
        }
    }
}

/// `synth = { status = 403, body = "..." }`: answer without a backend.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SynthConfig {
    pub status: u16,
    #[serde(default)]
    pub body: String,
    #[serde(default = "default_content_type")]
    pub content_type: String,
}

fn default_content_type() -> String {
    "text/plain; charset=utf-8".into()
}

/// `redirect = { to = "https://$host/$1", status = 301 }`: `$1`, `${name}` expand the
/// captures of the rule's `path` (or `url`) regex; `$scheme`, `$host`, `$request_uri`,
/// `$uri`, `$args` (`$query_string`) are nginx's variables.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RedirectConfig {
    pub to: String,
    #[serde(default = "default_redirect_status")]
    pub status: u16,
}

fn default_redirect_status() -> u16 {
    302
}

/// `rate_limit = { key = "client.ip", requests = 100, per = "10s" }`: at most `requests`
/// requests per `per` for each value of `key` (a token bucket, `proxy/throttle.rs`); the
/// request past it is answered `429` with `Retry-After`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// What a bucket counts: `client.ip`, `host`, `site`, or `req.http.NAME`.
    pub key: String,
    pub requests: u64,
    pub per: Dur,
    /// Once the bucket is empty, every request of the key is refused for this long.
    #[serde(default)]
    pub block: Dur,
}

/// What a rate limit counts by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RateKey {
    /// The client's address (after `server.trusted_proxies`).
    ClientIp,
    /// The request's host, lower case, without port.
    Host,
    /// The request's `[[site]]` name (its host without sites).
    Site,
    /// A request field's value (requests without it are not counted, as nginx's empty key).
    Header(http::HeaderName),
}

impl RateKey {
    /// Reads a `rate_limit.key`: `Err` says what is accepted.
    pub fn parse(key: &str) -> Result<RateKey, String> {
        match key {
            "client.ip" => Ok(RateKey::ClientIp),
            "host" => Ok(RateKey::Host),
            "site" => Ok(RateKey::Site),
            _ => {
                let name = key
                    .strip_prefix("req.http.")
                    .ok_or_else(|| {
                        format!(
                            "`{key}` is not a rate-limit key: \"client.ip\", \"host\", \"site\" or \"req.http.NAME\" (a request field)"
                        )
                    })?;
                http::HeaderName::from_bytes(name.as_bytes())
                    .map(RateKey::Header)
                    .map_err(|_| format!("`{name}` is not a header field name"))
            }
        }
    }
}

/// `secure_link = { secret = "..." }` (HMAC-SHA256) or `{ md5 = "..." }` (nginx's
/// `secure_link_md5`): the signature and expiry are query arguments.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SecureLinkConfig {
    /// HMAC-SHA256 key: the signature is `base64url(HMAC(secret, EXPIRES + PATH))`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// nginx's `secure_link_md5` expression (`$secure_link_expires`, `$uri`,
    /// `$remote_addr`, `$host`): the signature is `base64url(MD5(expression))`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// The query argument holding the signature. Default `sig` (`md5` with `md5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The query argument holding the expiry (seconds since the epoch). Default `expires`.
    #[serde(default = "default_expires_arg")]
    pub expires: String,
}

fn default_expires_arg() -> String {
    "expires".into()
}

impl Default for SecureLinkConfig {
    fn default() -> Self {
        SecureLinkConfig {
            secret: None,
            md5: None,
            signature: None,
            expires: default_expires_arg(),
        }
    }
}

/// One policy rule. Every matcher given must match; actions apply in rule order.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuleConfig {
    /// Name in logs and `Cache-Status` detail. Default `rule<N>`.
    pub name: String,

    // Request matchers
    /// Host names: exact (`www.example.com`) or wildcard (`*.example.com`), case-insensitive.
    pub host: OneOrMany,
    /// Regex on the path (without query), e.g. `\.(png|gif|jpg|css|js)$`.
    pub path: Option<String>,
    /// Regex on path and query.
    pub url: Option<String>,
    /// Methods, e.g. `["GET", "HEAD"]`.
    pub method: OneOrMany,
    /// Request headers: name → regex on the value (`""` = present with any value).
    pub request_header: BTreeMap<String, String>,
    /// Regex on cookie names: matches when the request carries such a cookie.
    pub cookie: Option<String>,
    /// Regex on the verified client certificate's subject (RFC 4514); empty without one.
    pub client_cert: Option<String>,
    /// `"http"` or `"https"`: how the request arrived.
    pub scheme: Option<String>,

    // Response matchers (response-phase actions only)
    #[serde(deserialize_with = "super::lists::one_or_many")]
    pub status: Vec<u16>,
    /// Response headers: name → regex on the value (`""` = present).
    pub response_header: BTreeMap<String, String>,

    // Request actions
    /// Never cache: fetch and deliver (`Cache-Status` detail `rule`).
    pub pass: bool,
    /// Look up and store as if the request carried no `Authorization` (the operator vouches
    /// that the credentials do not change the answer).
    pub cache: bool,
    /// Remove the `Cookie` header before lookup and fetch.
    pub strip_request_cookies: bool,
    pub set_request_headers: BTreeMap<String, String>,
    #[serde(deserialize_with = "super::lists::one_or_many")]
    pub unset_request_headers: Vec<String>,
    /// Answer without a backend.
    pub synth: Option<SynthConfig>,
    /// Answer with a redirect.
    pub redirect: Option<RedirectConfig>,
    /// Send to this backend or director instead of the default route.
    pub director: Option<String>,
    /// Answer `429` once a key's requests go past the limit.
    pub rate_limit: Option<RateLimitConfig>,
    /// FLV pseudo-streaming (nginx's `flv`): `?start=BYTE` is taken off the request before
    /// the cache key, and the answer is the FLV header then the file from that byte.
    pub flv: bool,
    /// MP4 pseudo-streaming (nginx's `mp4`): `?start=SECONDS` is taken off the request before
    /// the cache key, and the answer is the file cut at the keyframe at or before that time.
    pub mp4: bool,
    /// The most of an MP4 file held to read its `moov` (nginx's `mp4_max_buffer_size`).
    pub mp4_max_moov_size: Option<super::units::Size>,
    /// nginx's `valid_referers`: a request the rule matches whose `Referer` is none of these
    /// is answered 403 (`none`, `blocked`, `server_names`, host patterns, `~regex`).
    #[serde(deserialize_with = "super::lists::one_or_many")]
    pub valid_referers: Vec<String>,
    /// Signed expiring links: a request the rule matches needs a valid signature (403) that
    /// has not expired (410).
    pub secure_link: Option<SecureLinkConfig>,

    // Response actions
    /// Freshness lifetime from now, replacing what the origin said (with `override_origin`,
    /// even for `no-store` / `private` / `no-cache` responses).
    pub ttl: Option<Dur>,
    /// Lower bound on the lifetime (also for responses that are expired or carry no freshness
    /// information; never overrides `no-store` / `private` without `override_origin`).
    pub min_ttl: Option<Dur>,
    /// Upper bound on the lifetime (replaces `cache.max_ttl`).
    pub max_ttl: Option<Dur>,
    /// Stale-while-revalidate window (replaces `cache.grace` and `stale-while-revalidate`).
    pub grace: Option<Dur>,
    /// Keep window (replaces `cache.keep`).
    pub keep: Option<Dur>,
    /// Store even if the origin said `no-store`, `private` or `no-cache`.
    pub override_origin: bool,
    /// The storage the response is kept in: a `[[storage.named]]`'s name, `Transient` or `s0`.
    pub storage: Option<String>,
    /// Remove `Set-Cookie` from responses, except to POST requests.
    pub strip_set_cookie: bool,
    /// gzip the response as it is fetched (`true`: whatever its type and length) or never
    /// (`false`), instead of `[compression]`'s choice (docs/compression.md).
    pub compress: Option<bool>,
    pub set_response_headers: BTreeMap<String, String>,
    #[serde(deserialize_with = "super::lists::one_or_many")]
    pub unset_response_headers: Vec<String>,
    /// Parse the body for Edge Side Includes as it is fetched and assemble the page on
    /// delivery (VCL's `beresp.do_esi`; docs/esi.md).
    pub esi: bool,
}

impl RuleConfig {
    /// Whether the rule matches on the response (and so may only carry response actions).
    pub fn has_response_matchers(&self) -> bool {
        !self.status.is_empty() || !self.response_header.is_empty()
    }

    /// Whether the rule carries request-phase actions.
    pub fn has_request_actions(&self) -> bool {
        self.pass
            || self.cache
            || self.strip_request_cookies
            || !self.set_request_headers.is_empty()
            || !self.unset_request_headers.is_empty()
            || self.synth.is_some()
            || self.redirect.is_some()
            || self.director.is_some()
            || self.rate_limit.is_some()
            || self.flv
            || self.mp4
            || !self.valid_referers.is_empty()
            || self.secure_link.is_some()
    }
}

/// Checks of one rule's values each on its own (the syntax of a regex, a header name, a
/// method): (field, problem) pairs. Each reads only its own key, so it is reported even when
/// another key of the rule was wrong too (`Config::read`).
pub(super) fn syntax(rule: &RuleConfig) -> Vec<(String, String)> {
    let mut out = Vec::new();
    access(rule, &mut out);
    patterns(rule, &mut out);
    header_edits(rule, &mut out);
    words(rule, &mut out);
    out
}

/// `valid_referers`, `secure_link` and `scheme`: who may have the response.
fn access(rule: &RuleConfig, out: &mut Vec<(String, String)>) {
    for entry in &rule.valid_referers {
        if entry.is_empty() {
            out.push(("valid_referers".to_string(), "an empty entry".to_string()));
        } else if let Some(re) = entry.strip_prefix('~')
            && let Err(e) = regex::Regex::new(re)
        {
            out.push((
                "valid_referers".to_string(),
                format!("`{entry}`: invalid regex: {}", first_line(&e.to_string())),
            ));
        }
    }
    if let Some(s) = &rule.secure_link {
        match (&s.secret, &s.md5) {
            (Some(k), None) if k.is_empty() => out.push((
                "secure_link.secret".to_string(),
                "an empty secret signs nothing".to_string(),
            )),
            (Some(_), None) | (None, Some(_)) => {}
            _ => out.push((
                "secure_link".to_string(),
                "give either `secret` (HMAC-SHA256) or `md5` (nginx's secure_link_md5 expression)"
                    .to_string(),
            )),
        }
    }
    if let Some(s) = &rule.scheme
        && s != "http"
        && s != "https"
    {
        out.push((
            "scheme".to_string(),
            format!("`{s}` is not a scheme: \"http\" (cleartext listeners) or \"https\" (TLS)"),
        ));
    }
}

/// The regular expressions a rule matches with, and the header names beside them.
fn patterns(rule: &RuleConfig, out: &mut Vec<(String, String)>) {
    for (field, re) in [
        ("path", &rule.path),
        ("url", &rule.url),
        ("cookie", &rule.cookie),
        ("client_cert", &rule.client_cert),
    ] {
        if let Some(re) = re
            && let Err(e) = regex::Regex::new(re)
        {
            out.push((
                field.to_string(),
                format!("invalid regex: {}", first_line(&e.to_string())),
            ));
        }
    }
    for (field, map) in [
        ("request_header", &rule.request_header),
        ("response_header", &rule.response_header),
    ] {
        for (name, re) in map {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                out.push((
                    field.to_string(),
                    format!("`{name}` is not a header field name"),
                ));
            }
            if let Err(e) = regex::Regex::new(re) {
                out.push((
                    field.to_string(),
                    format!("invalid regex for `{name}`: {}", first_line(&e.to_string())),
                ));
            }
        }
    }
}

/// The header fields a rule sets or removes.
fn header_edits(rule: &RuleConfig, out: &mut Vec<(String, String)>) {
    for (field, map) in [
        ("set_request_headers", &rule.set_request_headers),
        ("set_response_headers", &rule.set_response_headers),
    ] {
        for (name, value) in map {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err()
                || http::HeaderValue::from_str(value).is_err()
            {
                out.push((
                    field.to_string(),
                    format!("`{name}: {value}` is not a valid header field"),
                ));
            }
        }
    }
    for (field, list) in [
        ("unset_request_headers", &rule.unset_request_headers),
        ("unset_response_headers", &rule.unset_response_headers),
    ] {
        for name in list {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                out.push((
                    field.to_string(),
                    format!("`{name}` is not a header field name"),
                ));
            }
        }
    }
}

/// Methods, hosts, a rate-limit key and a redirect target.
fn words(rule: &RuleConfig, out: &mut Vec<(String, String)>) {
    for m in &rule.method.0 {
        if http::Method::from_bytes(m.as_bytes()).is_err()
            || m.chars().any(|c| c.is_ascii_lowercase())
        {
            out.push((
                "method".into(),
                format!("`{m}` is not a method (methods are upper case)"),
            ));
        }
    }
    for h in &rule.host.0 {
        let bare = h.strip_prefix("*.").unwrap_or(h);
        if bare.is_empty() || bare.contains(['/', ' ', '*']) {
            out.push((
                "host".into(),
                format!("`{h}` is not a host name or `*.domain` wildcard"),
            ));
        }
    }
    if let Some(r) = &rule.rate_limit
        && let Err(e) = RateKey::parse(&r.key)
    {
        out.push(("rate_limit.key".into(), e));
    }
    if let Some(r) = &rule.redirect {
        if r.to.contains(['\r', '\n']) {
            out.push(("redirect.to".into(), "must not contain line breaks".into()));
        }
        redirect_names(rule, &r.to, out);
    }
}

/// Every `$name` of a redirect's `to` names a capture group of the rule's `path` (else
/// `url`) regex or one of nginx's variables: a name that is neither would expand to nothing.
fn redirect_names(rule: &RuleConfig, to: &str, out: &mut Vec<(String, String)>) {
    let re = rule
        .path
        .as_deref()
        .or(rule.url.as_deref())
        .and_then(|re| regex::Regex::new(re).ok());
    let groups = re.as_ref().map_or(0, |re| re.captures_len() - 1);
    let named = |name: &str| {
        re.as_ref()
            .is_some_and(|re| re.capture_names().flatten().any(|n| n == name))
    };
    let mut rest = to;
    while let Some(i) = rest.find('$') {
        rest = &rest[i + 1..];
        let Some((name, after)) = reference(rest) else {
            rest = rest.strip_prefix('$').unwrap_or(rest);
            continue;
        };
        rest = after;
        let known = match name.parse::<usize>() {
            Ok(n) => n <= groups,
            Err(_) => named(name) || VARIABLES.contains(&name),
        };
        if !known {
            out.push((
                "redirect.to".into(),
                format!(
                    "`${name}` is no capture group of the rule's {} regex (it has {groups}) nor a variable ({})",
                    if rule.path.is_some() { "path" } else { "url" },
                    VARIABLES.map(|v| format!("${v}")).join(", ")
                ),
            ));
        }
    }
}

/// The name after a `$` in a redirect's `to`: `{name}`, or a run of letters, digits and `_`
/// (the regex crate's rule for `$name`, kept so a `to` written for it reads the same), and
/// the text after it; `None` when no name follows.
pub fn reference(text: &str) -> Option<(&str, &str)> {
    if let Some(r) = text.strip_prefix('{') {
        let end = r.find('}')?;
        return (end > 0).then(|| (&r[..end], &r[end + 1..]));
    }
    let n = text
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    (n > 0).then(|| (&text[..n], &text[n..]))
}

/// Checks of one rule's keys against each other and against the rest of the file (`names`:
/// whether a backend or director has this name): (field, problem) pairs.
pub(super) fn validate(rule: &RuleConfig, names: &dyn Fn(&str) -> bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if rule.pass && rule.cache {
        out.push(("cache".into(), "a rule cannot both pass and cache".into()));
    }
    if rule.synth.is_some() && rule.redirect.is_some() {
        out.push((
            "redirect".into(),
            "a rule cannot both synth and redirect".into(),
        ));
    }
    if rule.has_response_matchers() && rule.has_request_actions() {
        out.push((
            "status".into(),
            "status / response_header match responses, so the rule can only carry response actions (ttl, headers, ...)".into(),
        ));
    }
    if let Some(d) = &rule.director
        && !names(d)
    {
        out.push((
            "director".into(),
            format!("no backend or director is named `{d}`"),
        ));
    }
    if let (Some(min), Some(max)) = (rule.min_ttl, rule.max_ttl)
        && min > max
    {
        out.push(("min_ttl".into(), "min_ttl is longer than max_ttl".into()));
    }
    out
}

fn first_line(s: &str) -> String {
    s.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or(s)
        .trim()
        .to_string()
}
