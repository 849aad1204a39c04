//! The small trait the shared tier talks to Redis through ([`Remote`]: a script or a command
//! routed by its first key, replies in our own [`Reply`]), and its implementation over
//! redis-rs's cluster client (MOVED/ASK, failovers and slot refreshes are the client's job).
//!
//! Deadlines are not here: the tier puts one around every operation (`mod.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use redis::aio::ConnectionLike;
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;

use crate::tls::stamps::Stamps;

/// A reply, whatever client produced it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Nil,
    Int(i64),
    Data(Bytes),
    Array(Vec<Reply>),
}

impl Reply {
    pub fn int(&self) -> Option<i64> {
        match self {
            Reply::Int(i) => Some(*i),
            Reply::Data(d) => std::str::from_utf8(d).ok()?.parse().ok(),
            _ => None,
        }
    }

    pub fn data(self) -> Option<Bytes> {
        match self {
            Reply::Data(d) => Some(d),
            _ => None,
        }
    }

    pub fn text(&self) -> Option<&str> {
        match self {
            Reply::Data(d) => std::str::from_utf8(d).ok(),
            _ => None,
        }
    }

    pub fn array(self) -> Vec<Reply> {
        match self {
            Reply::Array(a) => a,
            Reply::Nil => Vec::new(),
            other => vec![other],
        }
    }
}

/// Why an operation failed (the tier counts it and tells the breaker).
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("not connected to the Redis cluster yet")]
    NotConnected,
    #[error("{0}")]
    Redis(String),
    #[error("unexpected reply")]
    Reply,
}

pub type RemoteFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, RemoteError>> + Send + 'a>>;

/// A Lua script the tier runs; its keys are always in one hash slot.
pub struct Script {
    pub name: &'static str,
    pub source: &'static str,
}

/// What the shared tier needs from a Redis client.
pub trait Remote: Send + Sync + 'static {
    /// Runs `script` with `keys` (one hash slot) and `args` on the master serving them.
    fn eval<'a>(
        &'a self,
        script: &'static Script,
        keys: Vec<Vec<u8>>,
        args: Vec<Vec<u8>>,
    ) -> RemoteFuture<'a, Reply>;
    /// Runs one command (`args[0]` is its name), routed by its first key.
    fn command<'a>(&'a self, args: Vec<Vec<u8>>) -> RemoteFuture<'a, Reply>;
    /// Subscribes to a sharded pub/sub channel (kept across reconnects by the client).
    fn subscribe<'a>(&'a self, channel: Vec<u8>) -> RemoteFuture<'a, ()>;
    /// Bumped when the client is replaced by a new one (renewed TLS files): subscriptions
    /// must be made again on it.
    fn generation(&self) -> u64 {
        0
    }
}

/// How to reach the cluster.
pub struct Options {
    pub nodes: Vec<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    /// TLS to every node (`[storage.shared] tls`); its files are read at each attempt.
    pub tls: Option<crate::config::SharedTls>,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
}

/// redis-rs's cluster client behind [`Remote`]. Connects in the background: until the first
/// connection succeeds every operation fails at once with [`RemoteError::NotConnected`].
pub struct RedisRemote {
    conn: arc_swap::ArcSwapOption<ClusterConnection>,
    /// Connections made (a new one replaces the old when the TLS files change).
    generation: AtomicU64,
    scripts: Mutex<HashMap<&'static str, Arc<redis::Script>>>,
}

