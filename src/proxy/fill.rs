//! The fill: streaming a cacheable backend body into its busy object and storing the object
//! once complete (the backend-side state machine: head → stream → store | trim | fail).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use super::Proxy;
use super::chunks::Chunks;
use super::filter::esi::plain;
use crate::cache::busy::{BusyObject, LeaderGuard};
use crate::cache::partial::{Added, Piece, Validator, representation_fields};
use crate::cache::policy::StorePlan;
use crate::cache::shared::feed::Position;
use crate::cache::{Body, CacheKey, Object, StoredFields, VarySelection, body, boxed_vary};
use crate::esi::Program;

/// What the fill needs to build the cached object once the body is complete.
pub(super) struct Fill {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub vary: VarySelection,
    pub plan: StorePlan,
    pub stored_at: Instant,
    /// The body is a piece of partial content (`combine.rs`), not a whole object.
    pub piece: Option<PieceTarget>,
    /// This node's position in the fleet's invalidation log when the fetch started: the
    /// shared tier refuses the object if its URL was purged after it (`cache/shared`).
    pub seen: Position,
    /// ESI was on for this fetch: the parse filter's slot, whose program is stored as the
    /// object's first field (`filter/esi/parse.rs`).
    pub esi: Option<Arc<super::filter::esi::Slot>>,
    /// A body stored encoded: what its gzip filter learnt of the identity, stored as
    /// `cache::identity::FIELD` (`filter/gzip.rs`).
    pub identity: Option<Arc<super::filter::gzip::Decoded>>,
    /// Its charge to its storage's account while it runs ([`charge`]), dropped once the
    /// object is stored (or the fill ends without storing it).
    pub charge: Option<FillCharge>,
}

/// A fill's charge to its account while it runs (`cache/shares.rs`, `SiteShares::fill_add`):
/// what it has brought so far ([`FillCharge::add`]), taken off when it is dropped — after
/// the object is stored and charged as such, or when the fill fails or is abandoned.
pub(crate) struct FillCharge {
    storage: Arc<dyn crate::cache::Storage>,
    account: u16,
    bytes: u64,
}

impl FillCharge {
    /// A charge of `bytes` (the fill's head) to `account` of `storage`'s memory tier (none
    /// when it keeps no accounts).
    fn new(storage: Arc<dyn crate::cache::Storage>, account: u16, bytes: u64) -> FillCharge {
        if let Some(s) = storage.site_shares() {
            s.fill_add(account, bytes);
        }
        FillCharge {
            storage,
            account,
            bytes,
        }
    }

    /// `n` more bytes (a chunk of the body).
    fn add(&mut self, n: u64) {
        if let Some(s) = self.storage.site_shares() {
            s.fill_add(self.account, n);
            self.bytes += n;
        }
    }
}

impl Drop for FillCharge {
    fn drop(&mut self) {
        if let Some(s) = self.storage.site_shares() {
            s.fill_sub(self.account, self.bytes);
        }
    }
}

/// The charge of a fill of `key` with `plan` and the fields `headers` to the account its
/// object will be stored in (the memory tier's rule: the plan's storage, else the key's
/// site): its head now, before the client's response is delivered, then each chunk of its
/// body as it arrives (`cache/shares.rs`).
pub(super) fn charge(
    proxy: &Proxy,
    key: &CacheKey,
    plan: &StorePlan,
    headers: &HeaderMap,
) -> Option<FillCharge> {
    proxy.cache.storage.site_shares()?;
    let account = crate::cache::shares::store_account(plan.store).unwrap_or(key.site());
    let head: usize = headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    Some(FillCharge::new(
        proxy.cache.storage.clone(),
        account,
        head as u64,
    ))
}

/// Where a 206's body goes in its representation.
pub(super) struct PieceTarget {
    /// Its first byte.
    pub start: u64,
    /// The representation's complete length.
    pub length: u64,
    /// Its size (`Content-Range`): a body of any other length is not stored.
    pub size: u64,
    pub validator: Option<Validator>,
}

