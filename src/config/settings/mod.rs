//! Every setting defined once (in the style of Varnish's `params.h`): section, key, kind of
//! value, default, whether a reload may change it, and its documentation.
//!
//! The definitions are used three ways, so they cannot drift from the code or the docs:
//! - the validator takes its range checks ([`check_ranges`]) and the words of its type errors
//!   ([`Kind::phrase`]) from them, and error recovery the value it puts in place of a bad one;
//! - [`render`] turns them into docs/configuration.md's per-section tables and
//!   examples/full.toml, and a test compares those with the committed files;
//! - tests prove that every key serde accepts has a definition and the other way round, and
//!   that each definition's default is what the code uses.

mod acme;
mod cache;
mod compression;
mod esi;
mod fleet;
mod http2;
mod origins;
mod probes;
pub mod render;
mod rules;
mod server;
mod setting;
mod sites;
mod tls;
mod vcl;

use serde_json::Value;

use super::Config;
pub use setting::{Default, Kind, Setting};

/// A table of settings, as the file holds it.
#[derive(Clone, Copy, Debug)]
pub struct Section {
    /// Dotted name: `server`, `storage.disk`, `rule.synth`.
    pub name: &'static str,
    /// `[[name]]`: repeated (an array of tables), each named by its `name` key.
    pub array: bool,
    /// Present only when the operator writes it (`[storage.disk]`): off by default.
    pub optional: bool,
    /// Inline in its parent (`synth = { ... }`), not a table of its own in the file.
    pub inline: bool,
    /// The smallest valid file that holds this section (TOML), for tests and examples.
    pub context: &'static str,
}

/// Every section, in the order of the reference.
pub const SECTIONS: &[Section] = &[
    Section {
        name: "server",
        array: false,
        optional: false,
        inline: false,
        context: "[server]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "tls",
        array: true,
        optional: true,
        inline: false,
        context: "[[tls]]\nlisten = \"127.0.0.1:8443\"\ncertificate = [{ cert = \"a.pem\", key = \"a.key\" }]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "tls.certificate",
        array: true,
        optional: false,
        inline: true,
        context: "[[tls]]\nlisten = \"127.0.0.1:8443\"\ncertificate = [{ cert = \"a.pem\", key = \"a.key\" }]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "tls.acme",
        array: true,
        optional: false,
        inline: true,
        context: "[[tls]]\nlisten = \"127.0.0.1:8443\"\nacme = [{ names = [\"example.com\"] }]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "cache",
        array: false,
        optional: false,
        inline: false,
        context: "[cache]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "storage",
        array: false,
        optional: false,
        inline: false,
        context: "[storage]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "storage.disk",
        array: false,
        optional: true,
        inline: false,
        context: "[storage.disk]\npath = \"/var/cache/shellac/cache.dat\"\nsize = \"1GiB\"\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "storage.named",
        array: true,
        optional: true,
        inline: false,
        context: "[[storage.named]]\nname = \"images\"\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "storage.shared",
        array: false,
        optional: true,
        inline: false,
        context: "[storage.shared]\nnodes = [\"127.0.0.1:7000\"]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "storage.shared.tls",
        array: false,
        optional: true,
        inline: true,
        context: "[storage.shared]\nnodes = [\"127.0.0.1:7000\"]\ntls = { verify_name = true }\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "backend",
        array: true,
        optional: false,
        inline: false,
        context: "[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "backend.tls",
        array: false,
        optional: true,
        inline: true,
        context: "[[backend]]\nhost = \"127.0.0.1\"\ntls = { insecure_skip_verify = false }\n",
    },
    Section {
        name: "probe",
        array: true,
        optional: false,
        inline: false,
        context: "[[probe]]\nname = \"health\"\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "director",
        array: true,
        optional: false,
        inline: false,
        context: "[[director]]\nname = \"web\"\ntype = \"fallback\"\nbackends = [\"app\"]\n[[backend]]\nname = \"app\"\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "routing",
        array: false,
        optional: false,
        inline: false,
        context: "[routing]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "rule",
        array: true,
        optional: false,
        inline: false,
        context: "[[rule]]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "rule.synth",
        array: false,
        optional: true,
        inline: true,
        context: "[[rule]]\nsynth = { status = 403 }\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "rule.redirect",
        array: false,
        optional: true,
        inline: true,
        context: "[[rule]]\nredirect = { to = \"https://example.com/\" }\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "rule.secure_link",
        array: false,
        optional: true,
        inline: true,
        context: "[[rule]]\nsecure_link = { secret = \"k\" }\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "rule.rate_limit",
        array: false,
        optional: true,
        inline: true,
        context: "[[rule]]\nrate_limit = { key = \"client.ip\", requests = 10, per = \"1s\" }\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "vcl",
        array: false,
        optional: false,
        inline: false,
        context: "[vcl]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "site",
        array: true,
        optional: true,
        inline: false,
        context: "[[site]]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "invalidation",
        array: false,
        optional: false,
        inline: false,
        context: "[invalidation]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "log",
        array: false,
        optional: false,
        inline: false,
        context: "[log]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "http2",
        array: false,
        optional: false,
        inline: false,
        context: "[http2]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "compression",
        array: false,
        optional: false,
        inline: false,
        context: "[compression]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
    Section {
        name: "esi",
        array: false,
        optional: false,
        inline: false,
        context: "[esi]\n[[backend]]\nhost = \"127.0.0.1\"\n",
    },
];

/// Every setting, section by section in the order of [`SECTIONS`].
pub fn all() -> impl Iterator<Item = &'static Setting> {
    server::SERVER
        .iter()
        .chain(tls::TLS)
        .chain(tls::TLS_CERTIFICATE)
        .chain(acme::TLS_ACME)
        .chain(cache::CACHE)
        .chain(cache::STORAGE)
        .chain(cache::STORAGE_NAMED)
        .chain(fleet::SHARED)
        .chain(fleet::SHARED_TLS)
        .chain(origins::BACKEND)
        .chain(origins::BACKEND_TLS)
        .chain(probes::PROBE)
        .chain(probes::DIRECTOR)
        .chain(probes::ROUTING)
        .chain(rules::RULE)
        .chain(rules::RATE_LIMIT)
        .chain(vcl::VCL)
        .chain(sites::SITE)
        .chain(cache::INVALIDATION)
        .chain(server::LOG)
        .chain(http2::HTTP2)
        .chain(compression::COMPRESSION)
        .chain(esi::ESI)
}

