//! Checks of `[cache]` and `[storage]` across their settings: the largest object against
//! the tiers that could hold it, the shared tier's nodes and TLS, the disk file's regions,
//! TTLs, targeted Cache-Control names.

use super::problems::{Problems, key};
use crate::config::{Config, DISK_REGION_OVERHEAD, SharedConfig, SharedTls, units};

/// Every problem of `[cache]` and `[storage]` across their settings.
pub(super) fn cache(c: &Config, out: &mut Problems) {
    let cache = &c.cache;
    object_size(c, out);
    if let Some(s) = &c.storage.shared {
        shared(s, out);
    }
    if let Some(d) = &c.storage.disk {
        disk(d, out);
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

/// `max_object_size` fits the memory tier or a disk region.
fn object_size(c: &Config, out: &mut Problems) {
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
}

/// `[storage.shared]`: nodes, credentials, TLS, key prefix, node name.
fn shared(s: &SharedConfig, out: &mut Problems) {
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
        shared_tls(t, out);
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

/// `[storage.shared.tls]`: a certificate with its key; no name check only with a CA of its own.
fn shared_tls(t: &SharedTls, out: &mut Problems) {
    let tls = |field: &str| key(&["storage", "shared", "tls", field]);
    match (&t.cert, &t.key) {
        (Some(_), None) => out.push((tls("cert"), "a client certificate needs its `key`".into())),
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

/// `[storage.disk]`: a file path, not a directory; regions that divide the file.
fn disk(d: &crate::config::DiskConfig, out: &mut Problems) {
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
