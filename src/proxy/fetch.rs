//! The Fetch step: send the backend request (see `send.rs`) and turn the answer into the next
//! step — pass it through, refresh a revalidated copy, fall back to a stale copy, or store it
//! through a busy object that waiters follow (see `fill.rs`).
//!
//! In steps: [`fetch`] asks the policy, runs [`exchange`] (send, and again while the policy
//! retries), then decides — pass, piece, revalidation, stale-if-error, the storage decision —
//! and ends in an uncacheable delivery or [`store`] (busy head, fill task, streamed answer).

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::header::{self, HeaderMap, HeaderValue};
use http::response::Parts;
use http::{Method, StatusCode};

use super::body::ResponseBody;
use super::combine;
use super::fill::Fill;
use super::policy::{ErrorOutcome, Remember, ResponseOutcome, Storage};
use super::send::{self, SendFailure};
use super::txn::{FetchMode, Step, Txn};
use crate::backend::BackendBody;
use crate::cache::busy::{BusyHead, BusyObject, LeaderGuard};
use crate::cache::policy::{self, NoCacheReason};
use crate::cache::shared::SharedTier;
use crate::cache::shared::feed::{self, Invalidation, Position};
use crate::cache::{Body, CacheKey, Object, StoredFields, VarySelection};

/// Sends the backend request for `mode` and turns the answer into the next step.
pub(super) async fn fetch(txn: &mut Txn, mode: FetchMode) -> Step {
    let for_cache = !matches!(mode, FetchMode::Pass(_));
    // The policy on the backend request (VCL: vcl_backend_fetch, and its route).
    if let Some(step) = txn.policy.backend_fetch(txn, for_cache) {
        leave(&mode);
        return step;
    }
    let Exchanged {
        request_time,
        response_time,
        stored_at,
        seen,
        mut parts,
        body,
        storage,
        was_304,
    } = match exchange(txn, &mode, for_cache).await {
        ControlFlow::Continue(exchanged) => exchanged,
        ControlFlow::Break(step) => return step,
    };
    let overrides = storage.overrides();

    // The fetch filters (`filter/`): the fields as they leave them, and whether what they
    // make may be stored. Nothing to do (no allocation, no call) when there are none.
    let filtered = super::filter::fetch_head(
        &mut txn.filters.fetch,
        parts.status,
        &mut parts.headers,
        was_304,
    );

    let times = || combine::Times {
        request: request_time,
        response: response_time,
        received: stored_at,
    };
    let (guard, detail) = match mode {
        FetchMode::Pass(reason) => {
            // RFC 9111 §4.4; under VCL only when the configuration asks (Varnish never
            // changes the cache on a pass or pipe).
            let invalidates = txn
                .proxy
                .config
                .invalidation
                .unsafe_requests_invalidate
                .unwrap_or(txn.policy == super::txn::Policy::Rules);
            if invalidates
                && !is_safe(&txn.req.method)
                && (parts.status.is_success() || parts.status.is_redirection())
            {
                let urls = invalidate(txn, &parts.headers);
                if let Some(shared) = txn.proxy.cache.shared.clone() {
                    invalidate_fleet(shared, urls).await;
                }
            }
            return pass(txn, reason, parts, body);
        }
        FetchMode::Miss(guard) => (Some(guard), None),
        FetchMode::Alone(why) => (None, Some(why)),
        FetchMode::Authorized => (None, None),
        FetchMode::Range(joined) if parts.status == StatusCode::PARTIAL_CONTENT => {
            return combine::ranged(txn, parts, body, times(), overrides, joined);
        }
        FetchMode::Complete(held, gap)
            if matches!(
                parts.status,
                StatusCode::PARTIAL_CONTENT | StatusCode::RANGE_NOT_SATISFIABLE
            ) =>
        {
            return combine::complete(txn, (held, gap), parts, body, times(), overrides);
        }
        // A full answer (the backend ignored the Range, or If-Range found the representation
        // changed) or an error: the usual path (a 200 is stored whole; a client's Range is
        // cut from it).
        FetchMode::Range(_) | FetchMode::Complete(..) => (None, None),
    };
    let Some(primary) = txn.key.clone() else {
        return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
    };
    let proxy = txn.proxy.clone();
    if was_304 && let Some(stale) = txn.stale.take() {
        return revalidated(
            txn,
            (guard, &primary, stale),
            parts,
            storage,
            (request_time, response_time, stored_at, seen),
        );
    }
    if parts.status.is_server_error()
        && !txn.background
        && let Some(stale) = txn.stale.take_if(|s| s.stale_if_error_ok(Instant::now()))
    {
        // stale-if-error (RFC 5861 §4): the stale copy answers instead of the error.
        if let Some(guard) = guard {
            guard.object().abandon();
        }
        return txn.deliver_stale(stale, "if-error");
    }

    let content_length = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let exchange = policy::Exchange {
        request_time,
        response_time,
        failed_status: send::failed_status(txn, parts.status),
        authorization: txn.authorized,
        partial_content: false,
    };
    let (plan, remember) =
        storage.decide(parts.status, &parts.headers, &exchange, &proxy.config.cache);
    let plan = plan.and_then(|plan| match content_length {
        Some(len) if len > proxy.max_object_size => Err(NoCacheReason::TooLarge),
        _ if !filtered.storable => Err(NoCacheReason::Filter),
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
    let plan = match plan {
        Ok(plan) => plan,
        Err(reason) => {
            proxy.counters.cache_uncacheable.inc();
            // What one user's credentials got says nothing about the URL for others. Under
            // VCL the URL is remembered as uncacheable for the `beresp.ttl` of its
            // hit-for-miss (none: not remembered).
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
            let body = super::filter::fetched(body, std::mem::take(&mut txn.filters.fetch));
            return Step::Deliver(txn.stream_response(
                parts.status,
                parts.headers,
                body,
                content_length,
                &status,
            ));
        }
    };

    store(
        txn,
        Storing {
            primary,
            guard,
            detail,
            plan,
            content_length,
            stored_at,
            seen,
            always_miss,
        },
        parts,
        body,
    )
    .await
}

/// What a cacheable response is stored with.
struct Storing {
    primary: CacheKey,
    /// The busy-table lead, when this fetch is the one waiters follow.
    guard: Option<LeaderGuard>,
    /// The `Cache-Status` detail (why this fetch ran alone).
    detail: Option<&'static str>,
    plan: policy::StorePlan,
    content_length: Option<u64>,
    stored_at: Instant,
    seen: Position,
    /// The policy's `always_miss`: the copy this fetch refreshes goes now.
    always_miss: bool,
}

/// A cacheable response: its head published to the busy object waiters follow, a fill task
/// storing its body, and the client's response streamed from that busy object.
async fn store(txn: &mut Txn, storing: Storing, mut parts: Parts, body: BackendBody) -> Step {
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
    for name in &plan.strip {
        parts.headers.remove(name);
    }
    parts.headers.remove(header::AGE);
    txn.policy.storing(txn, &mut parts.headers);
    let vary: VarySelection = plan
        .vary
        .iter()
        .map(|name| (name.clone(), txn.req.headers.get(name).cloned()))
        .collect();
    let mut head_headers = parts.headers.clone();
    if plan.initial_age.as_secs() > 0 {
        head_headers.insert(header::AGE, HeaderValue::from(plan.initial_age.as_secs()));
    }
    // `always_miss` (VCL's `req.hash_always_miss`): the copy it refreshes goes now, so
    // requests from here on follow this fetch (and then hit what it stores) rather than the
    // copy it replaces.
    if guard.is_some() && always_miss {
        let variant = proxy.cache.variant_key(&primary, &txn.req.headers);
        proxy
            .cache
            .storage
            .remove(variant.as_ref().unwrap_or(&primary));
    }
    let busy = guard
        .as_ref()
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
            &plan,
            stored_at,
        ))
    });
    busy.set_head(BusyHead {
        status: parts.status,
        headers: head_headers.clone(),
        content_length,
        vary: vary.clone(),
        delivered: Default::default(),
        object,
    });
    // Register our reader before the fill starts so no chunk can be trimmed before we read it.
    let reader = (!txn.head_only).then(|| busy.reader());
    if guard.is_none() {
        proxy.cache.clear_hit_for_miss(&primary);
    }
    let fill = Fill {
        status: parts.status,
        headers: parts.headers,
        vary,
        plan,
        stored_at,
        piece: None,
        seen,
    };
    let empty = content_length == Some(0) && !txn.head_only;
    let chain = std::mem::take(&mut txn.filters.fetch);
    if chain.is_empty() {
        tokio::spawn(fill.run(proxy.clone(), primary, busy.clone(), guard, body));
    } else {
        tokio::spawn(fill.run(
            proxy.clone(),
            primary,
            busy.clone(),
            guard,
            chain.over(body),
        ));
    }
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

