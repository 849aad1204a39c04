//! The VCL front-end of the policy seam: each hook runs the program's subroutine for its step
//! (`client.rs`: vcl_recv, vcl_hash, vcl_hit, vcl_miss, vcl_pass, vcl_pipe, vcl_purge,
//! vcl_deliver, vcl_synth / 2.x vcl_error; `backend.rs`: vcl_backend_fetch;
//! `backend_response.rs`: vcl_backend_response / 2.x vcl_fetch; `backend_error.rs`:
//! vcl_backend_error) and turns its action into the machine's next step. The request's VCL state is `Txn::vcl` (`proxy/vcl/`).

mod answer;
mod backend;
mod backend_error;
mod backend_response;
mod bereq;
mod client;
mod lookup;
mod store_plan;

use std::sync::Arc;

use http::response::Parts;
use http::{HeaderMap, Response, StatusCode};

use super::{
    BackendRequest, Delivery, ErrorOutcome, Hooks, Instead, Limits, LookupFlags, ResponseOutcome,
    Storage,
};
use crate::backend::director::Member;
use crate::cache::busy::LeaderGuard;
use crate::cache::policy::{Exchange, NoCacheReason};
use crate::cache::{CacheKey, Object};
use crate::http::headers;
use crate::proxy::body::ResponseBody;
use crate::proxy::judge::wash_accept_encoding;
use crate::proxy::txn::{FetchMode, Inherited, Step, Txn};
use crate::vcl::run::BackendSel;

/// The VCL policy: the configuration's program (`Proxy::vcl`).
pub(in crate::proxy) struct Vcl;

/// The request's `Accept-Encoding` field lines.
fn accept_encoding(headers: &http::HeaderMap) -> Vec<http::HeaderValue> {
    headers
        .get_all(http::header::ACCEPT_ENCODING)
        .iter()
        .cloned()
        .collect()
}

/// Whether the request runs a 2.x program.
fn legacy(txn: &Txn) -> bool {
    txn.vcl
        .as_ref()
        .is_some_and(|v| v.runtime.program.dialect.is_legacy())
}

impl Hooks for Vcl {
    fn recv(txn: &mut Txn) -> Step {
        let Some(rt) = txn.vcl_program() else {
            return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-vcl-program");
        };
        // The VCL program decides (its built-in VCL for what the operator's does not):
        // PURGE, methods, Authorization, cookies; Accept-Encoding normalised first, as
        // Varnish does before vcl_recv.
        if txn.proxy.config.cache.normalize_accept_encoding {
            wash_accept_encoding(&mut txn.req.headers);
        }
        let washed = accept_encoding(&txn.req.headers);
        let mut step = client::recv(txn, &rt);
        // Varnish 2.1 counts its restarts after vcl_recv: once `max_restarts` restarts are
        // reached the request goes to vcl_error (503 unless VCL chose an error), vcl_error
        // reading `req.restarts == max_restarts` (2.1.5/b00019); 4.x synthesizes on the
        // restart past the limit instead (`answer::restart`). A first request never does.
        let max_restarts = txn.proxy.config.vcl.max_restarts;
        if let Some(v) = txn.vcl.as_deref()
            && v.runtime.program.dialect.is_legacy()
            && v.state.restarts > 0
            && v.state.restarts >= max_restarts
            && !matches!(step, Step::VclSynth(..))
        {
            step = Step::VclSynth(503, None);
        }
        // A program that changed `req.http.Accept-Encoding` decides what the client takes
        // (Varnish reads the request's field when it delivers: a VCL that unsets it gets
        // the client identity); one that left it as washed leaves the client's own
        // preferences (its q-values, br and zstd) in force (`coding.rs`).
        if accept_encoding(&txn.req.headers) != washed {
            super::super::coding::on_request(txn);
        }
        step
    }

    fn restarted(txn: &Txn) -> bool {
        txn.vcl.as_ref().is_some_and(|v| v.state.restarts != 0)
    }

    fn lookup_flags(txn: &Txn) -> LookupFlags {
        txn.vcl
            .as_ref()
            .map_or(LookupFlags::default(), |v| LookupFlags {
                ignore_vary: v.state.hash_ignore_vary,
                always_miss: v.state.hash_always_miss,
                ignore_busy: v.state.hash_ignore_busy,
            })
    }

