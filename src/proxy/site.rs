//! Virtual hosts at run time (`[[site]]`, config/site.rs): the table that picks a request's
//! site from the listener it came in on and its host (nginx's precedence,
//! `http::server_name`), and what a site carries instead of the global configuration — its
//! rules, rewrites, default route, document root, cache settings and access log. Built with
//! each configuration; a configuration without sites has none (`Proxy::sites` is `None`) and
//! pays nothing.
//!
//! The Recv step that chooses a request's site and runs the rewrites is `recv_site.rs`.
//!
//! Per-site counters live in [`SiteStats`], kept across reloads by the site's name (a site a
//! reload removes keeps its totals until the process ends, as Prometheus expects counters to).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::backend::director::{Backends, Member};
use crate::config::site::SiteConfig;
use crate::config::{CacheConfig, Config};
use crate::http::server_name::{Names, Pattern};
use crate::rules::Rules;
use crate::rules::rewrite::Rewrite;
use crate::stats::{Counter, Histogram};
use crate::txlog::Format;

/// One site, compiled.
pub struct Site {
    pub name: Arc<str>,
    /// Its own rules; `None`: the global ones.
    pub(super) rules: Option<Rules>,
    /// Its own rewrites; `None`: the global ones.
    pub(super) rewrites: Option<Vec<Rewrite>>,
    /// Where its requests go unless a rule says otherwise; `None`: the global default.
    pub(super) route: Option<Member>,
    /// Its document root for `files` and `fastcgi` backends; `None`: theirs.
    pub(super) root: Option<crate::backend::DocRoot>,
    /// Its directory listings for `files` backends; `None`: theirs.
    pub(super) autoindex: Option<crate::backend::Autoindex>,
    /// `cache = false`: every request is passed.
    pub(super) cache: bool,
    /// The cache settings its responses are stored with, when it sets any.
    pub(super) cache_config: Option<CacheConfig>,
    /// Where its access-log lines go.
    pub(super) log: SiteLog,
    pub stats: Arc<SiteCounters>,
    /// Its account in the memory tier (`cache/shares.rs`; `0`: none): kept by name across
    /// reloads, as its counters are.
    pub account: u16,
    /// Its `cache_share` in bytes, if it has one.
    pub(super) share: Option<u64>,
    /// Its own VCL program (`vcl`): the policy of its requests, by its place in
    /// `Proxy::site_vcl`.
    pub(super) vcl: Option<usize>,
    /// Its `server_name`s, which hotlink protection's `server_names` takes as its own.
    pub(super) names: Names<()>,
}

/// Where a site's access-log lines go (`access_log`, `log_format`).
pub(super) enum SiteLog {
    /// Sets neither: the global log and format (`Proxy::log_format`).
    Global,
    /// `access_log = "off"` (or the global log off and no file of its own).
    Off,
    /// Its own format, to its own output or (`Format::output` none) the global log.
    Own(Arc<Format>),
}

impl SiteLog {
    fn of(config: &Config, s: &SiteConfig) -> SiteLog {
        if s.access_log.is_none() && s.log_format.is_none() {
            return SiteLog::Global;
        }
        let to = s.access_log.as_deref().unwrap_or(&config.log.access_log);
        if to == "off" {
            return SiteLog::Off;
        }
        let spec = s.log_format.as_deref().unwrap_or(&config.log.format);
        // Checked by validation: a format that does not parse leaves the global log.
        let Ok(format) = Format::parse(spec) else {
            return SiteLog::Global;
        };
        SiteLog::Own(Arc::new(if to == config.log.access_log {
            format
        } else {
            format.to_output(to)
        }))
    }
}

/// What the table says about a request.
pub(super) enum Choice<'a> {
    /// No site on this listener: the global configuration.
    Global,
    Site(&'a Arc<Site>),
    /// Sites on this listener, none for this host and no default.
    Unknown,
}

/// One listen address's sites.
struct Address {
    names: Names<usize>,
    default: Option<usize>,
}

