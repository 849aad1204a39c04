//! The request path: per-process state ([`Proxy`]) and the request state machine in [`fsm`].
//!
//! Architecture invariant: the pipeline never touches a socket; it turns a parsed request into
//! a response. Connections live in `server`, origins in `backend`.

pub mod body;
mod chunks;
mod coding;
mod combine;
mod deliver;
mod fast_hit;
mod fetch;
mod fill;
pub mod filter;
mod fsm;
mod held;
mod interim;
mod judge;
mod lookup;
mod observe;
pub mod partial;
mod policy;
mod purge;
mod recv_site;
mod refresh;
pub mod represent;
mod request_body;
mod respond;
pub mod site;
mod slice;
mod surrogate;
pub mod throttle;
mod txn;
mod vcl;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use http::{Request, Response};
use hyper::body::Incoming;

use crate::backend::director::Backends;
use crate::cache::ban::BanList;
use crate::cache::disk::DiskStorage;
use crate::cache::memory::MemoryStorage;
use crate::cache::shared::SharedTier;
use crate::cache::tiered::Tiered;
use crate::cache::{Cache, Storage};
use crate::config::{Config, OnOpenError};
use crate::history::{History, Sample};
use crate::http::strict::Violation;
use crate::rules::Rules;
use crate::stats::Counters;
use crate::txlog::{self, Format, Recorder};
use crate::vcl::attach::Programs;
use crate::vcl::ir::Program;
pub use body::ResponseBody;
pub use fast_hit::FastAnswer;
pub use fsm::{Handled, Rest};
pub use interim::{InterimHead, InterimSink, MAX_INTERIM, serialise as serialise_interim};

/// VCL's `sess.timeout_idle`, as a request and response extension between the client
/// session (`server.rs`, `server/h2`) and the VCL program: on a request, the idle timeout an
/// earlier response set for the session; on a response, the idle timeout the session keeps
/// from then on (`None`: back to `server.idle_timeout`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SessionIdle(pub Option<std::time::Duration>);

/// VCL's `server.ip` and `local.ip`: the local address (IP and port) of the socket the
/// client connection was accepted on, as a request extension from the client session
/// (`server/local.rs`). Attached only when the loaded VCL program reads it
/// ([`Proxy::reads_local`]); a request without it reads `0.0.0.0:0`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalAddr(pub std::net::SocketAddr);

/// The client listener a request came in on, as configured (`server.listen` or a `[[tls]]`'s
/// `listen` address as written), as a request extension from the client session: attached
/// only when the configuration has `[[site]]`s ([`Proxy::has_sites`]), which are chosen by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listener(pub std::net::SocketAddr);

/// The log reason of a connection refused at `server.max_connections` (the `Cache-Status`
/// detail of its 503 is `max-connections`).
pub const MAX_CONNECTIONS_REASON: &str = "refused:max-connections";

/// Everything a request needs, shared by all connections.
pub struct Proxy {
    pub config: Arc<Config>,
    pub cache: Arc<Cache>,
    pub backends: Backends,
    /// Operator policy rules, compiled.
    pub rules: Rules,
    /// The VCL program (`vcl = "site.vcl"`, `serve --vcl`), with its backends resolved.
    pub vcl: Option<Arc<vcl::VclRuntime>>,
    /// The `[[site]] vcl` programs (a site names its own by its place here).
    pub(crate) site_vcl: Vec<Arc<vcl::VclRuntime>>,
    /// The virtual hosts (`[[site]]`); `None` without any.
    pub sites: Option<site::Sites>,
    /// `[routing] rewrite`, compiled.
    rewrites: Vec<crate::rules::rewrite::Rewrite>,
    pub counters: Arc<Counters>,
    /// Largest object the storage accepts (`cache.max_object_size`, possibly lowered so an
    /// object fits one shard of the memory tier).
    pub max_object_size: u64,
    /// The access-log format in force; None when the access log is off.
    pub log_format: Option<Arc<Format>>,
    /// br and zstd representations of hot objects, built in the background.
    pub representations: represent::Representations,
    /// State that outlives a configuration.
    pub shared: Arc<Process>,
}

