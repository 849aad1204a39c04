//! The end of every transaction, as observability sees it: the cache decision (read back from
//! `Cache-Status`, counted per reason) and, when the access log is on or somebody follows
//! `shellac log` / `shellac top`, a transaction record that the response body completes and queues.
//!
//! Costs on the request path: a hit with nobody listening is one prefix check and one relaxed
//! load; a recorded transaction is one allocation and a lock-free queue push.

use std::time::{Instant, SystemTime};

use http::Response;
use http::header;

use super::body::ResponseBody;
use super::deliver::CACHE_STATUS;
use super::fsm::Txn;
use crate::txlog::{Decision, DecisionKind, Pending, Record};

/// Attaches byte counting and, if wanted, the transaction record to the response.
pub(super) fn deliver(
    txn: &Txn<'_>,
    resp: Response<ResponseBody>,
    started: Instant,
) -> Response<ResponseBody> {
    let proxy = txn.proxy;
    let ttfb = started.elapsed();
    proxy.counters.ttfb.observe(ttfb);
    let counters = proxy.counters.clone();
    let cache_status = resp
        .headers()
        .get(CACHE_STATUS)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let is_hit = cache_status.starts_with("shellac; hit");
    let format = proxy.log_format.as_ref();
    let wanted = format.is_some() || proxy.shared.recorder.wants_records();
    if is_hit && !wanted {
        return resp.map(|b| b.counted(counters));
    }
    let decision = if is_hit {
        Decision {
            kind: DecisionKind::Hit,
            reason: None,
        }
    } else {
        Decision::from_cache_status(cache_status)
    };
    if let (DecisionKind::Miss | DecisionKind::Pass, Some(reason)) =
        (decision.kind, &decision.reason)
    {
        counters.pass_reason.inc(reason);
    }
    if !wanted {
        return resp.map(|b| b.counted(counters));
    }
    let req = &txn.req;
    let record = Record {
        time: SystemTime::now()
            .checked_sub(ttfb)
            .unwrap_or(SystemTime::now()),
        client: txn.client.ip(),
        method: req.method.clone(),
        uri: req.uri.clone(),
        version: req.version,
        host_header: req.headers.get(header::HOST).cloned(),
        user_agent: req.headers.get(header::USER_AGENT).cloned(),
        status: resp.status().as_u16(),
        bytes: 0,
        duration: ttfb,
        ttfb,
        decision,
        backend: txn.backend.as_ref().map(|b| b.name().into()),
        complete: false,
        request_headers: format.map_or_else(Vec::new, |f| {
            f.request_headers
                .iter()
                .map(|n| req.headers.get(n).cloned())
                .collect()
        }),
        response_headers: format.map_or_else(Vec::new, |f| {
            f.response_headers
                .iter()
                .map(|n| resp.headers().get(n).cloned())
                .collect()
        }),
        format: format.cloned(),
    };
    let pending = Pending::new(record, started, proxy.shared.recorder.clone());
    resp.map(|b| b.counted(counters).recorded(pending))
}
