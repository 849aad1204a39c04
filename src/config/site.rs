//! `[[site]]`: virtual hosts (issue 31). A site is chosen per request by the listener the
//! connection came in on and the request's host, with nginx's `server_name` precedence
//! (`http::server_name`); what a site does not set comes from the global configuration.
//! The checks here are the ones `shellac check` reports with file:line:key: two default
//! sites on one address, a name claimed twice on one address, a server name or rewrite that
//! does not compile, a listen address that is no listener, a backend that does not exist.

use std::collections::HashMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::units::Dur;
use super::{Config, lists, rules};
use crate::http::server_name::{Names, Pattern};

/// One `[[site]]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    /// Name in logs, `/metrics` labels and `shellac stat --site`. Default `site<N>`.
    #[serde(default)]
    pub name: String,
    /// The client listeners (`server.listen` or a `[[tls]]`'s `listen` addresses, as
    /// written) whose requests may be for this site. `[]`: every client listener.
    #[serde(default, deserialize_with = "lists::one_or_many")]
    pub listen: Vec<SocketAddr>,
    /// nginx's `server_name`: exact names, `*.example.org`, `mail.*`, `.example.org`,
    /// `~REGEX`.
    #[serde(default, deserialize_with = "lists::one_or_many")]
    pub server_name: Vec<String>,
    /// The site of its listen addresses for a host no site names (nginx's `listen ...
    /// default_server`).
    #[serde(default)]
    pub default: bool,
    /// Backend or director the site's requests go to (its `[[site.rule]]`s may choose
    /// another). Default: `[routing] default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The site's own `[[rule]]`s; absent: the global ones.
    #[serde(default, rename = "rule", skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<rules::RuleConfig>>,
    /// The site's own rewrite lines; absent: `[routing] rewrite`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "some_one_or_many"
    )]
    pub rewrite: Option<Vec<String>>,
    /// `false`: nothing of this site is stored or served from the cache (every request is
    /// passed). Default true.
    #[serde(default = "yes")]
    pub cache: bool,
    /// `cache.default_ttl` for this site's responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ttl: Option<Dur>,
    /// `cache.max_ttl` for this site's responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttl: Option<Dur>,
    /// `cache.grace` for this site's responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace: Option<Dur>,
    /// Where this site's access-log lines go: a file path, `"stdout"` or `"off"`. Default:
    /// `[log] access_log`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_log: Option<String>,
    /// This site's access-log format (as `[log] format`). Default: `[log] format`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_format: Option<String>,
}

fn yes() -> bool {
    true
}

fn some_one_or_many<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<String>>, D::Error> {
    lists::one_or_many(d).map(Some)
}

impl SiteConfig {
    /// The site's listen addresses: its own, else every client listener of `c`.
    pub fn addresses(&self, c: &Config) -> Vec<SocketAddr> {
        if self.listen.is_empty() {
            all_listeners(c)
        } else {
            self.listen.clone()
        }
    }
}

/// Every client listener address as written (`server.listen`, then each `[[tls]]`'s).
pub fn all_listeners(c: &Config) -> Vec<SocketAddr> {
    let mut out = c.server.listen.clone();
    for t in &c.tls {
        for a in &t.listen {
            if !out.contains(a) {
                out.push(*a);
            }
        }
    }
    out
}

type Problems = Vec<(Vec<String>, String)>;

fn at(i: usize, rest: &[&str]) -> Vec<String> {
    let mut p = vec!["site".to_string(), i.to_string()];
    p.extend(rest.iter().map(|s| s.to_string()));
    p
}

/// Problems of one value on its own: a server name or a rewrite line that does not compile,
/// a site rule's syntax.
pub(super) fn local(c: &Config) -> Problems {
    let mut out = Vec::new();
    for (j, line) in c.routing.rewrite.iter().enumerate() {
        if let Err(e) = super::rewrite::Line::parse(line) {
            out.push((
                vec!["routing".into(), "rewrite".into(), j.to_string()],
                e.to_string(),
            ));
        }
    }
    for (i, site) in c.sites.iter().enumerate() {
        for (j, name) in site.server_name.iter().enumerate() {
            if let Err(e) = Pattern::parse(name) {
                out.push((at(i, &["server_name", &j.to_string()]), e.to_string()));
            }
        }
        for (j, line) in site.rewrite.iter().flatten().enumerate() {
            if let Err(e) = super::rewrite::Line::parse(line) {
                out.push((at(i, &["rewrite", &j.to_string()]), e.to_string()));
            }
        }
        if let Some(log) = &site.access_log
            && log.trim().is_empty()
        {
            out.push((
                at(i, &["access_log"]),
                "must be a file path, \"stdout\" or \"off\"".into(),
            ));
        }
        if let Some(format) = &site.log_format
            && let Err(problem) = crate::txlog::Format::parse(format)
        {
            out.push((at(i, &["log_format"]), problem));
        }
        for (j, rule) in site.rules.iter().flatten().enumerate() {
            for (field, msg) in rules::syntax(rule) {
                let mut path = at(i, &["rule", &j.to_string()]);
                path.extend(field.split('.').map(str::to_string));
                out.push((path, msg));
            }
        }
    }
    out
}

