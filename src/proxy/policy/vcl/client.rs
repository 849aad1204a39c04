//! The client side's VCL: vcl_recv, vcl_hash, vcl_hit, vcl_miss, vcl_pass, vcl_pipe,
//! vcl_purge, vcl_deliver and vcl_synth (2.x: vcl_error), called by the state machine
//! (`fsm.rs`) at its steps, each turning the subroutine's action into the next step.

use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

use super::super::Delivery;
use crate::cache::Object;
use crate::cache::busy::LeaderGuard;
use crate::cache::policy::NoCacheReason;
use crate::cache::shared::feed::{self, Invalidation};
use crate::proxy::body::ResponseBody;
use crate::proxy::deliver;
use crate::proxy::txn::{FetchMode, Step, Txn};
use crate::proxy::vcl::env::{ObjEdit, Scope};
use crate::proxy::vcl::{self as rt, Bereq, Resp, VclRuntime, VclTxn, key_from_hash};
use crate::vcl::run::{Verdict, run};
use crate::vcl::types::Method;

/// Runs `m` on the client request (and `obj` / `resp` when given).
fn run_client(
    txn: &mut Txn,
    m: Method,
    obj: Option<(&Object, bool)>,
    edit: Option<&mut ObjEdit>,
    resp: Option<&mut Resp>,
) -> Verdict {
    let Txn {
        proxy,
        req,
        vcl,
        client,
        key,
        ..
    } = txn;
    let Some(v) = vcl.as_deref_mut() else {
        return Verdict::Fail("no VCL state".to_string());
    };
    let VclTxn {
        runtime,
        state,
        original,
        bereq,
        is_hitmiss,
        is_hitpass,
        fetched,
        ..
    } = v;
    let mut scope = Scope::client(runtime, &proxy.cache, *client, state, req);
    scope.original = original.as_deref();
    scope.obj = obj;
    scope.obj_edit = edit;
    scope.resp = resp;
    scope.bereq = bereq.as_mut();
    scope.is_hitmiss = *is_hitmiss;
    scope.is_hitpass = *is_hitpass;
    scope.key = key.as_ref();
    scope.fetched = *fetched;
    run(&runtime.program, m, &mut scope)
}

/// A failed subroutine: logged, and answered with a 503 through vcl_synth (which counts it in
/// `synth_resp`, as Varnish's vcl_synth counts `s_synth`: once).
fn failed(m: Method, why: &str) -> Step {
    tracing::warn!(subroutine = m.sub_name(), reason = why, "VCL failed");
    Step::VclSynth(503, Some("VCL failed".to_string()))
}

/// The step for an action the caller of `m` does not take itself: `synth` and `restart`
/// (which every client subroutine that allows them takes alike), `fail`, and an action `m`
/// does not allow, which fails the request as `fail` does (503 through vcl_synth).
fn settle(m: Method, verdict: Verdict) -> Step {
    match verdict {
        Verdict::Synth(status, reason) => Step::VclSynth(status, reason),
        Verdict::Restart => Step::Restart,
        Verdict::Fail(why) => failed(m, &why),
        other => failed(m, &format!("{} returned {}", m.sub_name(), other.as_str())),
    }
}

/// vcl_recv, and what its action leads to. Called once the request's authority is known.
pub(super) fn recv(txn: &mut Txn, rt: &Arc<VclRuntime>) -> Step {
    let first = txn.vcl.is_none();
    let whole_body = txn.body_whole_len();
    let v = txn
        .vcl
        .get_or_insert_with(|| Box::new(VclTxn::new(rt.clone())));
    v.state.req_body_held = whole_body;
    if first {
        if crate::http::headers::has_field(&txn.req.headers, &http::header::CONNECTION) {
            v.connection_named = crate::http::headers::connection_named(&txn.req.headers);
        }
        if rt.rollback {
            v.original = Some(Box::new((
                txn.req.method.clone(),
                txn.req.uri.clone(),
                txn.req.headers.clone(),
            )));
        }
        // Varnish 4 adds the client to X-Forwarded-For before vcl_recv; 2.x's default.vcl
        // does it itself.
        if !rt.program.dialect.is_legacy() {
            crate::http::headers::append_forwarded_for(&mut txn.req.headers, txn.client.ip());
        }
    }
    v.ran = true;
    let verdict = run_client(txn, Method::Recv, None, None, None);
    let kept = txn.vcl.as_ref().is_some_and(|v| {
        v.state
            .req_body_cached
            .load(std::sync::atomic::Ordering::Relaxed)
    });
    if kept
        && let Some(held) = txn.held_body.as_mut()
        && held.keep()
    {
        txn.proxy.counters.req_body_cached.inc();
        txn.proxy
            .counters
            .req_body_cached_bytes
            .add(held.len() as u64);
    }
    match verdict {
        Verdict::Hash | Verdict::Lookup => hash(txn, false),
        Verdict::Pass => Step::Pass(NoCacheReason::Vcl),
        Verdict::Pipe => pipe(txn),
        Verdict::Purge => hash(txn, true),
        other => settle(Method::Recv, other),
    }
}

