//! Sites that share cache keys: a name two `[[site]]`s claim on different listeners (an http
//! and an https site of one name) is one key, host + URL, so what one stores the other serves
//! (docs/sites.md). A warning when both cache and they would fetch differently: their
//! `backend`, `root` or `vcl` differ.

use super::finding::{Finding, Severity, at};
use crate::config::Config;

/// One warning per pair of such sites, at the later site's first shared name.
pub(super) fn shared_names(config: &Config) -> Vec<Finding> {
    let sites = &config.sites;
    let mut out = Vec::new();
    for (j, b) in sites.iter().enumerate().filter(|(_, s)| s.cache) {
        for a in sites[..j].iter().filter(|a| a.cache) {
            if a.backend == b.backend && a.root == b.root && a.vcl == b.vcl {
                continue;
            }
            let shared = b.server_name.iter().enumerate().find(|(_, name)| {
                !name.starts_with('~') && a.server_name.iter().any(|n| n.eq_ignore_ascii_case(name))
            });
            if let Some((k, name)) = shared {
                out.push(Finding {
                    severity: Severity::Warning,
                    path: at(&["site", &j.to_string(), "server_name", &k.to_string()]),
                    message: format!(
                        "\"{name}\" is also site `{}`'s (on other listeners): one cache key for both (host + URL), so what one stores the other serves, though their backend, root or vcl differ; give them the same, or `cache = false` to one",
                        a.name
                    ),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[server]\nlisten = [\"127.0.0.1:8080\", \"127.0.0.2:8080\"]\nadmin = \"off\"\n[[backend]]\nname = \"a\"\nhost = \"a\"\n[[backend]]\nname = \"b\"\nhost = \"b\"\n";

    fn found(sites: &str) -> Vec<Finding> {
        let text = format!("{BASE}{sites}");
        shared_names(&Config::parse(&text, "t.toml").unwrap())
    }

    #[test]
    fn one_name_on_two_listeners_with_two_backends_is_a_warning() {
        let two = "[[site]]\nname = \"plain\"\nlisten = \"127.0.0.1:8080\"\nserver_name = \"www.a.test\"\nbackend = \"a\"\n[[site]]\nname = \"secure\"\nlisten = \"127.0.0.2:8080\"\nserver_name = [\"x.test\", \"WWW.a.test\"]\nbackend = \"BACKEND\"\n";
        let f = found(&two.replace("BACKEND", "b"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(f[0].path.join("."), "site.1.server_name.1");
        assert!(f[0].message.contains("site `plain`'s"), "{f:?}");
        // The same backend, or one of them not caching: nothing to say.
        assert!(found(&two.replace("BACKEND", "a")).is_empty());
        let uncached = two
            .replace("BACKEND", "b")
            .replace("name = \"plain\"\n", "name = \"plain\"\ncache = false\n");
        assert!(found(&uncached).is_empty());
    }
}
