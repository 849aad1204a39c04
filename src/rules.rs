//! Operator policy rules, compiled once at config load: one `RegexSet` pass over the path and
//! one over the URL per request, then cheap per-rule checks in order. The request phase runs in
//! Recv; the response phase runs before the storage decision, for the rules whose request
//! matchers matched. With no rules configured both phases cost nothing. `rewrite` is nginx's
//! `rewrite` engine (issue 31; not wired into the rules yet).

pub(crate) mod hotlink;
mod md5;
pub mod rewrite;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use regex::{Regex, RegexSet};

use crate::cache::policy::Overrides;
use crate::config::rules::{RateKey, RuleConfig};

/// The rate-limit buckets a rule's `rate_limit` takes from (the proxy's `throttle::Throttle`,
/// handed down: the table lives above the rules and outlives them).
pub trait Limiter {
    /// Takes a token from the bucket of `key` under `limit`: `None` when allowed, else how
    /// long until the key may try again.
    fn deny(&self, key: &str, limit: Limit) -> Option<std::time::Duration>;
}

/// A rate limit: `requests` per `per`; an empty bucket blocks its key for `block`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub requests: u64,
    pub per: std::time::Duration,
    pub block: std::time::Duration,
}

/// A header matcher: the field must be present and (if given) its value match.
struct FieldMatch {
    name: HeaderName,
    value: Option<Regex>,
}

impl FieldMatch {
    fn compile(map: &std::collections::BTreeMap<String, String>) -> Vec<FieldMatch> {
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

    fn matches(&self, headers: &HeaderMap) -> bool {
        headers.get_all(&self.name).iter().any(|v| {
            self.value
                .as_ref()
                .is_none_or(|re| v.to_str().is_ok_and(|s| re.is_match(s)))
        })
    }
}

struct Rule {
    cfg: RuleConfig,
    path: Option<Regex>,
    url: Option<Regex>,
    cookie: Option<Regex>,
    client_cert: Option<Regex>,
    request_headers: Vec<FieldMatch>,
    response_headers: Vec<FieldMatch>,
    set_request: Vec<(HeaderName, HeaderValue)>,
    unset_request: Vec<HeaderName>,
    set_response: Vec<(HeaderName, HeaderValue)>,
    unset_response: Vec<HeaderName>,
    rate_limit: Option<(RateKey, Limit)>,
    referers: Option<hotlink::Referers>,
    secure_link: Option<hotlink::SecureLink>,
}

impl Rule {
    /// The request-phase actions that change a hit (`Rules::change_a_hit`). Stripping the
    /// request's cookies counts only where cookies matter to a hit (`cookies_matter`).
    fn acts_on_request(&self, cookies_matter: bool, seeking: bool) -> bool {
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

/// All rules of a config.
pub struct Rules {
    rules: Vec<Rule>,
    path_set: RegexSet,
    /// Rule index for each pattern of `path_set`.
    path_rule: Vec<usize>,
    url_set: RegexSet,
    url_rule: Vec<usize>,
    /// Prefix of this set's rate-limit keys: a `[[site]]`'s rules count apart from the
    /// global ones (`scoped`).
    scope: String,
}

/// What the request phase decided.
#[derive(Debug, Default)]
pub struct RequestOutcome {
    /// Rules whose request matchers matched (their response phase runs later).
    pub matched: Vec<usize>,
    /// A rule said `pass` (its name).
    pub pass: Option<String>,
    /// A rule said `cache`: look up even if the builtin policy would pass.
    pub cache: bool,
    /// Answer with this synthetic response (status, content type, body).
    pub synth: Option<(StatusCode, String, String)>,
    /// Answer with this redirect (status, location).
    pub redirect: Option<(StatusCode, String)>,
    /// Route to this backend or director.
    pub director: Option<String>,
    /// A rule's `rate_limit` refused the request: answer 429, `Retry-After` this long.
    pub limited: Option<std::time::Duration>,
    /// A matched rule says `flv = true`.
    pub flv: bool,
    /// A matched rule says `mp4 = true`: its `mp4_max_moov_size` (the last matched rule's).
    pub mp4: Option<u64>,
    /// A `valid_referers` or `secure_link` rule refused the request (its answer is `synth`).
    pub hotlink: bool,
}

fn pairs(map: &std::collections::BTreeMap<String, String>) -> Vec<(HeaderName, HeaderValue)> {
    map.iter()
        .filter_map(|(k, v)| {
            Some((
                HeaderName::from_bytes(k.as_bytes()).ok()?,
                HeaderValue::from_str(v).ok()?,
            ))
        })
        .collect()
}

fn names(list: &[String]) -> Vec<HeaderName> {
    list.iter()
        .filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok())
        .collect()
}

impl Rules {
    /// Compiles validated rules (invalid patterns were rejected by config validation).
    pub fn compile(configs: &[RuleConfig]) -> Rules {
        let rules: Vec<Rule> = configs
            .iter()
            .map(|cfg| Rule {
                path: cfg.path.as_deref().and_then(|p| Regex::new(p).ok()),
                url: cfg.url.as_deref().and_then(|p| Regex::new(p).ok()),
                cookie: cfg.cookie.as_deref().and_then(|p| Regex::new(p).ok()),
                client_cert: cfg.client_cert.as_deref().and_then(|p| Regex::new(p).ok()),
                request_headers: FieldMatch::compile(&cfg.request_header),
                response_headers: FieldMatch::compile(&cfg.response_header),
                set_request: pairs(&cfg.set_request_headers),
                unset_request: names(&cfg.unset_request_headers),
                set_response: pairs(&cfg.set_response_headers),
                unset_response: names(&cfg.unset_response_headers),
                rate_limit: cfg.rate_limit.as_ref().and_then(|r| {
                    let key = RateKey::parse(&r.key).ok()?;
                    let limit = Limit {
                        requests: r.requests,
                        per: r.per.0,
                        block: r.block.0,
                    };
                    Some((key, limit))
                }),
                referers: hotlink::Referers::compile(&cfg.valid_referers),
                secure_link: cfg
                    .secure_link
                    .as_ref()
                    .and_then(hotlink::SecureLink::compile),
                cfg: cfg.clone(),
            })
            .collect();
        let (path_rule, path_patterns): (Vec<usize>, Vec<&str>) = configs
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.path.as_deref().map(|p| (i, p)))
            .unzip();
        let (url_rule, url_patterns): (Vec<usize>, Vec<&str>) = configs
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.url.as_deref().map(|p| (i, p)))
            .unzip();
        Rules {
            path_set: RegexSet::new(path_patterns).unwrap_or_else(|_| RegexSet::empty()),
            url_set: RegexSet::new(url_patterns).unwrap_or_else(|_| RegexSet::empty()),
            path_rule,
            url_rule,
            rules,
            scope: String::new(),
        }
    }