/// A backend response head, as the policy left it, with what the fetch needs to store it.
struct Exchanged {
    /// When the backend request was sent, and its response head arrived (wall clock).
    request_time: SystemTime,
    response_time: SystemTime,
    /// When the response head arrived (monotonic): the stored object's birth.
    stored_at: Instant,
    /// Where this node stood in the fleet's invalidation log before asking the origin.
    seen: Position,
    parts: Parts,
    body: BackendBody,
    storage: Storage,
    /// A 304 revalidating the stale copy.
    was_304: bool,
}

/// The exchange with the backend, again as long as the policy says `retry` (VCL: bounded by
/// MAX_RETRIES): the response head as the policy left it, or the step the fetch ends in (an
/// error answered, a stale copy served, the policy's own answer).
async fn exchange(
    txn: &mut Txn,
    mode: &FetchMode,
    for_cache: bool,
) -> ControlFlow<Step, Exchanged> {
    loop {
        let request_time = SystemTime::now();
        // Where this node stood in the fleet's invalidation log before asking the origin.
        let seen = txn
            .proxy
            .cache
            .shared
            .as_ref()
            .map(|s| s.feed.position())
            .unwrap_or_default();
        let resp = match send::send(txn, for_cache).await {
            Ok(resp) => resp,
            Err(failure) => {
                let stale_answers =
                    txn.stale.as_ref().is_some_and(|s| s.stale_ok) && !txn.background;
                let (status, detail) = failure.status_detail();
                if !stale_answers
                    && let Some(outcome) = txn.policy.backend_error(txn, status, detail)
                {
                    match outcome {
                        ErrorOutcome::Retry => continue,
                        ErrorOutcome::Step(step) => {
                            if let FetchMode::Miss(guard) = mode {
                                guard.object().fail_with(status, detail);
                            }
                            return ControlFlow::Break(step);
                        }
                    }
                }
                return ControlFlow::Break(failed(txn, mode, failure));
            }
        };
        let response_time = SystemTime::now();
        let stored_at = Instant::now();
        let (mut parts, mut body) = resp.into_parts();
        // A 304 answering the revalidation of a stale copy (`send` made the request
        // conditional on it).
        let was_304 = for_cache && parts.status == StatusCode::NOT_MODIFIED && txn.stale.is_some();
        if was_304 && !still_stored(txn).await {
            // The copy was purged or banned while the backend was asked: it is never refreshed
            // and served. The policy may fail the fetch (VCL 4.x, as Varnish does); otherwise
            // the object is fetched again, unconditionally (there is nothing left to
            // revalidate).
            txn.proxy.counters.cache_revalidated_gone.inc();
            txn.stale = None;
            drop(body);
            match txn.policy.stale_gone(txn) {
                Some(ErrorOutcome::Retry) | None => continue,
                Some(ErrorOutcome::Step(step)) => {
                    if let FetchMode::Miss(guard) = mode {
                        guard
                            .object()
                            .fail_with(StatusCode::SERVICE_UNAVAILABLE, "stale-gone");
                    }
                    return ControlFlow::Break(step);
                }
            }
        }
        let ex = policy::Exchange::at(request_time, response_time);
        let storage = match txn
            .policy
            .backend_response(txn, &mut parts, &ex, mode, was_304)
        {
            ResponseOutcome::Store { storage, buffer } => {
                if buffer
                    && !was_304
                    && let Err(step) = read_ahead(txn, mode, &mut parts, &mut body).await
                {
                    return ControlFlow::Break(step);
                }
                storage
            }
            ResponseOutcome::Retry => continue,
            ResponseOutcome::Step(step) => {
                leave(mode);
                return ControlFlow::Break(step);
            }
        };
        return ControlFlow::Continue(Exchanged {
            request_time,
            response_time,
            stored_at,
            seen,
            parts,
            body,
            storage,
            was_304,
        });
    }
}