/// vcl_hash: the cache key from `hash_data()`, then the lookup (or, for `return (purge)`,
/// the purge of that key).
fn hash(txn: &mut Txn, purge: bool) -> Step {
    let Some(v) = txn.vcl.as_deref_mut() else {
        return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-vcl-state");
    };
    v.state.hash.clear();
    let key = if v.runtime.program.defines(Method::Hash) {
        match run_client(txn, Method::Hash, None, None, None) {
            Verdict::Lookup | Verdict::Hash => {}
            Verdict::Fail(why) => return failed(Method::Hash, &why),
            other => {
                return failed(
                    Method::Hash,
                    &format!("vcl_hash returned {}", other.as_str()),
                );
            }
        }
        let host = Txn::authority(&txn.req).unwrap_or("");
        let url = txn.req.uri.path_and_query().map_or("/", |p| p.as_str());
        let Some(v) = txn.vcl.as_deref_mut() else {
            return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-vcl-state");
        };
        if v.runtime.program.reads_digest {
            v.state.digest = Some(sha256(v.state.hash.as_bytes()));
        }
        key_from_hash(&v.state, host, url)
    } else {
        // The built-in vcl_hash (URL and host) is the default key: made directly, without
        // copying its inputs through hash_data().
        v.state.note(Method::Hash, &Verdict::Lookup);
        let url = txn.req.uri.path_and_query().map_or("/", |p| p.as_str());
        // The built-in's inputs, as Varnish's: `req.url`, then `req.http.host`, else
        // `server.ip` as text — an HTTP/1.0 request without `Host` (and the includes of
        // its ESI page) shares the objects of requests naming the address it came to.
        let server_ip = txn.req.headers.get(http::header::HOST).is_none().then(|| {
            txn.req
                .extensions
                .get::<crate::proxy::LocalAddr>()
                .map_or("0.0.0.0".to_string(), |l| {
                    l.0.ip().to_canonical().to_string()
                })
        });
        let host = match (&server_ip, Txn::authority(&txn.req)) {
            (_, Ok(h)) if !h.is_empty() => h,
            (Some(ip), _) => ip.as_str(),
            _ => "",
        };
        if v.runtime.program.reads_digest {
            let host_field = match txn.req.headers.get(http::header::HOST) {
                Some(h) => h.as_bytes(),
                None => host.as_bytes(),
            };
            let mut inputs = Vec::with_capacity(url.len() + host_field.len() + 2);
            inputs.extend_from_slice(url.as_bytes());
            inputs.push(0);
            inputs.extend_from_slice(host_field);
            inputs.push(0);
            v.state.digest = Some(sha256(&inputs));
        }
        crate::cache::CacheKey::new(host, url)
    };
    if purge {
        let n = txn.proxy.cache.purge(&key);
        txn.proxy.counters.purge_objects.add(n as u64);
        // With a fleet: the shared copy and every other node's (else this node's next miss
        // would read the purged object back from the shared tier).
        if let Some(shared) = &txn.proxy.cache.shared {
            feed::broadcast_later(shared, Invalidation::Purge(key.clone()));
        }
        txn.key = Some(key);
        let verdict = run_client(txn, Method::Purge, None, None, None);
        return settle(Method::Purge, verdict);
    }
    txn.key = Some(key);
    txn.read_request_directives();
    Step::Lookup
}

