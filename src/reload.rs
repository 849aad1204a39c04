//! Hot reload: the running configuration as one atomically swapped snapshot ([`Live`]).
//!
//! Each request loads the current [`Proxy`] once and keeps it to the end, so requests in flight
//! finish on the configuration they started with. A reload re-reads the file, validates it,
//! builds the next `Proxy` around the same cache, counters, recorder and history (backends whose
//! settings did not change are taken over with their pools and health), binds new listeners,
//! then swaps; only after the swap are removed listeners and probes stopped. Any error rejects
//! the whole reload with every problem listed, and the old configuration keeps running.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::backend::{Backend, probe};
use crate::config::{CliOverrides, Config, diff, settings};
use crate::proxy::Proxy;
use crate::stats::Counters;
use crate::tls::server::Frontends;

/// Where the configuration comes from, for reloads.
#[derive(Clone, Debug)]
pub enum ConfigSource {
    /// A file, re-read on every reload.
    File(PathBuf),
    /// The embedded default (a reload re-applies it and the overrides).
    Embedded,
    /// Given programmatically; there is nothing to reload.
    None,
}

/// What a successful reload changed.
#[derive(Debug, Clone)]
pub struct Reloaded {
    /// Number of this configuration (1 at start).
    pub generation: u64,
    /// One line per change, for logs and `shellac reload`.
    pub changes: Vec<String>,
}

struct Listener {
    /// As configured (`127.0.0.1:0` stays itself across reloads).
    configured: SocketAddr,
    bound: SocketAddr,
    /// The `[[tls]]` it belongs to; None: a cleartext `server.listen` address.
    tls: Option<Arc<str>>,
    task: AbortHandle,
    /// The listening socket's descriptor, open while `task` runs (`shellac upgrade` hands it
    /// over; the list is read under the reload lock, so no reload closes it meanwhile).
    fd: std::os::fd::RawFd,
}

/// What the server layer hands a reload so that it puts new listeners in service without
/// importing the server: binding an address, and starting the accept loop on a bound listener.
pub trait Listen: Send + Sync + 'static {
    /// A listening socket on `addr` with `backlog` (for the `[[tls]]` named `tls`, if any).
    fn bind(
        &self,
        addr: SocketAddr,
        backlog: u32,
        tls: Option<&str>,
    ) -> std::io::Result<TcpListener>;
    /// Spawns the task accepting on `listener` (configured as `configured`; of the `[[tls]]`
    /// named `tls`, if any).
    fn accept(
        &self,
        listener: TcpListener,
        configured: SocketAddr,
        live: Arc<Live>,
        tls: Option<Arc<str>>,
    ) -> AbortHandle;
}

/// The running configuration and the tasks that depend on it.
pub struct Live {
    current: ArcSwap<Proxy>,
    source: ConfigSource,
    overrides: CliOverrides,
    generation: AtomicU64,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    listeners: Mutex<Vec<Listener>>,
    probes: Mutex<Vec<(Arc<Backend>, AbortHandle)>>,
    shutdown: watch::Receiver<bool>,
    /// The TLS listeners' certificates and settings (swapped by reloads and file changes).
    tls: ArcSwap<Frontends>,
    /// Binds and accepts (the server's).
    listen: Box<dyn Listen>,
}

impl Live {
    pub(crate) fn new(
        proxy: Arc<Proxy>,
        source: ConfigSource,
        overrides: CliOverrides,
        shutdown: watch::Receiver<bool>,
        tls: Frontends,
        listen: Box<dyn Listen>,
    ) -> Arc<Live> {
        Arc::new(Live {
            current: ArcSwap::new(proxy),
            source,
            overrides,
            generation: AtomicU64::new(1),
            reloading: tokio::sync::Mutex::new(()),
            listeners: Mutex::new(Vec::new()),
            probes: Mutex::new(Vec::new()),
            shutdown,
            tls: ArcSwap::from_pointee(tls),
            listen,
        })
    }

    /// The TLS listeners in force (load once per connection).
    pub fn tls(&self) -> Arc<Frontends> {
        self.tls.load_full()
    }

