//! vcl_backend_error (4.x) when no backend answered or VCL asked for it, on a `beresp` of its
//! own; with what the backend side's subroutines share: running one, a retry's new
//! transaction, `beresp` before anything set it.

use http::StatusCode;
use http::header::{HeaderMap, HeaderValue};

use super::super::{ErrorOutcome, MadeAnswer};
use super::answer::{made, reason_phrase};
use super::client::{Sees, failed, run_sub};
use super::store_plan::{plan, store_of};
use crate::cache::policy::VclFreshness;
use crate::cache::status_line::{self, StatusLine};
use crate::proxy::txn::{Step, Txn};
use crate::proxy::vcl::{Beresp, VclTxn};
use crate::vcl::run::Verdict;
use crate::vcl::types::Method;

/// Runs `m` with the backend request (and `beresp`), the client request only in 2.x (whose
/// vcl_fetch is on the client side).
pub(super) fn run_backend(txn: &mut Txn, m: Method, beresp: Option<&mut Beresp>) -> Verdict {
    run_sub(txn, m, Sees::Backend(beresp))
}

/// A retry is a new backend transaction in 4.x (its own `bereq.xid`).
pub(super) fn retried(v: &mut VclTxn) {
    let xid = v.bereq_xid();
    if let Some(b) = v.bereq.as_mut() {
        b.xid = xid;
    }
}

/// `return (error(STATUS, REASON))` of vcl_backend_fetch / vcl_backend_response (4.x): the
/// fetch goes to vcl_backend_error with that status and reason (the status's own phrase when
/// none is given), as Varnish does — not counted as a failed fetch.
pub(super) fn vcl_error(txn: &mut Txn, status: u16, reason: Option<String>) -> ErrorOutcome {
    // The last three digits (Varnish's wire status of a wider one).
    let code = StatusCode::from_u16(status % 1000).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let reason = reason.unwrap_or_else(|| code.canonical_reason().unwrap_or("").to_string());
    run_backend_error(txn, (code, reason), "vcl-error")
}

/// `beresp` before anything set it: `status` and `headers`, the backend `txn` asked, no
/// lifetimes, cacheable, streamed, no reason, saint mode, prefetch, storage or transit
/// buffer, the fetch chain's gzip support as `[compression]` says. The one constructor: a
/// fetched response's ([`beresp`]) and the error vcl_backend_error sees ([`backend_error`])
/// set what differs.
pub(super) fn new_beresp(txn: &Txn, status: StatusCode, headers: HeaderMap) -> Beresp {
    Beresp {
        status,
        wide_status: status.as_u16(),
        reason: None,
        headers,
        ttl: 0.0,
        grace: 0.0,
        keep: 0.0,
        uncacheable: false,
        age: 0.0,
        backend: txn.backend.as_ref().map(|b| b.name().to_string()),
        was_304: false,
        do_stream: true,
        saintmode: None,
        prefetch: None,
        transit_buffer: 0,
        storage: None,
        fetch: crate::proxy::vcl::filters::Fetch {
            gzip_support: txn.proxy.config.compression.enabled,
            ..Default::default()
        },
    }
}

/// No backend answered (`status`, `detail`): 4.x runs vcl_backend_error, whose `beresp` is
/// delivered (then through vcl_deliver) or retried; 2.x goes to vcl_error.
pub(super) fn backend_error(txn: &mut Txn, status: StatusCode, detail: &str) -> ErrorOutcome {
    let Some(v) = txn.vcl.as_deref_mut() else {
        return ErrorOutcome::Step(Step::Synth(status, "backend-error"));
    };
    if v.runtime.program.dialect.is_legacy() {
        return ErrorOutcome::Step(Step::VclSynth(503, Some("Service Unavailable".into())));
    }
    let failed = (
        StatusCode::SERVICE_UNAVAILABLE,
        "Backend fetch failed".to_string(),
    );
    run_backend_error(txn, failed, detail)
}