/// vcl_pipe: an upgrade request is tunnelled when the backend switches protocols; any
/// other request is passed and its connection closed after the response (Shellac does not
/// shovel raw bytes of plain HTTP).
fn pipe(txn: &mut Txn) -> Step {
    new_bereq(txn, false, true);
    match run_client(txn, Method::Pipe, None, None, None) {
        Verdict::Pipe => {
            if let Some(v) = txn.vcl.as_deref_mut() {
                v.pipe = true;
                if let Some(b) = v.bereq.as_mut() {
                    b.headers
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
            }
            let upgrade = crate::http::headers::upgrade_request(
                &txn.req.method,
                txn.req.version,
                &txn.req.headers,
                &txn.proxy.config.server.upgrade_protocols,
            )
            .is_some();
            if upgrade {
                Step::Pass(NoCacheReason::Upgrade)
            } else {
                txn.close_after();
                Step::Pass(NoCacheReason::Vcl)
            }
        }
        Verdict::Synth(status, reason) => Step::VclSynth(status, reason),
        Verdict::Fail(why) => failed(Method::Pipe, &why),
        other => failed(
            Method::Pipe,
            &format!("vcl_pipe returned {}", other.as_str()),
        ),
    }
}

/// The backend request VCL edits, made from the client request when first needed.
pub(super) fn make_bereq(txn: &mut Txn, for_cache: bool) {
    new_bereq(txn, for_cache, false);
}

/// [`make_bereq`]; `pipe`: for vcl_pipe.
fn new_bereq(txn: &mut Txn, for_cache: bool, pipe: bool) {
    let body_gone = txn.body_gone();
    let Some(v) = txn.vcl.as_deref_mut() else {
        return;
    };
    if v.bereq.is_some() {
        return;
    }
    let xid = v.bereq_xid();
    // Varnish tells the backend which transaction asks (before the VCL runs, which may
    // unset it): the backend request's id, or for a pipe the client request's.
    let mut headers = txn.req.headers.clone();
    // Hop-by-hop fields (Keep-Alive, those named in Connection) are the client connection's:
    // vcl_backend_fetch does not see them, as in Varnish. A pipe keeps them (Upgrade).
    if !pipe {
        for name in &v.connection_named {
            headers.remove(name);
        }
        crate::http::headers::strip_fixed_hop_by_hop(&mut headers);
    }
    // A body an earlier backend request took (a restart's fetch, with no body kept by
    // std.cache_req_body()) is not there to send: its framing fields go too.
    if body_gone {
        headers.remove(http::header::CONTENT_LENGTH);
        headers.remove(http::header::TRANSFER_ENCODING);
    }
    let told = if pipe { v.state.xid } else { xid };
    headers.insert(rt::X_VARNISH, rt::x_varnish(told, None));
    // `http_gzip_support` (`[compression] enabled`): a fill asks for gzip before
    // vcl_backend_fetch runs (which may change it), as Varnish does.
    if for_cache && !pipe && txn.proxy.config.compression.enabled {
        headers.insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("gzip"),
        );
    }
    v.bereq = Some(Bereq {
        method: if for_cache {
            http::Method::GET
        } else {
            txn.req.method.clone()
        },
        uri: txn.req.uri.clone(),
        headers,
        backend: v.state.backend,
        connect_timeout: None,
        first_byte_timeout: None,
        between_bytes_timeout: None,
        uncacheable: !for_cache,
        bgfetch: txn.background,
        no_body: false,
        retry_connect: true,
        xid,
    });
}