/// Every site and, per listen address (as configured), the names that select them.
pub struct Sites {
    sites: Vec<Arc<Site>>,
    addresses: HashMap<SocketAddr, Address>,
}

impl Sites {
    /// The sites of `config` (`None` without any), routes resolved in `backends`, counters
    /// taken from `stats` by name.
    /// `vcl`: the sites that have their own VCL program, by name, with the program's
    /// default backend, in the order of `Proxy::site_vcl`.
    pub(super) fn build(
        config: &Config,
        backends: &Backends,
        stats: &SiteStats,
        vcl: &[(String, Option<Member>)],
    ) -> Option<Sites> {
        if config.sites.is_empty() {
            return None;
        }
        let mut sites = Vec::with_capacity(config.sites.len());
        let mut addresses: HashMap<SocketAddr, Address> = HashMap::new();
        for (i, s) in config.sites.iter().enumerate() {
            let cache_config =
                (s.default_ttl.is_some() || s.max_ttl.is_some() || s.grace.is_some()).then(|| {
                    let mut c = config.cache.clone();
                    if let Some(t) = s.default_ttl {
                        c.default_ttl = t;
                    }
                    if let Some(t) = s.max_ttl {
                        c.max_ttl = Some(t);
                    }
                    if let Some(g) = s.grace {
                        c.grace = g;
                    }
                    c
                });
            let own_vcl = vcl.iter().position(|(name, _)| *name == s.name);
            let (account, counters) = stats.get(&s.name);
            sites.push(Arc::new(Site {
                name: Arc::from(s.name.as_str()),
                rules: s
                    .rules
                    .as_deref()
                    .map(|r| Rules::compile(r).scoped(&s.name)),
                // Checked by validation: a line that does not compile is left out.
                rewrites: s.rewrite.as_ref().map(|lines| {
                    lines
                        .iter()
                        .filter_map(|l| Rewrite::parse(l).ok())
                        .collect()
                }),
                // A site's VCL program routes to its default backend unless it chooses one
                // (Varnish's `req.backend_hint` starts at the first backend declared).
                route: s
                    .backend
                    .as_deref()
                    .and_then(|b| backends.get(b))
                    .or_else(|| vcl.get(own_vcl?)?.1.clone()),
                root: s.root.as_deref().map(crate::backend::DocRoot::new),
                autoindex: s.autoindex.map(crate::backend::Autoindex),
                cache: s.cache,
                cache_config,
                log: SiteLog::of(config, s),
                stats: counters,
                account,
                share: s.cache_share.map(|c| c.bytes(config.cache.memory_size.0)),
                vcl: own_vcl,
                names: own_names(&s.server_name),
            }));
            for addr in s.addresses(config) {
                let a = addresses.entry(addr).or_insert_with(|| Address {
                    names: Names::new(),
                    default: None,
                });
                if s.default && a.default.is_none() {
                    a.default = Some(i);
                }
                for name in &s.server_name {
                    // Checked by validation (a name claimed twice is refused there).
                    if let Ok(p) = Pattern::parse(name) {
                        let _ = a.names.add(&p, i);
                    }
                }
            }
        }
        Some(Sites { sites, addresses })
    }

    /// The site for a request that came in on `listener` (as configured) for `host` (with
    /// or without its port; a Unix socket's listener is its `config::site::unix_listener`).
    pub(super) fn choose(&self, listener: Option<SocketAddr>, host: &str) -> Choice<'_> {
        let Some(a) = listener.and_then(|l| self.addresses.get(&l)) else {
            return Choice::Global;
        };
        let name = strip_port(host);
        match a.names.find(name).copied().or(a.default) {
            Some(i) => self.sites.get(i).map_or(Choice::Global, Choice::Site),
            None => Choice::Unknown,
        }
    }

    /// Every site, in file order.
    pub fn all(&self) -> &[Arc<Site>] {
        &self.sites
    }

    /// (account, bytes) of every site with a `cache_share`, for the memory tier.
    pub(super) fn shares(&self) -> Vec<(u16, u64)> {
        let with = |s: &Arc<Site>| Some((s.account, s.share?)).filter(|(a, _)| *a != 0);
        self.sites.iter().filter_map(with).collect()
    }
}