impl RedisRemote {
    /// Starts connecting (retrying every `retry` until it succeeds; each failed attempt is
    /// logged and counted, `shared_connect_error`) and returns at once.
    /// Sharded pub/sub messages (channel, payload) arrive on the returned receiver.
    pub fn start(
        options: Options,
        retry: Duration,
        counters: Arc<crate::stats::Counters>,
        refusals: Arc<super::auth::Refusals>,
    ) -> (
        Arc<RedisRemote>,
        tokio::sync::mpsc::UnboundedReceiver<(Bytes, Bytes)>,
    ) {
        let remote = Arc::new(RedisRemote {
            conn: arc_swap::ArcSwapOption::empty(),
            generation: AtomicU64::new(0),
            scripts: Mutex::new(HashMap::new()),
        });
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let weak = Arc::downgrade(&remote);
        tokio::spawn(async move {
            if options.tls.as_ref().is_some_and(|t| !t.verify_name) {
                tracing::warn!(
                    "storage.shared.tls.verify_name = false: the Redis nodes' certificates are checked against `ca` but not for their names; any certificate that CA signed is accepted for any node"
                );
            }
            let files = options.tls.as_ref().map(tls_files).unwrap_or_default();
            // A cluster that stays unreachable is logged when it starts and then once a
            // minute (with the attempts since), not at every attempt.
            let (mut warned_ms, mut unwarned) = (None::<u64>, 0u64);
            loop {
                let stamps = Stamps::take(&files);
                match connect(&options, tx.clone()).await {
                    Ok(conn) => {
                        if let Some(remote) = weak.upgrade() {
                            remote.conn.store(Some(Arc::new(conn)));
                            remote.generation.fetch_add(1, Ordering::AcqRel);
                            tracing::info!(nodes = ?options.nodes, tls = options.tls.is_some(), "connected to the Redis cluster (shared tier)");
                            refusals.accepted();
                        }
                        if !files.is_empty() {
                            renew(weak, options, tx, counters, stamps).await;
                        }
                        return;
                    }
                    Err(e) => {
                        counters.shared_connect_error.inc();
                        if let Some(refusal) =
                            super::auth::classify(&e, options.username.as_deref())
                        {
                            counters.shared_auth_error.inc();
                            refusals.report(refusal, crate::clock::now_ms());
                        } else if warned_ms
                            .is_some_and(|at| crate::clock::now_ms() < at + CONNECT_WARN_EVERY)
                        {
                            unwarned += 1;
                            tracing::debug!(error = %e, "cannot connect to the Redis cluster yet");
                        } else if options.tls.is_some() && super::tls::looks_like_tls(&e) {
                            tracing::warn!(nodes = ?options.nodes, error = %e, attempts = unwarned + 1, "TLS with the Redis cluster failed (check storage.shared.tls: the CA, the names in the nodes' certificates, the client certificate); serving without the shared tier");
                            (warned_ms, unwarned) = (Some(crate::clock::now_ms()), 0);
                        } else {
                            tracing::warn!(nodes = ?options.nodes, error = %e, attempts = unwarned + 1, "cannot connect to the Redis cluster yet; serving without the shared tier (logged again at most once a minute)");
                            (warned_ms, unwarned) = (Some(crate::clock::now_ms()), 0);
                        }
                    }
                }
                if weak.strong_count() == 0 {
                    return;
                }
                tokio::time::sleep(retry).await;
            }
        });
        (remote, rx)
    }

    /// How many connections were made (the first is 1).
    pub fn connections(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn conn(&self) -> Result<ClusterConnection, RemoteError> {
        self.conn
            .load()
            .as_deref()
            .cloned()
            .ok_or(RemoteError::NotConnected)
    }

    fn script(&self, script: &'static Script) -> Arc<redis::Script> {
        let mut map = self.scripts.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(script.name)
            .or_insert_with(|| Arc::new(redis::Script::new(script.source)))
            .clone()
    }
}

/// How often an unreachable cluster is logged again.
const CONNECT_WARN_EVERY: u64 = 60_000;

/// How often the TLS files are checked for changes once connected.
const RENEW_CHECK: Duration = Duration::from_secs(5);

/// The files `[storage.shared] tls` names.
fn tls_files(t: &crate::config::SharedTls) -> Vec<std::path::PathBuf> {
    [&t.ca, &t.cert, &t.key]
        .into_iter()
        .flatten()
        .cloned()
        .collect()
}

/// Once connected over TLS: when the CA, certificate or key files change (a renewed client
/// certificate, a rotated CA), connects anew with them and swaps the new connection in;
/// operations in flight finish on the old one. Files that do not load, or a cluster that
/// refuses them, keep the current connection (logged, `shared_connect_error`) until the
/// files change again.
async fn renew(
    weak: std::sync::Weak<RedisRemote>,
    options: Options,
    tx: tokio::sync::mpsc::UnboundedSender<(Bytes, Bytes)>,
    counters: Arc<crate::stats::Counters>,
    mut stamps: Stamps,
) {
    let files = options.tls.as_ref().map(tls_files).unwrap_or_default();
    loop {
        tokio::time::sleep(RENEW_CHECK).await;
        if weak.strong_count() == 0 {
            return;
        }
        if !stamps.changed() {
            continue;
        }
        stamps = Stamps::take(&files);
        match connect(&options, tx.clone()).await {
            Ok(conn) => {
                let Some(remote) = weak.upgrade() else {
                    return;
                };
                remote.conn.store(Some(Arc::new(conn)));
                remote.generation.fetch_add(1, Ordering::AcqRel);
                tracing::info!(nodes = ?options.nodes, "the TLS files of storage.shared changed: reconnected to the Redis cluster with them");
            }
            Err(e) => {
                counters.shared_connect_error.inc();
                tracing::warn!(nodes = ?options.nodes, error = %e, "the TLS files of storage.shared changed but cannot be used; keeping the current connection");
            }
        }
    }
}

/// `shellac check --online`: connects to the cluster as the shared tier would (the file's
/// nodes, credentials and TLS) and says what refused or could not be reached; a refusal of
/// the credentials in the words of [`super::auth`].
pub async fn probe(options: &Options) -> Result<(), String> {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let limit = options.connect_timeout * 2 + Duration::from_secs(1);
    match tokio::time::timeout(limit, connect(options, tx)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(
            match super::auth::classify(&e, options.username.as_deref()) {
                Some(r) => format!("{} (Redis said: {})", r.fix, r.error),
                None => e,
            },
        ),
        Err(_) => Err(format!("no connection within {}s", limit.as_secs())),
    }
}

async fn connect(
    options: &Options,
    tx: tokio::sync::mpsc::UnboundedSender<(Bytes, Bytes)>,
) -> Result<ClusterConnection, String> {
    let scheme = if options.tls.is_some() {
        "rediss"
    } else {
        "redis"
    };
    let nodes: Vec<String> = options
        .nodes
        .iter()
        .map(|n| format!("{scheme}://{n}/?protocol=resp3"))
        .collect();
    let mut builder = ClusterClientBuilder::new(nodes)
        .connection_timeout(options.connect_timeout)
        .response_timeout(options.response_timeout)
        .retries(2)
        .min_retry_wait(5)
        .max_retry_wait(100)
        .use_protocol(redis::ProtocolVersion::RESP3)
        // The client's default leaves Nagle's algorithm on: small commands behind another
        // unacknowledged one waited for a delayed ACK (up to 40 ms; the brief's incident 2).
        .tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true))
        .push_sender(move |push: redis::PushInfo| {
            if push.kind == redis::PushKind::SMessage
                && let [channel, payload] = &push.data[..]
                && let (Some(c), Some(p)) = (bulk(channel), bulk(payload))
            {
                let _ = tx.send((c, p));
            }
            Ok::<(), ()>(())
        });
    if let Some(u) = &options.username {
        builder = builder.username(u);
    }
    if let Some(p) = &options.password {
        builder = builder.password(p);
    }
    if let Some(t) = &options.tls {
        // Read again at each attempt: a file fixed after start-up is picked up by the retry.
        let certs = super::tls::load(t).map_err(|e| e.message)?;
        // The client builds its rustls configuration with the process's default provider:
        // make that ours (*ring*, our cipher suites) before the first handshake.
        let _ = rustls::crypto::CryptoProvider::install_default((*crate::tls::provider()).clone());
        builder = builder
            .certs(certs)
            .danger_accept_invalid_hostnames(!t.verify_name);
    }
    let client = builder.build().map_err(|e| e.to_string())?;
    client
        .get_async_connection()
        .await
        .map_err(|e| e.to_string())
}