/// vcl_hit for a fresh or graced object: `None` delivers it as Shellac would; otherwise the
/// step VCL chose (pass, a miss, synth, restart). 2.x's `set obj.ttl = ...` in vcl_hit
/// changes the stored object.
pub(super) fn after_hit(txn: &mut Txn, object: &Arc<Object>) -> Option<Step> {
    txn.vcl.as_ref()?;
    // Varnish counts the hit at the lookup: vcl_hit already sees it in `obj.hits`.
    object.count_hit();
    let mut edit = ObjEdit::default();
    let verdict = run_client(
        txn,
        Method::Hit,
        Some((object, true)),
        Some(&mut edit),
        None,
    );
    if edit.ttl.is_some() || edit.grace.is_some() || edit.keep.is_some() {
        retime(txn, object, &edit);
    }
    let legacy_uncacheable = edit.cacheable == Some(false);
    match verdict {
        Verdict::Deliver if !legacy_uncacheable => {
            if let Some(v) = txn.vcl.as_deref_mut() {
                v.obj = Some(object.clone());
                v.hit = true;
            }
            None
        }
        Verdict::Deliver | Verdict::Pass => {
            // Varnish 4 counts a hit that vcl_hit passes as a hit (`X-Varnish` names the
            // pass's backend request too); 2.x does not.
            if let Some(v) = txn.vcl.as_deref_mut() {
                v.hit = !v.runtime.program.dialect.is_legacy();
            }
            Some(Step::Pass(NoCacheReason::Vcl))
        }
        Verdict::Miss | Verdict::Fetch => {
            txn.stale = Some(object.clone());
            Some(Step::Fetch(FetchMode::Alone("vcl-miss")))
        }
        other => Some(settle(Method::Hit, other)),
    }
}

/// vcl_hit for a request that waited for another's fetch (4.x): `object` is what that fetch
/// stores, without its body (the waiter follows the fetch for it). `None` delivers it;
/// otherwise the step VCL chose. Unlike [`after_hit`], nothing is stored again and a miss
/// fetches anew, without conditions (there is no stored copy to revalidate yet).
pub(super) fn after_waiting(txn: &mut Txn, object: &Arc<Object>) -> Option<Step> {
    txn.vcl.as_ref()?;
    object.count_hit();
    let verdict = run_client(txn, Method::Hit, Some((object, true)), None, None);
    match verdict {
        Verdict::Deliver => {
            if let Some(v) = txn.vcl.as_deref_mut() {
                v.obj = Some(object.clone());
            }
            None
        }
        Verdict::Pass => {
            if let Some(v) = txn.vcl.as_deref_mut() {
                v.hit = true;
            }
            Some(Step::Pass(NoCacheReason::Vcl))
        }
        Verdict::Miss | Verdict::Fetch => Some(Step::Fetch(FetchMode::Alone("vcl-miss"))),
        other => Some(settle(Method::Hit, other)),
    }
}

/// Stores `object` again with the lifetimes vcl_hit gave it (seconds from now).
fn retime(txn: &Txn, object: &Object, edit: &ObjEdit) {
    let Some(key) = &txn.key else { return };
    let now = Instant::now();
    let age = object.age(now);
    let secs = crate::vcl::run::value::to_duration;
    let ttl = match edit.ttl {
        Some(t) => age.saturating_add(secs(t)),
        None => object.ttl.get(),
    };
    let grace = edit.grace.map_or(object.grace.get(), secs);
    let keep = edit.keep.map_or(object.keep.get(), secs);
    let copy = object.retimed(ttl, grace, keep);
    txn.proxy.cache.store(key, Arc::new(copy));
}

/// vcl_miss (also for hit-for-miss): `Some(step)` when VCL does not fetch as planned.
pub(super) fn miss(txn: &mut Txn, guard: Option<LeaderGuard>, hit_for_miss: bool) -> Step {
    match miss_verdict(txn, hit_for_miss) {
        None => match guard {
            Some(g) => Step::Fetch(FetchMode::Miss(g)),
            None => Step::Fetch(FetchMode::Alone("hit-for-miss")),
        },
        Some(step) => {
            // Anything but a fetch: waiters for this fetch look up again.
            if let Some(g) = guard {
                g.object().abandon();
            }
            step
        }
    }
}

/// vcl_miss: `None` when VCL fetches, else the step it chose instead (also for the first
/// slice of a sliced response that the cache does not hold: `slice/`).
pub(super) fn miss_verdict(txn: &mut Txn, hit_for_miss: bool) -> Option<Step> {
    if let Some(v) = txn.vcl.as_deref_mut() {
        v.is_hitmiss = hit_for_miss;
        if v.runtime.program.dialect.is_legacy() {
            make_bereq(txn, true);
        }
    }
    match run_client(txn, Method::Miss, None, None, None) {
        Verdict::Fetch => None,
        Verdict::Pass => Some(Step::Pass(NoCacheReason::Vcl)),
        other => Some(settle(Method::Miss, other)),
    }
}

