//! A document root served twice — by a files backend and by a FastCGI backend — whose PHP
//! scripts nothing sends to the FastCGI one: the files backend answers them `404` (it never
//! sends a script's source: `backend/files/scripts.rs`), so PHP never runs them. A warning,
//! not an error (a root may hold scripts nobody is meant to run), when no `[[rule]]` (the
//! configuration's or a site's) sending a script path to the FastCGI backend, no `try_files`
//! ending in `@` it, no `[routing] default` or `[[site]] backend` naming it is found. Said
//! nothing about with a VCL program, which may route any way.

use std::path::{Path, PathBuf};

use super::finding::{Finding, Severity};
use crate::config::rules::RuleConfig;
use crate::config::try_files::{Fallback, TryFiles};
use crate::config::{BackendConfig, BackendProtocol, Config};

/// The script path a rule is tried on: the PHP front controller every PHP application has.
const SCRIPT: &str = "/index.php";

/// One warning per files backend sharing its root with a FastCGI backend that no route
/// sends scripts to, at the files backend's `root`.
pub(super) fn unrouted(config: &Config) -> Vec<Finding> {
    if config.vcl.file.is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let of = |protocol| {
        config
            .backends
            .iter()
            .enumerate()
            .filter(move |(_, b)| b.protocol == protocol)
            .filter_map(|(i, b)| Some((i, b, real(b.root.as_deref()?))))
    };
    for (i, files, root) in of(BackendProtocol::Files) {
        for (_, php, _) in of(BackendProtocol::Fastcgi).filter(|(_, _, r)| *r == root) {
            if routed(config, files, php) {
                continue;
            }
            out.push(Finding {
                severity: Severity::Warning,
                path: vec!["backend".into(), i.to_string(), "root".into()],
                message: format!(
                    "backend `{php}` (FastCGI) serves this root too, but no rule, try_files, [routing] default or site sends script paths (`{SCRIPT}`) to it: `{files}` answers them 404 (it never sends a script's source) and PHP never runs them; add a rule with `path = '\\.php($|/)'` and `director = \"{php}\"`, or end try_files with \"@{php}\"",
                    php = php.name,
                    files = files.name,
                ),
            });
        }
    }
    out
}

/// Whether some route sends a script path to `php` (by name, or through a director it is in).
fn routed(config: &Config, files: &BackendConfig, php: &BackendConfig) -> bool {
    let reaches = |name: &str| {
        name == php.name
            || config
                .directors
                .iter()
                .any(|d| d.name == name && d.backends.contains(&php.name))
    };
    let try_files = matches!(
        TryFiles::parse(&files.try_files),
        Ok(Some(TryFiles { fallback: Fallback::Backend(next), .. })) if reaches(&next)
    );
    let default = config
        .routing
        .default
        .clone()
        .or_else(|| config.directors.first().map(|d| d.name.clone()))
        .or_else(|| config.backends.first().map(|b| b.name.clone()));
    let sites = config.sites.iter();
    let rules = config
        .rules
        .iter()
        .chain(sites.clone().filter_map(|s| s.rules.as_ref()).flatten());
    try_files
        || default.is_some_and(|d| reaches(&d))
        || sites.filter_map(|s| s.backend.as_deref()).any(reaches)
        || rules.into_iter().any(|r| sends_scripts(r, &reaches))
}

/// Whether `rule` sends [`SCRIPT`] to a backend `reaches` says is the FastCGI one.
fn sends_scripts(rule: &RuleConfig, reaches: &dyn Fn(&str) -> bool) -> bool {
    let matches = |re: &Option<String>| {
        re.as_deref()
            .is_none_or(|re| regex::Regex::new(re).is_ok_and(|re| re.is_match(SCRIPT)))
    };
    rule.director.as_deref().is_some_and(reaches) && matches(&rule.path) && matches(&rule.url)
}

/// The root as the kernel resolves it (as written when it does not exist).
fn real(root: &Path) -> PathBuf {
    std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[server]\nlisten = \"127.0.0.1:8080\"\nadmin = \"off\"\n[[backend]]\nname = \"files\"\nprotocol = \"files\"\nroot = \"/srv/www\"\n[[backend]]\nname = \"php\"\nprotocol = \"fastcgi\"\naddress = \"unix:/run/php.sock\"\nmax_connections = 4\nroot = \"/srv/www\"\n";

    fn found(more: &str) -> Vec<Finding> {
        let text = format!("{BASE}{more}");
        unrouted(&Config::parse(&text, "t.toml").unwrap())
    }

    #[test]
    fn a_shared_root_whose_scripts_go_nowhere_is_a_warning() {
        // The files backend is the default and no rule names php.
        let f = found("");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(f[0].path.join("."), "backend.0.root");
        assert!(f[0].message.contains("backend `php` (FastCGI)"), "{f:?}");
        // A rule for something else, or one naming php for other paths, is not enough.
        let images = "[[rule]]\npath = '\\.png$'\ndirector = \"php\"\n";
        assert_eq!(found(images).len(), 1);
    }

    #[test]
    fn any_route_sending_scripts_to_the_fastcgi_backend_is_enough() {
        for routed in [
            "[[rule]]\npath = '\\.php($|/)'\ndirector = \"php\"\n",
            "[[rule]]\nurl = '^/index\\.php'\ndirector = \"php\"\n",
            "[[rule]]\npath = '\\.php$'\ndirector = \"app\"\n[[director]]\nname = \"app\"\ntype = \"fallback\"\nbackends = [\"php\"]\n",
            "[routing]\ndefault = \"php\"\n[[rule]]\npath = '\\.css$'\ndirector = \"files\"\n",
        ] {
            assert!(found(routed).is_empty(), "{routed}");
        }
        let with_try = BASE.replace(
            "root = \"/srv/www\"\n[[backend]]\nname = \"php\"",
            "root = \"/srv/www\"\ntry_files = [\"$uri\", \"@php\"]\n[[backend]]\nname = \"php\"",
        );
        assert!(unrouted(&Config::parse(&with_try, "t.toml").unwrap()).is_empty());
        // Another root: nothing to say.
        let apart = BASE.replacen("root = \"/srv/www\"", "root = \"/srv/static\"", 1);
        assert!(unrouted(&Config::parse(&apart, "t.toml").unwrap()).is_empty());
    }
}
