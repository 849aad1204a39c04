//! The backend side's VCL before the request is sent: vcl_backend_fetch (4.x) on the backend
//! request made from the client's, and the route it leaves (`bereq.backend`, else
//! `req.backend_hint`). vcl_backend_response is `backend_response.rs`, vcl_backend_error
//! `backend_error.rs`.

use super::super::ErrorOutcome;
use super::backend_error::{run_backend, vcl_error};
use super::client::{failed, make_bereq};
use crate::proxy::txn::{Step, Txn};
use crate::vcl::run::Verdict;
use crate::vcl::types::Method;

/// vcl_backend_fetch (4.x) on the backend request made from the client's; it also picks the
/// route: `bereq.backend`, else `req.backend_hint`, else the default. `Some(step)` when VCL
/// does not fetch.
pub(super) fn backend_fetch(txn: &mut Txn, for_cache: bool) -> Option<Step> {
    let v = txn.vcl.as_deref()?;
    let legacy = v.runtime.program.dialect.is_legacy();
    make_bereq(txn, for_cache);
    if !legacy && let Some(step) = run_backend_fetch(txn) {
        return Some(step);
    }
    route(txn);
    None
}

/// vcl_backend_fetch itself: `Some(step)` when it does not fetch. A `return (retry)` of
/// vcl_backend_error after a `return (error)` runs it again (bounded: each retry counts
/// against max_retries).
fn run_backend_fetch(txn: &mut Txn) -> Option<Step> {
    loop {
        match run_backend(txn, Method::BackendFetch, None) {
            Verdict::Fetch => return None,
            Verdict::Abandon => {
                return Some(Step::VclSynth(503, Some("Backend fetch abandoned".into())));
            }
            Verdict::Synth(status, reason) => match vcl_error(txn, status, reason) {
                ErrorOutcome::Retry => continue,
                ErrorOutcome::Step(step) => return Some(step),
                // Delivered as made: stored only where no backend answered (`fetch/exchange.rs`).
                ErrorOutcome::Store(made) => return Some(made.instead),
            },
            Verdict::Fail(why) => return Some(failed(Method::BackendFetch, &why)),
            other => {
                return Some(failed(
                    Method::BackendFetch,
                    &format!("vcl_backend_fetch returned {}", other.as_str()),
                ));
            }
        }
    }
}

/// Sets the request's route from what VCL chose.
fn route(txn: &mut Txn) {
    let Some(v) = txn.vcl.as_deref() else {
        return;
    };
    let sel = v.bereq.as_ref().and_then(|b| b.backend).or(v.state.backend);
    if let Some(sel) = sel {
        txn.route = Some(
            v.runtime
                .member(sel)
                .unwrap_or_else(crate::backend::director::Member::none),
        );
        txn.route_hash = sel.hash;
    }
}
