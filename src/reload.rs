//! Hot reload: the running configuration as one atomically swapped snapshot ([`Live`]).
//!
//! Each request loads the current [`Proxy`] once and keeps it to the end, so requests in flight
//! finish on the configuration they started with. A reload re-reads the file, validates it,
//! builds the next `Proxy` around the same cache, counters, recorder and history (backends whose
//! settings did not change are taken over with their pools and health), binds new listeners,
//! then swaps; only after the swap are removed listeners and probes stopped. Any error rejects
//! the whole reload with every problem listed, and the old configuration keeps running.

mod swap;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::backend::{Backend, probe};
use crate::config::{CliOverrides, Config};
use crate::proxy::Proxy;
use crate::stats::Counters;
use crate::tls::server::Frontends;
pub(crate) use swap::wanted;

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

    /// The generation, read so that the configuration loaded after it is at least that
    /// generation's (the reload's store precedes its `Release` increment).
    pub fn generation_acquire(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
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
