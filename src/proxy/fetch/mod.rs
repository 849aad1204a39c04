//! The Fetch step: send the backend request and turn the answer into the next step — pass it
//! through, refresh a revalidated copy, fall back to a stale copy, or store it through a busy
//! object that waiters follow (`fill.rs`).
//!
//! In steps, one file each: the backend request is built (`request.rs`) and sent to a backend
//! of the route (`send.rs`); [`fetch`] asks the policy (`backend_fetch`), runs the exchange
//! (`exchange.rs`: send, and again while the policy retries; `backend_response` leaves the
//! head and the storage decision's inputs), runs the fetch filters' head (`filter/`), then
//! ends in a pass (`pass.rs`, with RFC 9111 §4.4 invalidation), a piece of partial content
//! (`combine.rs`), a revalidated copy (`revalidate.rs`), stale-if-error, or the storage
//! decision (`decide.rs`): an uncacheable delivery or the store (`store.rs`: busy head, fill
//! task, streamed answer).

mod decide;
mod exchange;
mod pass;
mod request;
mod revalidate;
mod send;
mod store;

use std::ops::ControlFlow;
use std::time::Instant;

use http::StatusCode;

use super::combine;
use super::policy::Instead;
use super::txn::{FetchMode, Step, Txn};
use crate::cache::CacheKey;
use crate::cache::busy::LeaderGuard;
use decide::Decision;
use exchange::{Exchanged, leave};
use store::Storing;

/// Sends the backend request for `mode` and turns the answer into the next step.
pub(super) async fn fetch(txn: &mut Txn, mode: FetchMode) -> Step {
    let for_cache = !matches!(mode, FetchMode::Pass(_));
    // Policy hook: the backend request (VCL: vcl_backend_fetch, and its route). An answer it
    // made instead is stored in the response's place, as vcl_backend_error's object is.
    let mut ex = match txn.policy.backend_fetch(txn, for_cache) {
        Some(Instead::Step(step)) => {
            leave(&mode);
            return step;
        }
        Some(Instead::Made(made)) => exchange::made_now(txn, *made),
        None => match exchange::exchange(txn, &mode, for_cache).await {
            ControlFlow::Continue(exchanged) => exchanged,
            ControlFlow::Break(step) => return step,
        },
    };

    let storable = fetch_filters(txn, &mut ex, for_cache);

    let (guard, detail) = match mode {
        FetchMode::Pass(reason) => return pass::pass(txn, reason, ex.parts, ex.body).await,
        FetchMode::Miss(guard) => (Some(guard), None),
        FetchMode::Alone(why) => (None, Some(why)),
        FetchMode::Authorized => (None, None),
        FetchMode::Range(joined) if ex.parts.status == StatusCode::PARTIAL_CONTENT => {
            let times = ex.times();
            // Big media: a representation longer than `max_object_size` is sliced from now on.
            let exchange = crate::cache::policy::Exchange {
                partial_content: true,
                ..crate::cache::policy::Exchange::at(times.request, times.response)
            };
            super::slice::learn_ranged(txn, &ex.parts, &ex.storage, &exchange);
            let overrides = ex.storage.overrides();
            return combine::ranged(txn, ex.parts, ex.body, times, overrides, joined);
        }
        FetchMode::Complete(held, gap)
            if matches!(
                ex.parts.status,
                StatusCode::PARTIAL_CONTENT | StatusCode::RANGE_NOT_SATISFIABLE
            ) =>
        {
            let overrides = ex.storage.overrides();
            let times = ex.times();
            return combine::complete(txn, (held, gap), ex.parts, ex.body, times, overrides);
        }
        // A full answer (the backend ignored the Range, or If-Range found the representation
        // changed) or an error: the usual path (a 200 is stored whole; a client's Range is
        // cut from it).
        FetchMode::Range(_) | FetchMode::Complete(..) => (None, None),
    };
    let Some(primary) = txn.key.clone() else {
        return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
    };
    if ex.was_304
        && let Some(stale) = txn.stale.take()
    {
        return revalidate::revalidated(txn, (guard, &primary, stale), ex);
    }
    if crate::http::is_server_error(ex.parts.status)
        && !txn.background
        && let Some(stale) = txn.stale.take_if(|s| s.stale_if_error_ok(Instant::now()))
    {
        // stale-if-error (RFC 5861 §4): the stale copy answers instead of the error (a 5xx,
        // or under VCL a 600-999, processed as a 5xx: RFC 9110 §15).
        if let Some(guard) = guard {
            guard.object().abandon();
        }
        return txn.deliver_stale(stale, "if-error");
    }

    // The store awaited here, not in an `async fn` of its own: that future would hold a second
    // copy of the exchange, and this one is part of every miss's future (moved when boxed).
    match decided(txn, ex, primary, (guard, detail), storable) {
        ControlFlow::Continue((storing, parts, body)) => {
            store::store(txn, storing, parts, body).await
        }
        ControlFlow::Break(step) => step,
    }
}

/// The body filters of the answer (`filter/`): the content codings (`coding.rs`), ESI, and
/// the fetch chain's head: the fields as the filters leave them, and whether what they make
/// may be stored.
fn fetch_filters(txn: &mut Txn, ex: &mut Exchanged, for_cache: bool) -> bool {
    // Content codings (`coding.rs`): gzip once what is stored, check an origin's gzip.
    let fill = for_cache && !ex.was_304;
    // Asked only where it changes the choice: a fill for a client that does not take gzip.
    let refused = fill
        && !super::coding::takes_gzip(txn)
        && decide::refused(txn, &ex.storage, &ex.parts, &ex.clock);
    super::coding::on_response(txn, ex.parts.status, &ex.parts.headers, fill, refused);
    // ESI (`filter/esi/`): its parse filter after the coding filters, over identity bytes.
    super::filter::esi::attach(&mut txn.filters);
    // Body filters, fetch chain (`filter/`): the fields as they leave them, and whether what
    // they make may be stored. Nothing to do (no allocation, no call) when there are none.
    super::filter::fetch_head(
        &mut txn.filters.fetch,
        ex.parts.status,
        &mut ex.parts.headers,
        ex.was_304,
    )
    .storable
}

/// The storage decision, made once (`Storage::decide`, whichever policy front-end), and what
/// follows it: an uncacheable delivery (`decide.rs`, `Break`) or what the store (`store.rs`)
/// needs (`Continue`).
fn decided(
    txn: &mut Txn,
    ex: Exchanged,
    primary: CacheKey,
    (guard, detail): (Option<LeaderGuard>, Option<&'static str>),
    storable: bool,
) -> ControlFlow<Step, (Storing, http::response::Parts, crate::backend::BackendBody)> {
    let Exchanged {
        parts,
        body,
        storage,
        clock,
        ..
    } = ex;
    let Decision {
        plan,
        remember,
        content_length,
        always_miss,
    } = decide::decide(txn, storage, &parts, &clock, storable);
    let plan = match plan {
        Ok(plan) => plan,
        Err(reason) => {
            let unstored = decide::Unstored {
                primary,
                guard,
                reason,
                remember,
                content_length,
            };
            return ControlFlow::Break(decide::uncacheable(txn, unstored, parts, body));
        }
    };
    let storing = Storing {
        primary,
        guard,
        detail,
        plan,
        content_length,
        stored_at: clock.stored_at,
        seen: clock.seen,
        always_miss,
    };
    ControlFlow::Continue((storing, parts, body))
}