    /// The rules of `[[site]]` `name`: their rate limits count apart from other sites'.
    pub fn scoped(mut self, name: &str) -> Rules {
        self.scope = format!("site {name}");
        self
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether any rule has a request-phase action that changes a hit (`change_a_hit`).
    pub fn act_on_requests(&self, cookies_matter: bool) -> bool {
        self.rules
            .iter()
            .any(|r| r.acts_on_request(cookies_matter, true))
    }

    /// Request phase: finds the matching rules in order and applies their request actions
    /// (header edits happen on `headers`). Stops at the first `pass`, `synth` or `redirect`.
    /// `conn`: the connection's scheme and client certificate.
    pub fn on_request(
        &self,
        host: &str,
        path_and_query: &str,
        method: &Method,
        headers: &mut HeaderMap,
        conn: Conn<'_>,
    ) -> RequestOutcome {
        let mut out = RequestOutcome::default();
        if self.rules.is_empty() {
            return out;
        }
        let path = path_and_query.split('?').next().unwrap_or("/");
        let target = self.target(host, path_and_query, conn);
        for (i, rule) in self.rules.iter().enumerate() {
            if !target.matches(i, rule, method, headers) {
                continue;
            }
            let c = &rule.cfg;
            out.matched.push(i);
            if c.strip_request_cookies {
                headers.remove(header::COOKIE);
            }
            for name in &rule.unset_request {
                headers.remove(name);
            }
            for (name, value) in &rule.set_request {
                headers.insert(name.clone(), value.clone());
            }
            if let Some(d) = &c.director {
                out.director = Some(d.clone());
            }
            if let (Some((key, limit)), Some(limiter)) = (&rule.rate_limit, conn.limiter)
                && let Some(value) = rate_key(key, &target.host, headers, conn)
            {
                let bucket = format!(
                    "{}\u{0}{}\u{0}{}\u{0}{value}",
                    self.scope,
                    c.name,
                    c.rate_limit.as_ref().map_or("", |r| r.key.as_str())
                );
                if let Some(retry) = limiter.deny(&bucket, *limit) {
                    out.limited = Some(retry);
                    break;
                }
            }
            if c.cache {
                out.cache = true;
            }
            out.flv |= c.flv;
            if c.mp4 {
                out.mp4 = Some(c.mp4_max_moov_size.map_or(10 << 20, |s| s.0));
            }
            if let Some(status) = self.hotlink(rule, path_and_query, headers, &target, conn) {
                let text = format!(
                    "{} {}\n",
                    status.as_u16(),
                    status.canonical_reason().unwrap_or("")
                );
                out.synth = Some((status, "text/plain; charset=utf-8".into(), text));
                out.hotlink = true;
                break;
            }
            if let Some(s) = &c.synth {
                let status = StatusCode::from_u16(s.status).unwrap_or(StatusCode::OK);
                out.synth = Some((status, s.content_type.clone(), s.body.clone()));
                break;
            }
            if let Some(r) = &c.redirect {
                let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::FOUND);
                out.redirect = Some((status, expand(rule, path, path_and_query, &r.to)));
                break;
            }
            if c.pass {
                out.pass = Some(c.name.clone());
                break;
            }
        }
        out
    }

