//! The answer: vcl_deliver over the response, vcl_synth (2.x: vcl_error) making one, and a
//! restart; `backend.rs` uses the reason phrase a subroutine set.

use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

use super::super::Delivery;
use super::client::{run_client, settle};
use crate::cache::status_line::StatusLine;
use crate::proxy::SessionTimeouts;
use crate::proxy::body::ResponseBody;
use crate::proxy::deliver;
use crate::proxy::txn::{Step, Txn};
use crate::proxy::vcl::{self as rt, Resp};
use crate::vcl::run::Verdict;
use crate::vcl::types::Method;

/// vcl_deliver on a response about to be sent; the `sess.*` timeouts VCL set go with the
/// response to the client session (`SessionTimeouts`).
pub(super) fn deliver(txn: &mut Txn, response: Response<ResponseBody>) -> Delivery {
    let mut delivery = run_deliver(txn, response);
    if let Delivery::Send(resp) = &delivery
        && let Some(t) = txn.vcl.as_ref().and_then(|v| v.vsl.as_ref())
    {
        let reason = resp
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .and_then(|r| std::str::from_utf8(r.as_bytes()).ok());
        rt::vsl::response(
            t,
            ["RespProtocol", "RespStatus", "RespReason", "RespHeader"],
            (txn.req.version, resp.status(), reason),
            resp.headers(),
        );
    }
    if let Delivery::Send(resp) = &mut delivery
        && let Some(v) = txn.vcl.as_ref()
        && let Some(t) =
            SessionTimeouts::after(txn.req.extensions.get::<SessionTimeouts>(), &v.state.sess)
    {
        resp.extensions_mut().insert(t);
    }
    delivery
}

fn run_deliver(txn: &mut Txn, response: Response<ResponseBody>) -> Delivery {
    let Some(v) = txn.vcl.as_deref() else {
        return Delivery::Send(response);
    };
    if !v.ran || v.synthesized {
        return Delivery::Send(response);
    }
    let obj = v.obj.clone();
    let pipe = v.pipe;
    let conditional = v.conditional;
    let (mut parts, body) = response.into_parts();
    let mut headers = std::mem::take(&mut parts.headers);
    // `X-Varnish` before vcl_deliver (which may change it), as Varnish sets it: the
    // request's id, and from the cache the id of the transaction that fetched the object
    // (stored with it by `fetch/`; a hit that vcl_hit passed: the pass's).
    let fetched = match (v.hit, v.obj.is_none(), v.bereq.as_ref()) {
        (false, ..) => None,
        (true, true, Some(b)) => Some(b.xid),
        (true, ..) => rt::fetched_by(headers.get(rt::X_VARNISH)),
    };
    headers.insert(rt::X_VARNISH, rt::x_varnish(v.state.xid, fetched));
    // `Age` on every delivery of an object, as Varnish sets it before vcl_deliver: a miss's
    // and a pass's too, 0 when the origin gave none (trunk s00006).
    if !headers.contains_key(header::AGE) {
        headers.insert(header::AGE, HeaderValue::from_static("0"));
    }
    let delivering = rt::filters::Delivering {
        esi: false,
        gunzip: txn.filters.coding.decoded,
        range: matches!(
            parts.status,
            http::StatusCode::PARTIAL_CONTENT | http::StatusCode::RANGE_NOT_SATISFIABLE
        ) && txn.req.headers.contains_key(header::RANGE),
    };
    // The reason phrase the response carries (a stored object's own), as `resp.reason`.
    let reason = parts
        .extensions
        .get::<hyper::ext::ReasonPhrase>()
        .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned());
    // The wide status the object was stored with (`cache::status_line`: a hit's vcl_deliver
    // sees 1200 where the client gets 200, as in Varnish).
    let wide_status = parts
        .extensions
        .get::<StatusLine>()
        .filter(|l| l.wide % 1000 == parts.status.as_u16())
        .map_or(parts.status.as_u16(), |l| l.wide);
    let mut resp = Resp {
        status: parts.status,
        wide_status,
        reason,
        headers,
        deliver: rt::filters::Deliver {
            delivering,
            ..Default::default()
        },
    };
    let verdict = run_client(
        txn,
        Method::Deliver,
        obj.as_deref().map(|o| (o, true)),
        None,
        Some(&mut resp),
    );
    match verdict {
        Verdict::Deliver => {
            parts.status = resp.status;
            parts.headers = resp.headers;
            // VCL's reason, or the status's own when it set the status (and no reason).
            match resp.reason.as_deref().and_then(reason_phrase) {
                Some(r) => {
                    parts.extensions.insert(r);
                }
                None => {
                    parts.extensions.remove::<hyper::ext::ReasonPhrase>();
                }
            }
            // `resp.filters` added `gunzip` to a gzip body (`vcl/filters.rs`).
            let body = if resp.deliver.gunzip_added {
                let mut chain = crate::proxy::filter::Chain::default();
                chain.push(Box::new(crate::proxy::filter::gzip::Gunzip::new(
                    txn.proxy.counters.clone(),
                )));
                crate::proxy::filter::streamed(
                    &mut chain,
                    parts.status,
                    &mut parts.headers,
                    body,
                    None,
                )
                .0
            } else {
                body
            };
            if pipe {
                parts
                    .headers
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            if conditional
                && matches!(
                    parts.status,
                    http::StatusCode::OK | http::StatusCode::PARTIAL_CONTENT
                )
                && crate::proxy::partial::not_modified(&txn.req.headers, &parts.headers)
            {
                // 304 with the fields vcl_deliver left, but the body's own (RFC 9110
                // §15.4.5: no representation metadata beyond what guides caches).
                parts.status = http::StatusCode::NOT_MODIFIED;
                crate::http::conditional::not_modified_fields(&mut parts.headers);
                return Delivery::Send(Response::from_parts(parts, ResponseBody::empty()));
            }
            Delivery::Send(Response::from_parts(parts, body))
        }
        other => Delivery::Step(settle(Method::Deliver, other)),
    }
}

