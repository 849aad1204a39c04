//! Preflight: what the machine says about a valid configuration: the checks `shellac check`
//! and `shellac serve` run before anything starts, so `check` refuses what `serve` would
//! refuse. Above the configuration model (which is data and validation): it loads
//! certificates, opens files and asks the kernel.
//!
//! Addresses are bound and released (not an address of this machine, no permission); the
//! access log and the disk tier's data file are opened the way `serve` opens them, without
//! writing to them (a file that does not exist yet is tested by creating and removing a probe
//! file next to it); the disk tier's preallocation is compared with the free space; the listen
//! backlog with `net.core.somaxconn`; certificate, key and CA files are loaded (listeners,
//! backends, the shared tier's Redis). What depends on the moment rather than the file (a port
//! another process holds, a data file a running Shellac has locked) is a warning: it is what
//! a configuration meant to replace a running instance meets.

mod acme;
mod disk;
mod files;
mod finding;
mod holder;
mod scripts;
mod sites;

use std::io;
use std::net::SocketAddr;
use std::path::Path;

use crate::config::tls::TlsConfig;
use crate::config::{Config, ConfigError, locate};
use files::{access_log, document_root, origin_paths};
use finding::at;
pub use finding::{Finding, Severity};

/// What the machine says about `config` ([`check`]: addresses that cannot be bound, paths
/// that cannot be opened or created, room for the disk tier), located in `text` (the file it
/// came from, named `file`): (errors, warnings).
pub fn check_machine(
    config: &Config,
    text: &str,
    file: &str,
) -> (Vec<ConfigError>, Vec<ConfigError>) {
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    for f in check_file(config, Some(Path::new(file))) {
        let located = locate::at_path(text, file, &f.path, f.message);
        match f.severity {
            Severity::Error => errors.push(located),
            Severity::Warning => warnings.push(located),
        }
    }
    errors.sort_by_key(|e| (e.line, e.column));
    warnings.sort_by_key(|e| (e.line, e.column));
    (errors, warnings)
}

/// Every finding for `config`, in file order of sections.
pub fn check(config: &Config) -> Vec<Finding> {
    check_file(config, None)
}

/// [`check`] for the configuration read from `file`: a port in use is told apart by who
/// holds it (`holder.rs`): the running Shellac started with `file` (a warning), or anyone
/// else (an error: `serve` could not listen there).
pub fn check_file(config: &Config, file: Option<&Path>) -> Vec<Finding> {
    let mut out = Vec::new();
    let bindable = |addr, path| bindable(addr, path, file, config.server.admin);
    for (i, addr) in config.server.listen.iter().enumerate() {
        let path = vec!["server".into(), "listen".into(), i.to_string()];
        out.extend(bindable(*addr, path));
    }
    if let Some(addr) = config.server.admin {
        out.extend(bindable(addr, at(&["server", "admin"])));
    }
    if let Some(max) = somaxconn()
        && config.server.listen_backlog > max
    {
        out.push(Finding {
            severity: Severity::Warning,
            path: at(&["server", "listen_backlog"]),
            message: format!(
                "{} is capped at {max} by the kernel (net.core.somaxconn); raise that sysctl for a longer queue",
                config.server.listen_backlog
            ),
        });
    }
    for (i, t) in config.tls.iter().enumerate() {
        for (j, a) in t.listen.iter().enumerate() {
            let path = vec!["tls".into(), i.to_string(), "listen".into(), j.to_string()];
            out.extend(bindable(*a, path));
        }
        out.extend(tls_files(i, t));
        out.extend(acme::check(i, &t.acme));
    }
    for (i, b) in config.backends.iter().enumerate() {
        out.extend(origin_paths(i, b));
        if let Some(t) = &b.tls
            && let Err(e) = crate::tls::client::BackendTlsClient::build(t, &b.host, false)
        {
            out.push(Finding {
                severity: Severity::Error,
                path: vec!["backend".into(), i.to_string(), "tls".into()],
                message: e,
            });
        }
    }
    for (i, site) in config.sites.iter().enumerate() {
        if let Some(root) = &site.root {
            let path = vec!["site".into(), i.to_string(), "root".into()];
            out.extend(document_root(root, path));
        }
    }
    out.extend(overcommitted_shares(config));
    out.extend(sites::shared_names(config));
    out.extend(scripts::unrouted(config));
    if let Some(t) = config.storage.shared.as_ref().and_then(|s| s.tls.as_ref())
        && let Err(e) = crate::cache::shared::tls::load(t)
    {
        out.push(Finding {
            severity: Severity::Error,
            path: at(&["storage", "shared", "tls", e.key]),
            message: e.message,
        });
    }
    if let Some(d) = &config.storage.disk {
        out.extend(disk::disk(d));
    }
    let log = config.log.access_log.as_str();
    if log != "off" && log != "stdout" {
        out.extend(access_log(Path::new(log)));
    }
    out
}