    /// The refusal of rule's `valid_referers` (403) or `secure_link` (403, 410), if any.
    fn hotlink(
        &self,
        rule: &Rule,
        path_and_query: &str,
        headers: &HeaderMap,
        target: &Target,
        conn: Conn<'_>,
    ) -> Option<StatusCode> {
        if let Some(r) = &rule.referers
            && !r.allows(
                headers.get(header::REFERER).map(|v| v.as_bytes()),
                &target.host,
            )
        {
            return Some(StatusCode::FORBIDDEN);
        }
        let s = rule.secure_link.as_ref()?;
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        s.check(&hotlink::Link {
            path,
            query,
            host: &target.host,
            client: conn.client,
            now,
        })
        .err()
    }

    /// Whether the request phase could change what a cache hit on this request delivers: a
    /// rule whose request matchers match it answers instead (`pass`, `synth`, `redirect`) or
    /// edits the request (fields set or unset, cookies stripped: the `Vary` selection and the
    /// logged fields see the edit; cookies only when `cookies_matter`, i.e. the URL varies on
    /// `Cookie` or the access log prints it), or seeks in an FLV or MP4 file (`flv`, `mp4`, a `start=`). Rules that only choose a director, say `cache`,
    /// or act in the response phase change nothing on a hit. Decided on the request as it is:
    /// no rule edits it unless one of these matched, and an edit can only make a later
    /// matcher fail (they test presence), so this errs towards "changes". A fast hit
    /// (proxy/fast_hit/) is taken only when this is false.
    pub fn change_a_hit(
        &self,
        host: &str,
        path_and_query: &str,
        method: &Method,
        headers: &HeaderMap,
        cookies_matter: bool,
        conn: Conn<'_>,
    ) -> bool {
        if !self.act_on_requests(cookies_matter) {
            return false;
        }
        let target = self.target(host, path_and_query, conn);
        // An `flv` or `mp4` rule changes only a seek.
        let seeking = path_and_query.contains("start=");
        self.rules.iter().enumerate().any(|(i, rule)| {
            rule.acts_on_request(cookies_matter, seeking)
                && target.matches(i, rule, method, headers)
        })
    }

    /// What the rules' path, URL and host matchers say about a request target.
    fn target(&self, host: &str, path_and_query: &str, conn: Conn<'_>) -> Target {
        let path = path_and_query.split('?').next().unwrap_or("/");
        let mut path_hit = vec![false; self.rules.len()];
        for i in self.path_set.matches(path).iter() {
            path_hit[self.path_rule[i]] = true;
        }
        let mut url_hit = vec![false; self.rules.len()];
        for i in self.url_set.matches(path_and_query).iter() {
            url_hit[self.url_rule[i]] = true;
        }
        Target {
            path_hit,
            url_hit,
            host: host.split(':').next().unwrap_or(host).to_ascii_lowercase(),
            client_cert: conn.client_cert.to_string(),
            https: conn.https,
        }
    }

