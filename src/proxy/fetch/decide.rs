//! The storage decision for a whole fetched response, made once whatever the policy
//! front-end (`Storage::decide`: RFC 9111 with the operator's overrides, or the plan the
//! front-end's program made), then bounded by `max_object_size`, the fetch filters and an
//! `always_miss` refresh; and the response that is not stored, streamed to the client.

use http::header;
use http::response::Parts;

use super::super::policy::{Remember, Storage};
use super::super::txn::{Step, Txn};
use super::exchange::Clock;
use super::send;
use crate::backend::BackendBody;
use crate::cache::CacheKey;
use crate::cache::busy::LeaderGuard;
use crate::cache::policy::{self, NoCacheReason, StorePlan};

/// What the storage decision made of a response.
pub(super) struct Decision {
    pub plan: Result<StorePlan, NoCacheReason>,
    /// How long its URL is remembered as uncacheable, if it is not stored.
    pub remember: Remember,
    /// The response's `Content-Length`, if it has a valid one.
    pub content_length: Option<u64>,
    /// The policy's `always_miss`: the copy this fetch refreshes goes now.
    pub always_miss: bool,
}

/// What the storage decision knows of the exchange that brought `parts`.
fn exchange_of(txn: &Txn, parts: &Parts, clock: &Clock) -> policy::Exchange {
    policy::Exchange {
        request_time: clock.request_time,
        response_time: clock.response_time,
        failed_status: send::failed_status(txn, parts.status),
        authorization: txn.authorized,
        partial_content: false,
    }
}

/// Whether the storage decision will refuse `parts`, asked before the fetch filters are
/// chosen: compression (`coding.rs`) gzips a response that will not be stored only for a
/// client that takes gzip (for one that does not it would be decoded again at once).
pub(super) fn refused(txn: &Txn, storage: &Storage, parts: &Parts, clock: &Clock) -> bool {
    storage.refuses(
        parts.status,
        &parts.headers,
        &exchange_of(txn, parts, clock),
        txn.cache_config(),
    )
}

/// The storage decision for `parts` (`storable`: what the fetch filters say of their output).
pub(super) fn decide(
    txn: &Txn,
    storage: Storage,
    parts: &Parts,
    clock: &Clock,
    storable: bool,
) -> Decision {
    let proxy = &txn.proxy;
    let content_length = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let exchange = exchange_of(txn, parts, clock);
    let (plan, remember) =
        storage.decide(parts.status, &parts.headers, &exchange, txn.cache_config());
    let plan = plan.and_then(|plan| match content_length {
        Some(len) if len > proxy.max_object_size => {
            // Big media: the URL is answered from slices from now on (`slice/`), unless a
            // Range was asked and ignored or a fetch filter changes the body.
            if parts.status == http::StatusCode::OK
                && txn.range_fetch.is_none()
                && storable
                && txn.filters.fetch.is_empty()
            {
                super::super::slice::learn(txn, &parts.headers, len, &plan);
            }
            Err(NoCacheReason::TooLarge)
        }
        _ if !storable => Err(NoCacheReason::Filter),
        _ => Ok(plan),
    });
    // An `always_miss` refresh (VCL's `req.hash_always_miss`) that brings a response with no
    // freshness left (`beresp.ttl` 0 or less): delivered, but it does not replace the stored
    // copy, which stays for grace (as in Varnish; varnishtest b00035). Nor is the URL
    // hit-for-miss.
    let always_miss = txn.policy.lookup_flags(txn).always_miss;
    let stale_refresh = always_miss && plan.as_ref().is_ok_and(|p| p.ttl <= p.initial_age);
    let (plan, remember) = if stale_refresh {
        (Err(NoCacheReason::Vcl), Remember::Not)
    } else {
        (plan, remember)
    };
    Decision {
        plan,
        remember,
        content_length,
        always_miss,
    }
}

/// A response the decision did not store, with what its URL and waiters are told.
pub(super) struct Unstored {
    pub primary: CacheKey,
    /// The busy-table lead, when this fetch is the one waiters follow.
    pub guard: Option<LeaderGuard>,
    pub reason: NoCacheReason,
    pub remember: Remember,
    pub content_length: Option<u64>,
}

/// An uncacheable response: the URL remembered as hit-for-miss (as `remember` says), the
/// waiters and the fleet lease released, and the backend body streamed to the client.
pub(super) fn uncacheable(
    txn: &mut Txn,
    unstored: Unstored,
    parts: Parts,
    body: BackendBody,
) -> Step {
    let Unstored {
        primary,
        guard,
        reason,
        remember,
        content_length,
    } = unstored;
    let proxy = txn.proxy.clone();
    proxy.counters.cache_uncacheable.inc();
    // What one user's credentials got says nothing about the URL for others. Under VCL the
    // URL is remembered as uncacheable for the `beresp.ttl` of its hit-for-miss (none: not
    // remembered).
    match remember {
        Remember::For(ttl) => proxy.cache.mark_hit_for_miss(primary, ttl),
        Remember::Default if reason != NoCacheReason::Authorization => proxy
            .cache
            .mark_hit_for_miss(primary, proxy.config.cache.hit_for_miss_ttl.0),
        Remember::Default | Remember::Not => {}
    }
    if let Some(mut guard) = guard {
        if let Some(ticket) = guard.take_ticket() {
            // Other nodes fetch this URL at once instead of waiting for the lease.
            ticket.pass(proxy.config.cache.hit_for_miss_ttl.0);
        }
        guard.object().abandon();
    }
    let status = format!("shellac; fwd=miss; detail={}", reason.as_str());
    // Body filters, fetch chain: what the client gets is their output.
    let body = super::super::filter::fetched(body, std::mem::take(&mut txn.filters.fetch));
    Step::Deliver(txn.stream_response(parts.status, parts.headers, body, content_length, &status))
}