/// vcl_pass (not after vcl_pipe, whose request is already decided).
pub(super) fn pass(txn: &mut Txn, reason: NoCacheReason) -> Step {
    let Some(v) = txn.vcl.as_deref_mut() else {
        return Step::Fetch(FetchMode::Pass(reason));
    };
    if v.pipe || !v.ran {
        return Step::Fetch(FetchMode::Pass(reason));
    }
    if v.runtime.program.dialect.is_legacy() {
        make_bereq(txn, false);
    }
    match run_client(txn, Method::Pass, None, None, None) {
        Verdict::Fetch | Verdict::Pass => Step::Fetch(FetchMode::Pass(reason)),
        other => settle(Method::Pass, other),
    }
}

/// vcl_deliver on a response about to be sent; a `sess.timeout_idle` VCL set goes with the
/// response to the client session (`SessionIdle`).
pub(super) fn deliver(txn: &mut Txn, response: Response<ResponseBody>) -> Delivery {
    let mut delivery = run_deliver(txn, response);
    if let Delivery::Send(resp) = &mut delivery
        && let Some(idle) = txn.vcl.as_ref().and_then(|v| v.state.sess_idle)
    {
        let idle = idle.map(crate::vcl::run::value::to_duration);
        resp.extensions_mut()
            .insert(crate::proxy::SessionIdle(idle));
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
    let delivering = rt::filters::Delivering {
        esi: false,
        gunzip: txn.filters.coding.decoded,
        range: matches!(
            parts.status,
            http::StatusCode::PARTIAL_CONTENT | http::StatusCode::RANGE_NOT_SATISFIABLE
        ) && txn.req.headers.contains_key(header::RANGE),
    };
    let mut resp = Resp {
        status: parts.status,
        reason: None,
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
            if let Some(r) = resp.reason.as_deref().and_then(reason_phrase) {
                parts.extensions.insert(r);
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
                for name in [
                    header::CONTENT_LENGTH,
                    header::CONTENT_RANGE,
                    header::CONTENT_TYPE,
                    header::CONTENT_ENCODING,
                    header::CONTENT_LANGUAGE,
                ] {
                    parts.headers.remove(name);
                }
                return Delivery::Send(Response::from_parts(parts, ResponseBody::empty()));
            }
            Delivery::Send(Response::from_parts(parts, body))
        }
        other => Delivery::Step(settle(Method::Deliver, other)),
    }
}

/// A custom reason phrase, when it is valid on the wire.
pub(super) fn reason_phrase(r: &str) -> Option<hyper::ext::ReasonPhrase> {
    hyper::ext::ReasonPhrase::try_from(r.as_bytes().to_vec()).ok()
}

/// vcl_synth (2.x: vcl_error): the generated response VCL makes for `status` and `reason`.
pub(super) fn synth(txn: &mut Txn, status: u16, reason: Option<String>) -> Step {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let Some(v) = txn.vcl.as_deref_mut() else {
        return Step::Synth(status, "vcl-synth");
    };
    v.synthesized = true;
    v.state.body = None;
    let legacy = v.runtime.program.dialect.is_legacy();
    let mut headers = HeaderMap::new();
    headers.insert(rt::X_VARNISH, rt::x_varnish(v.state.xid, None));
    let mut resp = Resp {
        status,
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
    let body = txn
        .vcl
        .as_deref_mut()
        .and_then(|v| v.state.body.take())
        .unwrap_or_default();
    let mut headers = resp.headers;
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    // Varnish 2.x closes the connection after every vcl_error response.
    if txn.closing() || legacy {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    let body = if txn.head_only {
        ResponseBody::empty()
    } else {
        ResponseBody::full(body)
    };
    let mut response = deliver::respond(resp.status, headers, body, "shellac; detail=vcl-synth");
    if let Some(r) = resp.reason.as_deref().and_then(reason_phrase) {
        response.extensions_mut().insert(r);
    }
    Step::Deliver(response)
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
        v.state.xid = v.runtime.next_xid();
    }
    txn.proxy.counters.backend_restart.inc();
    txn.reset_for_restart();
    Step::Recv
}

/// SHA-256, as Varnish digests the hash inputs (`req.hash`).
fn sha256(data: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, data).as_ref());
    out
}
