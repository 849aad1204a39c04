//! Checks across settings (one value against another, names that must exist, texts with a
//! syntax of their own). Each setting's own range comes from its definition
//! (`settings::check_ranges`); both run in `Config::validate`.
//!
//! The checks sit above the model: they read the whole [`Config`], while the sections'
//! files (config/server.rs, config/site.rs, ...) never name it. This file runs them all and
//! holds the small ones; `backends.rs` checks origins, probes and directors, `cache.rs` the
//! cache and storage tiers, `listeners.rs` listen addresses (clashes, h2c, PROXY protocol),
//! `sites.rs` the `[[site]]`s.

mod backends;
mod cache;
mod listeners;
mod problems;
mod sites;
mod stores;

use super::{Config, rules, units};
use problems::{Problems, key};

/// Problems of one value on its own (a regex that does not compile), as (key path, problem):
/// reported even when another key of the same table had to be stood in for.
pub(super) fn local(c: &Config) -> Problems {
    let mut out = Vec::new();
    for (i, rule) in c.rules.iter().enumerate() {
        for (field, msg) in rules::syntax(rule) {
            let mut path = vec!["rule".to_string(), i.to_string()];
            path.extend(field.split('.').map(str::to_string));
            out.push((path, msg));
        }
    }
    out.extend(sites::local(c));
    out
}

/// Every problem across settings, as (key path, problem).
pub(super) fn across(c: &Config) -> Problems {
    let mut out = Vec::new();
    server(c, &mut out);
    cache::cache(c, &mut out);
    stores::stores(c, &mut out);
    log(c, &mut out);
    out.extend(vcl(c));
    out.extend(backends::validate(c));
    out.extend(super::try_files::validate(c));
    out.extend(listeners::clashes(c));
    out.extend(listeners::h2c(c));
    out.extend(listeners::proxy_protocol(c));
    out.extend(sites::across(c));
    out.extend(super::tls::validate(&c.tls));
    for (i, t) in c.tls.iter().enumerate() {
        out.extend(super::acme::validate(
            i,
            &t.acme,
            !c.server.listen.is_empty(),
        ));
        // One worker per name: two listeners ordering one name would race for its files.
        for (j, a) in t.acme.iter().enumerate() {
            for (k, name) in a.names.iter().enumerate() {
                let earlier = c.tls[..i]
                    .iter()
                    .find(|o| o.acme.iter().any(|oa| oa.names.contains(name)));
                if let Some(o) = earlier {
                    out.push((
                        key(&["tls", &i.to_string(), "acme", &j.to_string(), "names", &k.to_string()]),
                        format!("`{name}` is already obtained by [[tls]] `{}`: give each name to one listener (one listener can listen on several addresses)", o.name),
                    ));
                }
            }
        }
    }
    let names =
        |n: &str| c.backends.iter().any(|b| b.name == n) || c.directors.iter().any(|d| d.name == n);
    for (i, rule) in c.rules.iter().enumerate() {
        for (field, msg) in rules::validate(rule, &names) {
            let mut path = vec!["rule".to_string(), i.to_string()];
            path.extend(field.split('.').map(str::to_string));
            out.push((path, msg));
        }
    }
    out
}

/// What may not stand beside a VCL file (its origins and policy come from it).
fn vcl(c: &Config) -> Problems {
    let mut out = Vec::new();
    if c.vcl.file.is_none() || c.vcl.origins_from_file {
        return out;
    }
    let clash = |what: &str| {
        format!(
            "{what} cannot be given with [vcl] file: the VCL file declares the backends, \
             probes and directors, and is the policy"
        )
    };
    if !c.backends.is_empty() {
        out.push((vec!["backend".to_string()], clash("[[backend]]")));
    }
    if !c.probes.is_empty() {
        out.push((vec!["probe".to_string()], clash("[[probe]]")));
    }
    if !c.directors.is_empty() {
        out.push((vec!["director".to_string()], clash("[[director]]")));
    }
    if c.routing.default.is_some() {
        out.push((
            vec!["routing".to_string(), "default".to_string()],
            clash("[routing] default"),
        ));
    }
    if !c.rules.is_empty() {
        out.push((vec!["rule".to_string()], clash("[[rule]]")));
    }
    out
}

fn server(c: &Config, out: &mut Problems) {
    let sv = &c.server;
    if sv.listen.is_empty() {
        out.push((
            key(&["server", "listen"]),
            "at least one listen address is required".into(),
        ));
    }
    if sv.unix_mode().is_none() {
        out.push((
            key(&["server", "listen_unix_mode"]),
            format!(
                "`{}` is not a file mode: write it in octal, at most \"0777\" (e.g. \"0660\")",
                sv.listen_unix_mode
            ),
        ));
    }
    for (i, p) in sv.listen_unix.iter().enumerate() {
        if p.as_os_str().is_empty() || sv.listen_unix[..i].contains(p) {
            out.push((
                vec!["server".into(), "listen_unix".into(), i.to_string()],
                "must be a socket path, each once".into(),
            ));
        }
    }
    let header_size_ok = (1024..=1 << 20).contains(&sv.max_header_size.0);
    if header_size_ok && sv.max_request_line.0 > sv.max_header_size.0 {
        out.push((
            key(&["server", "max_request_line"]),
            format!(
                "{} is larger than server.max_header_size ({})",
                units::format_size(sv.max_request_line.0),
                units::format_size(sv.max_header_size.0)
            ),
        ));
    }
    for (i, p) in sv.upgrade_protocols.iter().enumerate() {
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~/".contains(&b);
        if p.is_empty() || !p.bytes().all(token) {
            out.push((
                vec!["server".into(), "upgrade_protocols".into(), i.to_string()],
                format!("`{p}` is not a protocol name (a token, e.g. \"websocket\")"),
            ));
        }
    }
    if let Some(token) = &sv.admin_token
        && (token.len() < 8 || !token.bytes().all(|b| b.is_ascii_graphic()))
    {
        out.push((
            key(&["server", "admin_token"]),
            "must be at least 8 printable ASCII characters without spaces".into(),
        ));
    }
}

fn log(c: &Config, out: &mut Problems) {
    let log = &c.log;
    if log.access_log.trim().is_empty() {
        out.push((
            key(&["log", "access_log"]),
            "must be a file path, \"stdout\" or \"off\"".into(),
        ));
    }
    if let Err(problem) = crate::txlog::Format::parse(&log.format) {
        out.push((key(&["log", "format"]), problem));
    }
}
