//! The end of every transaction, as observability sees it: the cache decision (read back from
//! `Cache-Status`, counted per reason) and, when the access log is on or somebody follows
//! `shellac log` / `shellac top`, a transaction record that the response body completes and queues.
//!
//! Costs on the request path: a hit with nobody listening is one prefix check and one relaxed
//! load; a recorded transaction reuses a record the writer handed back (allocating only when
//! there is none) and is one lock-free queue push. Strings are copied, so a record never pins the connection's read buffer.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use http::header::{self, HeaderName};
use http::{HeaderMap, Response};

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
    let recorder = &proxy.shared.recorder;
    // Live readers and rankings see every field; the log alone captures what its format prints.
    let everything = recorder.wants_records();
    let host: &[u8] = if everything || format.is_some_and(|f| f.needs_host()) {
        match req.uri.authority() {
            Some(a) => a.as_str().as_bytes(),
            None => headers.get(header::HOST).map_or(&[], |h| h.as_bytes()),
        }
    } else {
        &[]
    };
    // Only the rankings use the user agent on its own (a log format names it as a header).
    let ua = if recorder.top_wanted() {
        headers.get(header::USER_AGENT).map(|v| v.as_bytes())
    } else {
        None
    };
    let backend = txn.backend.as_ref().map(|b| b.name());
    let mut record = recorder.record(
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
        capture(&f.request_headers, headers, |v| {
            record.push_request_header(v)
        });
        capture(&f.response_headers, resp.headers(), |v| {
            record.push_response_header(v)
        });
        record.format = Some(f.clone());
    }
    record.queue_to(recorder.clone());
    resp.map(|b| b.counted(counters).recorded(record))
}

/// Hands `push` the first value of each of `names` in `headers` (None when absent), in order.
/// A few names are found in one pass over the fields (comparing names, no hashing): cheaper
/// than one map lookup per name for the usual handful of request fields.
fn capture(names: &[HeaderName], headers: &HeaderMap, mut push: impl FnMut(Option<&[u8]>)) {
    const ONE_PASS: usize = 4;
    if names.is_empty() {
        return;
    }
    if names.len() > ONE_PASS || headers.len() > 32 {
        for n in names {
            push(headers.get(n).map(|v| v.as_bytes()));
        }
        return;
    }
    let mut found: [Option<&[u8]>; ONE_PASS] = [None; ONE_PASS];
    let mut missing = names.len();
    for (name, value) in headers {
        if let Some(i) = names.iter().position(|n| n == name)
            && found[i].is_none()
        {
            found[i] = Some(value.as_bytes());
            missing -= 1;
            if missing == 0 {
                break;
            }
        }
    }
    for value in &found[..names.len()] {
        push(*value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_first_values_in_format_order() {
        let mut h = HeaderMap::new();
        h.append("user-agent", "ua/1".parse().unwrap());
        h.append("x-forwarded-for", "203.0.113.1".parse().unwrap());
        h.append("x-forwarded-for", "198.51.100.2".parse().unwrap());
        let names: Vec<HeaderName> = ["referer", "x-forwarded-for", "user-agent"]
            .into_iter()
            .map(HeaderName::from_static)
            .collect();
        let mut got = Vec::new();
        capture(&names, &h, |v| got.push(v.map(<[u8]>::to_vec)));
        assert_eq!(
            got,
            vec![None, Some(b"203.0.113.1".to_vec()), Some(b"ua/1".to_vec())]
        );
        // Many names: map lookups, same answer.
        let many: Vec<HeaderName> = ["a", "b", "c", "d", "user-agent"]
            .into_iter()
            .map(HeaderName::from_static)
            .collect();
        let mut got = Vec::new();
        capture(&many, &h, |v| got.push(v.map(<[u8]>::to_vec)));
        assert_eq!(got, vec![None, None, None, None, Some(b"ua/1".to_vec())]);
    }
}
