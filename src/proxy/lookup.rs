//! The Lookup steps: the request's (variant) key in the tiers without I/O, then those below
//! (disk), the leader's second look, the fleet's shared tier — and what the machine does with
//! what they found (a hit, grace, waiting for another request's fetch, or a fetch of its own).

use std::sync::Arc;
use std::time::Instant;

use http::StatusCode;

use super::deliver;
use super::txn::{FetchMode, Step, Txn};
use crate::cache::busy::{Join, LeaderGuard};
use crate::cache::policy::NoCacheReason;
use crate::cache::shared::SharedFound;
use crate::cache::{CacheKey, NeedsIo, Object};

/// Lookups one request may make (a waiter whose leader's response was not shareable looks up
/// again). Bounds the loop; exceeding it answers 503.
const MAX_LOOKUPS: u32 = 4;

impl Txn {
    /// Looks the request's (variant) key up in the tiers that need no I/O and decides from
    /// what they hold; `LookupIo` when they have no copy and a tier below needs I/O.
    pub(super) fn lookup(&mut self) -> Step {
        self.lookups += 1;
        if self.lookups > MAX_LOOKUPS {
            return Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "too-many-lookups");
        }
        // The key is moved out and back rather than cloned: this runs on every hit.
        let Some(mut primary) = self.key.take() else {
            return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
        };
        // Whose share what is stored under it counts in (`[[site]] cache_share`); keys
        // derived from it (variants, slices) keep it.
        if let Some(site) = &self.site {
            primary.set_site(site.account);
        }
        let flags = self.policy.lookup_flags(self);
        // `ignore_vary` (VCL's `req.hash_ignore_vary`): the variant stored last, whatever the
        // request's fields (a miss there fetches the request's own variant).
        let newest = if flags.ignore_vary {
            self.proxy
                .cache
                .newest_variant_key(&primary)
                .filter(|k| matches!(self.proxy.cache.lookup_now(k), Ok(Some(_))))
        } else {
            None
        };
        let variant = newest.or_else(|| self.proxy.cache.variant_key(&primary, &self.req.headers));
        let key = variant.as_ref().unwrap_or(&primary);
        let now = Instant::now();
        self.looked_up = now;
        let step = match self.proxy.cache.lookup_now(key) {
            // `always_miss` (VCL's `req.hash_always_miss`): fetched and stored anew whatever
            // is cached.
            _ if flags.always_miss => self.decide(&primary, key, now, None),
            Ok(found) => self.decide(&primary, key, now, found),
            Err(NeedsIo) => Step::LookupIo(key.clone(), now),
        };
        self.key = Some(primary);
        step
    }

    /// `Lookup` continued in the tiers that need I/O.
    pub(super) async fn lookup_io(&mut self, key: CacheKey, now: Instant) -> Step {
        let found = self.proxy.cache.lookup_io(&key).await;
        let Some(primary) = self.key.take() else {
            return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
        };
        let step = self.decide(&primary, &key, now, found);
        self.key = Some(primary);
        step
    }

    /// A lookup's outcome once the tiers have answered for `key` (`found`): a hit or grace
    /// delivery, waiting for another request's fetch, or a fetch of this request's own.
    pub(super) fn decide(
        &mut self,
        primary: &CacheKey,
        key: &CacheKey,
        now: Instant,
        found: Option<Arc<Object>>,
    ) -> Step {
        if let Some(step) = found.and_then(|object| self.classify(key, object, now, true)) {
            return step;
        }
        if self.req_cc.as_ref().is_some_and(|cc| cc.only_if_cached) {
            return Step::Synth(StatusCode::GATEWAY_TIMEOUT, "only-if-cached");
        }
        // Big media (`slice/`): a URL known to be cached in slices. Not on the hit path.
        if self.proxy.config.cache.slice
            && let Some(step) = super::slice::decide(self, primary)
        {
            return step;
        }
        if let Some(step) = super::combine::decide(self, primary, now) {
            return step;
        }
        if self.authorized {
            // Not coalesced: a waiter would be handed whatever the leader's response is,
            // shareable with an authorized request or not. Fetched alone, stored if the
            // response allows it (and never marking the URL hit-for-miss for others).
            self.proxy.counters.cache_miss.inc();
            return Step::Fetch(FetchMode::Authorized);
        }
        if let Some(step) = self.remembered(primary, key, now) {
            return step;
        }
        let cache = &self.proxy.cache;
        let flags = self.policy.lookup_flags(self);
        match cache.busy.join(key) {
            // VCL's `req.hash_ignore_busy`: fetched alone rather than waiting.
            Join::Waiter(_) if flags.ignore_busy => {
                self.proxy.counters.cache_miss.inc();
                Step::Fetch(FetchMode::Alone("ignore-busy"))
            }
            Join::Waiter(busy) => Step::Wait(busy),
            // VCL's `req.hash_always_miss`: what is stored is not looked at again either.
            Join::Leader(guard) if flags.always_miss => self.recheck(key, now, None, guard),
            // The previous leader may have marked the URL hit-for-pass or hit-for-miss and
            // left between our look at the marks and the join (a thread preempted there, on
            // a loaded machine): the guard goes (a waiter that joined meanwhile looks up
            // again and finds the mark too).
            Join::Leader(guard) if cache.is_hit_for_miss(primary, now) => {
                drop(guard);
                self.remembered(primary, key, now).unwrap_or(Step::Lookup)
            }
            // The previous leader may have stored the object between our lookup and join.
            Join::Leader(guard) => match cache.lookup_now(key) {
                Ok(found) => self.recheck(key, now, found, guard),
                Err(NeedsIo) => Step::RecheckIo(key.clone(), now, guard),
            },
        }
    }

    /// A URL remembered as uncacheable: passed while it is hit-for-pass (VCL's
    /// `return (pass(DURATION))`, 2.x/3.0's pass objects), fetched alone while it is
    /// hit-for-miss. A hit-for-pass mark made by a fetch still reading its body (2.x's
    /// vcl_fetch `pass`, `beresp.do_stream = false`) is waited for first: in Varnish the
    /// hit-for-pass object is that fetch's busy object, so a request arriving meanwhile
    /// waits and then passes on the connection the fetch gave back (varnishtest c00014).
    fn remembered(&mut self, primary: &CacheKey, key: &CacheKey, now: Instant) -> Option<Step> {
        let cache = &self.proxy.cache;
        if !cache.is_hit_for_miss(primary, now) {
            return None;
        }
        if !cache.is_hit_for_pass(primary, now) {
            return Some(Step::HitForMiss);
        }
        if let Some(busy) = cache.busy.in_progress(key)
            && !self.policy.lookup_flags(self).ignore_busy
        {
            return Some(Step::Wait(busy));
        }
        self.proxy.counters.cache_hitpass.inc();
        // `req.is_hitpass` and `bereq.is_hitpass` read true for this pass (trunk c00075); a
        // restart clears it (`policy/vcl/answer.rs`).
        if let Some(v) = self.vcl.as_deref_mut() {
            v.is_hitpass = true;
        }
        Some(Step::Pass(NoCacheReason::Vcl))
    }

    /// The leader's second look: a hit after all, or this request's fetch.
    pub(super) fn recheck(
        &mut self,
        key: &CacheKey,
        now: Instant,
        found: Option<Arc<Object>>,
        guard: LeaderGuard,
    ) -> Step {
        match found.and_then(|object| self.classify(key, object, now, false)) {
            Some(hit) => hit,
            None if self.proxy.cache.shared.is_some() => Step::Shared(key.clone(), guard),
            None => Step::Miss(guard),
        }
    }

    /// The leader asks the fleet's shared tier: a copy (stored locally, then judged like a
    /// local one; local waiters look up again and find it), the URL's `Vary` fields (look up
    /// the request's variant), or nothing — fetch, with the fleet lease if this node got it.
    pub(super) async fn shared(&mut self, key: CacheKey, mut guard: LeaderGuard) -> Step {
        let (Some(shared), Some(primary)) = (self.proxy.cache.shared.clone(), self.key.clone())
        else {
            return Step::Miss(guard);
        };
        match shared.lookup(&key, true).await {
            SharedFound::Object(object) => {
                self.proxy.cache.store_from_shared(&primary, object.clone());
                let now = Instant::now();
                self.looked_up = now;
                match self.classify(&key, object, now, false) {
                    Some(Step::Hit(object)) => {
                        drop(guard);
                        let counters = &self.proxy.counters;
                        counters.cache_hit.inc();
                        counters.cache_hit_shared.inc();
                        let status =
                            format!("{}; detail=shared", &*deliver::hit_status(&object, now));
                        self.deliver_object_at(object, &status, now)
                    }
                    Some(step) => {
                        drop(guard);
                        step
                    }
                    None => Step::Miss(guard),
                }
            }
            SharedFound::Varies(names) => {
                self.proxy.cache.learn_vary(&primary, names);
                drop(guard);
                Step::Lookup
            }
            SharedFound::Miss(ticket) => {
                guard.set_ticket(ticket);
                Step::Miss(guard)
            }
        }
    }

    /// The leader's second look continued in the tiers that need I/O.
    pub(super) async fn recheck_io(
        &mut self,
        key: CacheKey,
        now: Instant,
        guard: LeaderGuard,
    ) -> Step {
        let found = self.proxy.cache.lookup_io(&key).await;
        self.recheck(&key, now, found, guard)
    }
}
