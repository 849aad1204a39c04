//! Operator policy rules, compiled once at config load: one `RegexSet` pass over the path and
//! one over the URL per request, then cheap per-rule checks in order. The request phase runs in
//! Recv; the response phase runs before the storage decision, for the rules whose request
//! matchers matched. With no rules configured both phases cost nothing. `rewrite` is nginx's
//! `rewrite` engine (issue 31; not wired into the rules yet).

mod conn;
pub(crate) mod hotlink;
mod matcher;
mod md5;
pub mod rewrite;
mod rewrite_uri;

use http::header::{self, HeaderMap};
use http::{Method, StatusCode};
use regex::{Regex, RegexSet};

use crate::cache::policy::Overrides;
use crate::config::rules::{RateKey, RuleConfig};
use conn::rate_key;
pub use conn::{Conn, Limit, Limiter};
use matcher::{FieldMatch, Rule, Target, expand, names, pairs};

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

    /// Whether any rule has a request-phase action that changes a hit (`change_a_hit`) of a
    /// request that is an FLV or MP4 seek (`seeking`: its target has `start=`) or not. An
    /// `flv` or `mp4` rule changes only seeks: a site with one still has plain fast hits
    /// without a header map built and every rule matched per hit.
    pub fn act_on_requests(&self, cookies_matter: bool, seeking: bool) -> bool {
        self.rules
            .iter()
            .any(|r| r.acts_on_request(cookies_matter, seeking))
    }

    /// Whether any rule says `compress` (which `compress` answers only for the rules a
    /// request matched): a fast hit that would serve another coding steps aside.
    pub fn say_compress(&self) -> bool {
        self.rules.iter().any(|r| r.cfg.compress.is_some())
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
                out.redirect = Some((status, expand(rule, &target, path_and_query, &r.to)));
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
                conn.site_names,
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
        // An `flv` or `mp4` rule changes only a seek.
        let seeking = path_and_query.contains("start=");
        if !self.act_on_requests(cookies_matter, seeking) {
            return false;
        }
        let target = self.target(host, path_and_query, conn);
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
            if c.storage.is_some() {
                o.storage.clone_from(&c.storage);
            }
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

#[cfg(test)]
mod tests;