/// Problems across settings: names, listeners, defaults and server names per address.
pub(super) fn across(c: &Config) -> Problems {
    let mut out = Vec::new();
    let listeners = all_listeners(c);
    let names =
        |n: &str| c.backends.iter().any(|b| b.name == n) || c.directors.iter().any(|d| d.name == n);
    let mut seen: HashMap<&str, usize> = HashMap::new();
    // Per listen address: the default site, and the names claimed.
    let mut defaults: HashMap<SocketAddr, usize> = HashMap::new();
    let mut claimed: HashMap<SocketAddr, Names<usize>> = HashMap::new();
    for (i, site) in c.sites.iter().enumerate() {
        if let Some(first) = seen.insert(site.name.as_str(), i) {
            out.push((
                at(i, &["name"]),
                format!(
                    "site `{}` is named twice (also [[site]] number {}): give each site its own name",
                    site.name,
                    first + 1
                ),
            ));
        }
        for (j, a) in site.listen.iter().enumerate() {
            if !listeners.contains(a) {
                out.push((
                    at(i, &["listen", &j.to_string()]),
                    format!(
                        "{a} is not a client listener (server.listen or a [[tls]] listen address, as written)"
                    ),
                ));
            }
        }
        if let Some(b) = &site.backend
            && !names(b)
        {
            out.push((
                at(i, &["backend"]),
                format!("no backend or director is named `{b}`"),
            ));
        }
        for (j, rule) in site.rules.iter().flatten().enumerate() {
            for (field, msg) in rules::validate(rule, &names) {
                let mut path = at(i, &["rule", &j.to_string()]);
                path.extend(field.split('.').map(str::to_string));
                out.push((path, msg));
            }
        }
        for addr in site.addresses(c) {
            if site.default
                && let Some(other) = defaults.insert(addr, i)
            {
                out.push((
                    at(i, &["default"]),
                    format!(
                        "{addr} has two default sites: `{}` and `{}`",
                        c.sites[other].name, site.name
                    ),
                ));
            }
            let table = claimed.entry(addr).or_default();
            for (j, name) in site.server_name.iter().enumerate() {
                let Ok(patterns) = Pattern::parse(name) else {
                    continue;
                };
                if let Err(conflict) = table.add(&patterns, i) {
                    out.push((
                        at(i, &["server_name", &j.to_string()]),
                        format!("{conflict} ({addr})"),
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const BASE: &str = "[server]\nlisten = [\"127.0.0.1:8080\", \"127.0.0.1:8081\"]\n[[backend]]\nname = \"app\"\nhost = \"127.0.0.1\"\n";

    fn errors(sites: &str) -> Vec<(usize, String, String)> {
        let text = format!("{BASE}{sites}");
        match Config::parse(&text, "t.toml") {
            Ok(_) => Vec::new(),
            Err(e) => e.into_iter().map(|e| (e.line, e.key, e.message)).collect(),
        }
    }

    #[test]
    fn a_good_site_parses_and_inherits() {
        let text = format!(
            "{BASE}[[site]]\nserver_name = [\"www.example.org\", \".example.net\"]\nbackend = \"app\"\nrewrite = '^/external/([0-9]+)/? /external.php?vid=$1 last'\n[[site.rule]]\npath = '^/x'\npass = true\n[[site]]\nname = \"fallback\"\ndefault = true\nlisten = \"127.0.0.1:8080\"\n"
        );
        let c = Config::parse(&text, "t.toml").unwrap();
        assert_eq!(c.sites.len(), 2);
        assert_eq!(c.sites[0].name, "site0");
        assert_eq!(c.sites[0].rules.as_ref().map(Vec::len), Some(1));
        assert_eq!(c.sites[0].rules.as_ref().unwrap()[0].name, "rule0");
        assert!(
            c.sites[1].rules.is_none(),
            "no [[site.rule]]: the global rules"
        );
        assert!(c.sites[1].rewrite.is_none());
        assert_eq!(c.sites[0].rewrite.as_ref().map(Vec::len), Some(1));
        assert!(c.sites[0].cache);
    }

    #[test]
    fn check_names_the_line_and_key() {
        let e = errors(
            "[[site]]\nname = \"a\"\ndefault = true\n[[site]]\nname = \"b\"\ndefault = true\nlisten = \"127.0.0.1:8081\"\n",
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].1, "site.1.default");
        assert_eq!(e[0].0, 11);
        assert!(e[0].2.contains("two default sites"), "{e:?}");

        let e = errors(
            "[[site]]\nserver_name = \"www.example.org\"\n[[site]]\nserver_name = [\"a.example.org\", \"WWW.example.org\"]\n",
        );
        assert_eq!(e.len(), 2, "claimed on both listeners: {e:?}");
        assert_eq!(e[0].1, "site.1.server_name.1");
        assert!(e[0].2.contains("claimed by two sites"), "{e:?}");

        let e = errors("[[site]]\nserver_name = \"~^(www\"\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].1, "site.0.server_name.0");
        assert!(e[0].2.contains("does not compile"), "{e:?}");

        let e = errors(
            "[[site]]\nserver_name = \"a\"\nlisten = \"127.0.0.1:9999\"\nbackend = \"nope\"\nrewrite = [\"^/(a) /$2 last\"]\n",
        );
        let keys: Vec<&str> = e.iter().map(|e| e.1.as_str()).collect();
        assert_eq!(
            keys,
            ["site.0.listen.0", "site.0.backend", "site.0.rewrite.0"],
            "{e:?}"
        );
    }
}
