//! The client side's VCL: vcl_recv, vcl_hash, vcl_hit, vcl_miss, vcl_pass, vcl_pipe,
//! vcl_purge, vcl_deliver and vcl_synth (2.x: vcl_error), called by the state machine
//! (`fsm.rs`) at its steps, each turning the subroutine's action into the next step.

use std::sync::Arc;

use http::StatusCode;
use http::header::{self, HeaderValue};

use crate::cache::Object;
use crate::cache::policy::NoCacheReason;
use crate::cache::shared::feed::{self, Invalidation};
use crate::proxy::txn::{Step, Txn};
use crate::proxy::vcl::env::{ObjEdit, Scope};
use crate::proxy::vcl::{self as rt, Bereq, Beresp, Resp, VclRuntime, VclTxn, key_from_hash};
use crate::vcl::run::{Verdict, run};
use crate::vcl::types::Method;

/// Runs `m` on the client request (and `obj` / `resp` when given).
pub(super) fn run_client(
    txn: &mut Txn,
    m: Method,
    obj: Option<(&Object, bool)>,
    edit: Option<&mut ObjEdit>,
    resp: Option<&mut Resp>,
) -> Verdict {
    run_sub(txn, m, Sees::Client { obj, edit, resp })
}

/// What a subroutine sees besides the client, its request and `bereq`: on the client side
/// `obj` (and the edit vcl_hit may make of it) and `resp`; on the backend side `beresp`.
pub(super) enum Sees<'a> {
    Client {
        obj: Option<(&'a Object, bool)>,
        edit: Option<&'a mut ObjEdit>,
        resp: Option<&'a mut Resp>,
    },
    Backend(Option<&'a mut Beresp>),
}

/// Runs `m` with what it `sees`, logging its call and return on the request's Varnish-style
/// records — on the backend side in 4.x, the backend request's (and what vcl_backend_fetch
/// changed in it), where the client request is not seen; 2.x's vcl_fetch runs on the client
/// side and sees it.
pub(super) fn run_sub(txn: &mut Txn, m: Method, sees: Sees<'_>) -> Verdict {
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
        vsl,
        ..
    } = v;
    let backend_side = matches!(sees, Sees::Backend(_));
    let bereq_tx = bereq
        .as_ref()
        .filter(|_| backend_side)
        .and_then(|b| b.vsl.clone());
    let tx = bereq_tx.as_deref().or(vsl.as_deref());
    rt::vsl::call(tx, m);
    // What vcl_backend_fetch changes is logged as it returns, and what vcl_backend_response
    // changes in `beresp`'s fields.
    let before = bereq
        .as_ref()
        .filter(|b| m == Method::BackendFetch && b.vsl.is_some())
        .map(|b| (b.method.clone(), b.uri.clone(), b.headers.clone()));
    let beresp_before = match &sees {
        Sees::Backend(Some(b)) if m == Method::BackendResponse && bereq_tx.is_some() => {
            Some(b.headers.clone())
        }
        _ => None,
    };
    let logged = state.log.len();
    let legacy = runtime.program.dialect.is_legacy();
    let mut scope = Scope::client(runtime, &proxy.cache, *client, state, req);
    scope.bereq = bereq.as_mut();
    scope.is_hitmiss = *is_hitmiss;
    scope.is_hitpass = *is_hitpass;
    match sees {
        Sees::Client { obj, edit, resp } => {
            scope.original = original.as_deref();
            scope.obj = obj;
            scope.obj_edit = edit;
            scope.resp = resp;
            scope.key = key.as_ref();
            scope.fetched = *fetched;
        }
        Sees::Backend(beresp) => {
            if !legacy {
                scope.req = None;
            }
            scope.beresp = beresp;
        }
    }
    let verdict = run(&runtime.program, m, &mut scope);
    if let (Some(before), Some(b), Some(t)) = (beresp_before, scope.beresp.as_deref(), tx) {
        rt::vsl::beresp_changed(t, &before, &b.headers, &runtime.program.spelled);
    }
    if let (Some(before), Some(b), Some(t)) = (before, bereq.as_ref(), tx) {
        rt::vsl::bereq_changed(t, &before, b);
    }
    rt::vsl::returned(tx, &verdict, (&state.log, logged), &state.errors);
    verdict
}

/// A failed subroutine: logged, and answered with a 503 through vcl_synth (which counts it in
/// `synth_resp`, as Varnish's vcl_synth counts `s_synth`: once).
pub(super) fn failed(m: Method, why: &str) -> Step {
    tracing::warn!(subroutine = m.sub_name(), reason = why, "VCL failed");
    Step::VclSynth(503, Some("VCL failed".to_string()))
}

/// The step for an action the caller of `m` does not take itself: `synth` and `restart`
/// (which every client subroutine that allows them takes alike), `fail`, and an action `m`
/// does not allow, which fails the request as `fail` does (503 through vcl_synth).
pub(super) fn settle(m: Method, verdict: Verdict) -> Step {
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
        if crate::http::fields::has_field(&txn.req.headers, &http::header::CONNECTION) {
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
    if first && v.vsl.is_none() {
        let esi = txn
            .req
            .extensions
            .get::<crate::esi::Level>()
            .is_some_and(|l| l.0 > 0);
        let r = &txn.req;
        let parent = r.extensions.get::<crate::txlog::vsl::Current>();
        let why = match (esi, parent) {
            (true, Some(p)) => (p.0.vxid, "esi"),
            (true, None) => (0, "esi"),
            (false, _) => (0, "rxreq"),
        };
        v.vsl = rt::vsl::begin_req(
            rt,
            v.state.xid,
            why,
            (&r.method, &r.uri, r.version, &r.headers),
        );
        if let Some(t) = &v.vsl {
            txn.req
                .extensions
                .insert(crate::txlog::vsl::Current(t.clone()));
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
                    // `server.ip`: a PROXY header's destination, else the local address.
                    let server = l.1.map_or(l.0, |p| p.server);
                    server.ip().to_canonical().to_string()
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
        vsl: None,
    });
    if !pipe
        && !v.runtime.program.dialect.is_legacy()
        && let Some(b) = v.bereq.as_mut()
    {
        b.vsl = rt::vsl::begin_bereq(&v.runtime, v.vsl.as_deref(), v.state.xid, b);
    }
}

/// SHA-256, as Varnish digests the hash inputs (`req.hash`).
fn sha256(data: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, data).as_ref());
    out
}