impl Fill {
    /// Streams the backend body into the busy object, then stores it. Runs as its own task so
    /// the cache fill completes even if the client that started it goes away.
    pub async fn run(
        mut self,
        proxy: Arc<Proxy>,
        key: CacheKey,
        busy: Arc<BusyObject>,
        mut guard: Option<LeaderGuard>,
        mut body: impl Chunks + Send + 'static,
    ) {
        let charge = &mut self.charge;
        let Some((total, storing)) =
            stream(&proxy, &key, &busy, (&mut guard, charge), &mut body).await
        else {
            return;
        };
        if storing {
            match self.piece.take() {
                Some(target) => self.store_piece(&proxy, &key, &busy, target, total),
                None => {
                    // ESI's program, when ESI was on; and a marked page that held none is
                    // gzipped now, off the workers (`filter/esi/plain.rs`). Awaited here, not
                    // in an `async` store: that future would hold a second `Fill`, and this
                    // task's future is moved when spawned and when it ends (every miss).
                    let program = self.esi.as_ref().and_then(|slot| slot.take());
                    let gzipped = match self.plain_gzip_level(&proxy, program.is_some()) {
                        Some(level) => {
                            Box::pin(plain::gzip(busy.chunks(), level, proxy.counters.clone()))
                                .await
                        }
                        None => None,
                    };
                    self.store_whole(&proxy, &key, &busy, &mut guard, total, (program, gzipped));
                }
            }
        }
        // Out of the busy table before it is complete: a waiter that sees it complete looks
        // the key up again (`BusyObject::wait_head`) and finds the stored object, or leads a
        // fetch of its own, instead of joining this one again.
        if let Some(g) = guard.as_mut() {
            g.release();
        }
        busy.finish();
        drop(guard);
    }

    /// A piece of partial content of exactly the size its `Content-Range` said: added to the
    /// URL's pieces, and the object stored when they complete it.
    fn store_piece(
        self,
        proxy: &Proxy,
        key: &CacheKey,
        busy: &BusyObject,
        target: PieceTarget,
        total: u64,
    ) {
        if total != target.size {
            return;
        }
        // One allocation of exactly its size (`cache::body`), pieces join it later.
        let body = body::one(&busy.chunks(), total as usize);
        let piece = Piece {
            start: target.start,
            length: target.length,
            body,
            headers: representation_fields(self.headers),
            validator: target.validator,
            vary: self.vary,
            initial_age: self.plan.initial_age,
            ttl: self.plan.ttl,
            received: self.stored_at,
        };
        match proxy.cache.partial.add(key, piece) {
            Added::Held(_) => proxy.counters.cache_partial_stored.inc(),
            Added::Complete(mut object) => {
                proxy.counters.cache_partial_stored.inc();
                proxy.counters.cache_partial_completed.inc();
                object.stale_ok = self.plan.stale_ok;
                object.grace = self.plan.grace.into();
                object.stale_if_error = self.plan.stale_if_error.into();
                object.keep = self.plan.keep.into();
                proxy.cache.store(key, Arc::new(object));
                proxy.counters.cache_insert.inc();
            }
            Added::Dropped => {}
        }
    }

    /// The gzip level a page ESI was on for is stored at as a plain gzip object: it held no
    /// ESI (`found_esi` false), is marked gzip-plain and `[compression]` is on; `None`
    /// otherwise (every fill without ESI).
    fn plain_gzip_level(&self, proxy: &Proxy, found_esi: bool) -> Option<u32> {
        let slot = self.esi.as_deref()?;
        let compression = &proxy.config.compression;
        if !plain::stores_gzip(slot.gzip_plain(), found_esi, compression.enabled) {
            return None;
        }
        Some(
            self.headers
                .get(http::header::CONTENT_TYPE)
                .map_or(compression.gzip_level, |t| {
                    compression.gzip_level_for(t.as_bytes())
                }),
        )
    }

