//! Client connections: listeners, HTTP/1.1 keep-alive, idle and header-read timeouts, graceful
//! shutdown. Hands each parsed request to the [`Proxy`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admin;
use crate::config::{CliOverrides, Config};
use crate::proxy::Proxy;
use crate::reload::{ConfigSource, Live};
use crate::service::listeners::Role;
use crate::stats::Counters;

mod accept;
mod client;
mod h1;
pub(crate) mod h2;
mod local;
mod near;
mod open;
pub(crate) mod park;
mod park_task;
mod proxy_header;
mod refuse;
mod sess_clocks;
mod tls_conn;
mod trim;
mod tunnel;
mod unix;

/// A started Shellac: bound listeners and the tasks serving them.
pub struct Running {
    /// The running configuration (swapped on reload).
    pub live: Arc<Live>,
    /// Client listeners bound at start (`server.listen`).
    pub listen: Vec<SocketAddr>,
    /// TLS listeners bound at start (every `[[tls]]`'s `listen`, in order).
    pub tls: Vec<SocketAddr>,
    /// Unix-socket listeners bound at start (`server.listen_unix`), removed at shutdown.
    pub unix: Vec<std::path::PathBuf>,
    pub admin: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

/// Binds every listener (failing early with the address that could not be bound) and starts
/// serving. Must be called inside a Tokio runtime. There is no file to reload from. The
/// `[vcl] file`, if any, is compiled here (its origins made the configuration's when they
/// are not yet).
pub async fn start(config: Arc<Config>) -> anyhow::Result<Running> {
    let (config, program) = crate::vcl::attach::for_config(config).map_err(|e| {
        let lines: Vec<String> = e.iter().map(|e| e.to_string()).collect();
        anyhow::anyhow!("{}", lines.join("\n"))
    })?;
    start_with(config, program, ConfigSource::None, CliOverrides::default()).await
}

/// Like [`start`], with `program` the VCL program compiled for `config` (`vcl::attach`);
/// reloads re-read `source` and apply `overrides` on top.
pub async fn start_with(
    config: Arc<Config>,
    program: crate::vcl::attach::Programs,
    source: ConfigSource,
    overrides: CliOverrides,
) -> anyhow::Result<Running> {
    trim::return_large_blocks();
    let counters = Arc::new(Counters::default());
    let proxy = Proxy::new(config.clone(), program, counters)?;
    let tls = crate::tls::server::Frontends::build(&config.tls, None)
        .map_err(|e| anyhow::anyhow!("{}", e.join("\n")))?;
    if let (Some(shared), Some(c)) = (&proxy.cache.shared, &config.storage.shared) {
        // A node that restarts catches up with the fleet's invalidations before it serves
        // from its local tiers; Redis unreachable costs at most this wait.
        if !shared.feed.wait_synced(c.connect_timeout.0 * 2).await {
            tracing::warn!(
                "not in sync with the fleet's invalidation log yet; serving, and catching up when Redis answers"
            );
        }
    }
    let (shutdown, _) = watch::channel(false);
    let parking =
        park::Parking::new().context("cannot create the parked connections' epoll set")?;
    let live = Live::new(
        proxy.clone(),
        source,
        overrides,
        shutdown.subscribe(),
        tls,
        Box::new(Listen {
            parking: parking.clone(),
        }),
    );
    let mut tasks = JoinSet::new();
    let mut bound = Vec::new();
    for (addr, tls) in crate::reload::wanted(&config) {
        let listener = bind_listener(addr, config.server.listen_backlog, tls.as_deref())
            .with_context(|| format!("cannot listen on {addr}"))?;
        bound.push((addr, listener, tls));
    }
    // Unix sockets: bound (stale files removed) before anything accepts.
    let mut unix_bound = Vec::new();
    let mode = config.server.unix_mode().unwrap_or(0o660);
    for path in &config.server.listen_unix {
        let listener = unix::bind(path, mode)
            .with_context(|| format!("cannot listen on {}", path.display()))?;
        unix_bound.push((path.clone(), listener));
    }
    let admin = match config.server.admin {
        Some(addr) => {
            let listener = match crate::service::listeners::take(addr, &Role::Admin) {
                Some(handed) => handed
                    .set_nonblocking(true)
                    .and_then(|()| TcpListener::from_std(handed)),
                None => TcpListener::bind(addr).await,
            }
            .with_context(|| format!("cannot listen on admin address {addr}"))?;
            let bound = listener.local_addr()?;
            crate::service::handover::set_admin(addr, std::os::fd::AsRawFd::as_raw_fd(&listener));
            tasks.spawn(admin::serve(listener, live.clone(), shutdown.subscribe()));
            Some(bound)
        }
        None => None,
    };
    // Certificates kept by ACME answer from the first handshake on.
    crate::acme::sync(&live, &shutdown.subscribe());
    tasks.spawn(crate::acme::run(live.clone(), shutdown.subscribe()));
    let (mut listen, mut tls_listen) = (Vec::new(), Vec::new());
    for (addr, listener, tls) in bound {
        match tls {
            None => listen.push(listener.local_addr()?),
            Some(_) => tls_listen.push(listener.local_addr()?),
        }
        live.add_listener(addr, listener, tls);
    }
    {
        let sampled = live.clone();
        tasks.spawn(crate::history::start_sampler(
            proxy.shared.history.clone(),
            move || sampled.load().sample(),
            shutdown.subscribe(),
        ));
    }
    let mut unix_paths = Vec::new();
    for (i, (path, listener)) in unix_bound.into_iter().enumerate() {
        tasks.spawn(accept::accept_loop(
            unix::Unix { listener, index: i },
            live.clone(),
            shutdown.subscribe(),
        ));
        unix_paths.push(path);
    }
    // Sockets handed over (socket activation, `shellac upgrade`) that nothing took.
    crate::service::listeners::close_leftovers();
    live.sync_probes();
    tasks.spawn(sweep_bans(live.clone(), shutdown.subscribe()));
    tasks.spawn(trim::run(live.clone(), shutdown.subscribe()));
    tasks.spawn(park_task::run(parking, live.clone(), shutdown.subscribe()));
    tasks.spawn(crate::tls::watch::run(live.clone(), shutdown.subscribe()));
    Ok(Running {
        live,
        listen,
        tls: tls_listen,
        unix: unix_paths,
        admin,
        shutdown,
        tasks,
    })
}

impl Running {
    /// The current configuration's proxy.
    pub fn proxy(&self) -> Arc<Proxy> {
        self.live.load()
    }