    /// A rule's `compress` for this response: the last matched rule (request and response
    /// matchers) that says it; `None`: `[compression]` decides.
    pub fn compress(
        &self,
        matched: &[usize],
        status: StatusCode,
        headers: &HeaderMap,
    ) -> Option<bool> {
        let mut compress = None;
        for &i in matched {
            let Some(rule) = self.rules.get(i) else {
                continue;
            };
            let c = &rule.cfg;
            if c.compress.is_none()
                || (!c.status.is_empty() && !c.status.contains(&status.as_u16()))
                || !rule.response_headers.iter().all(|f| f.matches(headers))
            {
                continue;
            }
            compress = c.compress;
        }
        compress
    }

    /// Response phase: for the rules matched in the request phase whose response matchers
    /// match too, applies response actions in order (later rules win) and returns the
    /// storage overrides.
    pub fn on_response(
        &self,
        matched: &[usize],
        method: &Method,
        status: StatusCode,
        headers: &mut HeaderMap,
    ) -> Overrides {
        let mut o = Overrides::default();
        for &i in matched {
            let Some(rule) = self.rules.get(i) else {
                continue;
            };
            let c = &rule.cfg;
            if !c.status.is_empty() && !c.status.contains(&status.as_u16()) {
                continue;
            }
            if !rule.response_headers.iter().all(|f| f.matches(headers)) {
                continue;
            }
            if c.strip_set_cookie && method != Method::POST {
                headers.remove(header::SET_COOKIE);
            }
            for name in &rule.unset_response {
                headers.remove(name);
            }
            for (name, value) in &rule.set_response {
                headers.insert(name.clone(), value.clone());
            }
            let d = |v: Option<crate::config::units::Dur>| v.map(|d| d.0);
            o.ttl = d(c.ttl).or(o.ttl);
            o.min_ttl = d(c.min_ttl).or(o.min_ttl);
            o.max_ttl = d(c.max_ttl).or(o.max_ttl);
            o.grace = d(c.grace).or(o.grace);
            o.keep = d(c.keep).or(o.keep);
            o.override_origin |= c.override_origin;
            o.rule = Some(c.name.clone());
        }
        o
    }
}

impl Rules {
    /// Whether a rule matched in the request phase whose response matchers match this
    /// response says `esi = true`.
    pub fn esi(&self, matched: &[usize], status: StatusCode, headers: &HeaderMap) -> bool {
        matched.iter().any(|&i| {
            self.rules.get(i).is_some_and(|rule| {
                let c = &rule.cfg;
                c.esi
                    && (c.status.is_empty() || c.status.contains(&status.as_u16()))
                    && rule.response_headers.iter().all(|f| f.matches(headers))
            })
        })
    }
}

/// What the rules know of the request's connection: TLS or not, the verified client
/// certificate's subject (empty without one), and for `rate_limit` the client, the site and
/// the buckets (without `limiter` no rate limit is applied: `change_a_hit` only asks).
#[derive(Clone, Copy, Default)]
pub struct Conn<'a> {
    pub https: bool,
    pub client_cert: &'a str,
    /// The client's address (after trusted proxies).
    pub client: Option<std::net::IpAddr>,
    /// The request's `[[site]]` name, if sites are configured.
    pub site: Option<&'a str>,
    pub limiter: Option<&'a dyn Limiter>,
}

/// The value a rate limit counts by for this request; `None`: not counted.
fn rate_key(key: &RateKey, host: &str, headers: &HeaderMap, conn: Conn<'_>) -> Option<String> {
    match key {
        RateKey::ClientIp => conn.client.map(|ip| ip.to_string()),
        RateKey::Host => Some(host.to_string()),
        RateKey::Site => Some(conn.site.unwrap_or(host).to_string()),
        RateKey::Header(name) => {
            let v = headers.get(name)?.as_bytes();
            (!v.is_empty()).then(|| String::from_utf8_lossy(v).into_owned())
        }
    }
}

