//! The shared tier: a cache every node of a fleet reads and fills, on Redis Cluster, below the
//! memory and disk tiers (`[storage.shared]`).
//!
//! - A request's local miss asks it (only the local leader of a key does, `proxy/fsm.rs`)
//!   before the origin: [`SharedTier::lookup`], which also takes the fleet lease on fetching
//!   the key or waits, bounded by `lease_timeout`, for the node that holds it.
//! - A node that fetched a cacheable object writes it once, in the background
//!   ([`SharedTier::share`]): chunks first, then the metadata committed by a script that
//!   refuses a fill that raced a purge (`scripts.rs`). Objects over `max_object_size` and
//!   bodies on disk stay local.
//! - Invalidations are applied here and on every other node (`feed.rs`).
//!
//! Every operation has a deadline and goes through the circuit breaker (`breaker.rs`):
//! Redis slow, failing over or gone costs a request at most a deadline per operation it waits
//! for (a lookup; the chunks of a large body; a second lookup for a URL with `Vary`), then
//! nothing while the breaker is open — the node works as a single Shellac and recovers by
//! itself.

pub mod auth;
pub mod breaker;
mod broadcast;
mod entry;
pub mod feed;
pub mod layout;
pub mod remote;
pub mod scripts;
pub mod tls;
mod writer;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderName;

use self::breaker::{Breaker, Permit};
use self::feed::{Feed, Position};
use self::layout::UrlKeys;
use self::remote::{Remote, RemoteError, Reply};
use super::{CacheKey, Object};
use crate::config::SharedConfig;
use crate::stats::Counters;

/// What the shared tier holds for a key.
pub enum Found {
    /// A complete object (a hit, or the copy another node finished while we waited).
    Object(Arc<Object>),
    /// The URL varies on these fields: look up the request's variant instead.
    Varies(Vec<HeaderName>),
    /// Nothing usable: fetch from the origin, holding the fleet lease if there is one.
    Miss(Option<Ticket>),
}

/// The fleet lease on fetching one key: released (or left as `pass`) when the fetch ends;
/// dropped unused, it is released in the background.
pub struct Ticket {
    tier: Arc<SharedTier>,
    key: Vec<u8>,
    token: String,
    done: bool,
}

impl Ticket {
    /// The lease is handed to the commit (which releases it).
    pub(super) fn token(mut self) -> String {
        self.done = true;
        std::mem::take(&mut self.token)
    }

    /// The answer was not cacheable: other nodes fetch at once for `hit_for_miss`.
    pub fn pass(mut self, hit_for_miss: Duration) {
        self.done = true;
        let (tier, key, token) = (
            self.tier.clone(),
            std::mem::take(&mut self.key),
            std::mem::take(&mut self.token),
        );
        let ms = hit_for_miss.as_millis().clamp(1, 600_000) as u64;
        spawn(async move { tier.release(key, token, ms).await });
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.done {
            let (tier, key, token) = (
                self.tier.clone(),
                std::mem::take(&mut self.key),
                std::mem::take(&mut self.token),
            );
            spawn(async move { tier.release(key, token, 0).await });
        }
    }
}

fn spawn(f: impl Future<Output = ()> + Send + 'static) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(f);
    }
}

/// The shared tier of this node.
pub struct SharedTier {
    remote: Arc<dyn Remote>,
    pub breaker: Breaker,
    pub counters: Arc<Counters>,
    prefix: String,
    pub node: String,
    max_object: u64,
    read_timeout: Duration,
    write_timeout: Duration,
    lease_timeout: Duration,
    pub confirm_timeout: Duration,
    pub log_length: u64,
    writes: tokio::sync::mpsc::Sender<writer::Write>,
    /// The invalidation feed (positions, lag, the cache it applies to).
    pub feed: Feed,
    /// The cluster's refusals of the credentials or permissions (`auth.rs`).
    pub refusals: Arc<auth::Refusals>,
    username: Option<String>,
}

impl SharedTier {
    /// The tier for `config`, connecting in the background (the breaker stays open until the
    /// first connection). Needs a Tokio runtime.
    pub fn start(config: &SharedConfig, node: String, counters: Arc<Counters>) -> Arc<SharedTier> {
        let refusals = Arc::new(auth::Refusals::default());
        let (remote, messages) = remote::RedisRemote::start(
            remote::Options {
                nodes: config.nodes.clone(),
                username: config.username.clone(),
                password: config.password.clone(),
                tls: config.tls.clone(),
                connect_timeout: config.connect_timeout.0,
                response_timeout: config.write_timeout.0,
            },
            config.breaker_cooldown.0,
            counters.clone(),
            refusals.clone(),
        );
        let tier = SharedTier::build(config, node, counters, remote, refusals);
        feed::spawn(tier.clone(), messages);
        tier
    }

