//! Looking a key up in the shared tier, and the fleet lease a miss takes on fetching it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderName;

use super::layout::{self, UrlKeys};
use super::remote::Reply;
use super::scripts;
use super::tier::{SharedTier, rand_u64, spawn};
use crate::cache::{CacheKey, Object};

/// What the shared tier holds for a key.
pub enum SharedFound {
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

impl SharedTier {
    /// Looks `key` up (`primary` is its URL). With `lease`, a miss takes the fleet lease on
    /// fetching it, or waits for the node holding it — at most `lease_timeout`, polling.
    pub async fn lookup(self: &Arc<Self>, key: &CacheKey, lease: bool) -> SharedFound {
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
                return SharedFound::Miss(None);
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
                        return SharedFound::Object(Arc::new(object));
                    }
                    return SharedFound::Miss(None);
                }
                "vary" => {
                    let names = names
                        .and_then(|n| n.data())
                        .map(|n| parse_names(&n))
                        .unwrap_or_default();
                    if names.is_empty() {
                        return SharedFound::Miss(None);
                    }
                    return SharedFound::Varies(names);
                }
                "lease" => {
                    self.counters.shared_lease.inc();
                    self.counters.shared_miss.inc();
                    return SharedFound::Miss(Some(Ticket {
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
                    return SharedFound::Miss(None);
                }
                _ => {
                    self.counters.shared_miss.inc();
                    return SharedFound::Miss(None);
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

    pub(super) async fn release(&self, key: Vec<u8>, token: String, pass_ms: u64) {
        let release = self.remote.eval(
            &scripts::RELEASE,
            vec![key],
            vec![token.into_bytes(), pass_ms.to_string().into_bytes()],
        );
        self.call(self.write_timeout, release).await;
    }
}

pub(super) fn parse_names(names: &[u8]) -> Vec<HeaderName> {
    names
        .split(|b| *b == b',')
        .filter_map(|n| HeaderName::from_bytes(n).ok())
        .collect()
}