    /// Stops accepting, lets requests in flight finish (at most `grace`), tells the fleet this
    /// node stopped, flushes the access log, then returns.
    pub async fn shutdown(mut self, grace: Duration) {
        let _ = self.shutdown.send(true);
        let shared_proxy = self.live.load();
        let shared = shared_proxy.shared.clone();
        let deadline = tokio::time::Instant::now() + grace;
        while shared.open_conns.load(Ordering::Relaxed) > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.tasks.abort_all();
        // A fleet node says it stopped: the others' invalidations stop waiting for it.
        if let (Some(fleet), Some(c)) = (
            &shared_proxy.cache.shared,
            &shared_proxy.config.storage.shared,
        ) {
            fleet.feed.leave(c.write_timeout.0 * 2).await;
        }
        unix::remove(&self.unix);
        self.live.stop_tasks();
        // Persist what the storage has pending (the disk tier seals its open region).
        let proxy = shared_proxy;
        let _ = tokio::task::spawn_blocking(move || proxy.cache.storage.close()).await;
        let recorder = shared.recorder.clone();
        let _ = tokio::task::spawn_blocking(move || recorder.close(Duration::from_secs(5))).await;
    }

    /// Reopens the access log (what SIGUSR1 does), e.g. after logrotate moved the file.
    pub fn reopen_logs(&self) {
        self.live.load().shared.recorder.reopen();
    }
}

/// The ban sweeper: walks the memory tier in the background (on the blocking pool) every
/// `invalidation.ban_sweep_interval` (of the configuration current at each turn), removing
/// banned objects and retiring old bans.
async fn sweep_bans(live: Arc<Live>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let interval = live.load().config.invalidation.ban_sweep_interval.0;
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
        let proxy = live.load();
        if proxy.cache.bans.is_empty() {
            continue;
        }
        let p = proxy.clone();
        if let Ok((removed, retired)) =
            tokio::task::spawn_blocking(move || p.cache.sweep_bans()).await
        {
            proxy.counters.ban_objects.add(removed as u64);
            proxy.counters.ban_retired.add(retired as u64);
        }
    }
}

/// Binds a client listener with `server.listen_backlog` as its accept queue (the kernel caps
/// it at `net.core.somaxconn`). SO_REUSEADDR as `TcpListener::bind` sets it, so a restart
/// binds again at once.
/// A socket handed over for `addr` (socket activation, `shellac upgrade`) is taken instead.
pub(crate) fn bind_listener(
    addr: SocketAddr,
    backlog: u32,
    tls: Option<&str>,
) -> std::io::Result<TcpListener> {
    let role = match tls {
        None => Role::Plain,
        Some(name) => Role::Tls(name.to_string()),
    };
    if let Some(handed) = crate::service::listeners::take(addr, &role) {
        handed.set_nonblocking(true)?;
        return TcpListener::from_std(handed);
    }
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// How a reload binds and accepts (`reload::Listen`): [`bind_listener`], `accept::accept_loop`
/// over a TCP listener (whose connections wait in `parking` while they send nothing).
struct Listen {
    parking: Arc<park::Parking>,
}

impl crate::reload::Listen for Listen {
    fn bind(
        &self,
        addr: SocketAddr,
        backlog: u32,
        tls: Option<&str>,
    ) -> std::io::Result<TcpListener> {
        bind_listener(addr, backlog, tls)
    }

    fn accept(
        &self,
        listener: TcpListener,
        configured: SocketAddr,
        live: Arc<Live>,
        tls: Option<Arc<str>>,
    ) -> tokio::task::AbortHandle {
        let shutdown = live.shutdown();
        let parking = self.parking.clone();
        let listener = accept::Tcp::new(listener, configured, parking, tls);
        tokio::spawn(accept::accept_loop(listener, live, shutdown)).abort_handle()
    }
}
