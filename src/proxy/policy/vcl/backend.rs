//! The backend side's VCL before the request is sent: vcl_backend_fetch (4.x) on the backend
//! request made from the client's, and the route it leaves (`bereq.backend`, else
//! `req.backend_hint`). vcl_backend_response is `backend_response.rs`, vcl_backend_error
//! `backend_error.rs`.

use super::super::{ErrorOutcome, Instead};
use super::backend_error::{run_backend, vcl_error};
use super::client::{failed, make_bereq};
use crate::proxy::txn::{Step, Txn};
use crate::vcl::run::Verdict;
use crate::vcl::types::Method;

/// vcl_backend_fetch (4.x) on the backend request made from the client's; it also picks the
/// route: `bereq.backend`, else `req.backend_hint`, else the default. `Some` when VCL does
/// not fetch.
pub(super) fn backend_fetch(txn: &mut Txn, for_cache: bool) -> Option<Instead> {
    let v = txn.vcl.as_deref()?;
    let legacy = v.runtime.program.dialect.is_legacy();
    make_bereq(txn, for_cache);
    if !legacy && let Some(instead) = run_backend_fetch(txn) {
        return Some(instead);
    }
    route(txn);
    None
}

/// vcl_backend_fetch itself: `Some` when it does not fetch. A `return (error(...))` goes to
/// vcl_backend_error, whose object with a lifetime is stored in the response's place as
/// Varnish inserts it (`Instead::Made`, stored by `fetch/`); a `return (retry)` there runs
/// vcl_backend_fetch again (bounded: each retry counts against max_retries).
fn run_backend_fetch(txn: &mut Txn) -> Option<Instead> {
    loop {
        let step = match run_backend(txn, Method::BackendFetch, None) {
            Verdict::Fetch => return None,
            Verdict::Abandon => Step::VclSynth(503, Some("Backend fetch abandoned".into())),
            Verdict::Synth(status, reason) => match vcl_error(txn, status, reason) {
                ErrorOutcome::Retry => continue,
                ErrorOutcome::Step(step) => step,
                ErrorOutcome::Store(made) => return Some(Instead::Made(made)),
            },
            Verdict::Fail(why) => failed(Method::BackendFetch, &why),
            other => failed(
                Method::BackendFetch,
                &format!("vcl_backend_fetch returned {}", other.as_str()),
            ),
        };
        return Some(Instead::Step(step));
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