/// vcl_backend_error (4.x) on a `beresp` of `status` and `reason`.
pub(super) fn run_backend_error(
    txn: &mut Txn,
    (status, reason): (StatusCode, String),
    detail: &str,
) -> ErrorOutcome {
    let Some(v) = txn.vcl.as_deref_mut() else {
        return ErrorOutcome::Step(Step::Synth(status, "backend-error"));
    };
    v.state.body = None;
    // A pass's object is never stored (Varnish: `beresp.uncacheable` is the request's).
    let pass = v.bereq.as_ref().is_none_or(|b| b.uncacheable);
    // `Date` before vcl_backend_error, as Varnish sets it.
    let mut headers = HeaderMap::new();
    headers.insert(http::header::DATE, super::answer::date_now());
    let mut beresp = Beresp {
        reason: Some(reason),
        uncacheable: pass,
        ..new_beresp(txn, status, headers)
    };
    match run_backend(txn, Method::BackendError, Some(&mut beresp)) {
        Verdict::Deliver => {}
        Verdict::Retry => {
            let max_retries = txn.proxy.config.vcl.max_retries;
            let Some(v) = txn.vcl.as_deref_mut() else {
                return ErrorOutcome::Step(Step::Synth(status, "backend-error"));
            };
            if v.state.retries < max_retries {
                v.state.retries += 1;
                retried(v);
                return ErrorOutcome::Retry;
            }
            if let Some(t) = v.bereq.as_ref().and_then(|b| b.vsl.as_deref()) {
                t.log("VCL_Error", "Too many retries, failing");
            }
            return ErrorOutcome::Step(Step::VclSynth(503, Some("Too many retries".into())));
        }
        Verdict::Abandon => {
            return ErrorOutcome::Step(Step::VclSynth(503, Some("Backend fetch failed".into())));
        }
        Verdict::Fail(why) => return ErrorOutcome::Step(failed(Method::BackendError, &why)),
        other => {
            return ErrorOutcome::Step(failed(
                Method::BackendError,
                &format!("vcl_backend_error returned {}", other.as_str()),
            ));
        }
    }
    if let Some(value) = own_status_line(&beresp) {
        beresp.headers.insert(status_line::FIELD, value);
    }
    // Stored as Varnish inserts it when it has a lifetime (`beresp.ttl`, `grace`, `keep`).
    let stored = if beresp.uncacheable {
        None
    } else {
        let store = store_of(&beresp, &txn.proxy.cache);
        plan(&beresp, &beresp.headers, VclFreshness::made(), false, store).ok()
    };
    let stored = stored.map(|plan| {
        // The body `synthetic` / `beresp.body` made (`made` below takes it for `instead`).
        let body = txn
            .vcl
            .as_deref()
            .and_then(|v| v.state.body.clone())
            .map(bytes::Bytes::from)
            .unwrap_or_default();
        let mut head = http::Response::new(());
        *head.status_mut() = beresp.status;
        *head.headers_mut() = beresp.headers.clone();
        let (mut parts, ()) = head.into_parts();
        parts
            .headers
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        if let Some(r) = beresp.reason.as_deref().and_then(reason_phrase) {
            parts.extensions.insert(r);
        }
        (parts, body, plan)
    });
    let head = (beresp.status, beresp.reason.as_deref(), beresp.headers);
    let resp = made(
        txn,
        head,
        false,
        &format!("shellac; fwd=miss; detail={detail}"),
    );
    let instead = Step::Deliver(resp);
    match stored {
        Some((parts, body, plan)) => ErrorOutcome::Store(Box::new(MadeAnswer {
            parts,
            body,
            plan,
            instead,
        })),
        None => ErrorOutcome::Step(instead),
    }
}

/// The status line of `beresp` when VCL made it other than its status's own
/// (`cache::status_line`): a wide status (`set beresp.status = 1200`) or a reason of its
/// own; the field's value, stored with the object and read back on delivery.
pub(super) fn own_status_line(beresp: &Beresp) -> Option<HeaderValue> {
    StatusLine::value(beresp.status, beresp.wide_status, beresp.reason.as_deref())
}
