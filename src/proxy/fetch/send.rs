//! Choosing a backend of the route and sending the backend request (built by `request.rs`):
//! retries on connection failures, restarts on chosen statuses.

use std::sync::Arc;

use http::{Method, Response, StatusCode};

use super::super::txn::Txn;
use super::request::build_request;
use crate::backend::director::{Member, Pick};
use crate::backend::{Backend, BackendBody, FetchError, Refusal, ScriptRefusal, TryNext};
use crate::cache::CacheKey;

/// Attempts at most per request (first try, retries and restarts together).
const MAX_ATTEMPTS: usize = 16;

/// Why no backend response could be obtained.
pub(super) enum SendFailure {
    /// The route's director had no healthy backend to offer.
    NoHealthyBackend,
    /// The request body went to an earlier backend request and was not kept (VCL's
    /// `std.cache_req_body()`): a retry or restart cannot send it again.
    BodyConsumed,
    /// The last backend tried failed.
    Fetch(FetchError),
}

impl SendFailure {
    pub(super) fn status_detail(&self) -> (StatusCode, &'static str) {
        match self {
            SendFailure::NoHealthyBackend => {
                (StatusCode::SERVICE_UNAVAILABLE, "no-healthy-backend")
            }
            SendFailure::BodyConsumed => (StatusCode::SERVICE_UNAVAILABLE, "request-body-consumed"),
            SendFailure::Fetch(e) => (e.status(), e.as_str()),
        }
    }

    /// What Varnish's `FetchError` record says of it (no backend to use: `No backend`, as
    /// `VDI_Resolve` logs it).
    pub(super) fn varnish_words(&self) -> String {
        match self {
            SendFailure::NoHealthyBackend => "No backend".to_string(),
            SendFailure::BodyConsumed => "req.body already consumed".to_string(),
            SendFailure::Fetch(e) => e.varnish_words(),
        }
    }
}

/// Picks a backend from the route and sends the request. Connection failures (before any
/// response byte) of idempotent requests are retried on the next choice; a response whose
/// status the director's `restart_on` names is re-run on the next choice, at most
/// `max_restarts` times — after the last one, or when no other backend is left, that response
/// is delivered.
pub(super) async fn send(
    txn: &mut Txn,
    for_cache: bool,
) -> Result<Response<BackendBody>, SendFailure> {
    let mut route = txn
        .route
        .clone()
        .unwrap_or_else(|| txn.proxy.backends.default.clone());
    let key = txn.key.clone().unwrap_or_else(|| CacheKey::new("", "/"));
    // Owned: `txn` is lent mutably below (the miss path; one reference count per fetch).
    let proxy = txn.proxy.clone();
    let counters = &proxy.counters;
    let idempotent = may_resend(txn, for_cache);
    if body_gone(txn, for_cache) {
        return Err(SendFailure::BodyConsumed);
    }
    let mut tried: Vec<Arc<Backend>> = Vec::new();
    let mut restarts = 0;
    let mut handed_on = false;
    let mut last_error = None;
    for _ in 0..MAX_ATTEMPTS {
        let Some(backend) = choose(&route, &key, txn, &tried) else {
            break;
        };
        txn.backend = Some(backend.clone());
        let mut bereq = build_request(txn, &backend, for_cache);
        // Awaited here, not in an `async fn` of its own: that future would hold a second
        // backend request, and this one is part of every miss's future (moved when boxed).
        // With interim responses (1xx) forwarded to the client while the final one is
        // awaited, when the client's connection takes them.
        let sent = match txn.interim.clone() {
            Some(sink) => {
                let heads = super::super::interim::listen(&mut bereq, counters.clone());
                let version = txn.req.version;
                let sending = backend.send(bereq);
                super::super::interim::forward_while(sending, heads, &*sink, version, counters)
                    .await
            }
            None => backend.send(bereq).await,
        };
        match sent {
            Err(e) => {
                tracing::warn!(backend = backend.name(), error = %e, "backend fetch failed");
                if !(idempotent && e.before_response()) {
                    return Err(SendFailure::Fetch(e));
                }
                tried.push(backend);
                last_error = Some(e);
                // A retry is counted only when there is another backend to retry on: one
                // refused backend alone is a failure, not a retry that never happened.
                if choose(&route, &key, txn, &tried).is_none() {
                    break;
                }
                counters.backend_retry.inc();
            }
            Ok(resp) => {
                // A files origin's refusal, counted by reason (`files_refused_*`).
                // And by site (the backend's own count: `files/mod.rs`).
                if let Some(refusal) = resp.extensions().get::<Refusal>() {
                    refusal.counter(counters).inc();
                    if let Some(site) = &txn.site {
                        site.stats.files_refused.count(*refusal);
                    }
                }
                // A FastCGI origin's, before the application saw the request
                // (`fastcgi_refused_*`).
                if let Some(counter) = resp
                    .extensions()
                    .get::<ScriptRefusal>()
                    .and_then(|r| r.counter(counters))
                {
                    counter.inc();
                }
                // A files origin's `try_files` found nothing and names the backend that
                // answers instead: once (a second hand-over would be a loop the
                // configuration cannot express, so the files origin's 404 stands).
                if let Some(next) = resp.extensions().get::<TryNext>()
                    && !handed_on
                    && let Some(member) = proxy.backends.get(&next.0)
                {
                    handed_on = true;
                    route = member;
                    tried.clear();
                    counters.files_try_next.inc();
                    continue;
                }
                let Some(director) = route.director() else {
                    return Ok(resp);
                };
                if !(idempotent
                    && restarts < director.max_restarts
                    && director.restarts_on(resp.status().as_u16()))
                {
                    return Ok(resp);
                }
                tried.push(backend);
                if choose(&route, &key, txn, &tried).is_none() {
                    return Ok(resp);
                }
                // Not used: its connection is kept when its body is small and on its way.
                resp.into_body().drain().await;
                restarts += 1;
                counters.backend_restart.inc();
            }
        }
    }
    match last_error {
        Some(e) => Err(SendFailure::Fetch(e)),
        None => {
            counters.backend_unhealthy.inc();
            Err(SendFailure::NoHealthyBackend)
        }
    }
}

