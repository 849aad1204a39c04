//! A cacheable response stored: its head published to the busy object waiters follow (the
//! policy's `storing` hook on its fields), a fill task storing its body through the fetch
//! filters (`fill.rs`), and the client's response streamed from that busy object.

use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderMap, HeaderValue};
use http::response::Parts;

use super::super::body::ResponseBody;
use super::super::fill::Fill;
use super::super::txn::{Step, Txn};
use crate::backend::BackendBody;
use crate::cache::busy::{BusyHead, BusyObject, LeaderGuard};
use crate::cache::policy;
use crate::cache::shared::feed::Position;
use crate::cache::{Body, CacheKey, Object, StoredFields, VarySelection};

/// What a cacheable response is stored with.
pub(super) struct Storing {
    pub primary: CacheKey,
    /// The busy-table lead, when this fetch is the one waiters follow.
    pub guard: Option<LeaderGuard>,
    /// The `Cache-Status` detail (why this fetch ran alone).
    pub detail: Option<&'static str>,
    pub plan: policy::StorePlan,
    pub content_length: Option<u64>,
    pub stored_at: Instant,
    pub seen: Position,
    /// The policy's `always_miss`: the copy this fetch refreshes goes now.
    pub always_miss: bool,
}

/// A cacheable response: its head published to the busy object waiters follow, a fill task
/// storing its body, and the client's response streamed from that busy object.
pub(super) async fn store(
    txn: &mut Txn,
    storing: Storing,
    mut parts: Parts,
    body: BackendBody,
) -> Step {
    let Storing {
        primary,
        mut guard,
        detail,
        plan,
        content_length,
        stored_at,
        seen,
        always_miss,
    } = storing;
    let proxy = txn.proxy.clone();
    // Too large for the shared tier (`max_object_size`): no node will get a copy from this
    // fetch, so the nodes waiting for it under the fleet lease fetch at once instead of
    // queueing behind it until it ends.
    if let (Some(shared), Some(len)) = (&proxy.cache.shared, content_length)
        && len > shared.max_object_size()
        && let Some(ticket) = guard.as_mut().and_then(LeaderGuard::take_ticket)
    {
        ticket.pass(proxy.config.cache.hit_for_miss_ttl.0);
    }
    let (vary, head_headers) = stored_head(txn, &mut parts, &plan);
    let busy = publish(
        txn,
        &parts,
        (&primary, guard.as_ref(), always_miss),
        (head_headers.clone(), &vary, &plan),
        (content_length, stored_at),
    );
    // Register our reader before the fill starts so no chunk can be trimmed before we read it.
    let reader = (!txn.head_only).then(|| busy.reader());
    if guard.is_none() {
        proxy.cache.clear_hit_for_miss(&primary);
    }
    let empty = content_length == Some(0) && !txn.head_only;
    spawn_fill(
        txn,
        parts.status,
        parts.headers,
        (vary, plan, stored_at, seen),
        (primary, busy.clone(), guard),
        body,
    );
    // An empty body ends the response at its head, before the fill stores the object: wait
    // for that (it has nothing to read), so the client's next request finds it stored
    // (`BusyReader::poll_chunk_settled` does the same for a body's last chunk).
    if empty {
        busy.settled().await;
    }
    let body = match reader {
        Some(r) => ResponseBody::busy(r, content_length),
        None => ResponseBody::empty(),
    };
    Step::Deliver(txn.stream_response(
        parts.status,
        head_headers,
        body,
        content_length,
        // The common case without formatting (this runs for every miss).
        &match detail {
            None => std::borrow::Cow::Borrowed("shellac; fwd=miss; stored"),
            Some(why) => {
                std::borrow::Cow::Owned(format!("shellac; fwd=miss; stored; detail={why}"))
            }
        },
    ))
}

