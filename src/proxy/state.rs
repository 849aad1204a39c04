//! The state every request reads: [`Proxy`] (one per configuration: cache, backends, policy,
//! sites, counters) and [`Process`] (what outlives a configuration); and [`Subrequest`], how
//! far an ESI include's request got without waiting.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use super::body::ResponseBody;
use super::represent::Representations;
use super::site::{SiteStats, Sites};
use super::throttle::Throttle;
use super::vcl::{VclRuntime, Xids};
use crate::backend::director::Backends;
use crate::cache::Cache;
use crate::config::Config;
use crate::history::History;
use crate::rules::Rules;
use crate::stats::Counters;
use crate::txlog::{Format, Recorder};

/// Everything a request needs, shared by all connections.
pub struct Proxy {
    pub config: Arc<Config>,
    pub cache: Arc<Cache>,
    pub backends: Backends,
    /// Operator policy rules, compiled.
    pub rules: Rules,
    /// The VCL program (`vcl = "site.vcl"`, `serve --vcl`), with its backends resolved.
    pub vcl: Option<Arc<VclRuntime>>,
    /// The `[[site]] vcl` programs (a site names its own by its place here).
    pub(crate) site_vcl: Vec<Arc<VclRuntime>>,
    /// The virtual hosts (`[[site]]`); `None` without any.
    pub sites: Option<Sites>,
    /// `[routing] rewrite`, compiled.
    pub(super) rewrites: Vec<crate::rules::rewrite::Rewrite>,
    /// A `protocol = "fastcgi"` backend is configured (its applications read the listener's
    /// address: SERVER_ADDR, SERVER_PORT), or a backend with `proxy_protocol` (its header
    /// names the address the client connected to): each request carries it.
    pub(super) backends_read_local: bool,
    pub counters: Arc<Counters>,
    /// Largest object the storage accepts (`cache.max_object_size`, possibly lowered so an
    /// object fits one shard of the memory tier).
    pub max_object_size: u64,
    /// The access-log format in force; None when the access log is off.
    pub log_format: Option<Arc<Format>>,
    /// br and zstd representations of hot objects, built in the background.
    pub representations: Representations,
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
    pub(super) xids: Arc<Xids>,
    /// Varnish-style log records (`log.vsl_records`, `GET /vsl`): kept across reloads.
    pub vsl: Arc<crate::txlog::vsl::Vsl>,
    /// Every site's counters by name, kept across reloads.
    pub site_stats: Arc<SiteStats>,
    /// Rate-limit buckets (vsthrottle, `[[rule]] rate_limit`): kept across reloads.
    pub throttle: Arc<Throttle>,
    /// Bytes MP4 seeks hold to read `moov`s, under `server.mp4_moov_memory`: kept across
    /// reloads.
    pub moov_held: Arc<crate::mp4::held::MoovHeld>,
}

impl Proxy {
    /// A client connection was accepted: under a 4.x VCL program its session takes a
    /// transaction id, as in Varnish (nothing to do without VCL).
    pub fn session_begins(&self) {
        if let Some(rt) = &self.vcl {
            rt.session_begins();
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

    /// Whether requests choose a `[[site]]`: the client session then attaches [`Listener`](super::Listener)
    /// to each request (and the fast-hit path looks the site up).
    pub fn has_sites(&self) -> bool {
        self.sites.is_some()
    }

    /// Whether `[routing] rewrite` has lines.
    pub(crate) fn has_rewrites(&self) -> bool {
        !self.rewrites.is_empty()
    }

    /// Whether the loaded VCL program reads the connection's local address (`server.ip`,
    /// `server.port`, `local.ip`), or a backend passes it on (FastCGI's SERVER_ADDR and
    /// SERVER_PORT, a PROXY protocol header's destination): the client session then attaches
    /// [`LocalAddr`](super::LocalAddr) to each request. Without either this is one branch in
    /// the full path's service, none in fast hits.
    pub fn reads_local(&self) -> bool {
        self.backends_read_local
            || self.vcl.as_ref().is_some_and(|rt| rt.program.reads_local)
            || self.site_vcl.iter().any(|rt| rt.program.reads_local)
    }
}

/// How far a sub-request got without waiting ([`Proxy::subrequest_now`]).
pub(crate) enum Subrequest {
    /// Answered: no step had to wait.
    Done(http::Response<ResponseBody>),
    /// The rest of the request, to await.
    Waits(std::pin::Pin<Box<dyn Future<Output = http::Response<ResponseBody>> + Send>>),
}
