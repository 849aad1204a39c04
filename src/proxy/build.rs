//! A [`Proxy`] built for a configuration: at start ([`Proxy::new`]: storage tiers, backends,
//! policy, sites, the recorder, the fleet's tier) and on reload ([`Proxy::next`]: the cache,
//! counters and per-process state kept).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use super::state::{Process, Proxy};
use super::{represent, site, throttle, vcl};
use crate::backend::director::Backends;
use crate::cache::Cache;
use crate::cache::Storage;
use crate::cache::ban::BanList;
use crate::cache::disk::DiskStorage;
use crate::cache::memory::MemoryStorage;
use crate::cache::shared::SharedTier;
use crate::cache::tiered::Tiered;
use crate::config::{Config, OnOpenError};
use crate::history::History;
use crate::rules::Rules;
use crate::stats::Counters;
use crate::txlog::{self, Recorder};
use crate::vcl::attach::Programs;
use crate::vcl::ir::Program;

/// Each site program's site name and default backend (Varnish's `req.backend_hint` starts at
/// the first backend declared), in the order of `runtimes`.
fn site_routes(
    programs: &Programs,
    runtimes: &[Arc<vcl::VclRuntime>],
) -> Vec<(String, Option<crate::backend::director::Member>)> {
    programs
        .sites
        .iter()
        .zip(runtimes)
        .map(|((name, _), rt)| {
            let route = rt
                .program
                .default_target
                .and_then(|target| rt.member(crate::vcl::run::BackendSel { target, hash: None }));
            (name.clone(), route)
        })
        .collect()
}

/// Whether `config` has a FastCGI backend (its requests then carry the listener's address).
/// Whether a backend passes the client connection's local address on: a FastCGI origin
/// (SERVER_ADDR, SERVER_PORT) or a backend sending a PROXY protocol header (its destination).
fn backends_read_local(config: &Config) -> bool {
    config.backends.iter().any(|b| {
        b.protocol == crate::config::BackendProtocol::Fastcgi || b.proxy_protocol.is_some()
    })
}

impl Proxy {
    /// Builds the proxy for `config`: storage tiers (memory, and disk if configured), backends,
    /// rules or `program` (the VCL program of its `[vcl] file`, compiled by `vcl::attach`),
    /// and the transaction recorder with its writer thread. Fails if the access log
    /// cannot be opened, or the disk tier (`storage.disk.on_open_error = "refuse"`, the
    /// default); with `"memory-only"` an unusable disk tier leaves the memory tier alone.
    pub fn new(
        config: Arc<Config>,
        programs: impl Into<Programs>,
        counters: Arc<Counters>,
    ) -> std::io::Result<Arc<Proxy>> {
        let programs = programs.into();
        // Shared with the disk tier, which reads persisted bans back into it and persists new
        // ones.
        let bans = Arc::new(BanList::new(config.invalidation.max_bans));
        let (storage, max_object_size, disk_running) = storage(&config, &counters, &bans)?;
        let backends = Backends::build(&config, &counters);
        let rules = Rules::compile(&config.rules);
        let xids = Arc::new(vcl::Xids::default());
        let vsl = Arc::new(crate::txlog::vsl::Vsl::default());
        vsl.set_capacity(config.log.vsl_records);
        let throttle = Arc::new(throttle::Throttle::new(
            config.server.rate_limit_keys,
            counters.clone(),
        ));
        let runtime = |p: &Arc<Program>| {
            Arc::new(vcl::VclRuntime::new(
                (**p).clone(),
                &backends,
                (xids.clone(), throttle.clone(), vsl.clone()),
                counters.clone(),
                config.cache.grace.0,
                sess_defaults(&config.server),
                config.cache.hit_for_miss_ttl.0,
            ))
        };
        let vcl = programs.global.as_ref().map(runtime);
        let site_vcl: Vec<_> = programs.sites.iter().map(|(_, p)| runtime(p)).collect();
        let site_routes = site_routes(&programs, &site_vcl);
        let recorder = recorder(&config, &counters)?;
        // The fleet's shared tier connects in the background: start-up never waits for Redis.
        let shared = config
            .storage
            .shared
            .as_ref()
            .map(|s| SharedTier::start(s, node_name(&config, s), counters.clone()));
        let cache = Arc::new(
            Cache::new(storage, config.cache.max_variants)
                .with_bans(bans)
                // Partial content beside the memory tier: an eighth of its bound.
                .with_partial_capacity(config.cache.memory_size.0 / 8)
                .with_shared(shared.clone()),
        );
        if let Some(shared) = &shared {
            shared
                .feed
                .attach(&cache, fleet_state(&config, disk_running));
        }
        let site_stats = Arc::new(site::SiteStats::default());
        let sites = site::Sites::build(&config, &backends, &site_stats, &site_routes);
        apply_shares(&cache, sites.as_ref(), &config);
        Ok(Arc::new(Proxy {
            cache,
            sites,
            site_vcl,
            rewrites: compile_rewrites(&config),
            backends_read_local: backends_read_local(&config),
            backends,
            rules,
            vcl,
            counters,
            max_object_size,
            log_format: config.log.active_format().map(Arc::new),
            representations: represent::Representations::new(&config.compression, max_object_size),
            shared: Arc::new(Process {
                started: Instant::now(),
                open_conns: AtomicU64::new(0),
                released_conns: AtomicU64::new(0),
                waiting_conns: AtomicU64::new(0),
                recorder,
                history: Arc::new(History::new(crate::stats::names())),
                acme: Arc::default(),
                xids,
                vsl,
                site_stats,
                throttle,
                moov_held: Arc::default(),
            }),
            config,
        }))
    }