    #[cfg(test)]
    fn with_remote(
        config: &SharedConfig,
        node: String,
        counters: Arc<Counters>,
        remote: Arc<dyn Remote>,
    ) -> Arc<SharedTier> {
        SharedTier::build(config, node, counters, remote, Arc::default())
    }

    fn build(
        config: &SharedConfig,
        node: String,
        counters: Arc<Counters>,
        remote: Arc<dyn Remote>,
        refusals: Arc<auth::Refusals>,
    ) -> Arc<SharedTier> {
        let (tx, rx) = tokio::sync::mpsc::channel(writer::WRITE_QUEUE);
        let tier = Arc::new(SharedTier {
            remote,
            breaker: Breaker::new(
                config.breaker_threshold,
                config.breaker_cooldown.0.as_millis() as u64,
            ),
            counters,
            prefix: config.key_prefix.clone(),
            feed: Feed::new(&config.key_prefix),
            node,
            max_object: config.max_object_size.0,
            read_timeout: config.read_timeout.0,
            write_timeout: config.write_timeout.0,
            lease_timeout: config.lease_timeout.0,
            confirm_timeout: config.confirm_timeout.0,
            log_length: config.log_length,
            writes: tx,
            refusals,
            username: config.username.clone(),
        });
        tier.breaker.open_now(crate::clock::now_ms());
        tokio::spawn(writer::writer(Arc::downgrade(&tier), rx));
        tier
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `max_object_size`: larger objects stay in the node's own tiers.
    pub fn max_object_size(&self) -> u64 {
        self.max_object
    }

    /// Runs `op` under a deadline and the breaker; None when skipped, failed or late (counted).
    pub(crate) async fn call<T>(
        &self,
        deadline: Duration,
        op: impl Future<Output = Result<T, RemoteError>>,
    ) -> Option<T> {
        if self.breaker.permit(crate::clock::now_ms()) == Permit::Refused {
            self.counters.shared_skipped.inc();
            return None;
        }
        match tokio::time::timeout(deadline, op).await {
            Ok(Ok(v)) => {
                self.breaker.success();
                Some(v)
            }
            Ok(Err(RemoteError::NotConnected)) => {
                self.counters.shared_skipped.inc();
                self.breaker.not_ready(crate::clock::now_ms());
                None
            }
            Ok(Err(e)) => {
                let why = e.to_string();
                match auth::classify(&why, self.username.as_deref()) {
                    Some(refusal) => {
                        self.counters.shared_auth_error.inc();
                        self.refusals.report(refusal, crate::clock::now_ms());
                    }
                    None => {
                        self.counters.shared_error.inc();
                        tracing::debug!(error = %e, "shared tier operation failed");
                    }
                }
                self.failed(&why);
                None
            }
            Err(_) => {
                self.counters.shared_timeout.inc();
                self.failed("no answer within the deadline");
                None
            }
        }
    }

    /// One more failure in a row; `why` (the last one's reason) is logged if it opens the
    /// breaker — a TLS handshake refused after a reconnect shows there.
    fn failed(&self, why: &str) {
        if self.breaker.failure(crate::clock::now_ms()) {
            self.counters.shared_breaker_open.inc();
            tracing::warn!(
                last_error = why,
                "shared tier circuit breaker open: serving without it for a while"
            );
        }
    }

    /// Looks `key` up (`primary` is its URL). With `lease`, a miss takes the fleet lease on
    /// fetching it, or waits for the node holding it — at most `lease_timeout`, polling.
    pub async fn lookup(self: &Arc<Self>, key: &CacheKey, lease: bool) -> Found {
        let keys = UrlKeys::new(&self.prefix, &key.primary());
        let token = if lease {
            format!("{}:{:x}", self.node, rand_u64())
        } else {
            String::new()
        };
        let started = Instant::now();
        let mut pause = Duration::from_millis(2);
        let mut waited = false;
        loop {
            let args = vec![
                keys.base(),
                format!("{:x}", key.variant).into_bytes(),
                token.clone().into_bytes(),
                self.lease_timeout
                    .as_millis()
                    .max(1)
                    .to_string()
                    .into_bytes(),
                if key.variant == 0 {
                    b"1".to_vec()
                } else {
                    b"0".to_vec()
                },
            ];
            let reply = self
                .call(
                    self.read_timeout,
                    self.remote.eval(&scripts::LOOKUP, vec![keys.index()], args),
                )
                .await;
            let Some(reply) = reply else {
                return Found::Miss(None);
            };
            let mut parts = reply.array().into_iter();
            let (meta, names, word, soft) =
                (parts.next(), parts.next(), parts.next(), parts.next());
            let word = word.as_ref().and_then(Reply::text).unwrap_or("");
            match word {
                "hit" => {
                    let soft = soft
                        .and_then(|s| s.int())
                        .and_then(|s| u64::try_from(s).ok());
                    let record = meta.and_then(Reply::data);
                    if let Some(object) = self.read(&keys, key, record, soft).await {
                        if waited {
                            self.counters.shared_lease_waited_hit.inc();
                        }
                        return Found::Object(Arc::new(object));
                    }
                    return Found::Miss(None);
                }
                "vary" => {
                    let names = names
                        .and_then(|n| n.data())
                        .map(|n| parse_names(&n))
                        .unwrap_or_default();
                    if names.is_empty() {
                        return Found::Miss(None);
                    }
                    return Found::Varies(names);
                }
                "lease" => {
                    self.counters.shared_lease.inc();
                    self.counters.shared_miss.inc();
                    return Found::Miss(Some(Ticket {
                        tier: self.clone(),
                        key: keys.lease(key.variant),
                        token,
                        done: false,
                    }));
                }
                "held" if started.elapsed() + pause < self.lease_timeout => {
                    if !waited {
                        waited = true;
                        self.counters.shared_lease_wait.inc();
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(25));
                }
                "held" => {
                    self.counters.shared_lease_timeout.inc();
                    self.counters.shared_miss.inc();
                    return Found::Miss(None);
                }
                _ => {
                    self.counters.shared_miss.inc();
                    return Found::Miss(None);
                }
            }
        }
    }

    /// The object a metadata record names, its chunks read in one round trip (same slot).
    /// `soft`: the URL's last soft purge (wall ms), which makes a copy stored before it stale.
    async fn read(
        &self,
        keys: &UrlKeys,
        key: &CacheKey,
        record: Option<Bytes>,
        soft: Option<u64>,
    ) -> Option<Object> {
        let mut meta = match layout::decode(key, record?) {
            Ok(meta) => meta,
            Err(why) => {
                tracing::debug!(%key, ?why, "shared record not used");
                self.counters.shared_refused.inc();
                return None;
            }
        };
        if let Some(mark) = soft {
            meta.soft_purged(mark);
        }
        // Purged here while Redis could not remove this copy (the purge waits in the outbox).
        match self.feed.held(&key.primary()) {
            Some((mark, true)) => meta.soft_purged(mark),
            Some((mark, false)) if meta.stored_ms() <= mark => {
                self.counters.shared_refused.inc();
                return None;
            }
            _ => {}
        }
        let chunks = if meta.chunks == 0 {
            Vec::new()
        } else {
            let mut args = vec![b"MGET".to_vec()];
            args.extend((0..meta.chunks).map(|n| keys.chunk(key.variant, meta.generation, n)));
            let reply = self
                .call(self.read_timeout, self.remote.command(args))
                .await?;
            reply.array().into_iter().map(Reply::data).collect()
        };
        let stored_ms = meta.stored_ms();
        match meta.into_object(chunks) {
            Ok(object) if self.feed.held_tag(&object.headers, stored_ms) => {
                self.counters.shared_refused.inc();
                None
            }
            Ok(object) => {
                self.counters.shared_hit.inc();
                Some(object)
            }
            Err(why) => {
                tracing::debug!(%key, ?why, "shared object incomplete: a miss");
                self.counters.shared_refused.inc();
                None
            }
        }
    }

    async fn release(&self, key: Vec<u8>, token: String, pass_ms: u64) {
        let release = self.remote.eval(
            &scripts::RELEASE,
            vec![key],
            vec![token.into_bytes(), pass_ms.to_string().into_bytes()],
        );
        self.call(self.write_timeout, release).await;
    }

    /// Removes every variant of `primary` from the shared tier and marks the URL purged at
    /// `at` (fills that started before are refused). None if Redis could not be asked.
    pub async fn purge_url(&self, primary: &CacheKey, at: Position) -> Option<u64> {
        let keys = UrlKeys::new(&self.prefix, primary);
        let mark_ms = (self.lease_timeout.max(Duration::from_secs(600))).as_millis();
        let purge = self.remote.eval(
            &scripts::PURGE,
            vec![keys.index()],
            vec![
                keys.base(),
                at.to_string().into_bytes(),
                mark_ms.to_string().into_bytes(),
            ],
        );
        let n = self.call(self.write_timeout, purge).await?.int()?;
        Some(n.max(0) as u64)
    }

    /// Soft-purges every variant of `primary` in the shared tier: its copies stay, stale from
    /// now (grace and keep still apply, on every node that reads them). None if Redis could
    /// not be asked.
    pub async fn soft_purge_url(&self, primary: &CacheKey) -> Option<u64> {
        let keys = UrlKeys::new(&self.prefix, primary);
        let soft = self.remote.eval(
            &scripts::SOFT_PURGE,
            vec![keys.index()],
            vec![keys.base(), layout::wall_ms().to_string().into_bytes()],
        );
        let n = self.call(self.write_timeout, soft).await?.int()?;
        Some(n.max(0) as u64)
    }

    /// The URLs tagged `tag` in the shared tier: (set member, URL).
    pub async fn tag_members(&self, tag: &str) -> Option<Vec<(Bytes, CacheKey)>> {
        let get = self.remote.command(vec![
            b"SMEMBERS".to_vec(),
            layout::tag_key(&self.prefix, tag),
        ]);
        let members = self.call(self.write_timeout, get).await?;
        Some(
            members
                .array()
                .into_iter()
                .filter_map(Reply::data)
                .filter_map(|m| layout::tag_member_key(&m).map(|url| (m, url)))
                .collect(),
        )
    }

    /// Takes `members` (their copies purged) out of `tag`'s set; members added since stay.
    pub async fn drop_tag_members(&self, tag: &str, members: Vec<Bytes>) -> Option<()> {
        if members.is_empty() {
            return Some(());
        }
        let mut args = vec![b"SREM".to_vec(), layout::tag_key(&self.prefix, tag)];
        args.extend(members.into_iter().map(|m| m.to_vec()));
        self.call(self.write_timeout, self.remote.command(args))
            .await
            .map(drop)
    }

    /// Whether the shared tier holds `key` now (the admin API; no lease, not counted as a
    /// lookup). None when Redis could not be asked.
    pub async fn inspect(&self, key: &CacheKey) -> Option<Option<Object>> {
        let keys = UrlKeys::new(&self.prefix, &key.primary());
        let get = self
            .remote
            .command(vec![b"GET".to_vec(), keys.meta(key.variant)]);
        let record = self.call(self.read_timeout, get).await?.data();
        let Some(record) = record else {
            return Some(None);
        };
        Some(
            layout::decode(key, record)
                .ok()
                .map(layout::Meta::head_only),
        )
    }

    /// The URL's `Vary` names and the variants its index lists (the admin API). None when
    /// Redis could not be asked.
    pub async fn variants(&self, primary: &CacheKey) -> Option<(Vec<HeaderName>, Vec<u64>)> {
        let keys = UrlKeys::new(&self.prefix, primary);
        let get = self.remote.command(vec![b"HGETALL".to_vec(), keys.index()]);
        let reply = self.call(self.read_timeout, get).await?;
        let (mut names, mut variants) = (Vec::new(), Vec::new());
        for pair in reply.array().chunks(2) {
            if let [Reply::Data(field), _] = pair {
                if &field[..] == b"names" {
                    if let Some(v) = pair[1].clone().data() {
                        names = parse_names(&v);
                    }
                } else if let Some(v) = std::str::from_utf8(field)
                    .ok()
                    .and_then(|f| u64::from_str_radix(f, 16).ok())
                {
                    variants.push(v);
                }
            }
        }
        Some((names, variants))
    }

    /// The remote, for the feed.
    pub(crate) fn remote(&self) -> &Arc<dyn Remote> {
        &self.remote
    }
}

fn parse_names(names: &[u8]) -> Vec<HeaderName> {
    names
        .split(|b| *b == b',')
        .filter_map(|n| HeaderName::from_bytes(n).ok())
        .collect()
}

/// A random 64-bit number (generations, lease tokens): xxh3 of the time and a counter is
/// enough, nothing depends on it being unpredictable.
pub(super) fn rand_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    xxhash_rust::xxh3::xxh3_64(
        &[
            t.to_le_bytes(),
            n.to_le_bytes(),
            (std::process::id() as u64).to_le_bytes(),
        ]
        .concat(),
    )
}

#[cfg(test)]
mod tests;
