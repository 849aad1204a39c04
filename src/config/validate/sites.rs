//! Checks of the `[[site]]`s (issue 31) that `shellac check` reports with file:line:key: two
//! default sites on one address, a name claimed twice on one address, a server name or
//! rewrite that does not compile, a listen address that is no listener, a backend that does
//! not exist, a document root that is not an absolute path, a `cache_share` larger than the
//! memory tier, more sites than the memory tier keeps accounts for.

use std::collections::HashMap;
use std::net::SocketAddr;

use super::problems::Problems;
use crate::config::site::{ListenOn, unix_listener};
use crate::config::site_share::MAX_SITES;
use crate::config::{Config, rewrite, rules};
use crate::http::server_name::{Names, Pattern};

/// How messages name `listener` (an address of [`Config::all_listeners`]).
fn named(c: &Config, listener: SocketAddr) -> String {
    c.server
        .listen_unix
        .iter()
        .enumerate()
        .find(|(i, _)| unix_listener(*i) == listener)
        .map_or(listener.to_string(), |(_, p)| {
            format!("unix:{}", p.display())
        })
}

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
        if let Err(e) = rewrite::Line::parse(line) {
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
            if let Err(e) = rewrite::Line::parse(line) {
                out.push((at(i, &["rewrite", &j.to_string()]), e.to_string()));
            }
        }
        if let Some(root) = &site.root
            && !root.is_absolute()
        {
            out.push((
                at(i, &["root"]),
                format!("`{}` must be an absolute path", root.display()),
            ));
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
    let listeners = c.all_listeners();
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
        for (j, l) in site.listen.iter().enumerate() {
            let problem = match l {
                ListenOn::Addr(a) if !listeners.contains(a) => format!(
                    "{a} is not a client listener (server.listen or a [[tls]] listen address, as written)"
                ),
                ListenOn::Unix(p) if !c.server.listen_unix.contains(p) => {
                    format!("{l} is not a socket of server.listen_unix (as written there)")
                }
                _ => continue,
            };
            out.push((at(i, &["listen", &j.to_string()]), problem));
        }
        if site.vcl.is_some() {
            for (key, what) in [
                ("rule", site.rules.is_some()),
                ("backend", site.backend.is_some()),
            ] {
                if what {
                    out.push((
                        at(i, &[key]),
                        format!(
                            "a site with its own `vcl` file takes its policy and backends from it: `{key}` cannot be given beside it"
                        ),
                    ));
                }
            }
        }
        if let Some(share) = site.cache_share
            && share.bytes(c.cache.memory_size.0) > c.cache.memory_size.0
        {
            out.push((
                at(i, &["cache_share"]),
                format!(
                    "{share} is more than the whole memory tier (cache.memory_size = {}): give a smaller share, or none",
                    crate::config::units::size_text(c.cache.memory_size.0)
                ),
            ));
        }
        if i == MAX_SITES {
            out.push((
                at(i, &["name"]),
                format!("at most {MAX_SITES} sites: the memory tier keeps an account for each"),
            ));
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
                        "{} has two default sites: `{}` and `{}`",
                        named(c, addr),
                        c.sites[other].name,
                        site.name
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
                        format!("{conflict} ({})", named(c, addr)),
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

        let e = errors("[[site]]\nserver_name = \"a\"\nroot = \"srv/www\"\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!((e[0].0, e[0].1.as_str()), (8, "site.0.root"), "{e:?}");
        assert!(e[0].2.contains("absolute path"), "{e:?}");
    }

    #[test]
    fn a_cache_share_larger_than_the_memory_tier_is_refused() {
        let e = errors(
            "[cache]\nmemory_size = \"64MiB\"\n[[site]]\nserver_name = \"a\"\ncache_share = \"128MiB\"\n",
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(
            (e[0].0, e[0].1.as_str()),
            (10, "site.0.cache_share"),
            "{e:?}"
        );
        assert!(e[0].2.contains("more than the whole memory tier"), "{e:?}");
        let e = errors("[[site]]\nserver_name = \"a\"\ncache_share = \"120%\"\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].2.contains("at most 100"), "{e:?}");
        // Shares that add up to more than the tier are a warning (preflight), not an error.
        let text = format!(
            "{BASE}[[site]]\nserver_name = \"a\"\ncache_share = \"60%\"\n[[site]]\nserver_name = \"b\"\ncache_share = \"60%\"\n"
        );
        let c = Config::parse(&text, "t.toml").unwrap();
        assert_eq!(
            c.sites[1].cache_share,
            Some(crate::config::site_share::CacheShare::Percent(60.0))
        );
    }

    #[test]
    fn a_site_names_a_unix_socket_of_listen_unix() {
        let text = "[[backend]]\nhost = \"127.0.0.1\"\n[server]\nlisten = \"127.0.0.1:8080\"\nlisten_unix = [\"/run/a.sock\", \"/run/b.sock\"]\n[[site]]\nlisten = \"unix:/run/b.sock\"\ndefault = true\n[[site]]\nname = \"x\"\nlisten = [\"unix:/run/c.sock\", \"unix:/run/b.sock\"]\ndefault = true\n";
        let e = match Config::parse(text, "t.toml") {
            Ok(_) => Vec::new(),
            Err(e) => e.into_iter().map(|e| (e.key, e.message)).collect(),
        };
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!(e[0].0, "site.1.listen.0");
        assert!(
            e[0].1.contains("not a socket of server.listen_unix"),
            "{e:?}"
        );
        assert_eq!(e[1].0, "site.1.default");
        assert!(
            e[1].1.contains("unix:/run/b.sock has two default sites"),
            "{e:?}"
        );
        let ok = text
            .replace("c.sock", "a.sock")
            .replace("default = true\n[[site]]", "[[site]]");
        let c = Config::parse(&ok, "t.toml").unwrap();
        assert_eq!(
            c.sites[1].addresses(&c),
            [
                crate::config::site::unix_listener(0),
                crate::config::site::unix_listener(1)
            ]
        );
    }
}