/// The settings of one section, in definition order.
pub fn of(section: &str) -> impl Iterator<Item = &'static Setting> + '_ {
    let section = canonical(section);
    all().filter(move |s| s.section == section)
}

/// A backend's inline probe has the keys of a `[[probe]]`.
fn canonical(section: &str) -> &str {
    match section {
        "backend.probe" => "probe",
        // A site's rules have the keys of a `[[rule]]`.
        "site.rule" => "rule",
        _ => section,
    }
}

/// The setting `key` of `section`.
pub fn find(section: &str, key: &str) -> Option<&'static Setting> {
    let section = canonical(section);
    all().find(|s| s.section == section && s.key == key)
}

/// The setting a dotted key path from the file is about (`backend.0.probe.window` →
/// `probe.window`; `rule.2.request_header.X-Foo` → `rule.request_header`), and how many
/// segments of `path` name it (`rule.2.request_header` = 3).
pub fn for_path(path: &[String]) -> Option<(&'static Setting, usize)> {
    let named: Vec<(usize, &str)> = path
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.bytes().all(|b| b.is_ascii_digit()))
        .map(|(i, p)| (i, p.as_str()))
        .collect();
    (1..named.len()).rev().find_map(|k| {
        let section: Vec<&str> = named[..k].iter().map(|(_, p)| *p).collect();
        let (at, key) = named[k];
        find(&section.join("."), key).map(|s| (s, at + 1))
    })
}

/// Whether a reload may not change the setting a reload diff key names (`cache.memory_size`,
/// `backend[app].port`, `storage.disk`).
pub fn needs_restart(diff_key: &str) -> bool {
    let mut parts = Vec::new();
    for part in diff_key.split('.') {
        // `backend[app]` is a section with a name, `storage.disk` a table.
        parts.push(part.split('[').next().unwrap_or(part).to_string());
    }
    // The storage tiers are opened once; named storages are parts of the memory tier that a
    // reload sizes again.
    if parts.first().is_some_and(|p| p == "storage") && parts.get(1).is_none_or(|p| p != "named") {
        return true;
    }
    for_path(&parts).is_some_and(|(s, _)| s.restart)
}

/// Range problems of every setting in `config` (key path, problem), from the definitions.
pub(super) fn check_ranges(config: &Config) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let Ok(Value::Object(top)) = serde_json::to_value(config) else {
        return out;
    };
    for section in SECTIONS.iter().filter(|s| !s.name.contains('.')) {
        match top.get(section.name) {
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let path = vec![section.name.to_string(), i.to_string()];
                    walk(section.name, item, &path, &mut out);
                }
            }
            Some(table) => walk(section.name, table, &[section.name.to_string()], &mut out),
            None => {}
        }
    }
    out
}

fn walk(section: &str, table: &Value, path: &[String], out: &mut Vec<(Vec<String>, String)>) {
    let Value::Object(map) = table else { return };
    for (key, value) in map {
        let Some(setting) = find(section, key) else {
            continue;
        };
        let mut here = path.to_vec();
        here.push(key.clone());
        match setting.kind {
            Kind::Table { section } => walk(section, value, &here, out),
            Kind::Probe => walk("probe", value, &here, out),
            Kind::Rules => {
                for (i, rule) in value.as_array().into_iter().flatten().enumerate() {
                    let mut at = here.clone();
                    at.push(i.to_string());
                    walk("rule", rule, &at, out);
                }
            }
            Kind::Statuses => {
                for (i, status) in value.as_array().into_iter().flatten().enumerate() {
                    let status_kind = Kind::Status {
                        min: 100,
                        max: 599,
                        what: "an HTTP status",
                    };
                    if let Some(problem) = status_kind.check(status) {
                        let mut at = here.clone();
                        at.push(i.to_string());
                        out.push((at, problem));
                    }
                }
            }
            kind => {
                if let Some(problem) = kind.check(value) {
                    out.push((here, problem));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