/// VCL's `beresp.do_stream = false`: the whole body is read before the response goes out,
/// so a body that fails (between_bytes_timeout, a cut connection) is a 503 rather than a
/// truncated response, and a body the backend framed by closing the connection gets a
/// `Content-Length`. At most `cache.max_object_size` is held: past it the rest streams.
async fn read_ahead(
    txn: &mut Txn,
    mode: &FetchMode,
    parts: &mut Parts,
    body: &mut BackendBody,
) -> Result<(), Step> {
    match body.buffer(txn.proxy.max_object_size).await {
        Ok(Some(len)) => {
            // A length the backend sent stays (a HEAD's answer has one and no body).
            if !parts.headers.contains_key(header::CONTENT_LENGTH) {
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            }
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) => {
            tracing::warn!(error = %e, "backend body failed before delivery (beresp.do_stream = false)");
            if let FetchMode::Miss(guard) = mode {
                guard
                    .object()
                    .fail_with(StatusCode::SERVICE_UNAVAILABLE, "body-failed");
            }
            Err(Step::VclSynth(
                503,
                Some("Backend fetch failed".to_string()),
            ))
        }
    }
}

/// A fetch VCL left: the busy object is abandoned, so waiters look up again.
fn leave(mode: &FetchMode) {
    if let FetchMode::Miss(guard) = mode {
        guard.object().abandon();
    }
}