    /// `req.ttl` / `req.max_age` and `req.grace`, as Varnish's EXP_Ttl and EXP_Ttl_grace
    /// read them (`judge.rs` applies them).
    fn limits(txn: &Txn) -> Limits {
        txn.vcl.as_ref().map_or(Limits::default(), |v| Limits {
            ttl: v.state.req_ttl,
            grace: v.state.req_grace,
        })
    }

    /// Varnish 2.x's grace: a stale copy within grace answers only while a fetch of it is in
    /// progress or the request's backend is sick; otherwise it is fetched anew (4.x serves
    /// it and refreshes it in the background).
    fn grace_applies(txn: &Txn, key: &CacheKey, leading: bool) -> bool {
        let Some(v) = txn.vcl.as_deref() else {
            return true;
        };
        if !v.runtime.program.dialect.is_legacy() {
            return true;
        }
        if !leading && txn.proxy.cache.busy.contains(key) {
            return true;
        }
        let sel = v.state.backend.or_else(|| {
            v.runtime
                .program
                .default_target
                .map(|target| BackendSel { target, hash: None })
        });
        sel.and_then(|s| v.runtime.member(s))
            .is_some_and(|m| !m.healthy_for(key))
    }

    fn hit(txn: &mut Txn, object: &Arc<Object>) -> Option<Step> {
        lookup::after_hit(txn, object)
    }

    /// Under a 4.x program a waiter runs vcl_hit on what is being fetched, as Varnish's
    /// waiting list looks the busy object up again; VCL may take another way than
    /// delivering it. A waiter is served from the cache, as Varnish's waiting list is.
    fn waiting_hit(txn: &mut Txn, object: Option<&Arc<Object>>) -> Option<Step> {
        if let Some(object) = object
            && let Some(step) = lookup::after_waiting(txn, object)
        {
            return Some(step);
        }
        if let Some(v) = txn.vcl.as_deref_mut() {
            v.hit = true;
        }
        None
    }

    fn waiters_judge(txn: &Txn) -> bool {
        txn.vcl.is_some() && !legacy(txn)
    }

    fn miss(txn: &mut Txn, guard: LeaderGuard) -> Step {
        if txn.vcl.is_none() {
            return Step::Fetch(FetchMode::Miss(guard));
        }
        lookup::miss(txn, Some(guard), false)
    }

    /// The first slice stored: vcl_hit on it, as on an object a waiter follows (nothing is
    /// stored again: a slice's lifetimes are the representation's). Not stored: vcl_miss.
    fn slices(txn: &mut Txn, stored: Option<&Arc<Object>>) -> Option<Step> {
        txn.vcl.as_ref()?;
        match stored {
            Some(object) => Self::waiting_hit(txn, Some(object)),
            None => lookup::miss_verdict(txn, false),
        }
    }

    fn hit_for_miss(txn: &mut Txn) -> Step {
        if txn.vcl.is_none() {
            return Step::Fetch(FetchMode::Alone("hit-for-miss"));
        }
        lookup::miss(txn, None, true)
    }

    fn pass(txn: &mut Txn, reason: NoCacheReason) -> Step {
        lookup::pass(txn, reason)
    }

    /// `If-None-Match` / `If-Modified-Since` are answered after vcl_deliver, on the
    /// validators it delivers, as Varnish does.
    fn conditionals_after_deliver(txn: &mut Txn) -> bool {
        match txn.vcl.as_deref_mut() {
            Some(v) => {
                v.conditional = true;
                true
            }
            None => false,
        }
    }

    fn backend_fetch(txn: &mut Txn, for_cache: bool) -> Option<Instead> {
        backend::backend_fetch(txn, for_cache)
    }