/// Per-process state that is not part of a configuration.
pub struct Process {
    pub started: Instant,
    /// Client connections open right now (gauge `n_client_conn`).
    pub open_conns: AtomicU64,
    /// Of those, released after `idle_release` (gauge `n_client_conn_released`).
    pub released_conns: AtomicU64,
    /// Of those, new connections that have not sent a byte yet, held as a socket alone in the
    /// parking lot (gauge `n_client_conn_waiting`).
    pub waiting_conns: AtomicU64,
    /// Transaction records: access log and live subscribers.
    pub recorder: Arc<Recorder>,
    /// One sample of every counter and gauge per second (hit ratios, rates).
    pub history: Arc<History>,
    /// ACME: the HTTP-01 answers being asked for and every managed certificate.
    pub acme: Arc<crate::acme::Acme>,
    /// VCL transaction ids (`X-Varnish`): numbered on across reloads.
    xids: Arc<vcl::Xids>,
    /// Every site's counters by name, kept across reloads.
    pub site_stats: Arc<site::SiteStats>,
    /// Rate-limit buckets (vsthrottle, `[[rule]] rate_limit`): kept across reloads.
    pub throttle: Arc<throttle::Throttle>,
}

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
        let (memory_size, max_object) =
            (config.cache.memory_size.0, config.cache.max_object_size.0);
        // The memory tier never holds more than it can (its shards are sized by this).
        let memory_max = max_object.min(memory_size);
        // Shared with the disk tier, which reads persisted bans back into it and persists new
        // ones.
        let bans = Arc::new(BanList::new(config.invalidation.max_bans));
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
                let tiered =
                    Tiered::new(memory_size, memory_max, disk, admission, counters.clone());
                let max = tiered.max_object();
                (Arc::new(tiered), max)
            }
            None => {
                let memory = MemoryStorage::new(memory_size, memory_max, counters.clone());
                let max = memory.max_object();
                (Arc::new(memory), max)
            }
        };
        let max_object_size = max_object.min(tier_max);
        let backends = Backends::build(&config, &counters);
        let rules = Rules::compile(&config.rules);
        let xids = Arc::new(vcl::Xids::default());
        let throttle = Arc::new(throttle::Throttle::new(
            config.server.rate_limit_keys,
            counters.clone(),
        ));
        let runtime = |p: &Arc<Program>| {
            Arc::new(vcl::VclRuntime::new(
                (**p).clone(),
                &backends,
                (xids.clone(), throttle.clone()),
                counters.clone(),
                config.cache.grace.0,
                config.server.idle_timeout.0,
            ))
        };
        let vcl = programs.global.as_ref().map(runtime);
        let site_vcl: Vec<_> = programs.sites.iter().map(|(_, p)| runtime(p)).collect();
        let site_routes = site_routes(&programs, &site_vcl);
        let output = match config.log.access_log.as_str() {
            "off" => None,
            target => Some(txlog::open_output(target).map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot open access log {target}: {e}"))
            })?),
        };
        let recorder = Recorder::start(
            config.server.worker_threads(),
            config.log.buffer,
            output,
            counters.clone(),
        )?;
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
            // With a disk tier the position in the fleet's invalidation log survives a
            // restart beside its file, so the node catches up instead of dropping its cache.
            let state = disk_running
                .then(|| {
                    config
                        .storage
                        .disk
                        .as_ref()
                        .map(|d| d.path.with_extension("fleet"))
                })
                .flatten();
            shared.feed.attach(&cache, state);
        }
        let site_stats = Arc::new(site::SiteStats::default());
        Ok(Arc::new(Proxy {
            cache,
            sites: site::Sites::build(&config, &backends, &site_stats, &site_routes),
            site_vcl,
            rewrites: compile_rewrites(&config),
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
                site_stats,
                throttle,
            }),
            config,
        }))
    }

    /// The proxy for a reloaded `config`: same cache, counters and shared state; backends whose
    /// settings did not change are kept (pools, health); the rest is built anew.
    pub fn next(&self, config: Arc<Config>, programs: Programs) -> Arc<Proxy> {
        let backends = Backends::build_reusing(&config, &self.counters, Some(&self.backends));
        let runtime = |p: &Arc<Program>| {
            Arc::new(vcl::VclRuntime::new(
                (**p).clone(),
                &backends,
                (self.shared.xids.clone(), self.shared.throttle.clone()),
                self.counters.clone(),
                config.cache.grace.0,
                config.server.idle_timeout.0,
            ))
        };
        let vcl = programs.global.as_ref().map(runtime);
        let site_vcl: Vec<_> = programs.sites.iter().map(|(_, p)| runtime(p)).collect();
        let site_routes = site_routes(&programs, &site_vcl);
        Arc::new(Proxy {
            sites: site::Sites::build(&config, &backends, &self.shared.site_stats, &site_routes),
            site_vcl,
            rewrites: compile_rewrites(&config),
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

    /// A client connection was accepted: under a 4.x VCL program its session takes a
    /// transaction id, as in Varnish (nothing to do without VCL).
    pub fn session_begins(&self) {
        if let Some(rt) = &self.vcl {
            rt.session_begins();
        }
    }

    /// Every counter and gauge now, for the history.
    pub fn sample(&self) -> Sample {
        Sample {
            at: Instant::now(),
            values: self.stats().into_iter().map(|(_, v)| v).collect(),
            ttfb: self.counters.ttfb.buckets(),
        }
    }

    /// Whether a `[[site]]` named `name` is configured or was since start (its counters are
    /// kept across reloads).
    pub fn site_named(&self, name: &str) -> bool {
        self.shared
            .site_stats
            .all()
            .iter()
            .any(|(n, _)| &**n == name)
    }

    /// Whether requests choose a `[[site]]`: the client session then attaches [`Listener`]
    /// to each request (and the fast-hit path looks the site up).
    pub fn has_sites(&self) -> bool {
        self.sites.is_some()
    }

    /// Whether `[routing] rewrite` has lines.
    pub(crate) fn has_rewrites(&self) -> bool {
        !self.rewrites.is_empty()
    }

    /// Whether the loaded VCL program reads the connection's local address (`server.ip`,
    /// `server.port`, `local.ip`): the client session then attaches [`LocalAddr`] to each
    /// request. Without VCL this is one branch in the full path's service, none in fast hits.
    pub fn reads_local(&self) -> bool {
        self.vcl.as_ref().is_some_and(|rt| rt.program.reads_local)
            || self.site_vcl.iter().any(|rt| rt.program.reads_local)
    }

    /// Runs one request through the state machine: the response when no step had to wait (a
    /// hit from memory, a refusal, a generated answer), otherwise the rest of the request's
    /// work, to be run with [`Rest::run`] (why: `fsm::start`).
    ///
    /// First the request is put in the one form every later step sees: fields whose name
    /// contains `_` dropped (unless `server.underscores_in_headers`), the rewrite fields and
    /// (from untrusted clients) the forwarding fields removed, the target's escapes normalised
    /// (`http::target`).
    pub fn handle(self: Arc<Self>, mut req: Request<Incoming>, client: SocketAddr) -> Handled {
        let trusted = self.config.server.trusts(client.ip());
        if !self.config.server.underscores_in_headers {
            let dropped = crate::http::headers::drop_underscored(req.headers_mut());
            if dropped > 0 {
                self.counters.client_field_underscore.add(dropped as u64);
            }
        }
        if self.vcl.is_some() {
            crate::http::headers::sanitize_request_for_vcl(req.headers_mut(), trusted);
        } else {
            crate::http::headers::sanitize_request(req.headers_mut(), trusted);
        }
        if let Some(normal) = req
            .uri()
            .path_and_query()
            .and_then(|p| crate::http::target::normalise(p.as_str()))
        {
            let mut parts = req.uri().clone().into_parts();
            if let Ok(pq) = normal.parse() {
                parts.path_and_query = Some(pq);
                if let Ok(uri) = http::Uri::from_parts(parts) {
                    *req.uri_mut() = uri;
                }
            }
        }
        fsm::start(self, req, client)
    }

    /// An ESI include's request (`filter/esi/include.rs`) through the whole state machine —
    /// policy, lookup, coalescing, grace — as a client's request without a body would go.
    pub(crate) async fn subrequest(
        self: Arc<Self>,
        req: http::request::Parts,
        client: SocketAddr,
    ) -> Response<body::ResponseBody> {
        match fsm::start_sub(self, req, client) {
            fsm::Handled::Done(resp, _) => resp,
            fsm::Handled::Waits(rest) => rest.run().await.0,
        }
    }

    /// A generated error answer: `status` with `detail` (in `Cache-Status`) and
    /// `Connection: close`. Never cached; not logged by itself (see [`Proxy::refuse_request`]).
    pub fn refuse(&self, status: u16, detail: &str) -> Response<ResponseBody> {
        let status = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::BAD_REQUEST);
        deliver::synth(status, detail, true)
    }

    /// The answer to a request the strict parser refused (framing, fields, limits): the
    /// violation's status, `Connection: close`. Counted in `client_refused`; logged (access log,
    /// `shellac log`) with reason `refused:<word>` and the request line when it was valid
    /// (`line`), else `-`.
    pub fn refuse_request(
        &self,
        v: Violation,
        client: IpAddr,
        line: Option<&[u8]>,
    ) -> Response<ResponseBody> {
        let resp = self.refuse(v.status(), v.as_str());
        match observe::refusal(self, client, v.status(), v.refused_reason(), line) {
            Some(record) => resp.map(|b| b.recorded(record)),
            None => resp,
        }
    }

    /// A request whose body broke the framing rules after its head was forwarded: `answer`
    /// (what the pipeline made of it) is dropped for the refusal. Its transaction record, which
    /// knows the request line and the backend, is kept with the refusal's status and reason.
    pub fn refuse_body(
        &self,
        v: Violation,
        answer: Response<ResponseBody>,
    ) -> Response<ResponseBody> {
        self.counters.client_refused.inc();
        self.replace_answer(v.status(), v.as_str(), v.refused_reason(), answer)
    }

    /// The answer to an HTTP/2 request whose body came too slowly (`server.body_timeout`,
    /// `server.body_min_rate`), in place of the aborted fetch's: `408`, logged with reason
    /// `refused:body-timeout`. (Over HTTP/1.1 the connection is closed instead: its framing
    /// is lost mid-body; an HTTP/2 stream can still be answered.)
    pub fn refuse_slow_body(&self, answer: Response<ResponseBody>) -> Response<ResponseBody> {
        self.replace_answer(408, "body-timeout", "refused:body-timeout", answer)
    }

    /// `answer` (its transaction record kept) replaced by a synthetic `status` page.
    fn replace_answer(
        &self,
        status: u16,
        detail: &str,
        reason: &'static str,
        mut answer: Response<ResponseBody>,
    ) -> Response<ResponseBody> {
        let record = answer.body_mut().take_record();
        drop(answer);
        let resp = self.refuse(status, detail);
        match record {
            Some(mut r) => {
                r.status = status;
                r.decision = observe::refused(reason);
                resp.map(|b| b.recorded(r))
            }
            None => resp,
        }
    }

    /// Records a connection refused at `server.max_connections` (it was answered 503 without
    /// reading its request): counted in `client_refused`, logged with reason
    /// `refused:max-connections` and `-` for the request line.
    pub fn log_connection_refused(&self, client: IpAddr) {
        if let Some(r) = observe::refusal(self, client, 503, MAX_CONNECTIONS_REASON, None) {
            r.finish(true);
        }
    }

    /// Counters and gauges as (name, value), for `/stats`; names as `stats::names()`.
    pub fn stats(&self) -> Vec<(&'static str, u64)> {
        let mut out = self.counters.snapshot();
        out.extend(
            self.counters
                .pass_reason
                .snapshot()
                .map(|(_, name, n)| (name, n)),
        );
        let storage = self.cache.storage.stats();
        out.push(("n_object", storage.objects));
        out.push(("n_hit_for_miss", self.cache.hit_for_miss_len() as u64));
        out.push(("n_busy", self.cache.busy.len() as u64));
        out.push(("cache_bytes", storage.bytes));
        out.push(("cache_capacity_bytes", storage.capacity));
        let slabs = crate::cache::slab::stats();
        out.push(("cache_slab_bytes", slabs.chunk_bytes));
        out.push(("cache_slot_bytes", slabs.slot_bytes));
        let disk = self
            .cache
            .storage
            .lower_tiers()
            .into_iter()
            .find(|(name, _)| *name == "disk")
            .map(|(_, s)| s)
            .unwrap_or_default();
        out.push(("n_object_disk", disk.objects));
        out.push(("disk_bytes", disk.bytes));
        out.push(("disk_capacity_bytes", disk.capacity));
        out.push((
            "n_client_conn",
            self.shared.open_conns.load(Ordering::Relaxed),
        ));
        out.push((
            "n_client_conn_released",
            self.shared.released_conns.load(Ordering::Relaxed),
        ));
        out.push((
            "n_client_conn_waiting",
            self.shared.waiting_conns.load(Ordering::Relaxed),
        ));
        let fleet = self.cache.shared.as_deref();
        out.push((
            "shared_breaker_state",
            fleet.map_or(0, |f| f.breaker.state_code()),
        ));
        out.push((
            "fleet_inval_lag_ms",
            fleet.map_or(0, |f| f.feed.lag_ms.load(Ordering::Relaxed)),
        ));
        out.push((
            "fleet_sync_age_ms",
            fleet.map_or(0, |f| f.feed.sync_age_ms().min(u64::MAX >> 1)),
        ));
        out.push((
            "fleet_inval_outbox",
            fleet.map_or(0, |f| f.feed.queued() as u64),
        ));
        out.push(("uptime_seconds", self.shared.started.elapsed().as_secs()));
        out.push((
            "log_subscribers",
            self.shared.recorder.subscriber_count() as u64,
        ));
        out
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_names_are_declared_in_order() {
        let proxy = Proxy::new(
            Arc::new(Config::embedded_default()),
            crate::vcl::attach::Programs::default(),
            Arc::new(Counters::default()),
        )
        .unwrap();
        let names: Vec<&str> = proxy.stats().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, crate::stats::names());
        proxy
            .shared
            .recorder
            .close(std::time::Duration::from_secs(5));
    }
}