/// No backend could answer: waiters get the same error; the stale copy answers if allowed.
fn failed(txn: &mut Txn, mode: &FetchMode, failure: SendFailure) -> Step {
    let (status, detail) = failure.status_detail();
    if let FetchMode::Miss(guard) = mode {
        guard.object().fail_with(status, detail);
    }
    match txn.stale.take() {
        Some(stale) if stale.stale_ok && !txn.background => txn.deliver_stale(stale, detail),
        // A stale copy exists but may not be served (must-revalidate, proxy-revalidate,
        // s-maxage): RFC 9111 §5.2.2.2 says the error SHOULD be 504.
        Some(_) => Step::Synth(StatusCode::GATEWAY_TIMEOUT, detail),
        None => Step::Synth(status, detail),
    }
}

/// Whether `method` is safe (RFC 9110 §9.2.1: GET, HEAD, OPTIONS, TRACE). Every other method
/// — POST, PUT, DELETE, PATCH and any extension method (`M-SEARCH`, WebDAV's `MKCOL`, ...) —
/// may change the resource: Shellac cannot know what an unknown method does, so it assumes
/// the worst.
pub(super) fn is_safe(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// A passed request's response, streamed as is; a successful (2xx/3xx) unsafe request
/// invalidates what it may have changed (RFC 9111 §4.4).
fn pass(txn: &mut Txn, reason: NoCacheReason, parts: Parts, body: BackendBody) -> Step {
    let fwd = if reason == NoCacheReason::Method {
        "method"
    } else {
        "request"
    };
    let status = format!("shellac; fwd={fwd}; detail={}", reason.as_str());
    let body = if txn.head_only {
        ResponseBody::empty()
    } else {
        super::filter::fetched(body, std::mem::take(&mut txn.filters.fetch))
    };
    let switching = parts.status == StatusCode::SWITCHING_PROTOCOLS;
    let mut parts = parts;
    let on_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    let mut resp = super::deliver::respond(parts.status, parts.headers, body, &status);
    // The backend switched protocols (only ever for an upgrade it was asked for): the server
    // joins the two connections once the 101 is written (`server::tunnel`).
    if switching && let Some(on_upgrade) = on_upgrade {
        let h = resp.headers_mut();
        h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        if let Some(protocol) = txn.req.headers.get(header::UPGRADE) {
            h.insert(header::UPGRADE, protocol.clone());
        }
        resp.extensions_mut().insert(on_upgrade);
    }
    Step::Deliver(resp)
}

/// Purges the target URI and the same-host `Location` / `Content-Location` URIs.
fn invalidate(txn: &Txn, response: &HeaderMap) -> Vec<CacheKey> {
    let Some(target) = &txn.key else {
        return Vec::new();
    };
    let cache = &txn.proxy.cache;
    let mut removed = cache.purge(target);
    let mut urls = vec![target.clone()];
    for name in [header::LOCATION, header::CONTENT_LOCATION] {
        let Some(uri) = response.get(&name).and_then(|v| v.to_str().ok()) else {
            continue;
        };
        if let Some(key) = same_host_key(target, uri) {
            removed += cache.purge(&key);
            urls.push(key);
        }
    }
    txn.proxy.counters.cache_invalidated.add(removed as u64);
    urls
}

/// With a fleet, the URLs an unsafe request invalidated leave the shared tier before the
/// answer (or this node's next miss would find them there: at most `write_timeout` each),
/// and every other node's tiers in the background.
async fn invalidate_fleet(shared: Arc<SharedTier>, urls: Vec<CacheKey>) {
    let at = shared.feed.position();
    for url in &urls {
        shared.purge_url(url, at).await;
    }
    tokio::spawn(async move {
        for url in urls {
            feed::broadcast(&shared, Invalidation::Purge(url)).await;
        }
    });
}

/// The cache key of `uri` if it is relative or names the same host as `target`.
fn same_host_key(target: &CacheKey, uri: &str) -> Option<CacheKey> {
    if uri.starts_with('/') && !uri.starts_with("//") {
        return Some(CacheKey::new(target.host(), uri));
    }
    let parsed: http::Uri = uri.parse().ok()?;
    let authority = parsed.authority()?;
    let key = CacheKey::new(
        authority.as_str(),
        parsed.path_and_query().map(|p| p.as_str()).unwrap_or("/"),
    );
    (key.host() == target.host()).then_some(key)
}

/// Whether the stale copy a 304 just revalidated is still stored (under its own variant's
/// key, the same object or the same response re-timed by a soft purge) and unbanned. A copy
/// purged or banned while the backend was asked must not come back refreshed.
async fn still_stored(txn: &Txn) -> bool {
    let (Some(primary), Some(stale)) = (&txn.key, &txn.stale) else {
        return false;
    };
    let cache = &txn.proxy.cache;
    let key = if stale.vary().is_empty() {
        primary.clone()
    } else {
        let names: Vec<_> = stale.vary().iter().map(|(n, _)| n.clone()).collect();
        let mut selected = HeaderMap::new();
        for (n, v) in stale.vary() {
            if let Some(v) = v {
                selected.append(n.clone(), v.clone());
            }
        }
        primary.with_variant(crate::cache::vary::variant_hash(&names, &selected))
    };
    if cache.bans.is_banned(&key, stale) {
        return false;
    }
    cache.storage.inspect(&key).await.iter().any(|(_, o)| {
        Arc::ptr_eq(o, stale)
            || (o.status == stale.status
                && o.body_len == stale.body_len
                && o.headers.block() == stale.headers.block())
    })
}

/// The backend answered our conditional request with 304: the stale copy is fresh again with
/// the 304's header fields merged in (RFC 9111 §3.2, §4.3.4). Under VCL, `parts` is already
/// that merge as vcl_backend_response left it, stored by `vcl_plan`.
fn revalidated(
    txn: &mut Txn,
    (mut guard, primary, stale): (Option<LeaderGuard>, &CacheKey, Arc<Object>),
    parts: Parts,
    storage: Storage,
    (request_time, response_time, stored_at, seen): (SystemTime, SystemTime, Instant, Position),
) -> Step {
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
    let (plan, remember) = storage.decide(status_code, &headers, &ex, &proxy.config.cache);
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
            // Validated, but no longer storable: deliver this once and forget the copy (VCL:
            // remembered as uncacheable for its hit-for-miss `beresp.ttl`).
            proxy.cache.purge(primary);
            if let Some(ttl) = hit_for_miss {
                proxy.cache.mark_hit_for_miss(primary.clone(), ttl);
            }
            let object = Arc::new(Object {
                status: status_code,
                headers: StoredFields::from_map(&headers),
                ttl: crate::cache::Span::ZERO,
                stored_at,
                hits: Default::default(),
                ..stale.copy()
            });
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
        // Waiters follow the refreshed object like any fill.
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
    txn.deliver_object(object, &status)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23: extension methods are unsafe too (only GET, HEAD, OPTIONS, TRACE are safe).
    #[test]
    fn only_the_four_safe_methods_are_safe() {
        for m in ["GET", "HEAD", "OPTIONS", "TRACE"] {
            assert!(is_safe(&Method::from_bytes(m.as_bytes()).unwrap()), "{m}");
        }
        for m in [
            "POST",
            "PUT",
            "DELETE",
            "PATCH",
            "M-SEARCH",
            "MKCOL",
            "PROPPATCH",
            "LINK",
            "get",
        ] {
            assert!(!is_safe(&Method::from_bytes(m.as_bytes()).unwrap()), "{m}");
        }
    }

    #[test]
    fn invalidation_stays_on_the_same_host() {
        let target = CacheKey::new("www.example.com", "/form");
        assert_eq!(
            same_host_key(&target, "/thanks").unwrap().path_and_query(),
            "/thanks"
        );
        assert_eq!(
            same_host_key(&target, "http://www.example.com/a?b")
                .unwrap()
                .path_and_query(),
            "/a?b"
        );
        assert!(same_host_key(&target, "http://evil.example/a").is_none());
        assert!(same_host_key(&target, "//evil.example/a").is_none());
    }
}
