//! Checks of `[[backend]]`, `[[probe]]`, `[[director]]` and `[routing]` together: kinds and
//! addresses, cross references, probe limits.

use std::collections::{HashMap, HashSet};

use crate::config::{
    BackendConfig, BackendProtocol, BackendTls, Config, DirectorConfig, DirectorKind, HashOn,
    ProbeConfig, ProbeRef, unix_path,
};

use super::problems::Problems;

#[cfg(test)]
mod tests;

fn at(section: &str, i: usize, field: &str) -> Vec<String> {
    vec![section.to_string(), i.to_string(), field.to_string()]
}

/// Checks backends, probes, directors and routing together.
pub(super) fn validate(c: &Config) -> Problems {
    let mut out = Vec::new();
    // A VCL file declares the origins (it may declare only `backend default none;`).
    if c.backends.is_empty() && c.vcl.file.is_none() {
        out.push((
            vec!["backend".to_string()],
            "at least one [[backend]] is required".into(),
        ));
    }
    let mut names: HashMap<&str, &str> = HashMap::new();
    let probe_names: HashSet<&str> = c.probes.iter().map(|p| p.name.as_str()).collect();
    for (i, b) in c.backends.iter().enumerate() {
        if names.insert(b.name.as_str(), "backend").is_some() {
            out.push((
                at("backend", i, "name"),
                format!("backend name `{}` is used twice", b.name),
            ));
        }
        out.extend(validate_kind(i, b));
        out.extend(backend(i, b, &probe_names));
    }
    probes(c, &mut out);
    directors(c, &mut names, &mut out);
    if let Some(target) = &c.routing.default
        && !names.contains_key(target.as_str())
    {
        out.push((
            vec!["routing".into(), "default".into()],
            format!("no backend or director is named `{target}`"),
        ));
    }
    out
}

/// One backend's own settings beside its kind: host, Host header, preamble, PROXY header,
/// TLS, probe.
fn backend(i: usize, b: &BackendConfig, probe_names: &HashSet<&str>) -> Problems {
    let mut out = Vec::new();
    if b.host.is_empty() {
        // Checked with the kind (`validate_kind`): not every backend needs one.
    } else if b.host.trim().is_empty() {
        out.push((at("backend", i, "host"), "must not be empty".into()));
    } else if b.host.contains(['/', ' ', ':']) && b.host.parse::<std::net::Ipv6Addr>().is_err() {
        out.push((
            at("backend", i, "host"),
            format!(
                "`{}` is not a host name or IP address (put the port in `port`)",
                b.host
            ),
        ));
    }
    if let Some(h) = &b.host_header
        && (h.trim().is_empty() || http::HeaderValue::from_str(h).is_err())
    {
        out.push((
            at("backend", i, "host_header"),
            "must be a Host value (a name, with `:port` if wanted; no control characters)".into(),
        ));
    }
    if let Some(p) = &b.preamble
        && crate::http::base64::decode_base64(p).is_none()
    {
        out.push((
            at("backend", i, "preamble"),
            "must be standard base64 with padding (the bytes to send first, encoded)".into(),
        ));
    }
    if b.proxy_protocol.is_some() {
        let why = if b.protocol != BackendProtocol::Http1 {
            Some(format!(
                "a PROXY protocol header names one client per connection: only HTTP/1.1 backends can send it (this one is protocol = \"{}\")",
                b.protocol.as_str()
            ))
        } else if b.preamble.is_some() {
            Some("`preamble` and `proxy_protocol` both want the first bytes of a connection: keep one".into())
        } else {
            None
        };
        if let Some(why) = why {
            out.push((at("backend", i, "proxy_protocol"), why));
        }
    }
    if let Some(t) = &b.tls {
        tls(i, t, &mut out);
    }
    match &b.probe {
        Some(ProbeRef::Named(name)) if !probe_names.contains(name.as_str()) => out.push((
            at("backend", i, "probe"),
            format!("no [[probe]] is named `{name}`"),
        )),
        Some(ProbeRef::Inline(p)) => {
            for (path, msg) in validate_probe(p) {
                let mut key = at("backend", i, "probe");
                key.extend(path);
                out.push((key, msg));
            }
        }
        _ => {}
    }
    out
}

/// A backend's `tls` table: a client certificate needs its key, a name must be one.
fn tls(i: usize, t: &BackendTls, out: &mut Problems) {
    let key = |k: &str| vec!["backend".to_string(), i.to_string(), "tls".into(), k.into()];
    if t.cert.is_some() != t.key.is_some() {
        let missing = if t.cert.is_some() { "key" } else { "cert" };
        out.push((
            key(missing),
            "a client certificate needs both `cert` and `key`".into(),
        ));
    }
    if let Some(n) = &t.server_name
        && rustls::pki_types::ServerName::try_from(n.as_str()).is_err()
    {
        out.push((
            key("server_name"),
            format!("`{n}` is not a host name or IP address"),
        ));
    }
    if t.insecure_skip_verify && t.ca.is_some() {
        out.push((
            key("ca"),
            "`insecure_skip_verify = true` checks nothing: `ca` would not be used".into(),
        ));
    }
}

