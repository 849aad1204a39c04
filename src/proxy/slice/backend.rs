//! Each slice fetched is a backend transaction of its own, as each backend fetch is in
//! Varnish: a transaction of the backend side (`Txn::backend_side`, with what the client
//! request left it: rules matched, route, VCL's backend hint) runs the policy's backend-request
//! step (VCL's vcl_backend_fetch) on the client's request, sends it with the slice's `Range`,
//! gives a failure to the backend-error step (which may retry) and the response head to the
//! backend-response step (vcl_backend_response, a rule's response actions), which may change
//! it, retry, refuse to store it or abandon the fetch. The storage decision it makes is the
//! slice's own: a later slice the policy finds uncacheable is sent to the client but not
//! stored, one it gives another `ttl` is stored with that.

use std::time::SystemTime;

use http::StatusCode;
use http::response::Parts;

use super::Ctx;
use crate::backend::BackendBody;
use crate::cache::policy::{Exchange, NoCacheReason, StorePlan};
use crate::proxy::policy::{ErrorOutcome, ResponseOutcome};
use crate::proxy::txn::{FetchMode, Txn};

/// Backend requests one slice sends at most (the policy's retries included).
const TRIES: usize = 4;

/// A slice's response head as the policy left it, its body, and the policy's storage decision.
pub(super) struct Fetched {
    pub parts: Parts,
    pub body: BackendBody,
    pub plan: Result<StorePlan, NoCacheReason>,
}

/// Bytes `start..=end` of `ctx`'s URL, asked through a backend transaction of its own; the
/// status and detail to fail the slice with when no response could be had or the policy
/// abandoned the fetch.
pub(super) async fn exchange(
    ctx: &Ctx,
    (start, end): (u64, u64),
) -> Result<Fetched, (StatusCode, &'static str)> {
    let mut txn = Txn::backend_side(
        ctx.proxy.clone(),
        (crate::proxy::backend_side::get_head(&ctx.req), ctx.client),
        (ctx.primary.clone(), ctx.inherited.clone()),
        None,
        false,
    );
    // Policy hook: the backend request (VCL: vcl_backend_fetch, and its route).
    if txn.policy.backend_fetch(&mut txn, true).is_some() {
        return Err((StatusCode::SERVICE_UNAVAILABLE, "slice-abandoned"));
    }
    for _ in 0..TRIES {
        let Some(requester) = txn.slice_requester() else {
            return Err((StatusCode::SERVICE_UNAVAILABLE, "no-healthy-backend"));
        };
        let request_time = SystemTime::now();
        let resp = match requester.send(start, end).await {
            Ok(resp) => resp,
            Err((status, detail)) => match txn.policy.backend_error(&mut txn, status, detail) {
                Some(ErrorOutcome::Retry) => continue,
                _ => return Err((status, detail)),
            },
        };
        let (mut parts, body) = resp.into_parts();
        // Shellac's own fields: a backend never sets them (as `fetch/exchange.rs`).
        parts.headers.remove(crate::proxy::filter::esi::FIELD);
        parts.headers.remove(crate::cache::identity::FIELD);
        parts.headers.remove(crate::cache::status_line::FIELD);
        let ex = Exchange {
            partial_content: true,
            ..Exchange::at(request_time, SystemTime::now())
        };
        let mode = FetchMode::Alone("slice");
        match txn
            .policy
            .backend_response(&mut txn, &mut parts, &ex, &mode, false)
        {
            ResponseOutcome::Store { storage, .. } => {
                let plan = storage.plan(parts.status, &parts.headers, &ex, txn.cache_config());
                return Ok(Fetched { parts, body, plan });
            }
            ResponseOutcome::Retry => continue,
            ResponseOutcome::Step(_) | ResponseOutcome::Made(_) => {
                return Err((StatusCode::SERVICE_UNAVAILABLE, "slice-abandoned"));
            }
        }
    }
    Err((StatusCode::SERVICE_UNAVAILABLE, "too-many-retries"))
}