/// A `[[tls]]`'s files, loaded as `serve` loads them: certificates with their keys (and
/// their validity now), the client CA, the ticket keys. Each problem names the file. A
/// certificate that expires within 14 days is a warning.
fn tls_files(i: usize, t: &TlsConfig) -> Vec<Finding> {
    let mut out = Vec::new();
    let at = |rest: &[&str]| {
        let mut p = vec!["tls".to_string(), i.to_string()];
        p.extend(rest.iter().map(|s| s.to_string()));
        p
    };
    let error = |path: Vec<String>, message: String| Finding {
        severity: Severity::Error,
        path,
        message,
    };
    let provider = crate::tls::provider();
    let now = crate::tls::certs::unix_now();
    for (j, c) in t.certificates.iter().enumerate() {
        let j = j.to_string();
        match crate::tls::certs::load(&c.cert, &c.key, &provider, now) {
            Ok(loaded) if loaded.facts.not_after - now < 14 * 86_400 => out.push(Finding {
                severity: Severity::Warning,
                path: at(&["certificate", &j, "cert"]),
                message: format!(
                    "{}: the certificate for {} expires on {}",
                    c.cert.display(),
                    loaded.facts.names_text(),
                    crate::tls::certs::format_time(loaded.facts.not_after)
                ),
            }),
            Ok(_) => {}
            Err(e) => {
                let key = if e.contains(&c.key.display().to_string())
                    && !e.contains(&c.cert.display().to_string())
                {
                    "key"
                } else {
                    "cert"
                };
                out.push(error(at(&["certificate", &j, key]), e));
            }
        }
    }
    if let Some(ca) = &t.client_ca
        && let Err(e) = crate::tls::server::client_verifier(t, &crate::tls::provider())
    {
        let key = if e.starts_with(&ca.display().to_string()) {
            "client_ca"
        } else {
            "client_crl"
        };
        out.push(error(at(&[key]), e));
    }
    if t.session_tickets
        && !t.ticket_key_file.is_empty()
        && let Err(e) = crate::tls::ticket::FileTicketer::load(&t.ticket_key_file)
    {
        out.push(error(at(&["ticket_key_file"]), e));
    }
    out
}

fn bindable(
    addr: SocketAddr,
    path: Vec<String>,
    file: Option<&Path>,
    admin: Option<SocketAddr>,
) -> Option<Finding> {
    use holder::{Holder, holder};
    let e = std::net::TcpListener::bind(addr).err()?;
    let (severity, message) = match e.kind() {
        io::ErrorKind::AddrInUse => match holder(addr, file, admin) {
            Holder::ThisShellac(pid) => (
                Severity::Warning,
                format!(
                    "{addr} is held by the running Shellac this file is for{}: fine (`shellac reload` applies this file to it; a second `serve` could not listen here)",
                    pid.map_or(String::new(), |p| format!(" (pid {p})"))
                ),
            ),
            Holder::OtherShellac(pid, theirs) => (
                Severity::Error,
                format!(
                    "{addr} is held by another Shellac (pid {pid}, running {}): `serve` with this file cannot listen here",
                    theirs.map_or("the embedded default configuration".to_string(), |t| t
                        .display()
                        .to_string())
                ),
            ),
            Holder::Other(pid, name) => (
                Severity::Error,
                format!(
                    "{addr} is held by another process (pid {pid}, `{name}`): `serve` cannot listen here; stop it or choose another address"
                ),
            ),
            Holder::Connection(state, peer) => (
                Severity::Error,
                match holder::ephemeral_range() {
                    Some((low, high)) if (low..=high).contains(&addr.port()) => format!(
                        "{addr} is in use, though nobody listens on it: a connection from that port to {peer} holds it ({state}). The port is in the kernel's ephemeral range ({low}-{high}, net.ipv4.ip_local_port_range), from which outgoing connections take their own ports: choose a port outside it"
                    ),
                    _ => format!(
                        "{addr} is in use, though nobody listens on it: a connection from that port to {peer} holds it ({state}): wait for it to end, or choose another port"
                    ),
                },
            ),
            Holder::Unknown => (
                Severity::Error,
                format!(
                    "{addr} is held by another process (one this user cannot look into, and not the Shellac this file is for: {}): `serve` cannot listen here",
                    admin.map_or(
                        "the file has no admin listener to ask".to_string(),
                        |a| format!("its admin listener {a} does not answer as Shellac")
                    )
                ),
            ),
        },
        io::ErrorKind::AddrNotAvailable => (
            Severity::Error,
            format!("cannot listen on {addr}: not an address of this machine"),
        ),
        io::ErrorKind::PermissionDenied => (
            Severity::Error,
            format!(
                "cannot listen on {addr} as this user: {e} (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
            ),
        ),
        _ => (Severity::Error, format!("cannot listen on {addr}: {e}")),
    };
    Some(Finding {
        severity,
        path,
        message,
    })
}

