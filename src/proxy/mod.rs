//! The request path: per-process state ([`Proxy`]) and the request state machine in [`fsm`].
//!
//! Architecture invariant: the pipeline never touches a socket; it turns a parsed request into
//! a response. Connections live in `server`, origins in `backend`.

pub mod body;
mod deliver;
mod fetch;
mod fill;
mod fsm;
mod partial;
mod refresh;
mod send;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use http::{Request, Response};
use hyper::body::Incoming;

use crate::backend::director::Backends;
use crate::cache::Cache;
use crate::cache::memory::MemoryStorage;
use crate::config::Config;
use crate::rules::Rules;
use crate::stats::Counters;
pub use body::ResponseBody;

/// Everything a request needs, shared by all connections.
pub struct Proxy {
    pub config: Arc<Config>,
    pub cache: Cache,
    pub backends: Backends,
    /// Operator policy rules, compiled.
    pub rules: Rules,
    pub counters: Arc<Counters>,
    pub started: Instant,
    /// Largest object the storage accepts (`cache.max_object_size`, possibly lowered so an
    /// object fits one shard of the memory tier).
    pub max_object_size: u64,
    /// Client connections open right now (gauge `n_client_conn`).
    pub open_conns: AtomicU64,
}

impl Proxy {
    pub fn new(config: Arc<Config>, counters: Arc<Counters>) -> Arc<Proxy> {
        let memory = MemoryStorage::new(
            config.cache.memory_size.0,
            config.cache.max_object_size.0,
            counters.clone(),
        );
        let max_object_size = config.cache.max_object_size.0.min(memory.max_object());
        let backends = Backends::build(&config, &counters);
        let rules = Rules::compile(&config.rules);
        Arc::new(Proxy {
            cache: Cache::new(Arc::new(memory), config.cache.max_variants),
            backends,
            rules,
            counters,
            started: Instant::now(),
            max_object_size,
            open_conns: AtomicU64::new(0),
            config,
        })
    }

    /// Runs one request through the state machine.
    pub async fn handle(
        self: &Arc<Self>,
        req: Request<Incoming>,
        client: SocketAddr,
    ) -> Response<ResponseBody> {
        fsm::run(self, req, client).await
    }

    /// Counters and gauges as (name, value), for `/stats`.
    pub fn stats(&self) -> Vec<(&'static str, u64)> {
        let mut out = self.counters.snapshot();
        let storage = self.cache.storage.stats();
        out.push(("n_object", storage.objects));
        out.push(("n_hit_for_miss", self.cache.hit_for_miss_len() as u64));
        out.push(("n_busy", self.cache.busy.len() as u64));
        out.push(("cache_bytes", storage.bytes));
        out.push(("cache_capacity_bytes", storage.capacity));
        out.push(("n_client_conn", self.open_conns.load(Ordering::Relaxed)));
        out.push(("uptime_seconds", self.started.elapsed().as_secs()));
        out
    }
}