    fn backend_request(txn: &Txn) -> Option<BackendRequest<'_>> {
        bereq::backend_request(txn)
    }

    /// The program adds it (4.x before vcl_recv, 2.x's default.vcl in it), as Varnish does.
    fn forwarded_for(txn: &Txn) -> bool {
        txn.vcl.is_none()
    }

    fn if_modified_since<'a>(txn: &Txn, stale: &'a Object) -> Option<&'a str> {
        if txn.vcl.is_some() {
            bereq::strong_last_modified(stale)
        } else {
            stale.last_modified()
        }
    }

    fn route_draw(txn: &Txn, route: &Member) -> Option<u32> {
        bereq::legacy_draw(txn, route)
    }

    /// Varnish never changes the cache on a pass or pipe.
    fn unsafe_invalidates(_txn: &Txn) -> bool {
        false
    }

    /// A program that calls `std.cache_req_body()`: up to the largest size it names.
    fn body_to_read(txn: &Txn) -> Option<u64> {
        txn.vcl_program()?.program.req_body_keep
    }

    /// The backend `req.backend_hint` chose and the transaction id, which the refresh's own
    /// VCL state starts from (`background`).
    fn inherit(txn: &Txn, into: &mut Inherited) {
        into.vcl_backend = txn.vcl.as_ref().and_then(|v| v.state.backend);
        into.vcl_xid = txn.vcl.as_ref().map_or(0, |v| v.state.xid);
    }

    fn background(txn: &mut Txn, from: &Inherited) {
        bereq::background(txn, from);
    }

    fn trace(txn: &Txn) -> Option<String> {
        txn.vcl.as_ref().map(|v| v.state.trace_text())
    }

    fn backend_error(txn: &mut Txn, status: StatusCode, detail: &str) -> Option<ErrorOutcome> {
        txn.vcl.as_ref()?;
        Some(backend_error::backend_error(txn, status, detail))
    }

    /// As in Varnish, under a 4.x program that fetch failed (vcl_backend_error, which may
    /// retry).
    fn stale_gone(txn: &mut Txn) -> Option<ErrorOutcome> {
        if txn.vcl.is_none() || legacy(txn) {
            return None;
        }
        Some(backend_error::backend_error(
            txn,
            StatusCode::SERVICE_UNAVAILABLE,
            "stale-gone",
        ))
    }

    fn backend_response(
        txn: &mut Txn,
        parts: &mut Parts,
        ex: &Exchange,
        mode: &FetchMode,
        was_304: bool,
    ) -> ResponseOutcome {
        let pass = matches!(mode, FetchMode::Pass(_));
        // Varnish: vcl_backend_response sees a revalidated copy as the object it becomes —
        // the stale copy's status, its fields merged with the 304's, `beresp.was_304`.
        if was_304 && let Some(stale) = &txn.stale {
            parts.status = stale.status;
            parts.headers = crate::cache::policy::merge_304(stale.headers.to_map(), &parts.headers);
        }
        // vcl_backend_response sees the backend's hop-by-hop fields (Keep-Alive) in beresp,
        // as in Varnish; the stored or delivered response never has them.
        match backend_response::backend_response(txn, parts, ex, pass, was_304) {
            backend_response::BerespOutcome::Plan {
                plan,
                hit_for_miss,
                buffer,
            } => {
                // `beresp.http.connection` saying `close`: that backend connection serves
                // no other request (Varnish closes it rather than recycle it).
                if headers::connection_close(&parts.headers) {
                    parts.extensions.insert(crate::proxy::BackendClose);
                }
                headers::strip_hop_by_hop(&mut parts.headers);
                ResponseOutcome::Store {
                    storage: Storage::Decided { plan, hit_for_miss },
                    buffer,
                }
            }
            backend_response::BerespOutcome::Retry => ResponseOutcome::Retry,
            backend_response::BerespOutcome::Step(step) => ResponseOutcome::Step(step),
            backend_response::BerespOutcome::Made(made) => ResponseOutcome::Made(made),
        }
    }

    /// `X-Varnish`: the id of the transaction that fetched it.
    fn storing(txn: &Txn, fields: &mut HeaderMap) {
        if let Some(v) = txn.vcl.as_deref() {
            crate::proxy::vcl::mark_fetched(v, fields);
        }
    }

    fn deliver(txn: &mut Txn, response: Response<ResponseBody>) -> Delivery {
        answer::deliver(txn, response)
    }

    fn synth(txn: &mut Txn, status: u16, reason: Option<String>) -> Step {
        answer::synth(txn, status, reason)
    }

    fn restart(txn: &mut Txn) -> Step {
        answer::restart(txn)
    }
}
