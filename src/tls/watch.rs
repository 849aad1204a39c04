//! The task that notices that certificate, key, CA or ticket-key files changed on disk
//! (`stamps.rs`, compared every `watch_interval`) and loads the listener again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::server::Frontends;
use super::stamps::Stamps;
use crate::stats::Counters;

/// What the watcher (and the ACME tasks) need of the running server, which `reload::Live`
/// provides: the TLS listeners in force, a way to replace them, and the counters.
pub trait Listeners: Send + Sync + 'static {
    /// The TLS listeners in force.
    fn tls(&self) -> Arc<Frontends>;
    /// Replaces the TLS listeners with what `f` builds from the running ones, between reloads
    /// (a reload in progress finishes first); an error changes nothing.
    fn swap_tls(
        &self,
        f: impl FnOnce(&Frontends) -> Result<Frontends, Vec<String>> + Send,
    ) -> impl Future<Output = Result<(), Vec<String>>> + Send;
    /// The running configuration's counters.
    fn counters(&self) -> Arc<Counters>;
}

/// Watches the TLS listeners' files: a listener whose files changed is built again and
/// swapped in (as a reload would); one that does not load keeps running as it was (logged at
/// ERROR once per change of its files, counted in `tls_reload_error`).
pub async fn run(live: Arc<impl Listeners>, mut shutdown: watch::Receiver<bool>) {
    // The stamps of files that failed to load, per listener: tried again once they change.
    let mut failed: HashMap<Arc<str>, Stamps> = HashMap::new();
    let mut last: HashMap<Arc<str>, Instant> = HashMap::new();
    loop {
        let frontends = live.tls();
        let tick = frontends
            .iter()
            .map(|f| f.settings.watch_interval.0)
            .filter(|d| !d.is_zero())
            .min()
            .unwrap_or(Duration::from_secs(5))
            .max(Duration::from_millis(100));
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = shutdown.changed() => return,
        }
        let frontends = live.tls();
        for f in frontends.iter() {
            let interval = f.settings.watch_interval.0;
            let due = last.get(&f.name).is_none_or(|t| t.elapsed() >= interval);
            if interval.is_zero() || !due {
                continue;
            }
            last.insert(f.name.clone(), Instant::now());
            let now = Stamps::take(&f.settings.files());
            if now == f.stamps || failed.get(&f.name) == Some(&now) {
                continue;
            }
            let name = f.name.clone();
            let result = live.swap_tls(|running| running.rebuilt(&name)).await;
            let counters = live.counters();
            match result {
                Ok(()) => {
                    failed.remove(&name);
                    counters.tls_reload.inc();
                    tracing::info!(listener = %name, "TLS files changed on disk: certificates loaded again");
                }
                Err(errors) => {
                    failed.insert(name.clone(), now);
                    counters.tls_reload_error.inc();
                    for e in errors {
                        tracing::error!(listener = %name, "TLS files changed on disk but cannot be loaded; the running certificates are kept: {e}");
                    }
                }
            }
        }
        failed.retain(|n, _| frontends.get(n).is_some());
        last.retain(|n, _| frontends.get(n).is_some());
    }
}