/// `[[probe]]`s: each named once, each one's own limits.
fn probes(c: &Config, out: &mut Problems) {
    let mut seen_probes = HashSet::new();
    for (i, p) in c.probes.iter().enumerate() {
        if p.name.is_empty() {
            out.push((
                at("probe", i, "name"),
                "a [[probe]] needs a name backends can refer to".into(),
            ));
        } else if !seen_probes.insert(p.name.as_str()) {
            out.push((
                at("probe", i, "name"),
                format!("probe name `{}` is used twice", p.name),
            ));
        }
        for (path, msg) in validate_probe(p) {
            let mut key = vec!["probe".to_string(), i.to_string()];
            key.extend(path);
            out.push((key, msg));
        }
    }
}

/// `[[director]]`s: names not taken, members that exist, no director inside itself.
fn directors<'a>(c: &'a Config, names: &mut HashMap<&'a str, &'static str>, out: &mut Problems) {
    for (i, d) in c.directors.iter().enumerate() {
        if let Some(kind) = names.insert(d.name.as_str(), "director") {
            out.push((
                at("director", i, "name"),
                format!("name `{}` is already used by a {kind}", d.name),
            ));
        }
    }
    let directors: HashMap<&str, &DirectorConfig> =
        c.directors.iter().map(|d| (d.name.as_str(), d)).collect();
    for (i, d) in c.directors.iter().enumerate() {
        if d.backends.is_empty() {
            out.push((
                at("director", i, "backends"),
                "needs at least one member".into(),
            ));
        }
        for m in &d.backends {
            if !names.contains_key(m.as_str()) {
                out.push((
                    at("director", i, "backends"),
                    format!("no backend or director is named `{m}`"),
                ));
            }
        }
        if let Some(h) = &d.hash_on {
            if d.kind != DirectorKind::Hash {
                out.push((
                    at("director", i, "hash_on"),
                    "only a `hash` director uses hash_on".into(),
                ));
            } else if let Err(e) = HashOn::parse(h) {
                out.push((at("director", i, "hash_on"), e));
            }
        }
        if !d.restart_on.is_empty() && !d.restart_unless.is_empty() {
            out.push((
                at("director", i, "restart_unless"),
                "use either restart_on or restart_unless, not both".into(),
            ));
        }
        if reaches(&directors, &d.name, &d.name, &mut HashSet::new()) {
            out.push((
                at("director", i, "backends"),
                format!("director `{}` contains itself", d.name),
            ));
        }
    }
}

/// What a backend's kind needs: a `host` or an `address` to reach (not for files), a `root`
/// for files and FastCGI, and settings that mean something for it.
fn validate_kind(i: usize, b: &BackendConfig) -> Problems {
    let mut out = Vec::new();
    reach(i, b, &mut out);
    document_root(i, b, &mut out);
    media_types(i, b, &mut out);
    fastcgi(i, b, &mut out);
    out
}

/// How the backend is reached: `host` and `port`, or a Unix socket's `address`; a `files`
/// backend is not reached at all.
fn reach(i: usize, b: &BackendConfig, out: &mut Problems) {
    let files = b.protocol == BackendProtocol::Files;
    if let Some(address) = &b.address {
        match unix_path(address) {
            None => out.push((
                at("backend", i, "address"),
                format!("`{address}` is not `unix:` followed by an absolute path"),
            )),
            Some(_) if files => out.push((
                at("backend", i, "address"),
                "a `files` backend reads its `root`: it has no address".into(),
            )),
            Some(_) if !b.host.is_empty() => out.push((
                at("backend", i, "address"),
                "give either `host` (with `port`) or `address`, not both".into(),
            )),
            Some(_) if b.tls.is_some() => out.push((
                at("backend", i, "tls"),
                "TLS is not spoken over a Unix socket (`address`)".into(),
            )),
            Some(_) => {}
        }
    } else if b.host.is_empty() && !files {
        out.push((
            at("backend", i, "host"),
            "`host` is required in [[backend]] (a host name or IP address), or `address = \"unix:/path\"`"
                .into(),
        ));
    }
    if files && b.tls.is_some() {
        out.push((
            at("backend", i, "tls"),
            "a `files` backend reads its `root`: TLS means nothing for it".into(),
        ));
    }
}

