//! Client connections: listeners, HTTP/1.1 keep-alive, idle and header-read timeouts, graceful
//! shutdown. Hands each parsed request to the [`Proxy`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admin;
use crate::clock::now_ms;
use crate::config::{CliOverrides, Config};
use crate::proxy::{Process, Proxy};
use crate::reload::{ConfigSource, Live};
use crate::service::listeners::Role;
use crate::stats::Counters;

mod h1;
pub(crate) mod h2;
mod local;
mod near;
pub(crate) mod park;
mod proxy_header;
mod refuse;
mod tls_conn;
mod trim;
mod tunnel;
mod unix;

pub(crate) use tls_conn::TlsStart;

use h1::serve_session;

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
        tasks.spawn(unix::accept_loop(
            listener,
            i,
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
    tasks.spawn(park::run(parking, live.clone(), shutdown.subscribe()));
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

    /// Stops accepting, lets requests in flight finish (at most `grace`), flushes the access
    /// log, then returns.
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

/// How a reload binds and accepts (`reload::Listen`): [`bind_listener`], [`accept_loop`]
/// (whose connections wait in `parking` while they send nothing).
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
        tokio::spawn(accept_loop(
            listener, configured, live, parking, shutdown, tls,
        ))
        .abort_handle()
    }
}

/// Accepts client connections on `listener`, configured as `configured`; `tls`: the `[[tls]]`
/// listener it belongs to (its certificates and settings are those current at each accept).
pub(crate) async fn accept_loop(
    listener: TcpListener,
    configured: SocketAddr,
    live: Arc<Live>,
    parking: Arc<park::Parking>,
    mut shutdown: watch::Receiver<bool>,
    tls: Option<Arc<str>>,
) {
    let lingering = refuse::Lingering::default();
    // Every connection's local address when the listener is bound to one IP (VCL's
    // `server.ip`): known once here, not asked of each socket.
    let bound = local::specific(listener.local_addr().ok());
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                // Connection settings come from the configuration current at accept time.
                let proxy = live.load();
                proxy.counters.client_conn.inc();
                proxy.session_begins();
                let max_conns = proxy.config.server.max_connections as u64;
                let open = proxy.shared.open_conns.fetch_add(1, Ordering::Relaxed);
                if max_conns > 0 && open >= max_conns {
                    proxy.shared.open_conns.fetch_sub(1, Ordering::Relaxed);
                    refuse::refuse(stream, peer, &proxy, &lingering);
                    continue;
                }
                let tls = match &tls {
                    None => None,
                    Some(name) => match live.tls().get(name) {
                        Some(frontend) => Some(TlsStart::Handshake(frontend)),
                        // Removed by a reload that has not stopped this loop yet.
                        None => {
                            proxy.shared.open_conns.fetch_sub(1, Ordering::Relaxed);
                            continue;
                        }
                    },
                };
                // A client a short round trip away gets a send buffer that keeps large
                // responses warm in the caches (server/near.rs).
                let server = &proxy.config.server;
                if near::tune(&stream, server.near_send_buffer.0, server.near_rtt.0) {
                    proxy.counters.client_conn_near.inc();
                }
                // `[http2] h2c` for this listener, as configured at accept time.
                let h2c = tls.is_none() && proxy.config.http2.h2c.on(configured);
                // Behind a load balancer: the PROXY protocol header first, read by a task of
                // its own; the session then starts with the client address it names.
                if server.proxy_protocol.on(configured) {
                    if !crate::config::proxy_protocol::trusted(
                        &server.proxy_protocol_from,
                        peer.ip(),
                    ) {
                        proxy_header::Refused::Untrusted.count(&proxy.counters);
                        proxy.shared.open_conns.fetch_sub(1, Ordering::Relaxed);
                        continue;
                    }
                    let _ = stream.set_nodelay(server.tcp_nodelay);
                    let open = Arc::new(OpenConn(proxy.shared.clone()));
                    let conn = Accepted {
                        live: live.clone(),
                        parking: parking.clone(),
                        shutdown: shutdown.clone(),
                        open,
                        since: now_ms(),
                        tls,
                        h2c,
                        bound,
                    };
                    tokio::spawn(behind_proxy(stream, peer, conn));
                    continue;
                }
                // A connection that has not sent a byte yet waits as a socket alone (no task,
                // no session) until it does or `header_read_timeout` passes: a flood of silent
                // connections costs a parking slot each, not ~11.5 KiB.
                if !has_bytes(&stream) {
                    let _ = stream.set_nodelay(proxy.config.server.tcp_nodelay);
                    let now = now_ms();
                    let wait = match &tls {
                        Some(TlsStart::Handshake(f)) => f.handshake_timeout,
                        _ => proxy.config.server.header_read_timeout.0,
                    };
                    let deadline = now.saturating_add(ms(wait));
                    let open = Arc::new(OpenConn(proxy.shared.clone()));
                    parking.park(stream, peer, open, deadline, Some(now), tls, h2c);
                    continue;
                }
                tokio::spawn(client_connection(
                    stream,
                    peer,
                    live.clone(),
                    parking.clone(),
                    shutdown.clone(),
                    None,
                    None,
                    tls,
                    h2c,
                    bound,
                ));
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                live.load().counters.client_accept_error.inc();
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A connection accepted on a `server.proxy_protocol` listener, waiting for its header.
struct Accepted {
    live: Arc<Live>,
    parking: Arc<park::Parking>,
    shutdown: watch::Receiver<bool>,
    open: Arc<OpenConn>,
    since: u64,
    tls: Option<TlsStart>,
    h2c: bool,
    bound: Option<SocketAddr>,
}

/// Reads the PROXY protocol header of a connection accepted from `peer` (within
/// `header_read_timeout` of the accept), then serves it as the client the header names; a
/// connection without a valid header is closed and counted.
async fn behind_proxy(mut stream: TcpStream, peer: SocketAddr, c: Accepted) {
    let timeout = c.live.load().config.server.header_read_timeout.0;
    let deadline = c.since.saturating_add(ms(timeout));
    let client = match proxy_header::read(&mut stream, peer, deadline).await {
        Ok(client) => client,
        Err(why) => {
            why.count(&c.live.load().counters);
            return;
        }
    };
    c.live.load().counters.client_proxy.inc();
    client_connection(
        stream,
        client,
        c.live,
        c.parking,
        c.shutdown,
        Some(c.open),
        Some(c.since),
        c.tls,
        c.h2c,
        c.bound,
    )
    .await;
}

/// Decrements the open-connection gauge however the connection task ends (incremented by the
/// accept loop, which counts it against `max_connections`); a tunnel keeps it alive.
pub(super) struct OpenConn(Arc<Process>);

impl Drop for OpenConn {
    fn drop(&mut self) {
        self.0.open_conns.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A client connection from accept (or from the parking lot, `open` then carried over) until
/// it closes or is released: one HTTP session (hyper behind the strict gate). After
/// `idle_release` without a request the session is freed and the socket parked
/// ([`park::Parking`]) until the next request arrives, `idle_timeout` ends it or Shellac
/// shuts down; the next request starts a new task.
/// Whether the client has sent anything yet (or closed): a non-blocking peek of one byte.
/// An error other than "nothing yet" counts as something, for the session to see.
fn has_bytes(stream: &TcpStream) -> bool {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    match socket2::SockRef::from(stream).peek(&mut byte) {
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        Ok(_) => true,
    }
}

/// `new_since`: a new connection resumed from the parking lot on its first byte, accepted at
/// this time (its request head is due `header_read_timeout` after it). `tls`: a connection
/// on a TLS listener (server/tls_conn.rs runs it). `h2c`: a new connection on a cleartext
/// listener that accepts HTTP/2 with prior knowledge. `bound`: the listener's address when it
/// is bound to one IP (`None` from the parking lot: then asked of the socket if VCL needs it).
// Each argument is a separate fact about the connection, from the accept loop or the lot.
#[allow(clippy::too_many_arguments)]
async fn client_connection(
    stream: TcpStream,
    peer: SocketAddr,
    live: Arc<Live>,
    parking: Arc<park::Parking>,
    shutdown: watch::Receiver<bool>,
    open: Option<Arc<OpenConn>>,
    new_since: Option<u64>,
    tls: Option<TlsStart>,
    h2c: bool,
    bound: Option<SocketAddr>,
) {
    let local = local::ConnLocal::new(&stream, bound);
    // Connection settings come from the configuration current when a session starts.
    let cfg = live.load().config.server.clone();
    let resumed = open.is_some();
    let open = match open {
        Some(open) => open,
        None => {
            let _ = stream.set_nodelay(cfg.tcp_nodelay);
            // Shared with a tunnel that outlives this task (an upgraded connection).
            Arc::new(OpenConn(live.load().shared.clone()))
        }
    };
    // The TLS and HTTP/2 sessions are boxed too (as `serve_session` below): this task's
    // future is as large as its largest branch, and an idle HTTP/2 connection would
    // otherwise carry the TLS branch's size (bench/RESULTS.md, idle HTTP/2 memory).
    if let Some(start) = tls {
        let released = Box::pin(tls_conn::run(
            stream,
            peer,
            live.clone(),
            shutdown,
            open,
            new_since,
            start,
            local,
        ))
        .await;
        if let Some(r) = released
            && parking.park(r.socket, peer, r.open, r.deadline, None, Some(r.tls), false)
        {
            live.load().counters.client_idle_released.inc();
        }
        return;
    }
    // A new connection on a listener that accepts h2c: HTTP/2 if it starts with the preface.
    if h2c && (new_since.is_some() || !resumed) {
        let since = new_since.unwrap_or_else(now_ms);
        match sniff_preface(&stream, since.saturating_add(ms(cfg.header_read_timeout.0))).await {
            Some(true) => {
                Box::pin(h2::serve(stream, peer, live.clone(), shutdown, None, local)).await;
                return;
            }
            Some(false) => {}
            None => {
                live.load().counters.client_header_timeout.inc();
                return;
            }
        }
    }
    // Boxed: this task's future stays small, so spawning it (from accept or the parking lot)
    // moves a few hundred bytes, not the session's state (callgrind, a new session per
    // request: memcpy −1,350 instructions per request, −300 net of the box's allocation).
    let session = Box::pin(serve_session(
        stream, peer, &live, &open, &cfg, shutdown, new_since, None, local,
    ));
    let Some((released, idle_since)) = session.await else {
        return;
    };
    let deadline = idle_since.saturating_add(ms(cfg.idle_timeout.0));
    // The gauge (in park) before the counter: whoever sees the count sees the gauge too.
    if parking.park(released, peer, open, deadline, None, None, false) {
        live.load().counters.client_idle_released.inc();
    }
}

/// Whether a new connection's first bytes are the HTTP/2 preface (`Some(true)`), something
/// else (`Some(false)`: HTTP/1.1, or the client closed), or only a prefix of it until
/// `deadline` (ms; `None`). Peeks, so the session that follows reads every byte.
async fn sniff_preface(stream: &TcpStream, deadline: u64) -> Option<bool> {
    let mut buf = [0u8; h2::PREFACE.len()];
    let mut pause = 2;
    loop {
        let n = match tokio::time::timeout(
            Duration::from_millis(deadline.saturating_sub(now_ms()).max(1)),
            stream.peek(&mut buf),
        )
        .await
        {
            Ok(Ok(n)) => n,
            Ok(Err(_)) => return Some(false),
            Err(_) => return None,
        };
        if n == 0 || buf[..n] != h2::PREFACE[..n] {
            return Some(false);
        }
        if n == buf.len() {
            return Some(true);
        }
        // A preface split over segments (rare): peek again a little later; a peek does not
        // consume, so waiting for readiness would return at once.
        if now_ms() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(pause)).await;
        pause = (pause * 2).min(200);
    }
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}
