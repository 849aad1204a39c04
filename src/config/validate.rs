//! Checks across settings (one value against another, names that must exist, texts with a
//! syntax of their own). Each setting's own range comes from its definition
//! (`settings::check_ranges`); both run in `Config::validate`.

use super::{Config, DISK_REGION_OVERHEAD, addresses, backend, rules, units};

type Problems = Vec<(Vec<String>, String)>;

fn key(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

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
    out.extend(super::site::local(c));
    out
}

/// Every problem across settings, as (key path, problem).
pub(super) fn across(c: &Config) -> Problems {
    let mut out = Vec::new();
    server(c, &mut out);
    cache(c, &mut out);
    log(c, &mut out);
    out.extend(super::vcl::validate(c));
    out.extend(backend::validate(c));
    out.extend(super::try_files::validate(c));
    out.extend(addresses::validate(c));
    out.extend(super::http2::validate(c));
    out.extend(super::proxy_protocol::validate(c));
    out.extend(super::site::across(c));
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

fn cache(c: &Config, out: &mut Problems) {
    let cache = &c.cache;
    let disk_max = c
        .storage
        .disk
        .as_ref()
        .map_or(0, |d| d.region_size.0.saturating_sub(DISK_REGION_OVERHEAD));
    if cache.max_object_size.0 > cache.memory_size.0.max(disk_max) {
        out.push((
            key(&["cache", "max_object_size"]),
            if disk_max == 0 {
                format!(
                    "{} is larger than cache.memory_size ({})",
                    units::format_size(cache.max_object_size.0),
                    units::format_size(cache.memory_size.0)
                )
            } else {
                format!(
                    "{} is larger than both cache.memory_size ({}) and the largest disk object \
                     (storage.disk.region_size - 64 KiB = {})",
                    units::format_size(cache.max_object_size.0),
                    units::format_size(cache.memory_size.0),
                    units::format_size(disk_max)
                )
            },
        ));
    }
    if let Some(s) = &c.storage.shared {
        let at = |field: &str| key(&["storage", "shared", field]);
        if s.nodes.is_empty() {
            out.push((
                at("nodes"),
                "must name at least one Redis Cluster node".into(),
            ));
        }
        for node in &s.nodes {
            let port = node.rsplit_once(':').map(|(h, p)| (h, p.parse::<u16>()));
            // A host name, an IPv4 address or a bracketed IPv6 one: nothing a URL would read
            // as more (`?`, `#`, `@`, `/` — the client is given `redis://HOST:PORT/...`).
            let host_ok = |h: &str| {
                let inner = h
                    .strip_prefix('[')
                    .and_then(|h| h.strip_suffix(']'))
                    .filter(|v6| v6.parse::<std::net::Ipv6Addr>().is_ok());
                inner.is_some()
                    || (!h.is_empty()
                        && h.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')))
            };
            if !matches!(port, Some((h, Ok(p))) if p > 0 && host_ok(h)) {
                out.push((
                    at("nodes"),
                    format!("`{node}` is not host:port (e.g. \"10.0.0.5:7000\")"),
                ));
            }
        }
        if s.username.is_some() && s.password.is_none() {
            out.push((at("username"), "an ACL user needs its `password`".into()));
        }
        if let Some(t) = &s.tls {
            let tls = |field: &str| key(&["storage", "shared", "tls", field]);
            match (&t.cert, &t.key) {
                (Some(_), None) => {
                    out.push((tls("cert"), "a client certificate needs its `key`".into()))
                }
                (None, Some(_)) => out.push((
                    tls("key"),
                    "a key needs its client certificate (`cert`)".into(),
                )),
                _ => {}
            }
            if !t.verify_name && t.ca.is_none() {
                out.push((
                    tls("verify_name"),
                    "`false` needs `ca` (the cluster's own CA): with the system's trust store, \
                     any certificate a public CA issued, for any name, would be accepted"
                        .into(),
                ));
            }
        }
        if s.key_prefix.contains(['{', '}']) {
            out.push((
                at("key_prefix"),
                "must not contain `{` or `}` (Redis Cluster reads them as a hash tag)".into(),
            ));
        }
        if s.node_name
            .as_deref()
            .is_some_and(|n| n.is_empty() || n.contains(char::is_whitespace))
        {
            out.push((
                at("node_name"),
                "must be a non-empty word without spaces".into(),
            ));
        }
    }
    if let Some(d) = &c.storage.disk {
        let at = |field: &str| key(&["storage", "disk", field]);
        if d.path.as_os_str().is_empty() {
            out.push((at("path"), "must not be empty".into()));
        } else if d.path.as_os_str().to_string_lossy().ends_with('/') || d.path.is_dir() {
            out.push((
                at("path"),
                format!(
                    "`{}` is a directory; name the data file (e.g. `{}/shellac.dat`)",
                    d.path.display(),
                    d.path.display().to_string().trim_end_matches('/')
                ),
            ));
        }
        // The range (1 MiB - 1 GiB) is the definition's; the rest needs a region size in it.
        let r = d.region_size.0;
        if (1 << 20..=1 << 30).contains(&r) {
            if !r.is_multiple_of(4096) {
                out.push((
                    at("region_size"),
                    format!("{} must be a multiple of 4 KiB", units::format_size(r)),
                ));
            } else if d.size.0 < 4 * r {
                out.push((
                    at("size"),
                    format!(
                        "{} is less than 4 regions of {} (storage.disk.region_size)",
                        units::format_size(d.size.0),
                        units::format_size(r)
                    ),
                ));
            } else if d.size.0 / r > 65_536 {
                out.push((
                    at("size"),
                    format!(
                        "{} is more than 65536 regions of {}; raise storage.disk.region_size",
                        units::format_size(d.size.0),
                        units::format_size(r)
                    ),
                ));
            }
        }
    }
    if let Some(max) = cache.max_ttl
        && max < cache.default_ttl
    {
        out.push((
            key(&["cache", "max_ttl"]),
            format!(
                "max_ttl ({}) is shorter than default_ttl ({})",
                units::format_duration(max.0),
                units::format_duration(cache.default_ttl.0)
            ),
        ));
    }
    for (i, name) in cache.targeted_cache_control.iter().enumerate() {
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            out.push((
                vec![
                    "cache".into(),
                    "targeted_cache_control".into(),
                    i.to_string(),
                ],
                format!("`{name}` is not a header field name"),
            ));
        }
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
