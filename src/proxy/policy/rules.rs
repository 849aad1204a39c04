//! The `[[rule]]` front-end of the policy seam: the rules' request phase at Recv (synth,
//! redirect, pass, route, `cache = true`) before RFC 9111's own request checks, PURGE, and
//! the rules' response phase on the backend response (fields changed, the overrides the
//! storage decision applies, cache deception armor). Every other step is Shellac's default.

use http::Method;
use std::ops::ControlFlow;

use http::header;
use http::response::Parts;

use super::{Hooks, ResponseOutcome, Storage};
use crate::cache::CacheKey;
use crate::cache::policy::{Exchange, NoCacheReason};
use crate::cache::status_line::{self, StatusLine};
use crate::http::cache_control::CacheControl;
use crate::http::fields::has_field;
use crate::http::headers;
use crate::proxy::deliver;
use crate::proxy::filter::flv;
use crate::proxy::judge::normalize_accept_encoding;
use crate::proxy::txn::{FetchMode, Step, Txn};

/// The `[[rule]]` policy (no rules: RFC 9111 and the builtin policy alone).
pub(in crate::proxy) struct Rules;

impl Hooks for Rules {
    fn recv(txn: &mut Txn) -> Step {
        if txn.req.method.as_str() == "PURGE" {
            return txn.purge();
        }
        let mut forced_lookup = false;
        if !txn.rules().is_empty() {
            match request_phase(txn) {
                ControlFlow::Continue(cache) => forced_lookup = cache,
                ControlFlow::Break(step) => return step,
            }
        }
        if headers::upgrade_request(
            &txn.req.method,
            txn.req.version,
            &txn.req.headers,
            &txn.proxy.config.server.upgrade_protocols,
        )
        .is_some()
        {
            return Step::Pass(NoCacheReason::Upgrade);
        }
        if txn.req.method != Method::GET && txn.req.method != Method::HEAD {
            return Step::Pass(NoCacheReason::Method);
        }
        // RFC 9111 §3.5: looked up, but see `authorized`. A rule's `cache = true` vouches for
        // the request: then it is a lookup like any other.
        txn.authorized = !forced_lookup && has_field(&txn.req.headers, &header::AUTHORIZATION);
        let cc = CacheControl::from_headers(&txn.req.headers);
        if cc.no_store {
            return Step::Pass(NoCacheReason::RequestNoStore);
        }
        if txn.proxy.config.cache.normalize_accept_encoding {
            normalize_accept_encoding(&mut txn.req.headers);
        }
        txn.read_request_directives();
        Step::Lookup
    }

    fn backend_response(
        txn: &mut Txn,
        parts: &mut Parts,
        _ex: &Exchange,
        _mode: &FetchMode,
        was_304: bool,
    ) -> ResponseOutcome {
        headers::strip_hop_by_hop(&mut parts.headers);
        // The backend's own reason phrase (`200 Okay`) is stored with the object, so a hit
        // sends the phrase the miss did (a 304's is not: the stored copy keeps its own).
        if !was_304
            && let Some(value) = super::backend_reason(parts)
                .and_then(|r| StatusLine::value(parts.status, parts.status.as_u16(), Some(&r)))
        {
            parts.headers.insert(status_line::FIELD, value);
        }
        let mut overrides = txn.rules().on_response(
            &txn.matched_rules,
            &txn.req.method,
            parts.status,
            &mut parts.headers,
        );
        // A rule's `compress` (`coding.rs`); only with `[compression]` on, which decodes
        // for clients without gzip what it stores gzipped.
        if let Some(c) = txn
            .proxy
            .rules
            .compress(&txn.matched_rules, parts.status, &parts.headers)
        {
            txn.filters.coding.gzip = Some(c && txn.proxy.config.compression.enabled);
        }
        // A rule's `storage`: `shellac check` refused a name the configuration does not
        // declare, so only a storage a reload removed is not found here (then `s0`).
        if let Some(name) = overrides.storage.as_deref() {
            overrides.store = txn
                .proxy
                .cache
                .storage
                .site_shares()
                .and_then(|s| s.names.id(name))
                .unwrap_or(crate::cache::stores::S0);
        }
        if txn.proxy.config.cache.deception_armor {
            let target = txn.req.uri.path_and_query().map_or("/", |p| p.as_str());
            overrides.armor(target, &parts.headers);
            if overrides.armored {
                txn.proxy.counters.cache_deception_armor.inc();
            }
        }
        if txn
            .proxy
            .rules
            .esi(&txn.matched_rules, parts.status, &parts.headers)
        {
            let url = txn
                .req
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string();
            crate::proxy::filter::esi::turn_on(
                &mut txn.filters,
                (&txn.proxy.config.esi, &txn.proxy.counters),
                &url,
                None,
            );
        }
        ResponseOutcome::Store {
            storage: Storage::Evaluate(overrides),
            buffer: false,
        }
    }
}

/// A matched `flv` rule: a request with `?start=BYTE` is looked up and fetched without it,
/// and its answer cut by the FLV delivery filter (`filter/flv.rs`). `start=0` is the file as
/// it is, from the one stored copy: nothing to cut.
fn flv_seek(txn: &mut Txn, host: &str) {
    let Some(query) = txn.req.uri.query() else {
        return;
    };
    let start = flv::start_of(query);
    if start.is_none() && !flv::starts_at_zero(query) {
        return;
    }
    if without_start(txn, host) {
        txn.flv_start = start;
        txn.proxy.counters.flv_seek.inc();
    }
}