fn bulk(v: &redis::Value) -> Option<Bytes> {
    match v {
        redis::Value::BulkString(b) => Some(Bytes::copy_from_slice(b)),
        redis::Value::SimpleString(s) => Some(Bytes::copy_from_slice(s.as_bytes())),
        _ => None,
    }
}

fn reply(v: redis::Value) -> Result<Reply, RemoteError> {
    use redis::Value as V;
    Ok(match v {
        V::Nil => Reply::Nil,
        V::Int(i) => Reply::Int(i),
        V::Boolean(b) => Reply::Int(i64::from(b)),
        V::BulkString(b) => Reply::Data(Bytes::from(b)),
        V::SimpleString(s) => Reply::Data(Bytes::from(s)),
        V::Okay => Reply::Data(Bytes::from_static(b"OK")),
        V::Double(d) => Reply::Data(Bytes::from(d.to_string())),
        V::VerbatimString { text, .. } => Reply::Data(Bytes::from(text)),
        V::Array(a) | V::Set(a) => {
            Reply::Array(a.into_iter().map(reply).collect::<Result<_, _>>()?)
        }
        V::Map(m) => Reply::Array(
            m.into_iter()
                .flat_map(|(k, v)| [reply(k), reply(v)])
                .collect::<Result<_, _>>()?,
        ),
        V::Attribute { data, .. } => reply(*data)?,
        V::ServerError(e) => return Err(RemoteError::Redis(e.to_string())),
        _ => return Err(RemoteError::Reply),
    })
}

fn failed(e: redis::RedisError) -> RemoteError {
    RemoteError::Redis(e.to_string())
}

impl Remote for RedisRemote {
    fn eval<'a>(
        &'a self,
        script: &'static Script,
        keys: Vec<Vec<u8>>,
        args: Vec<Vec<u8>>,
    ) -> RemoteFuture<'a, Reply> {
        Box::pin(async move {
            let mut conn = self.conn()?;
            let s = self.script(script);
            let mut call = s.prepare_invoke();
            for k in &keys {
                call.key(&k[..]);
            }
            for a in &args {
                call.arg(&a[..]);
            }
            let v: redis::Value = call.invoke_async(&mut conn).await.map_err(failed)?;
            reply(v)
        })
    }

    fn command<'a>(&'a self, args: Vec<Vec<u8>>) -> RemoteFuture<'a, Reply> {
        Box::pin(async move {
            let mut conn = self.conn()?;
            let Some((name, rest)) = args.split_first() else {
                return Err(RemoteError::Reply);
            };
            let mut cmd = redis::cmd(std::str::from_utf8(name).map_err(|_| RemoteError::Reply)?);
            for a in rest {
                cmd.arg(&a[..]);
            }
            let v = conn.req_packed_command(&cmd).await.map_err(failed)?;
            reply(v)
        })
    }

    fn subscribe<'a>(&'a self, channel: Vec<u8>) -> RemoteFuture<'a, ()> {
        Box::pin(async move {
            let mut conn = self.conn()?;
            conn.ssubscribe(&channel[..]).await.map_err(failed)
        })
    }

    fn generation(&self) -> u64 {
        self.connections()
    }
}