/// `root` and `index`: for files and FastCGI only, an absolute path and file names.
fn document_root(i: usize, b: &BackendConfig, out: &mut Problems) {
    let needs_root = matches!(
        b.protocol,
        BackendProtocol::Files | BackendProtocol::Fastcgi
    );
    match &b.root {
        None if needs_root => out.push((
            at("backend", i, "root"),
            format!(
                "`root` is required with `protocol = \"{}\"` (the document root)",
                b.protocol.as_str()
            ),
        )),
        Some(_) if !needs_root => out.push((
            at("backend", i, "root"),
            "only `protocol = \"files\"` and `\"fastcgi\"` have a document root".into(),
        )),
        Some(root) if !root.is_absolute() => out.push((
            at("backend", i, "root"),
            format!("`{}` must be an absolute path", root.display()),
        )),
        _ => {}
    }
    if let Some(index) = &b.index {
        if !needs_root {
            out.push((
                at("backend", i, "index"),
                "only `protocol = \"files\"` and `\"fastcgi\"` have index files".into(),
            ));
        }
        for name in index {
            if name.is_empty() || name.contains(['/', '\\', '\0']) || name == "." || name == ".." {
                out.push((
                    at("backend", i, "index"),
                    format!("`{name}` must be a file name (no `/`, not `.` or `..`)"),
                ));
            }
        }
    }
}

/// `mime_types` and `default_type`: extensions and media types.
fn media_types(i: usize, b: &BackendConfig, out: &mut Problems) {
    for (ext, ty) in &b.mime_types {
        if ext.is_empty() || ext.starts_with('.') || ext.contains(['/', ' ']) {
            out.push((
                at("backend", i, "mime_types"),
                format!("`{ext}` must be an extension without the dot"),
            ));
        }
        if http::HeaderValue::from_str(ty).is_err() || ty.trim().is_empty() {
            out.push((
                at("backend", i, "mime_types"),
                format!("`{ty}` is not a media type"),
            ));
        }
    }
    if http::HeaderValue::from_str(&b.default_type).is_err() || b.default_type.trim().is_empty() {
        out.push((
            at("backend", i, "default_type"),
            format!("`{}` is not a media type", b.default_type),
        ));
    }
}

/// What only FastCGI has (`params`) or needs (`max_connections`, no TLS).
fn fastcgi(i: usize, b: &BackendConfig, out: &mut Problems) {
    let fastcgi = b.protocol == BackendProtocol::Fastcgi;
    for name in b.params.keys() {
        if name.is_empty() || !name.bytes().all(|c| c.is_ascii_graphic()) {
            out.push((
                at("backend", i, "params"),
                format!("`{name}` must be a parameter name (printable ASCII, no spaces)"),
            ));
        }
    }
    if !b.params.is_empty() && !fastcgi {
        out.push((
            at("backend", i, "params"),
            "only `protocol = \"fastcgi\"` sends parameters".into(),
        ));
    }
    if fastcgi && b.max_connections == 0 {
        out.push((
            at("backend", i, "max_connections"),
            "`protocol = \"fastcgi\"` needs max_connections: the application's workers (PHP-FPM's pm.max_children); a kept connection holds one".into(),
        ));
    }
    if fastcgi && b.tls.is_some() {
        out.push((
            at("backend", i, "tls"),
            "FastCGI is not spoken over TLS here".into(),
        ));
    }
}

/// Whether director `from` (transitively) contains `target`.
fn reaches<'a>(
    directors: &HashMap<&'a str, &'a DirectorConfig>,
    from: &'a str,
    target: &str,
    seen: &mut HashSet<&'a str>,
) -> bool {
    let Some(d) = directors.get(from) else {
        return false;
    };
    if !seen.insert(from) {
        return false;
    }
    d.backends
        .iter()
        .any(|m| m == target || reaches(directors, m.as_str(), target, seen))
}

fn validate_probe(p: &ProbeConfig) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let key = |f: &str| vec![f.to_string()];
    if p.url.is_some() && p.request.is_some() {
        out.push((
            key("request"),
            "give either url or request, not both".into(),
        ));
    }
    if let Some(url) = &p.url
        && (!url.starts_with('/') || url.contains([' ', '\r', '\n']))
    {
        out.push((
            key("url"),
            format!("`{url}` must be a path starting with `/`, without spaces"),
        ));
    }
    if let Some(lines) = &p.request
        && (lines.is_empty() || lines.iter().any(|l| l.contains(['\r', '\n'])))
    {
        out.push((
            key("request"),
            "one request line per element, without CR/LF, at least one".into(),
        ));
    }
    // Ranges of their own are the definitions' (window 1-64, ...); these compare two keys,
    // each only when the operator wrote it (issue 23 #5: `window = 5, threshold = 8` blamed
    // `initial`, which the file did not have).
    if (1..=64).contains(&p.window) && p.threshold > p.window {
        out.push((
            key("threshold"),
            format!("{} is more than window ({})", p.threshold, p.window),
        ));
    }
    if let Some(initial) = p.initial
        && (1..=64).contains(&p.window)
        && initial > p.window
    {
        out.push((
            key("initial"),
            format!("{initial} is more than window ({})", p.window),
        ));
    }
    out
}
