//! A reload: the source read again, everything that can fail tried first (restart-only
//! settings, TLS files, new listeners bound, the access log opened), then the next `Proxy`
//! swapped in and what went retired.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::net::TcpListener;

use super::{ConfigSource, Live, Reloaded};
use crate::config::{Config, diff, settings};
use crate::proxy::Proxy;
use crate::tls::server::Frontends;
use crate::txlog::LogOutput;
use crate::vcl::attach::Programs;

impl Live {
    /// Reads the configuration source again and swaps it in, or explains why not. Under
    /// systemd, `RELOADING=1` before and `READY=1` after, whatever the outcome.
    pub async fn reload(self: &Arc<Self>) -> Result<Reloaded, Vec<String>> {
        let _one_at_a_time = self.reloading.lock().await;
        crate::service::notify::reloading();
        let result = self.swap_in().await;
        let status = match &result {
            Ok(r) => format!("configuration generation {} loaded", r.generation),
            Err(e) => format!(
                "reload refused ({} errors); running configuration kept",
                e.len()
            ),
        };
        crate::service::notify::ready(&status);
        result
    }

    /// [`Live::reload`]'s work, under its lock: everything that can fail is tried before
    /// anything changes.
    async fn swap_in(self: &Arc<Self>) -> Result<Reloaded, Vec<String>> {
        let (config, program) = self.read()?;
        let old = self.load();
        let changed = diff::describe(&old.config, &config);
        let mut errors = restart_needed(&changed);
        // Every setting that changed, then what the running proxy did about it.
        let mut changes: Vec<String> = changed.iter().map(|c| c.to_string()).collect();
        let tls = self.tls_for(&config, &mut errors);
        let bound = self.bind_new(&config, &mut errors);
        // The access log: open the new output before anything changes.
        let log_changed = config.log.access_log != old.config.log.access_log;
        let output = open_log(&config, log_changed, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        compiled(&config, &program, &mut changes);
        let next = old.next(Arc::new(config), program);
        if let Some(tls) = tls {
            self.tls.store(Arc::new(tls));
            next.counters.tls_reload.inc();
        }
        backend_changes(&old, &next, &mut changes);
        let recorder = &next.shared.recorder;
        if log_changed {
            recorder.set_output(output);
        } else {
            recorder.reopen();
        }
        self.current.store(next.clone());
        // Release: whoever reads this generation with Acquire (a session's fast hits,
        // `server/h1/session.rs`) then loads `next`, not the configuration before it.
        let generation = self.generation.fetch_add(1, Ordering::Release) + 1;
        self.switch_listeners(bound, &next.config, &mut changes);
        self.sync_probes();
        tracing::info!(generation, "configuration reloaded: {}", self.summary());
        for c in &changes {
            tracing::info!(generation, "reload: {c}");
        }
        Ok(Reloaded {
            generation,
            changes,
        })
    }

    /// The configuration the source holds now, its VCL compiled and the overrides applied.
    fn read(&self) -> Result<(Config, Programs), Vec<String>> {
        let mut config = match &self.source {
            ConfigSource::File(path) => Config::load(path).map_err(display)?,
            ConfigSource::Embedded => Config::embedded_default(),
            ConfigSource::None => {
                return Err(vec![
                    "started without a configuration file: nothing to reload".into(),
                ]);
            }
        };
        let program = crate::vcl::attach::attach(&mut config, self.overrides.vcl.as_deref())
            .map_err(display)?;
        config.apply(&self.overrides).map_err(display)?;
        Ok((config, program))
    }

    /// The TLS listeners' next certificates and settings (every file loaded and checked),
    /// after the backends' TLS files were tried; what failed goes to `errors`.
    fn tls_for(&self, config: &Config, errors: &mut Vec<String>) -> Option<Frontends> {
        // TLS to backends: their CA, certificate and key files load.
        for b in &config.backends {
            if let Some(t) = &b.tls
                && let Err(e) = crate::tls::client::BackendTlsClient::build(t, &b.host, false)
            {
                errors.push(format!("backend {}: tls: {e}", b.name));
            }
        }
        // TLS: every certificate and key loaded and checked before anything changes.
        match Frontends::build(&config.tls, Some(&self.tls())) {
            Ok(t) => Some(t),
            Err(e) => {
                errors.extend(e);
                None
            }
        }
    }

    /// The listeners `config` adds, bound now so that a port in use rejects the reload;
    /// what cannot be bound goes to `errors`.
    fn bind_new(&self, config: &Config, errors: &mut Vec<String>) -> Vec<Bound> {
        let running: Vec<(SocketAddr, Option<Arc<str>>)> = self
            .listeners
            .lock()
            .map(|l| l.iter().map(|l| (l.configured, l.tls.clone())).collect())
            .unwrap_or_default();
        let mut bound = Vec::new();
        let asked = wanted(config);
        for (addr, tls_name) in asked.clone() {
            if running.contains(&(addr, tls_name.clone())) {
                continue;
            }
            // The same fixed address held by a listener of another kind that goes away:
            // it cannot be bound before that one stops.
            let moves = addr.port() != 0
                && running
                    .iter()
                    .any(|(a, t)| *a == addr && !asked.contains(&(*a, t.clone())));
            if moves {
                errors.push(format!(
                    "{addr} moves between cleartext and TLS listeners (or between [[tls]] tables): that needs a restart"
                ));
                continue;
            }
            match self
                .listen
                .bind(addr, config.server.listen_backlog, tls_name.as_deref())
            {
                Ok(l) => bound.push((addr, l, tls_name)),
                Err(e) => {
                    let key = match &tls_name {
                        None => "server.listen".to_string(),
                        Some(t) => format!("tls {t}: listen"),
                    };
                    errors.push(format!("`{key}`: cannot listen on {addr}: {e}"));
                }
            }
        }
        bound
    }

    /// Puts the new listeners in service and stops accepting on those `config` no longer
    /// asks for (connections accepted on them carry on).
    fn switch_listeners(
        self: &Arc<Self>,
        bound: Vec<Bound>,
        config: &Config,
        changes: &mut Vec<String>,
    ) {
        for (addr, listener, tls) in bound {
            match &tls {
                None => changes.push(format!("listening on {addr}")),
                Some(t) => changes.push(format!("listening on {addr} (TLS, {t})")),
            }
            self.add_listener(addr, listener, tls);
        }
        let wanted = wanted(config);
        if let Ok(mut l) = self.listeners.lock() {
            l.retain(|l| {
                let kept = wanted.contains(&(l.configured, l.tls.clone()));
                if !kept {
                    // Connections accepted on it carry on; only accepting stops.
                    l.task.abort();
                    changes.push(format!("no longer listening on {}", l.bound));
                }
                kept
            });
        }
    }
}

/// A listener bound for a reload: (configured address, socket, `[[tls]]` name).
type Bound = (SocketAddr, TcpListener, Option<Arc<str>>);

/// The changed settings a reload cannot apply, one error each.
fn restart_needed(changed: &[diff::Change]) -> Vec<String> {
    changed
        .iter()
        .filter(|c| settings::needs_restart(&c.key))
        .map(|c| {
            format!(
                "`{}`: changing it needs a restart (running with {}, file says {})",
                c.key,
                c.old.as_deref().unwrap_or("unset"),
                c.new.as_deref().unwrap_or("unset")
            )
        })
        .collect()
}

/// The access log's new output when `log.access_log` changed (None: unchanged or off); an
/// output that cannot be opened goes to `errors`.
fn open_log(config: &Config, changed: bool, errors: &mut Vec<String>) -> Option<LogOutput> {
    match config.log.access_log.as_str() {
        "off" => None,
        target if changed => match crate::txlog::open_output(target) {
            Ok(o) => Some(o),
            Err(e) => {
                errors.push(format!(
                    "`log.access_log`: cannot open access log {target}: {e}"
                ));
                None
            }
        },
        _ => None,
    }
}

/// One line per VCL file compiled (the global one, each site's).
fn compiled(config: &Config, program: &Programs, changes: &mut Vec<String>) {
    if let (Some(file), Some(p)) = (&config.vcl.file, &program.global) {
        changes.push(format!(
            "vcl {}: compiled (VCL {})",
            file.display(),
            p.dialect.as_str()
        ));
    }
    for ((site, p), file) in program
        .sites
        .iter()
        .zip(config.sites.iter().filter_map(|s| s.vcl.as_ref()))
    {
        changes.push(format!(
            "site {site}: vcl {}: compiled (VCL {})",
            file.display(),
            p.dialect.as_str()
        ));
    }
}

/// One line per backend the next proxy builds anew, and per backend it retires.
fn backend_changes(old: &Proxy, next: &Proxy, changes: &mut Vec<String>) {
    for b in &next.backends.backends {
        let reused = old.backends.backends.iter().any(|o| Arc::ptr_eq(o, b));
        if !reused {
            changes.push(format!("backend {}: new ({})", b.name(), b.address()));
        }
    }
    for o in &old.backends.backends {
        if !next.backends.backends.iter().any(|b| Arc::ptr_eq(o, b)) {
            changes.push(format!("backend {}: retired", o.name()));
        }
    }
}

/// Every client listener a configuration asks for: (address, `[[tls]]` name).
pub(crate) fn wanted(config: &Config) -> Vec<(SocketAddr, Option<Arc<str>>)> {
    let mut out: Vec<(SocketAddr, Option<Arc<str>>)> =
        config.server.listen.iter().map(|a| (*a, None)).collect();
    for t in &config.tls {
        let name: Arc<str> = t.name.as_str().into();
        out.extend(t.listen.iter().map(|a| (*a, Some(name.clone()))));
    }
    out
}

fn display(errors: Vec<crate::config::ConfigError>) -> Vec<String> {
    errors.iter().map(|e| e.to_string()).collect()
}
