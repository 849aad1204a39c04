//! The end of every transaction, as observability sees it: the cache decision (read back from
//! `Cache-Status`, counted per reason) and, when the access log is on or somebody follows
//! `shellac log` / `shellac top`, a transaction record that the response body completes and queues.
//!
//! Costs on the request path: a hit with nobody listening is one prefix check and one relaxed
//! load; a recorded transaction reuses a record the writer handed back (allocating only when
//! there is none) and is one lock-free queue push. Strings are copied, so a record never pins the connection's read buffer.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use http::Response;
use http::header;

use super::body::ResponseBody;
use super::deliver::CACHE_STATUS;
use super::fsm::Txn;
use crate::txlog::{Decision, DecisionKind, RecordHead};

/// The wall-clock time of `at`, from one (Instant, SystemTime) pair taken at first use: one
/// clock read per record less, and log times that never go backwards.
fn wall_clock(at: Instant) -> SystemTime {
    static ANCHOR: OnceLock<(Instant, SystemTime)> = OnceLock::new();
    let (i, s) = *ANCHOR.get_or_init(|| (Instant::now(), SystemTime::now()));
    match at.checked_duration_since(i) {
        Some(d) => s + d,
        None => s.checked_sub(i - at).unwrap_or(s),
    }
}

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
    let headers = &req.headers;
    let host: &[u8] = match req.uri.authority() {
        Some(a) => a.as_str().as_bytes(),
        None => headers.get(header::HOST).map_or(&[], |h| h.as_bytes()),
    };
    // Only the rankings use the user agent on its own (a log format names it as a header).
    let ua = if proxy.shared.recorder.top_wanted() {
        headers.get(header::USER_AGENT).map(|v| v.as_bytes())
    } else {
        None
    };
    let backend = txn.backend.as_ref().map(|b| b.name());
    let mut record = proxy.shared.recorder.record(
        RecordHead {
            time: wall_clock(started),
            client: txn.client.ip(),
            method: req.method.clone(),
            version: req.version,
            status: resp.status().as_u16(),
            decision,
            started,
            ttfb,
        },
        // A recycled record keeps its buffer; a new one starts with room for a typical request.
        256,
    );
    record.set_uri(&req.uri);
    record.set_host(host);
    record.set_user_agent(ua);
    record.set_backend(backend);
    if let Some(f) = format {
        for n in &f.request_headers {
            record.push_request_header(headers.get(n).map(|v| v.as_bytes()));
        }
        for n in &f.response_headers {
            record.push_response_header(resp.headers().get(n).map(|v| v.as_bytes()));
        }
        record.format = Some(f.clone());
    }
    record.queue_to(proxy.shared.recorder.clone());
    resp.map(|b| b.counted(counters).recorded(record))
}