    /// Changes to `true` when the server shuts down.
    pub fn shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.clone()
    }

    /// The current configuration's proxy. Load once per request and keep it.
    #[inline]
    pub fn load(&self) -> Arc<Proxy> {
        self.current.load_full()
    }

    /// What runs, in one paragraph (the start-up and reload log lines): the configuration's
    /// summary, with the disk tier said to be off when it could not be opened.
    pub fn summary(&self) -> String {
        let proxy = self.load();
        let disk_running = proxy
            .cache
            .storage
            .lower_tiers()
            .iter()
            .any(|(name, _)| *name == "disk");
        let policy = match (&proxy.config.vcl.file, &proxy.vcl) {
            (Some(file), Some(vcl)) => Some(crate::vcl::attach::describe(file, &vcl.program)),
            _ => None,
        };
        proxy
            .config
            .summary_running(disk_running, policy.as_deref())
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Cleartext addresses accepting client connections now (`server.listen`).
    pub fn listening(&self) -> Vec<SocketAddr> {
        self.listeners
            .lock()
            .map(|l| {
                l.iter()
                    .filter(|l| l.tls.is_none())
                    .map(|l| l.bound)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Starts accepting on an already bound listener (of the `[[tls]]` named `tls`, if any).
    pub(crate) fn add_listener(
        self: &Arc<Self>,
        configured: SocketAddr,
        listener: TcpListener,
        tls: Option<Arc<str>>,
    ) {
        let Ok(bound) = listener.local_addr() else {
            return;
        };
        let fd = std::os::fd::AsRawFd::as_raw_fd(&listener);
        let task = self
            .listen
            .accept(listener, configured, self.clone(), tls.clone());
        if let Ok(mut l) = self.listeners.lock() {
            l.push(Listener {
                configured,
                bound,
                tls,
                task,
                fd,
            });
        }
    }

    /// Runs `f` on every client listener accepting now — (configured address, `[[tls]]`
    /// name, descriptor) — with reloads held off, so every descriptor stays open meanwhile
    /// (`shellac upgrade` sends them to the new process).
    pub async fn with_listeners<T>(
        &self,
        f: impl FnOnce(Vec<(SocketAddr, Option<Arc<str>>, std::os::fd::RawFd)>) -> T,
    ) -> T {
        let _no_reload = self.reloading.lock().await;
        let list = self
            .listeners
            .lock()
            .map(|l| {
                l.iter()
                    .filter(|l| !l.task.is_finished())
                    .map(|l| (l.configured, l.tls.clone(), l.fd))
                    .collect()
            })
            .unwrap_or_default();
        f(list)
    }

    /// The configured address of the client listener a connection whose local address is
    /// `local` was accepted on (a wildcard listener matches by port); `None` when no
    /// listener accepting now has it. `[[site]]`s are chosen by it.
    pub fn configured_for(&self, local: SocketAddr) -> Option<SocketAddr> {
        let l = self.listeners.lock().ok()?;
        l.iter()
            .find(|l| l.bound == local)
            .or_else(|| {
                l.iter().find(|l| {
                    l.bound.ip().is_unspecified()
                        && l.bound.port() == local.port()
                        && l.bound.is_ipv4() == local.is_ipv4()
                })
            })
            .or_else(|| {
                // A dual-stack `[::]` listener accepts IPv4 clients as well.
                l.iter()
                    .find(|l| l.bound.ip().is_unspecified() && l.bound.port() == local.port())
            })
            .map(|l| l.configured)
    }

    /// TLS listeners accepting now: (`[[tls]]` name, bound address).
    pub fn listening_tls(&self) -> Vec<(String, SocketAddr)> {
        self.listeners
            .lock()
            .map(|l| {
                l.iter()
                    .filter_map(|l| l.tls.as_ref().map(|t| (t.to_string(), l.bound)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Runs a probe task for every probed backend of the current configuration that has none,
    /// and stops those of backends no longer in it.
    pub(crate) fn sync_probes(&self) {
        let proxy = self.load();
        let Ok(mut probes) = self.probes.lock() else {
            return;
        };
        probes.retain(|(b, task)| {
            let kept = proxy.backends.backends.iter().any(|n| Arc::ptr_eq(n, b));
            if !kept {
                task.abort();
            }
            kept
        });
        for backend in &proxy.backends.backends {
            if let Some(p) = backend.probe.clone()
                && !probes.iter().any(|(b, _)| Arc::ptr_eq(b, backend))
            {
                let task = tokio::spawn(probe::run(backend.clone(), p, self.shutdown.clone()));
                probes.push((backend.clone(), task.abort_handle()));
            }
        }
    }

    /// Stops every listener and probe task (shutdown).
    pub(crate) fn stop_tasks(&self) {
        if let Ok(mut l) = self.listeners.lock() {
            for l in l.drain(..) {
                l.task.abort();
            }
        }
        if let Ok(mut p) = self.probes.lock() {
            for (_, task) in p.drain(..) {
                task.abort();
            }
        }
    }

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

    /// [`Live::reload`]'s work, under its lock.
    async fn swap_in(self: &Arc<Self>) -> Result<Reloaded, Vec<String>> {
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
        let old = self.load();
        let changed = diff::describe(&old.config, &config);
        let mut errors: Vec<String> = changed
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
            .collect();
        // Every setting that changed, then what the running proxy did about it.
        let mut changes: Vec<String> = changed.iter().map(|c| c.to_string()).collect();

        // TLS to backends: their CA, certificate and key files load.
        for b in &config.backends {
            if let Some(t) = &b.tls
                && let Err(e) = crate::tls::client::BackendTlsClient::build(t, &b.host, false)
            {
                errors.push(format!("backend {}: tls: {e}", b.name));
            }
        }
        // TLS: every certificate and key loaded and checked before anything changes.
        let tls = match Frontends::build(&config.tls, Some(&self.tls())) {
            Ok(t) => Some(t),
            Err(e) => {
                errors.extend(e);
                None
            }
        };
        // Listeners: bind the new ones first, so a port in use rejects the reload.
        let running: Vec<(SocketAddr, Option<Arc<str>>)> = self
            .listeners
            .lock()
            .map(|l| l.iter().map(|l| (l.configured, l.tls.clone())).collect())
            .unwrap_or_default();
        let mut bound = Vec::new();
        let asked = wanted(&config);
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
        // The access log: open the new output before anything changes.
        let log_changed = config.log.access_log != old.config.log.access_log;
        let output = match config.log.access_log.as_str() {
            "off" => None,
            target if log_changed => match crate::txlog::open_output(target) {
                Ok(o) => Some(o),
                Err(e) => {
                    errors.push(format!(
                        "`log.access_log`: cannot open access log {target}: {e}"
                    ));
                    None
                }
            },
            _ => None,
        };
        if !errors.is_empty() {
            return Err(errors);
        }

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
        let next = old.next(Arc::new(config), program);
        if let Some(tls) = tls {
            self.tls.store(Arc::new(tls));
            next.counters.tls_reload.inc();
        }
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
        let recorder = &next.shared.recorder;
        if log_changed {
            recorder.set_output(output);
        } else {
            recorder.reopen();
        }
        self.current.store(next.clone());
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;

        for (addr, listener, tls) in bound {
            match &tls {
                None => changes.push(format!("listening on {addr}")),
                Some(t) => changes.push(format!("listening on {addr} (TLS, {t})")),
            }
            self.add_listener(addr, listener, tls);
        }
        let wanted = wanted(&next.config);
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

impl crate::acme::Host for Live {
    fn generation(&self) -> u64 {
        Live::generation(self)
    }

    fn running(&self) -> (Arc<Config>, Arc<crate::acme::Acme>) {
        let proxy = self.load();
        (proxy.config.clone(), proxy.shared.acme.clone())
    }
}

impl crate::tls::watch::Listeners for Live {
    fn tls(&self) -> Arc<Frontends> {
        Live::tls(self)
    }

    async fn swap_tls(
        &self,
        f: impl FnOnce(&Frontends) -> Result<Frontends, Vec<String>> + Send,
    ) -> Result<(), Vec<String>> {
        let _one_at_a_time = self.reloading.lock().await;
        let next = f(&self.tls())?;
        self.tls.store(Arc::new(next));
        Ok(())
    }

    fn counters(&self) -> Arc<Counters> {
        self.load().counters.clone()
    }
}