    /// The proxy for a reloaded `config`: same cache, counters and shared state; backends whose
    /// settings did not change are kept (pools, health); the rest is built anew.
    pub fn next(&self, config: Arc<Config>, programs: Programs) -> Arc<Proxy> {
        let backends = Backends::build_reusing(&config, &self.counters, Some(&self.backends));
        self.shared.vsl.set_capacity(config.log.vsl_records);
        let runtime = |p: &Arc<Program>| {
            Arc::new(vcl::VclRuntime::new(
                (**p).clone(),
                &backends,
                (
                    self.shared.xids.clone(),
                    self.shared.throttle.clone(),
                    self.shared.vsl.clone(),
                ),
                self.counters.clone(),
                config.cache.grace.0,
                sess_defaults(&config.server),
                config.cache.hit_for_miss_ttl.0,
            ))
        };
        let vcl = programs.global.as_ref().map(runtime);
        let site_vcl: Vec<_> = programs.sites.iter().map(|(_, p)| runtime(p)).collect();
        let site_routes = site_routes(&programs, &site_vcl);
        let sites = site::Sites::build(&config, &backends, &self.shared.site_stats, &site_routes);
        apply_shares(&self.cache, sites.as_ref(), &config);
        Arc::new(Proxy {
            sites,
            site_vcl,
            rewrites: compile_rewrites(&config),
            backends_read_local: backends_read_local(&config),
            backends,
            vcl,
            rules: Rules::compile(&config.rules),
            cache: self.cache.clone(),
            counters: self.counters.clone(),
            max_object_size: self.max_object_size,
            log_format: config.log.active_format().map(Arc::new),
            representations: represent::Representations::new(
                &config.compression,
                self.max_object_size,
            ),
            shared: self.shared.clone(),
            config,
        })
    }
}

/// The sites' `cache_share`s (none without sites) and the named storages' sizes to the memory
/// tier.
fn apply_shares(cache: &Cache, sites: Option<&site::Sites>, config: &Config) {
    if let Some(shares) = cache.storage.site_shares() {
        shares.set_limits(&sites.map(site::Sites::shares).unwrap_or_default());
        let named: Vec<(String, Option<u64>)> = config
            .storage
            .named
            .iter()
            .map(|n| (n.name.clone(), n.size.map(|s| s.0)))
            .collect();
        shares.set_stores(&named);
    }
}