/// The fields stored and sent: the plan's `strip` and `Age` out, the policy's `storing` hook;
/// the Vary selection (`Accept-Encoding` only when the body is chosen by coding), and the head
/// sent with the plan's initial `Age`.
fn stored_head(
    txn: &mut Txn,
    parts: &mut Parts,
    plan: &policy::StorePlan,
) -> (VarySelection, HeaderMap) {
    for name in &plan.strip {
        parts.headers.remove(name);
    }
    parts.headers.remove(header::AGE);
    txn.policy.storing(txn, &mut parts.headers);
    // A body every client can be served from (identity, or gzip decoded for those without
    // it) is one variant whatever their `Accept-Encoding` (`coding.rs`).
    let by_coding = super::super::coding::varies_on_coding(txn, &parts.headers);
    let vary: VarySelection = plan
        .vary
        .iter()
        .filter(|name| by_coding || **name != header::ACCEPT_ENCODING)
        .map(|name| (name.clone(), txn.req.headers.get(name).cloned()))
        .collect();
    let mut head_headers = parts.headers.clone();
    if plan.initial_age.as_secs() > 0 {
        head_headers.insert(header::AGE, HeaderValue::from(plan.initial_age.as_secs()));
    }
    (vary, head_headers)
}

/// The busy object waiters follow, with the head published: `always_miss` removes the copy
/// this fetch refreshes first; waiters that judge what is fetched see the object bodyless.
fn publish(
    txn: &Txn,
    parts: &Parts,
    (primary, guard, always_miss): (&CacheKey, Option<&LeaderGuard>, bool),
    (head_headers, vary, plan): (HeaderMap, &VarySelection, &policy::StorePlan),
    (content_length, stored_at): (Option<u64>, Instant),
) -> Arc<BusyObject> {
    let proxy = &txn.proxy;
    // `always_miss` (VCL's `req.hash_always_miss`): the copy it refreshes goes now, so
    // requests from here on follow this fetch (and then hit what it stores) rather than the
    // copy it replaces.
    if guard.is_some() && always_miss {
        let variant = proxy.cache.variant_key(primary, &txn.req.headers);
        proxy
            .cache
            .storage
            .remove(variant.as_ref().unwrap_or(primary));
    }
    let busy = guard
        .map(|g| g.object().clone())
        .unwrap_or_else(BusyObject::new);
    // Waiters that judge what is being fetched (VCL 4.x: vcl_hit, as Varnish's waiting list
    // looks the busy object up again) see the object as it will be stored, bodyless.
    let object = txn.policy.waiters_judge(txn).then(|| {
        Arc::new(Object::from_plan(
            parts.status,
            StoredFields::from_map(&parts.headers),
            Body::Memory(Default::default()),
            content_length.unwrap_or(0),
            crate::cache::boxed_vary(vary.clone()),
            plan,
            stored_at,
        ))
    });
    busy.set_head(BusyHead {
        status: parts.status,
        headers: head_headers,
        content_length,
        vary: vary.clone(),
        delivered: Default::default(),
        object,
    });
    busy
}

/// The fill task that stores the body (through the fetch chain when it has filters).
fn spawn_fill(
    txn: &mut Txn,
    status: http::StatusCode,
    headers: HeaderMap,
    (vary, plan, stored_at, seen): (VarySelection, policy::StorePlan, Instant, Position),
    (primary, busy, guard): (CacheKey, Arc<BusyObject>, Option<LeaderGuard>),
    body: BackendBody,
) {
    let proxy = &txn.proxy;
    let charge = super::super::fill::charge(proxy, &primary, &plan, &headers);
    let fill = Fill {
        status,
        headers,
        vary,
        plan,
        stored_at,
        piece: None,
        seen,
        esi: txn.filters.esi.take(),
        identity: txn.filters.identity.take(),
        charge,
    };
    let chain = std::mem::take(&mut txn.filters.fetch);
    if chain.is_empty() {
        tokio::spawn(fill.run(proxy.clone(), primary, busy, guard, body));
    } else {
        tokio::spawn(fill.run(proxy.clone(), primary, busy, guard, chain.over(body)));
    }
}