/// A site's `server_name`s as one table (a pattern that does not parse was refused by
/// validation and is left out here).
fn own_names(written: &[String]) -> Names<()> {
    let mut names = Names::new();
    for name in written {
        if let Ok(p) = Pattern::parse(name) {
            // A name written twice in one site is the same site.
            let _ = names.add(&p, ());
        }
    }
    names
}

/// A host without its port (`[::1]:80` → `[::1]`).
pub(super) fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

/// One site's counters (exported with a `site` label in `/metrics`, and in `/sites`).
#[derive(Debug, Default)]
pub struct SiteCounters {
    /// Requests answered for the site.
    pub req: Counter,
    /// Of those, hits (fresh or graced, fast or not).
    pub hit: Counter,
    /// Of those, misses (fetched and stored, or fetched for storing).
    pub miss: Counter,
    /// Of those, passes and every other response not served from the cache.
    pub pass: Counter,
    /// Rewrites applied to the site's requests.
    pub rewrite: Counter,
    /// Time from a request's arrival to its response head (`/metrics`
    /// `shellac_site_ttfb_seconds{site}`).
    pub ttfb: Histogram,
    /// The site's requests a files backend refused, by reason (`/sites` under the names of
    /// the process-wide `files_refused_*` counters; `/metrics`
    /// `shellac_site_files_refused_total{site,reason}`).
    pub(crate) files_refused: crate::backend::Refused,
}

/// (name, description, value) of every counter of a site.
pub type SiteSnapshot = [(&'static str, &'static str, u64); 5];

impl SiteCounters {
    /// (name, description, value) of every counter.
    pub fn snapshot(&self) -> SiteSnapshot {
        [
            ("req", "Requests answered for the site", self.req.get()),
            ("hit", "Of those, hits", self.hit.get()),
            ("miss", "Of those, misses", self.miss.get()),
            ("pass", "Of those, neither hit nor miss", self.pass.get()),
            (
                "rewrite",
                "Requests whose target a rewrite changed",
                self.rewrite.get(),
            ),
        ]
    }
}

/// Every site's counters by name, kept across reloads.
#[derive(Debug, Default)]
pub struct SiteStats(Mutex<Vec<(Arc<str>, Arc<SiteCounters>)>>);

impl SiteStats {
    /// The memory tier account and the counters of the site named `name` (new ones for a
    /// name not seen before). Accounts follow the order names were first seen, from 1; a name
    /// first seen when every account is taken has none (`0`).
    fn get(&self, name: &str) -> (u16, Arc<SiteCounters>) {
        let Ok(mut all) = self.0.lock() else {
            return (0, Arc::default());
        };
        if let Some(i) = all.iter().position(|(n, _)| &**n == name) {
            return (account(i), all[i].1.clone());
        }
        let c = Arc::new(SiteCounters::default());
        all.push((Arc::from(name), c.clone()));
        (account(all.len() - 1), c)
    }

    /// The memory tier account of the site named `name`, if it was seen and has one.
    pub fn account(&self, name: &str) -> u16 {
        let Ok(all) = self.0.lock() else { return 0 };
        all.iter()
            .position(|(n, _)| &**n == name)
            .map_or(0, account)
    }

    /// (site name, counters) for every site seen since start, in the order first seen.
    pub fn all(&self) -> Vec<(Arc<str>, Arc<SiteCounters>)> {
        self.0.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

/// The memory tier account of the `i`th site name seen (`0` past the last account).
fn account(i: usize) -> u16 {
    u16::try_from(i + 1)
        .ok()
        .filter(|a| usize::from(*a) < crate::cache::shares::SITE_ACCOUNTS)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_stripped() {
        assert_eq!(strip_port("www.example.org:8080"), "www.example.org");
        assert_eq!(strip_port("www.example.org"), "www.example.org");
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
    }
}