/// `net.core.somaxconn`, the kernel's cap on a listen backlog (Linux).
fn somaxconn() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Sites' `cache_share`s that add up to more than the memory tier: a warning, not an error —
/// shares are caps, and an operator may mean to let busy sites compete for the tier — named at
/// the share that takes the sum over.
fn overcommitted_shares(config: &Config) -> Option<Finding> {
    let memory = config.cache.memory_size.0;
    let mut sum = 0u64;
    for (i, site) in config.sites.iter().enumerate() {
        let Some(share) = site.cache_share else {
            continue;
        };
        sum = sum.saturating_add(share.bytes(memory));
        if sum > memory {
            return Some(Finding {
                severity: Severity::Warning,
                path: at(&["site", &i.to_string(), "cache_share"]),
                message: format!(
                    "the sites' cache_shares add up to more than cache.memory_size ({}): shares cap each site, they reserve nothing, so these sites may together fill the memory tier and push each other out",
                    crate::config::units::size_text(memory)
                ),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text, "t.toml").unwrap()
    }

    #[test]
    fn a_missing_directory_is_an_error_for_the_log_and_the_disk_tier() {
        let c = config(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"off\"\n[log]\naccess_log = \"/nonexistent-dir/access.log\"\n[storage.disk]\npath = \"/nonexistent-dir/cache.dat\"\nsize = \"4MiB\"\nregion_size = \"1MiB\"\n[[backend]]\nhost = \"a\"\n",
        );
        let found = check(&c);
        let keys: Vec<String> = found.iter().map(|f| f.path.join(".")).collect();
        assert_eq!(keys, ["storage.disk.path", "log.access_log"], "{found:?}");
        assert!(found.iter().all(|f| f.severity == Severity::Error));
        assert!(
            found[1]
                .message
                .contains("directory /nonexistent-dir does not exist"),
            "{found:?}"
        );
    }

    #[test]
    fn site_shares_over_the_memory_tier_are_a_warning() {
        let sites = "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"off\"\n[[backend]]\nhost = \"a\"\n[[site]]\nserver_name = \"a\"\ncache_share = \"60%\"\n[[site]]\nserver_name = \"b\"\ncache_share = \"SHARE\"\n";
        let found = check(&config(&sites.replace("SHARE", "60%")));
        let shares: Vec<&Finding> = found
            .iter()
            .filter(|f| f.path.last().is_some_and(|k| k == "cache_share"))
            .collect();
        assert_eq!(shares.len(), 1, "{found:?}");
        assert_eq!(shares[0].path.join("."), "site.1.cache_share");
        assert_eq!(shares[0].severity, Severity::Warning);
        assert!(
            shares[0].message.contains("add up to more than"),
            "{found:?}"
        );
        let found = check(&config(&sites.replace("SHARE", "40%")));
        assert!(
            !found.iter().any(|f| f.message.contains("cache_share")),
            "{found:?}"
        );
    }

    #[test]
    fn memory_only_makes_disk_findings_warnings() {
        let c = config(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"off\"\n[storage.disk]\npath = \"/nonexistent-dir/cache.dat\"\nsize = \"4MiB\"\nregion_size = \"1MiB\"\non_open_error = \"memory-only\"\n[[backend]]\nhost = \"a\"\n",
        );
        let found = check(&c);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].severity, Severity::Warning);
        assert!(found[0].message.contains("memory-only"), "{found:?}");
    }

    #[test]
    fn a_port_another_process_holds_and_a_foreign_address_are_errors() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap();
        let c = config(&format!(
            "[server]\nlisten = [\"{addr}\", \"192.0.2.1:0\"]\nadmin = \"off\"\n[[backend]]\nhost = \"a\"\n"
        ));
        let found = check(&c);
        assert_eq!(found.len(), 2, "{found:?}");
        // Held by this test process: not the Shellac this file is for.
        assert_eq!(found[0].severity, Severity::Error);
        assert!(
            found[0].message.contains(&format!(
                "is held by another process (pid {}",
                std::process::id()
            )),
            "{found:?}"
        );
        assert_eq!(found[1].severity, Severity::Error);
        assert_eq!(found[1].path.join("."), "server.listen.1");
        assert!(found[1].message.contains("not an address of this machine"));
    }
}