    /// A whole object: stored (with its ESI program and its identity, when it has them),
    /// superseding any pieces of the URL, and shared with the fleet — unless it was purged
    /// while it was fetched. `gzipped`: the page's gzip when it is stored as a plain gzip
    /// object ([`Fill::plain_gzip_level`]).
    fn store_whole(
        self,
        proxy: &Proxy,
        key: &CacheKey,
        busy: &BusyObject,
        guard: &mut Option<LeaderGuard>,
        total: u64,
        (program, gzipped): (Option<Program>, Option<Bytes>),
    ) {
        let mut headers = self.headers;
        if let Some(value) = self
            .identity
            .and_then(|slot| slot.take())
            .and_then(|identity| identity.to_value())
        {
            headers.insert(crate::cache::identity::FIELD, value);
        }
        let (fields, body, total) = stored_body(
            self.esi.as_deref(),
            (program, gzipped),
            headers,
            busy,
            total,
        );
        let object = Arc::new(Object::from_plan(
            self.status,
            fields,
            Body::Memory(body),
            total,
            boxed_vary(self.vary),
            &self.plan,
            self.stored_at,
        ));
        let stored = proxy.cache.store(key, object.clone());
        proxy.counters.cache_insert.inc();
        // A whole object supersedes any pieces of the URL.
        proxy.cache.partial.remove(key);
        if busy.is_purged() {
            // Purged while it was fetched (the mark is set before the purge removes, and
            // read after this store): it does not outlive the purge.
            proxy.cache.storage.remove(&stored);
        } else if let Some(shared) = &proxy.cache.shared {
            let ticket = guard.as_mut().and_then(LeaderGuard::take_ticket);
            shared.share(key, &stored, &object, ticket, self.seen);
        }
    }
}

/// What a fill stores: its fields (with the ESI program first when ESI was on, `esi`) and its
/// body in one allocation of exactly its size (cache/body.rs), and the body's length. A page
/// ESI was on for that held no ESI and is marked gzip is stored as a plain gzip object
/// (`filter/esi/plain.rs`), `gzipped` once by the fill.
fn stored_body(
    esi: Option<&super::filter::esi::Slot>,
    (program, gzipped): (Option<Program>, Option<Bytes>),
    mut headers: HeaderMap,
    busy: &BusyObject,
    total: u64,
) -> (StoredFields, body::MemoryChunks, u64) {
    let Some(slot) = esi else {
        let body = body::store(&busy.chunks(), total as usize);
        return (StoredFields::from_map(&headers), body, total);
    };
    if let Some(gz) = gzipped {
        plain::mark(&mut headers, total);
        let len = gz.len();
        return (
            StoredFields::from_map(&headers),
            body::store(&[gz], len),
            len as u64,
        );
    }
    let fields = super::filter::esi::stored_fields(
        &headers,
        program,
        (slot.gzip(), slot.gzip_plain()),
        total,
    );
    (fields, body::store(&busy.chunks(), total as usize), total)
}