/// A matched `mp4` rule: a request with `?start=SECONDS` and/or `end=SECONDS` is looked up
/// and fetched without them, and its answer cut by the MP4 delivery filter
/// (`filter/mp4.rs`).
fn mp4_seek(txn: &mut Txn, host: &str, max: u64) {
    use crate::proxy::filter::mp4;
    let Some(query) = txn.req.uri.query() else {
        return;
    };
    let (start, end) = (mp4::start_of(query), mp4::end_of(query));
    // `start=0` alone is the file as it is, from the one stored copy: nothing to cut.
    let whole = start.is_none() && end.is_none();
    if whole && !mp4::starts_at_zero(query) {
        return;
    }
    if without_args(txn, host, mp4::without_span) {
        if !whole {
            let span = (start.unwrap_or(0.0), end);
            txn.mp4_start = Some((span, usize::try_from(max).unwrap_or(usize::MAX)));
        }
        txn.proxy.counters.mp4_seek.inc();
    }
}

/// The request's target and cache key without its `start` arguments; whether they could be
/// rewritten.
fn without_start(txn: &mut Txn, host: &str) -> bool {
    without_args(txn, host, flv::without_start)
}

/// The request's target and cache key with the query `strip` leaves; whether they could be
/// rewritten.
fn without_args(txn: &mut Txn, host: &str, strip: fn(&str) -> Option<String>) -> bool {
    let path = txn.req.uri.path();
    let target = match txn.req.uri.query().and_then(strip) {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let mut parts = txn.req.uri.clone().into_parts();
    let Ok(pq) = target.parse() else {
        return false;
    };
    parts.path_and_query = Some(pq);
    let Ok(uri) = http::Uri::from_parts(parts) else {
        return false;
    };
    txn.req.uri = uri;
    txn.key = Some(CacheKey::new(host, &target));
    true
}

/// The rules' request phase: `Continue(cache)` goes on (`cache`: a rule said
/// `cache = true`), `Break(step)` is a rule's answer (synth, redirect) or its pass.
fn request_phase(txn: &mut Txn) -> ControlFlow<Step, bool> {
    let host = Txn::authority(&txn.req).unwrap_or("").to_string();
    let path = txn
        .req
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let tls = txn.req.extensions.get::<crate::tls::server::Session>();
    let client = txn.real_client().ip();
    let site = txn.site.clone();
    let conn = crate::rules::Conn {
        https: tls.is_some(),
        client_cert: tls.and_then(|s| s.0.client.as_deref()).unwrap_or(""),
        client: Some(client),
        site: site.as_deref().map(|s| &*s.name),
        site_names: site.as_deref().map(|s| &s.names),
        limiter: Some(&*txn.proxy.shared.throttle),
    };
    let rules = match txn.site.as_ref().and_then(|s| s.rules.as_ref()) {
        Some(own) => own,
        None => &txn.proxy.rules,
    };
    let outcome = rules.on_request(&host, &path, &txn.req.method, &mut txn.req.headers, conn);
    txn.matched_rules = outcome.matched;
    if let Some(retry) = outcome.limited {
        txn.proxy.counters.rate_limited.inc();
        return ControlFlow::Break(Step::Deliver(too_many_requests(retry)));
    }
    if outcome.flv {
        flv_seek(txn, &host);
    } else if let Some(max) = outcome.mp4 {
        mp4_seek(txn, &host, max);
    }
    if let Some(name) = &outcome.director {
        txn.route = txn.proxy.backends.get(name);
    }
    if let Some((status, content_type, body)) = outcome.synth {
        txn.proxy.counters.synth_resp.inc();
        if outcome.hotlink {
            txn.proxy.counters.hotlink_refused.inc();
        }
        return ControlFlow::Break(Step::Deliver(deliver::generated(
            status,
            &content_type,
            body,
            None,
        )));
    }
    if let Some((status, location)) = outcome.redirect {
        txn.proxy.counters.synth_resp.inc();
        let body = format!(
            "{} {}\n{location}\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        return ControlFlow::Break(Step::Deliver(deliver::generated(
            status,
            "text/plain; charset=utf-8",
            body,
            Some(&location),
        )));
    }
    if outcome.pass.is_some() {
        return ControlFlow::Break(Step::Pass(NoCacheReason::Rule));
    }
    ControlFlow::Continue(outcome.cache)
}

/// The answer to a request past a rule's `rate_limit`: `429` with `Retry-After` in whole
/// seconds (rounded up: a client that waits that long finds a token).
fn too_many_requests(
    retry: std::time::Duration,
) -> http::Response<crate::proxy::body::ResponseBody> {
    let secs = retry.as_secs() + u64::from(retry.subsec_nanos() > 0);
    let mut resp = deliver::generated(
        http::StatusCode::TOO_MANY_REQUESTS,
        "text/plain; charset=utf-8",
        "429 Too Many Requests\n".to_string(),
        None,
    );
    let headers = resp.headers_mut();
    headers.insert(header::RETRY_AFTER, http::HeaderValue::from(secs.max(1)));
    if let Ok(v) = http::HeaderValue::from_str("shellac; detail=rate-limit") {
        headers.insert("cache-status", v);
    }
    resp
}