/// The storage tiers for `config`: memory, and disk if configured (`bans` shared with it),
/// with the largest object they take and whether the disk tier runs. Fails when the disk tier
/// cannot be opened under `storage.disk.on_open_error = "refuse"`.
fn storage(
    config: &Config,
    counters: &Arc<Counters>,
    bans: &Arc<BanList>,
) -> std::io::Result<(Arc<dyn Storage>, u64, bool)> {
    let (memory_size, max_object) = (config.cache.memory_size.0, config.cache.max_object_size.0);
    // The memory tier never holds more than it can (its shards are sized by this).
    let memory_max = max_object.min(memory_size);
    let disk = match &config.storage.disk {
        None => None,
        Some(d) => match DiskStorage::open(d, counters.clone(), bans.clone()) {
            Ok(disk) => Some((disk, d.admission)),
            Err(e) if d.on_open_error == OnOpenError::Refuse => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot open the disk cache {}: {e} (storage.disk.on_open_error = \"memory-only\" would run without it)",
                        d.path.display()
                    ),
                ));
            }
            Err(e) => {
                counters.disk_io_error.inc();
                tracing::error!(path = %d.path.display(), error = %e, "disk cache unavailable; running with the memory tier only (storage.disk.on_open_error = \"memory-only\")");
                None
            }
        },
    };
    let disk_running = disk.is_some();
    let (storage, tier_max): (Arc<dyn Storage>, u64) = match disk {
        Some((disk, admission)) => {
            let tiered = Tiered::new(memory_size, memory_max, disk, admission, counters.clone());
            let max = tiered.max_object();
            (Arc::new(tiered), max)
        }
        None => {
            let memory = MemoryStorage::new(memory_size, memory_max, counters.clone());
            let max = memory.max_object();
            (Arc::new(memory), max)
        }
    };
    Ok((storage, max_object.min(tier_max), disk_running))
}

/// The transaction recorder with its writer thread, writing to `log.access_log` (if on).
fn recorder(config: &Config, counters: &Arc<Counters>) -> std::io::Result<Arc<Recorder>> {
    let output = match config.log.access_log.as_str() {
        "off" => None,
        target => Some(txlog::open_output(target).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot open access log {target}: {e}"))
        })?),
    };
    Recorder::start(
        config.server.worker_threads(),
        config.log.buffer,
        output,
        counters.clone(),
    )
}

/// Where the fleet's invalidation-log position is kept: with a disk tier it survives a
/// restart beside its file, so the node catches up instead of dropping its cache.
fn fleet_state(config: &Config, disk_running: bool) -> Option<std::path::PathBuf> {
    disk_running
        .then(|| {
            config
                .storage
                .disk
                .as_ref()
                .map(|d| d.path.with_extension("fleet"))
        })
        .flatten()
}

/// `storage.shared.node_name`, else the host name and the first listen port: stable across
/// restarts (the fleet keeps each node's position under it) and distinct per instance.
fn node_name(config: &Config, shared: &crate::config::SharedConfig) -> String {
    if let Some(name) = &shared.node_name {
        return name.clone();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let host = if host.is_empty() {
        "shellac".into()
    } else {
        host
    };
    match config.server.listen.first() {
        Some(addr) => format!("{host}:{}", addr.port()),
        None => host,
    }
}

/// `[routing] rewrite`, compiled (validation refused lines that do not compile).
fn compile_rewrites(config: &Config) -> Vec<crate::rules::rewrite::Rewrite> {
    config
        .routing
        .rewrite
        .iter()
        .filter_map(|l| crate::rules::rewrite::Rewrite::parse(l).ok())
        .collect()
}

/// The session timeouts VCL's `sess.*` read until it sets them, in
/// [`crate::vcl::run::SessTimeout`]'s order.
fn sess_defaults(server: &crate::config::ServerConfig) -> [std::time::Duration; 4] {
    [
        server.idle_timeout.0,
        server.idle_release.0,
        server.send_total_timeout.0,
        server.send_timeout.0,
    ]
}