/// `Date` for now (IMF-fixdate).
pub(super) fn date_now() -> HeaderValue {
    HeaderValue::from_str(&httpdate::fmt_http_date(std::time::SystemTime::now()))
        .unwrap_or(HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"))
}

/// A custom reason phrase, when it is valid on the wire.
pub(super) fn reason_phrase(r: &str) -> Option<hyper::ext::ReasonPhrase> {
    hyper::ext::ReasonPhrase::try_from(r.as_bytes().to_vec()).ok()
}

/// The reason phrase Varnish gives a status it has none for.
const UNKNOWN_STATUS: &str = "Unknown HTTP Status";

/// vcl_synth (2.x: vcl_error): the generated response VCL makes for `status` and `reason`.
pub(super) fn synth(txn: &mut Txn, status: u16, reason: Option<String>) -> Step {
    // `synth(22301)`: VCL sees 22301, 301 is sent (Varnish keeps up to 65535 in VCL); a
    // status whose last three digits are no status is a 503.
    let (wide, status) = match StatusCode::from_u16(status % 1000) {
        Ok(s) if status >= 100 => (status, s),
        _ => (503, StatusCode::SERVICE_UNAVAILABLE),
    };
    let Some(v) = txn.vcl.as_deref_mut() else {
        return Step::Synth(status, "vcl-synth");
    };
    // A status without a reason phrase of its own gets Varnish's (`http_Status2Reason`),
    // which `resp.reason` reads and the status line carries (trunk p00010: 999).
    let reason = reason.or_else(|| {
        status
            .canonical_reason()
            .is_none()
            .then(|| UNKNOWN_STATUS.into())
    });
    v.synthesized = true;
    v.state.body = None;
    let legacy = v.runtime.program.dialect.is_legacy();
    let mut headers = HeaderMap::new();
    // `Date` before vcl_synth, as Varnish sets it (VCL sees it; trunk c00066 finds it in
    // the response's records): not left to the connection's writer.
    headers.insert(header::DATE, date_now());
    headers.insert(rt::X_VARNISH, rt::x_varnish(v.state.xid, None));
    let mut resp = Resp {
        status,
        wide_status: wide,
        reason,
        headers,
        deliver: Default::default(),
    };
    let m = if legacy { Method::Error } else { Method::Synth };
    let verdict = run_client(txn, m, None, None, Some(&mut resp));
    // The response made after too many restarts is delivered even when vcl_synth asks for
    // another restart (as Varnish does): the loop vcl_synth -> restart -> vcl_synth ends.
    let max_restarts = txn.proxy.config.vcl.max_restarts;
    let exhausted = txn
        .vcl
        .as_deref()
        .is_some_and(|v| v.state.restarts > max_restarts);
    match verdict {
        Verdict::Deliver => {}
        Verdict::Restart if exhausted => {}
        Verdict::Restart => return Step::Restart,
        Verdict::Fail(why) => {
            tracing::warn!(subroutine = m.sub_name(), reason = %why, "VCL failed");
            return Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "vcl-failed");
        }
        other => {
            tracing::warn!(
                subroutine = m.sub_name(),
                action = other.as_str(),
                "unexpected VCL action"
            );
            return Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "vcl-failed");
        }
    }
    txn.proxy.counters.synth_resp.inc();
    // Varnish 2.x closes the connection after every vcl_error response.
    let close = txn.closing() || legacy;
    let head = (resp.status, resp.reason.as_deref(), resp.headers);
    Step::Deliver(made(txn, head, close, "shellac; detail=vcl-synth"))
}