/// The body streamed into the busy object while readers remain: how long it was, and whether
/// it is still to be stored (past `max_object_size` the rest is streamed, not stored, and the
/// URL remembered as uncacheable). `None`: the body failed, or every reader left a response
/// that is not stored; the busy object is failed.
async fn stream(
    proxy: &Proxy,
    key: &CacheKey,
    busy: &BusyObject,
    (guard, charge): (&mut Option<LeaderGuard>, &mut Option<FillCharge>),
    body: &mut (impl Chunks + Send),
) -> Option<(u64, bool)> {
    let mut total: u64 = 0;
    let mut storing = true;
    loop {
        if !busy.writable().await {
            tracing::debug!(%key, "every reader left an unstorable response; stopping fetch");
            busy.fail();
            return None;
        }
        match std::future::poll_fn(|cx| body.poll_chunk(cx)).await {
            Some(Ok(data)) => {
                total += data.len() as u64;
                if storing && total > proxy.max_object_size {
                    storing = false;
                    busy.start_trimming();
                    if let Some(g) = guard.as_mut() {
                        g.release();
                    }
                    proxy.counters.cache_uncacheable.inc();
                    proxy
                        .cache
                        .mark_hit_for_miss(key.clone(), proxy.config.cache.hit_for_miss_ttl.0);
                }
                if storing && let Some(c) = charge.as_mut() {
                    c.add(data.len() as u64);
                }
                busy.push(data);
            }
            Some(Err(e)) => {
                tracing::warn!(%key, error = %e, "backend body failed; object not stored");
                busy.fail();
                return None;
            }
            None => break,
        }
    }
    Some((total, storing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http::HeaderValue;
    use std::time::Duration;

    use crate::backend::BackendBody;
    use crate::proxy::filter::tests::{Upper, chain};
    use crate::stats::Counters;
    use http_body_util::BodyExt;

    /// Seam 2, the fetch side: what the fill stores is the fetch chain's output.
    #[tokio::test]
    async fn a_fill_stores_what_the_fetch_chain_makes() {
        let config = Arc::new(crate::config::Config::embedded_default());
        let counters = Arc::new(Counters::default());
        let proxy = Proxy::new(
            config,
            crate::vcl::attach::Programs::default(),
            counters.clone(),
        )
        .expect("embedded default config");
        let body = http_body_util::Full::new(Bytes::from_static(b"hello"))
            .map_err(|e| -> crate::backend::BoxError { Box::new(e) });
        let body = BackendBody::from_stream(Box::pin(body), Duration::from_secs(60), counters);
        let plan = StorePlan {
            ttl: Duration::from_secs(60),
            initial_age: Duration::ZERO,
            strip: Vec::new(),
            vary: Vec::new(),
            stale_ok: true,
            grace: Duration::ZERO,
            keep: Duration::ZERO,
            stale_if_error: None,
            prefetch: crate::cache::Prefetch::CONFIGURED,
            transient: false,
            store: 0,
        };
        let fill = Fill {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            vary: Vec::new(),
            plan,
            stored_at: Instant::now(),
            piece: None,
            seen: Default::default(),
            esi: None,
            identity: None,
            charge: None,
        };
        let key = CacheKey::new("example.com", "/filtered");
        let busy = BusyObject::new();
        let filtered = chain(vec![Box::new(Upper)]).over(body);
        fill.run(proxy.clone(), key.clone(), busy, None, filtered)
            .await;
        let stored = proxy.cache.lookup_now(&key).ok().flatten().expect("stored");
        let Body::Memory(chunks) = &stored.body else {
            panic!("stored in memory");
        };
        let bytes: Vec<u8> = chunks.iter().flat_map(|c| c.to_vec()).collect();
        assert_eq!(bytes, b"HELLO");
        assert_eq!(stored.body_len, 5);
    }

    /// A fill's charge: its head, then each chunk, in its account while it runs; gone when it
    /// is dropped (stored, failed or abandoned).
    #[test]
    fn a_fill_charge_is_taken_off_when_dropped() {
        let storage: Arc<dyn crate::cache::Storage> = Arc::new(
            crate::cache::memory::MemoryStorage::new(1 << 20, 1 << 20, Default::default()),
        );
        let shares = storage.site_shares().expect("accounts");
        let mut charge = FillCharge::new(storage.clone(), 3, 100);
        charge.add(1000);
        charge.add(24);
        assert_eq!(shares.filling(3), 1124);
        let other = FillCharge::new(storage.clone(), 3, 6);
        assert_eq!(shares.filling(3), 1130);
        drop(charge);
        assert_eq!(shares.filling(3), 6);
        drop(other);
        assert_eq!(shares.filling_total(), 0);
    }

    /// Regression: stored header values kept a slice of hyper's read buffer (RSS 41% over
    /// `cache.memory_size`). They are copied out (bodies too: `cache::body::store`).
    #[test]
    fn stored_fields_do_not_pin_the_read_buffer() {
        let raw = Bytes::from_static(b"text/html; charset=utf-8 and the rest of a big read buffer");
        let mut h = HeaderMap::new();
        h.insert(
            "content-type",
            HeaderValue::from_maybe_shared(raw.slice(0..24)).unwrap(),
        );
        // Stored fields are copied into their own block (StoredFields), never sliced.
        let c = StoredFields::from_map(&h);
        assert_eq!(c.map()["content-type"], "text/html; charset=utf-8");
        assert_ne!(
            c.map()["content-type"].as_bytes().as_ptr(),
            h["content-type"].as_bytes().as_ptr()
        );
    }

    /// Regression (the miss path at 48ed772): the fill's store was an `async fn` holding a
    /// second `Fill`, its future 2,904 bytes (debug) instead of 1,560, and every miss spawns
    /// one (moved into its task, and again as the task ends). 1,680 bytes now (rustc 1.95).
    #[test]
    fn a_fill_task_is_small_to_move() {
        fn size<F>(
            _: impl FnOnce(Fill, Arc<Proxy>, CacheKey, Arc<BusyObject>, BackendBody) -> F,
        ) -> usize {
            std::mem::size_of::<F>()
        }
        let size = size(|fill, proxy, key, busy, body| fill.run(proxy, key, busy, None, body));
        assert!(size <= 2_048, "the fill task's future is {size} bytes");
    }
}