/// A request target as the rules' matchers see it: which path and URL patterns matched (by
/// rule index) and the host without port, lower case.
struct Target {
    path_hit: Vec<bool>,
    url_hit: Vec<bool>,
    host: String,
    /// The client certificate's subject (empty: none).
    client_cert: String,
    /// The request came over TLS.
    https: bool,
}

impl Target {
    /// Whether rule `i`'s request matchers all match (`headers` as they are now).
    fn matches(&self, i: usize, rule: &Rule, method: &Method, headers: &HeaderMap) -> bool {
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

/// Expands `$1` / `${name}` in `to` with the captures of the rule's path (or url) regex.
fn expand(rule: &Rule, path: &str, path_and_query: &str, to: &str) -> String {
    let caps = match (&rule.path, &rule.url) {
        (Some(re), _) => re.captures(path),
        (None, Some(re)) => re.captures(path_and_query),
        _ => None,
    };
    match caps {
        Some(c) => {
            let mut out = String::new();
            c.expand(to, &mut out);
            out
        }
        None => to.to_string(),
    }
}

#[cfg(test)]
mod tests {
    /// `client_cert` matches the subject of a verified client certificate, the empty string
    /// without one; the fast path asks with the connection's subject too.
    /// `scheme`: an HTTP-to-HTTPS redirect answers cleartext requests only; TLS hits stay
    /// fast.
    #[test]
    fn scheme_matcher() {
        let r = rules(
            "[[rule]]\nscheme = \"http\"\nurl = '^(.*)$'\nredirect = { to = \"https://example.com$1\", status = 301 }\n",
        );
        let mut h = HeaderMap::new();
        let http = r.on_request("example.com", "/a?b", &Method::GET, &mut h, Conn::default());
        assert_eq!(
            http.redirect.map(|(s, to)| (s.as_u16(), to)),
            Some((301, "https://example.com/a?b".to_string()))
        );
        let https = Conn {
            https: true,
            client_cert: "",
            ..Conn::default()
        };
        assert!(
            r.on_request("example.com", "/a", &Method::GET, &mut h, https)
                .redirect
                .is_none()
        );
        assert!(!r.change_a_hit("example.com", "/a", &Method::GET, &h, false, https));
        assert!(r.change_a_hit(
            "example.com",
            "/a",
            &Method::GET,
            &h,
            false,
            Conn::default()
        ));
    }

    #[test]
    fn client_cert_matcher() {
        let r = rules("[[rule]]\nclient_cert = '^$'\nsynth = { status = 403 }\n");
        let mut h = HeaderMap::new();
        let anonymous = r.on_request("x", "/", &Method::GET, &mut h, Conn::default());
        assert!(anonymous.synth.is_some());
        let alice = Conn {
            https: true,
            client_cert: "CN=alice,O=Example",
            ..Conn::default()
        };
        assert!(
            r.on_request("x", "/", &Method::GET, &mut h, alice)
                .synth
                .is_none()
        );
        assert!(r.change_a_hit("x", "/", &Method::GET, &h, false, Conn::default()));
        assert!(!r.change_a_hit("x", "/", &Method::GET, &h, false, alice));
    }

    use super::*;
    use crate::config::Config;

    fn rules(text: &str) -> Rules {
        let full = format!("[[backend]]\nhost = \"127.0.0.1\"\n\n{text}");
        let config = Config::parse(&full, "t.toml").unwrap_or_else(|e| panic!("{e:?}"));
        Rules::compile(&config.rules)
    }

    /// Only a matching rule that answers or edits the request changes a hit; response-phase
    /// rules, `cache` and directors do not, and neither do rules that do not match.
    #[test]
    fn which_rules_change_a_hit() {
        let r = rules(
            "[[rule]]\nttl = \"1h\"\n\n[[rule]]\npath = '^/api'\ncache = true\n\n\
             [[rule]]\ncookie = '^session'\npass = true\n\n\
             [[rule]]\nrequest_header = { \"x-debug\" = \"\" }\nset_request_headers = { \"x-a\" = \"1\" }\n",
        );
        assert!(r.act_on_requests(false));
        let mut h = HeaderMap::new();
        assert!(!r.change_a_hit(
            "example.com",
            "/api/x",
            &Method::GET,
            &h,
            true,
            Conn::default()
        ));
        h.insert(header::COOKIE, HeaderValue::from_static("a=1; session=2"));
        assert!(
            r.change_a_hit(
                "example.com",
                "/api/x",
                &Method::GET,
                &h,
                true,
                Conn::default()
            ),
            "pass"
        );
        h.clear();
        h.insert("x-debug", HeaderValue::from_static("1"));
        assert!(
            r.change_a_hit("example.com", "/", &Method::GET, &h, true, Conn::default()),
            "edits"
        );
        let quiet = rules("[[rule]]\nmin_ttl = \"2m\"\nstrip_set_cookie = true\n");
        assert!(!quiet.act_on_requests(true));
        assert!(!quiet.change_a_hit("example.com", "/", &Method::GET, &h, true, Conn::default()));
        // Stripping cookies changes a hit only where cookies matter.
        let strip =
            rules("[[rule]]\npath = '\\.css$'\nstrip_request_cookies = true\ncache = true\n");
        h.insert(header::COOKIE, HeaderValue::from_static("a=1"));
        assert!(!strip.change_a_hit(
            "example.com",
            "/s.css",
            &Method::GET,
            &h,
            false,
            Conn::default()
        ));
        assert!(strip.change_a_hit(
            "example.com",
            "/s.css",
            &Method::GET,
            &h,
            true,
            Conn::default()
        ));
    }

    /// `rate_limit` keys: `host` and `site` count per host / per site, and a set of site
    /// rules counts apart from the global set (`scoped`); without a limiter nothing counts.
    #[test]
    fn rate_limit_keys_host_and_site() {
        struct Seen(std::sync::Mutex<Vec<String>>);
        impl Limiter for Seen {
            fn deny(&self, key: &str, _: Limit) -> Option<std::time::Duration> {
                let mut seen = self.0.lock().unwrap();
                let denied = seen.iter().any(|k| k == key);
                seen.push(key.to_string());
                denied.then_some(std::time::Duration::from_secs(5))
            }
        }
        let seen = Seen(std::sync::Mutex::new(Vec::new()));
        let text = "[[rule]]\nrate_limit = { key = \"host\", requests = 1, per = \"1m\" }\n\n\
                    [[rule]]\nrate_limit = { key = \"site\", requests = 1, per = \"1m\" }\n";
        let global = rules(text);
        let site = rules(text).scoped("shop");
        let conn = |site| Conn {
            site,
            limiter: Some(&seen),
            ..Conn::default()
        };
        let mut h = HeaderMap::new();
        let get = |r: &Rules, host, site, h: &mut HeaderMap| {
            r.on_request(host, "/", &Method::GET, h, conn(site)).limited
        };
        assert_eq!(get(&global, "A.example:80", None, &mut h), None);
        // Same host (case and port aside): the `host` rule refuses.
        assert_eq!(
            get(&global, "a.example", None, &mut h),
            Some(std::time::Duration::from_secs(5))
        );
        assert_eq!(get(&global, "b.example", Some("blog"), &mut h), None);
        // Another host of site `blog`: the `site` rule refuses.
        assert!(get(&global, "c.example", Some("blog"), &mut h).is_some());
        // The site's own rules count apart.
        assert_eq!(get(&site, "b.example", Some("blog"), &mut h), None);
        // A rate-limited request is never a fast hit.
        assert!(global.change_a_hit("x", "/", &Method::GET, &h, false, Conn::default()));
        // Without a limiter (the fast-hit question) nothing is taken.
        let before = seen.0.lock().unwrap().len();
        global.on_request("a.example", "/", &Method::GET, &mut h, Conn::default());
        assert_eq!(seen.0.lock().unwrap().len(), before);
    }

    #[test]
    fn static_files_get_an_hour() {
        let r = rules(
            "[[rule]]\npath = '\\.(png|gif|jpg|swf|css|js)$'\nttl = \"1h\"\noverride_origin = true\n",
        );
        let mut h = HeaderMap::new();
        let out = r.on_request(
            "example.com",
            "/a/b.css?v=1",
            &Method::GET,
            &mut h,
            Conn::default(),
        );
        assert_eq!(out.matched, vec![0]);
        let o = r.on_response(&out.matched, &Method::GET, StatusCode::OK, &mut h);
        assert_eq!(o.ttl, Some(std::time::Duration::from_secs(3600)));
        assert!(o.override_origin);
        assert!(
            r.on_request(
                "example.com",
                "/page.php",
                &Method::GET,
                &mut h,
                Conn::default()
            )
            .matched
            .is_empty()
        );
    }

    #[test]
    fn hosts_methods_headers_cookies() {
        let r = rules(
            "[[rule]]\nhost = \"*.example.com\"\nmethod = [\"GET\"]\nrequest_header = { \"X-Debug\" = \"\" }\npass = true\n\n[[rule]]\ncookie = '^wordpress_logged_in_'\npass = true\nname = \"logged-in\"\n",
        );
        let mut h = HeaderMap::new();
        h.insert("x-debug", "1".parse().unwrap());
        assert_eq!(
            r.on_request(
                "WWW.Example.com:8080",
                "/",
                &Method::GET,
                &mut h,
                Conn::default()
            )
            .pass
            .as_deref(),
            Some("rule0")
        );
        assert!(
            r.on_request("example.org", "/", &Method::GET, &mut h, Conn::default())
                .pass
                .is_none()
        );
        let mut h = HeaderMap::new();
        h.insert("cookie", "a=1; wordpress_logged_in_abc=x".parse().unwrap());
        assert_eq!(
            r.on_request("x", "/", &Method::GET, &mut h, Conn::default())
                .pass
                .as_deref(),
            Some("logged-in")
        );
    }

    #[test]
    fn redirect_with_captures_and_synth() {
        let r = rules(
            "[[rule]]\npath = '^/old/(.*)$'\nredirect = { to = \"https://new.example/$1\", status = 301 }\n\n[[rule]]\npath = '^/admin'\nsynth = { status = 403, body = \"no\" }\n",
        );
        let mut h = HeaderMap::new();
        let out = r.on_request("x", "/old/a/b", &Method::GET, &mut h, Conn::default());
        assert_eq!(
            out.redirect,
            Some((
                StatusCode::MOVED_PERMANENTLY,
                "https://new.example/a/b".into()
            ))
        );
        let out = r.on_request("x", "/admin/x", &Method::GET, &mut h, Conn::default());
        assert_eq!(out.synth.map(|s| s.0), Some(StatusCode::FORBIDDEN));
    }

    #[test]
    fn strip_set_cookie_except_post_and_response_matchers() {
        let r =
            rules("[[rule]]\nstrip_set_cookie = true\n\n[[rule]]\nstatus = [404]\nttl = \"10s\"\n");
        let mut req = HeaderMap::new();
        let out = r.on_request("x", "/", &Method::GET, &mut req, Conn::default());
        let mut h = HeaderMap::new();
        h.insert("set-cookie", "a=b".parse().unwrap());
        let o = r.on_response(&out.matched, &Method::GET, StatusCode::OK, &mut h);
        assert!(!h.contains_key("set-cookie"));
        assert_eq!(o.ttl, None, "status rule does not match a 200");
        let mut h = HeaderMap::new();
        h.insert("set-cookie", "a=b".parse().unwrap());
        r.on_response(&out.matched, &Method::POST, StatusCode::OK, &mut h);
        assert!(h.contains_key("set-cookie"), "kept on POST");
        let o = r.on_response(
            &out.matched,
            &Method::GET,
            StatusCode::NOT_FOUND,
            &mut HeaderMap::new(),
        );
        assert_eq!(o.ttl, Some(std::time::Duration::from_secs(10)));
    }

    #[test]
    fn invalid_rules_are_config_errors() {
        let full = "[[backend]]\nhost = \"h\"\n\n[[rule]]\npath = '(unclosed'\n\n[[rule]]\nstatus = [200]\npass = true\n";
        let errs = Config::parse(full, "t.toml").unwrap_err();
        let all: Vec<String> = errs
            .iter()
            .map(|e| format!("{}:{}: {}", e.line, e.key, e.message))
            .collect();
        assert!(
            all.iter()
                .any(|e| e.starts_with("5:rule.0.path: invalid regex")),
            "{all:?}"
        );
        assert!(all.iter().any(|e| e.contains("rule.1.status")), "{all:?}");
    }
}
