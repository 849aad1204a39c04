//! A 304 answering the revalidation of a stale copy (RFC 9111 §3.2, §4.3.4): the copy
//! refreshed with the 304's fields, stored here and in the fleet's shared tier, and handed to
//! the waiters — or, if no longer storable, delivered once and forgotten.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::StatusCode;
use http::header::{self, HeaderMap};

use super::super::policy::{Remember, Storage};
use super::super::txn::{Step, Txn};
use super::exchange::{Clock, Exchanged};
use crate::cache::busy::{BusyHead, LeaderGuard};
use crate::cache::policy;
use crate::cache::{Body, CacheKey, Object, StoredFields};

/// The backend answered our conditional request with 304: the stale copy is fresh again with
/// the 304's header fields merged in (RFC 9111 §3.2, §4.3.4). Under VCL, `parts` is already
/// that merge as vcl_backend_response left it, stored by `vcl_plan`.
pub(super) fn revalidated(
    txn: &mut Txn,
    (mut guard, primary, stale): (Option<LeaderGuard>, &CacheKey, Arc<Object>),
    ex: Exchanged,
) -> Step {
    let Exchanged {
        clock:
            Clock {
                request_time,
                response_time,
                stored_at,
                seen,
            },
        parts,
        storage,
        ..
    } = ex;
    let proxy = txn.proxy.clone();
    proxy.counters.cache_revalidated.inc();
    // A plan the policy decided was made on the merge already (the policy saw the
    // revalidated copy); otherwise the stale copy's fields with the 304's merged in are
    // evaluated.
    let (status_code, mut headers) = match &storage {
        Storage::Decided { .. } => (parts.status, parts.headers),
        Storage::Evaluate(_) => (
            stale.status,
            policy::merge_304(stale.headers.to_map(), &parts.headers),
        ),
    };
    let ex = policy::Exchange {
        authorization: txn.authorized,
        ..policy::Exchange::at(request_time, response_time)
    };
    let (plan, remember) = storage.decide(status_code, &headers, &ex, txn.cache_config());
    let hit_for_miss = match remember {
        Remember::For(ttl) => Some(ttl),
        Remember::Default | Remember::Not => None,
    };
    txn.policy.storing(txn, &mut headers);
    let (object, status) = match plan {
        Ok(plan) => {
            for name in &plan.strip {
                headers.remove(name);
            }
            headers.remove(header::AGE);
            let object = Arc::new(Object::from_plan(
                status_code,
                StoredFields::from_map(&headers),
                stale.body.clone(),
                stale.body_len,
                stale.vary.clone(),
                &plan,
                stored_at,
            ));
            let key = proxy.cache.store(primary, object.clone());
            if let Some(shared) = &proxy.cache.shared {
                // The refreshed copy replaces the stale one fleet-wide (its lease, if this
                // request held one, is released by the write).
                let ticket = guard.as_mut().and_then(LeaderGuard::take_ticket);
                shared.share(primary, &key, &object, ticket, seen);
            }
            (
                object,
                "shellac; fwd=stale; fwd-status=304; stored".to_string(),
            )
        }
        Err(reason) => {
            let fields = (status_code, &headers, stored_at);
            let object = forget(txn, primary, &stale, fields, hit_for_miss);
            (
                object,
                format!(
                    "shellac; fwd=stale; fwd-status=304; detail={}",
                    reason.as_str()
                ),
            )
        }
    };
    if let Some(guard) = guard {
        hand_to_waiters(txn, guard, &object);
    }
    txn.deliver_object(object, &status)
}

/// Waiters follow the refreshed object like any fill: its head, then its body when it is in
/// memory.
fn hand_to_waiters(txn: &Txn, guard: LeaderGuard, object: &Arc<Object>) {
    let busy = guard.object();
    busy.set_head(BusyHead {
        status: object.status,
        headers: object.headers.to_map(),
        content_length: Some(object.body_len),
        vary: object.vary().to_vec(),
        delivered: Default::default(),
        object: txn.policy.waiters_judge(txn).then(|| object.clone()),
    });
    match &object.body {
        Body::Memory(chunks) => {
            for chunk in chunks {
                busy.push(chunk.clone());
            }
            busy.finish();
        }
        // A body left on disk cannot be pushed here without reading it: waiters look up
        // again and find the refreshed object.
        Body::Disk(_) => busy.abandon(),
    }
}

/// Validated, but no longer storable: the copy is forgotten (VCL: remembered as uncacheable
/// for its hit-for-miss `beresp.ttl`), and what is delivered this once is made of it.
fn forget(
    txn: &Txn,
    primary: &CacheKey,
    stale: &Object,
    (status_code, headers, stored_at): (StatusCode, &HeaderMap, Instant),
    hit_for_miss: Option<Duration>,
) -> Arc<Object> {
    let cache = &txn.proxy.cache;
    cache.purge(primary);
    if let Some(ttl) = hit_for_miss {
        cache.mark_hit_for_miss(primary.clone(), ttl);
    }
    Arc::new(Object {
        status: status_code,
        headers: StoredFields::from_map(headers),
        ttl: crate::cache::Span::ZERO,
        stored_at,
        hits: Default::default(),
        ..stale.copy()
    })
}