/// Whether a failed or restarted request may go to another backend: a cache fill, or an
/// idempotent method whose body (if any) is held in memory — none, or kept by VCL's
/// `std.cache_req_body()`.
fn may_resend(txn: &Txn, for_cache: bool) -> bool {
    // A body can go to a second backend only when it is held in memory (none, or kept by
    // VCL's std.cache_req_body()).
    let resendable = for_cache || txn.body_resendable();
    for_cache
        || (resendable
            && matches!(
                txn.req.method,
                Method::GET
                    | Method::HEAD
                    | Method::PUT
                    | Method::DELETE
                    | Method::OPTIONS
                    | Method::TRACE
            ))
}

/// Whether the body this backend request would send is gone (an earlier one sent it).
fn body_gone(txn: &Txn, for_cache: bool) -> bool {
    let bereq = txn.policy.backend_request(txn);
    let method = bereq.as_ref().map_or(&txn.req.method, |b| b.method);
    let sends = !for_cache
        && !bereq.as_ref().is_some_and(|b| b.no_body)
        && !matches!(*method, Method::GET | Method::HEAD);
    if txn.body_spent(sends) {
        tracing::warn!("request body already sent to a backend and not kept: not sent again");
        return true;
    }
    false
}

/// Whether the director this request is routed to counts `status` as failed (`restart_on` /
/// `restart_unless`): such a response is what was left after the restarts, delivered but never
/// stored (unless a rule says `override_origin`).
pub(super) fn failed_status(txn: &Txn, status: StatusCode) -> bool {
    txn.route
        .as_ref()
        .unwrap_or(&txn.proxy.backends.default)
        .director()
        .is_some_and(|d| d.restarts_on(status.as_u16()))
}

fn choose(
    route: &Member,
    key: &CacheKey,
    txn: &Txn,
    tried: &[Arc<Backend>],
) -> Option<Arc<Backend>> {
    route.pick(&Pick {
        key,
        headers: &txn.req.headers,
        client: txn.client.ip(),
        exclude: tried,
        hash: txn.route_hash,
        draw: txn.policy.route_draw(txn, route),
    })
}