/// The response vcl_synth / vcl_error or vcl_backend_error made, its status, reason phrase
/// and fields as VCL left them (`head`): with the body VCL set (`synthetic`) and its length
/// (no body sent for HEAD), `Connection: close` when `close`.
pub(super) fn made(
    txn: &mut Txn,
    (status, reason, mut headers): (StatusCode, Option<&str>, HeaderMap),
    close: bool,
    cache_status: &str,
) -> Response<ResponseBody> {
    let body = txn
        .vcl
        .as_deref_mut()
        .and_then(|v| v.state.body.take())
        .unwrap_or_default();
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    if close {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    let body = if txn.head_only {
        ResponseBody::empty()
    } else {
        ResponseBody::full(body)
    };
    let mut response = deliver::respond(status, headers, body, cache_status);
    if let Some(r) = reason.and_then(reason_phrase) {
        response.extensions_mut().insert(r);
    }
    response
}

/// `return (restart)`: the request runs again from vcl_recv, at most `[vcl] max_restarts`
/// times (Varnish's `max_restarts`).
pub(super) fn restart(txn: &mut Txn) -> Step {
    let max_restarts = txn.proxy.config.vcl.max_restarts;
    let Some(v) = txn.vcl.as_deref_mut() else {
        return Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "restart");
    };
    if v.state.restarts > max_restarts {
        // Already past the limit (its vcl_synth ran): no subroutine runs again.
        return Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "restart");
    }
    v.state.restarts += 1;
    v.obj = None;
    v.fetched = None;
    v.bereq = None;
    v.synthesized = false;
    v.is_hitmiss = false;
    v.is_hitpass = false;
    v.hit = false;
    v.state.hash.clear();
    v.state.body = None;
    v.state.retries = 0;
    if v.state.restarts > max_restarts {
        tracing::warn!(xid = v.state.xid, "too many restarts");
        // Once more through vcl_synth, which then delivers whatever it returns.
        return Step::VclSynth(503, Some("Too many restarts".to_string()));
    }
    // 4.x: a restart is a new transaction (Varnish's restart takes a new id).
    if !v.runtime.program.dialect.is_legacy() {
        let old = v.state.xid;
        v.state.xid = v.runtime.next_xid();
        if let Some(t) = v.vsl.take() {
            t.log("Link", format!("req {} restart", v.state.xid));
            drop(t);
            let r = &txn.req;
            v.vsl = rt::vsl::begin_req(
                &v.runtime,
                v.state.xid,
                (old, "restart"),
                (&r.method, &r.uri, r.version, &r.headers),
            );
            if let Some(t) = &v.vsl {
                txn.req
                    .extensions
                    .insert(crate::txlog::vsl::Current(t.clone()));
            }
        }
    }
    txn.proxy.counters.backend_restart.inc();
    txn.reset_for_restart();
    Step::Recv
}
