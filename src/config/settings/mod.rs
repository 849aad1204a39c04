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
pub mod render;
mod rules;
mod server;
mod sites;
mod tls;

use std::time::Duration;

use serde_json::Value;

use super::Config;
use super::units;

/// What a setting holds: the words errors use, the range the validator checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `true` or `false`.
    Bool,
    /// A whole number in `min..=max`.
    Count { min: u64, max: u64 },
    /// A TCP port, 1-65535.
    Port,
    /// An HTTP status in `min..=max`; `what` names it in messages.
    Status {
        min: u16,
        max: u16,
        what: &'static str,
    },
    /// A list of HTTP statuses (100-599).
    Statuses,
    /// A duration of at least `min` (and at most 10 years, as every duration).
    Duration { min: Duration },
    /// A size in `min..=max` bytes.
    Size { min: u64, max: u64 },
    /// A list of `ADDRESS:PORT` (one is accepted for a list of one).
    Addresses,
    /// `ADDRESS:PORT`, or `"off"` / `false`.
    AdminAddress,
    /// `true`, `false`, or a list of `server.listen` addresses (`[http2] h2c`).
    Listeners,
    /// `true`, `false`, or a list of client listener addresses, cleartext or TLS
    /// (`server.proxy_protocol`).
    ClientListeners,
    /// A list of IP networks (one is accepted).
    Networks,
    /// A string, described by the phrase given.
    Text(&'static str),
    /// A list of strings, described by the phrase given (one is accepted).
    Texts(&'static str),
    /// One of the words given.
    Choice(&'static [&'static str]),
    /// A table of header field name → text, described by the phrase given.
    FieldTable(&'static str),
    /// A table of its own keys (`[storage.disk]`, a rule's `synth`): section `section`.
    Table { section: &'static str },
    /// A `[[probe]]`'s name, or an inline probe table.
    Probe,
    /// A list of tables with the keys of `[[rule]]` (`[[site.rule]]`).
    Rules,
}

const ONE_NANOSECOND: Duration = Duration::from_nanos(1);

impl Kind {
    /// What a value of this kind is, in an operator's words: "a port number (1-65535)".
    pub fn phrase(&self) -> String {
        match *self {
            Kind::Bool => "true or false".into(),
            Kind::Count { min, max } => match (min, max) {
                (0, u64::MAX) => "a whole number (0 or more)".into(),
                (min, u64::MAX) => format!("a whole number ({min} or more)"),
                (min, max) => format!("a whole number ({min}-{max})"),
            },
            Kind::Port => "a port number (1-65535)".into(),
            Kind::Status { min, max, what } => format!("{what} ({min}-{max})"),
            Kind::Statuses => "an HTTP status (100-599), or a list of them such as [502, 503]".into(),
            Kind::Duration { .. } => "a duration such as \"30s\", \"500ms\" or \"2h\"".into(),
            Kind::Size { .. } => "a size such as \"64KiB\" or \"512MiB\"".into(),
            Kind::Addresses => {
                "an address such as \"127.0.0.1:6081\", or a list of them such as [\"127.0.0.1:6081\", \"[::1]:6081\"]".into()
            }
            Kind::AdminAddress => "an address such as \"127.0.0.1:6082\", or \"off\"".into(),
            Kind::Listeners => {
                "true, false, or a list of server.listen addresses such as [\"127.0.0.1:6081\"]"
                    .into()
            }
            Kind::ClientListeners => {
                "true, false, or a list of client listener addresses (server.listen or a [[tls]]'s listen) such as [\"0.0.0.0:443\"]"
                    .into()
            }
            Kind::Networks => {
                "a network such as \"10.0.0.0/8\" or \"::1\", or a list of them".into()
            }
            Kind::Text(what) | Kind::Texts(what) | Kind::FieldTable(what) => what.into(),
            Kind::Choice(words) => {
                let quoted: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
                format!("one of {}", quoted.join(", "))
            }
            Kind::Table { .. } => "a table".into(),
            Kind::Probe => "the name of a [[probe]], or an inline probe table".into(),
            Kind::Rules => "a list of [[rule]] tables".into(),
        }
    }

    /// The allowed range, as the reference shows it ("1 – 10000", "≥ 100ms"); None when any
    /// value of the kind is allowed.
    pub fn range(&self) -> Option<String> {
        match *self {
            // A 32-bit bound is a limit of the type, not a range worth reading.
            Kind::Count { min: 0, max } if max >= u64::from(u32::MAX) => None,
            Kind::Count { min, max: u64::MAX } => Some(format!("≥ {min}")),
            Kind::Count { min, max } => Some(format!("{min} – {max}")),
            Kind::Port => Some("1 – 65535".into()),
            Kind::Status { min, max, .. } => Some(format!("{min} – {max}")),
            Kind::Statuses => Some("100 – 599 each".into()),
            Kind::Duration { min } if min.is_zero() => None,
            Kind::Duration { min } if min == ONE_NANOSECOND => Some("> 0".into()),
            Kind::Duration { min } => Some(format!("≥ {}", units::format_duration(min))),
            Kind::Size {
                min: 0,
                max: units::MAX_SIZE,
            } => None,
            Kind::Size {
                min: 1,
                max: units::MAX_SIZE,
            } => Some("> 0".into()),
            Kind::Size {
                min,
                max: units::MAX_SIZE,
            } => Some(format!("≥ {}", units::format_size(min))),
            Kind::Size { min, max } => Some(format!(
                "{} – {}",
                units::format_size(min),
                units::format_size(max)
            )),
            _ => None,
        }
    }

    /// The problem with `value` (as serialized) for this kind's range, if any.
    fn check(&self, value: &Value) -> Option<String> {
        match *self {
            Kind::Count { min, max } => {
                let v = value.as_u64()?;
                (!(min..=max).contains(&v)).then(|| match max {
                    u64::MAX => format!("must be at least {min}"),
                    _ => format!("must be between {min} and {max}"),
                })
            }
            Kind::Port => {
                let v = value.as_u64()?;
                (!(1..=65_535).contains(&v)).then(|| "must be between 1 and 65535".into())
            }
            Kind::Status { min, max, what } => {
                let v = value.as_u64()?;
                (!(u64::from(min)..=u64::from(max)).contains(&v))
                    .then(|| format!("{v} is not {what} ({min}-{max})"))
            }
            Kind::Duration { min } => {
                let d = units::parse_duration(value.as_str()?).ok()?;
                (d < min).then(|| {
                    if min == ONE_NANOSECOND {
                        "must be greater than 0".into()
                    } else {
                        format!("must be at least {}", units::format_duration(min))
                    }
                })
            }
            Kind::Size { min, max } => {
                let b = units::parse_size(value.as_str()?).ok()?;
                (!(min..=max).contains(&b)).then(|| match (min, max) {
                    (1, units::MAX_SIZE) => "must be greater than 0".into(),
                    (min, units::MAX_SIZE) => {
                        format!("must be at least {}", units::format_size(min))
                    }
                    (min, max) => format!(
                        "must be between {} and {}",
                        units::format_size(min),
                        units::format_size(max)
                    ),
                })
            }
            _ => None,
        }
    }
}

/// What a setting is when the file does not give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Default {
    /// This value, as TOML text (`"60s"`, `4096`, `["websocket"]`).
    Value(&'static str),
    /// None: the key must be given.
    Required,
    /// No value; the text says what that means ("none", "first director, else first backend").
    Unset(&'static str),
}

/// One setting.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// The table it is in: `server`, `storage.disk`, `backend`, `rule.synth`, ...
    pub section: &'static str,
    pub key: &'static str,
    pub kind: Kind,
    pub default: Default,
    /// A value to show (and to use for a required key whose value was wrong, so checking can
    /// go on): TOML text, `""` when the default serves.
    pub example: &'static str,
    /// A reload cannot change it (a restart is needed).
    pub restart: bool,
    /// Documentation (Markdown): what it does, for whom, counters, caveats.
    pub doc: &'static str,
}

impl Setting {
    /// TOML text of a valid value: the default, else the example.
    pub fn sample(&self) -> &'static str {
        match self.default {
            Default::Value(v) => v,
            _ => self.example,
        }
    }
}

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
        .chain(fleet::SHARED)
        .chain(fleet::SHARED_TLS)
        .chain(origins::BACKEND)
        .chain(origins::BACKEND_TLS)
        .chain(origins::PROBE)
        .chain(origins::DIRECTOR)
        .chain(origins::ROUTING)
        .chain(rules::RULE)
        .chain(rules::RATE_LIMIT)
        .chain(rules::VCL)
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
    if parts.first().is_some_and(|p| p == "storage") {
        return true; // The storage tiers are opened once.
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
