//! vcl_backend_response (2.x: vcl_fetch) on the response head: `beresp` made from it, and
//! what the subroutine leaves turned into what the fetch does next (store with a plan,
//! deliver uncached, retry, or a step of the client side).

use std::time::Duration;

use http::StatusCode;
use http::response::Parts;

use super::super::{ErrorOutcome, MadeAnswer};
use super::answer::reason_phrase;
use super::backend_error::{
    new_beresp, own_status_line, retried, run_backend, run_backend_error, vcl_error,
};
use super::client::failed;
use super::store_plan::{plan, store_of};
use crate::cache::policy::{self, NoCacheReason, StorePlan};
use crate::cache::status_line::{self, StatusLine};
use crate::proxy::txn::{Step, Txn};
use crate::proxy::vcl::{self as rt, Beresp};
use crate::vcl::run::Verdict;
use crate::vcl::types::Method;

/// What vcl_backend_response decided.
pub(super) enum BerespOutcome {
    /// Store the response with this plan, or deliver it uncached for this reason (and
    /// remember the URL as uncacheable this long: `beresp.ttl` of a hit-for-miss); `buffer`:
    /// read the whole body before delivering (`beresp.do_stream = false`).
    Plan {
        plan: Result<StorePlan, NoCacheReason>,
        hit_for_miss: Option<Duration>,
        buffer: bool,
    },
    /// `return (retry)`: send the request again.
    Retry,
    /// Leave the fetch for this client-side step (restart, synth, abandon).
    Step(Step),
    /// vcl_backend_error's object (after `return (error)`, or past `max_retries`) with a
    /// lifetime: stored instead of the backend's response, as Varnish inserts it.
    Made(Box<MadeAnswer>),
}

/// vcl_backend_response (2.x: vcl_fetch) on the response head in `parts`: VCL may change its
/// status and fields and decides whether and how long it is stored. `pass`: a pass fetch,
/// never stored. `was_304`: `parts` is a stale copy a 304 revalidated, merged with the 304's
/// fields (`beresp.was_304`).
pub(super) fn backend_response(
    txn: &mut Txn,
    parts: &mut Parts,
    ex: &policy::Exchange,
    pass: bool,
    was_304: bool,
) -> BerespOutcome {
    let Some(v) = txn.vcl.as_deref() else {
        return BerespOutcome::Plan {
            plan: Err(NoCacheReason::Vcl),
            hit_for_miss: None,
            buffer: false,
        };
    };
    let legacy = v.runtime.program.dialect.is_legacy();
    let cfg = &txn.proxy.config.cache;
    let fresh = policy::vcl_freshness(parts.status, &parts.headers, ex, cfg, legacy);
    // Varnish 4.0 on (vbf_stp_startfetch; RFC 9110 §6.6.1): a response without `Date` is
    // given one, the time it arrived, before vcl_backend_response reads it (the last
    // `BerespHeader` before `VCL_call`); it is stored and delivered with the object. The
    // lifetime is the same: without `Date` the arrival time is the date.
    if !legacy && !parts.headers.contains_key(http::header::DATE) {
        parts
            .headers
            .insert(http::header::DATE, super::answer::date_now());
    }
    let tx = v.bereq.as_ref().and_then(|b| b.vsl.clone());
    if let Some(t) = tx.as_deref() {
        let reason = parts
            .extensions
            .get::<hyper::ext::ReasonPhrase>()
            .and_then(|r| std::str::from_utf8(r.as_bytes()).ok());
        crate::proxy::vcl::vsl::response(
            t,
            [
                "BerespProtocol",
                "BerespStatus",
                "BerespReason",
                "BerespHeader",
            ],
            (parts.version, parts.status, reason),
            &parts.headers,
        );
    }
    let mut beresp = beresp(txn, parts, &fresh, ex, pass, was_304, legacy);
    let m = if legacy {
        Method::Fetch
    } else {
        Method::BackendResponse
    };
    let verdict = run_backend(txn, m, Some(&mut beresp));
    took(txn, parts, &mut beresp, pass);
    if let Some(t) = tx.as_deref()
        && matches!(
            verdict,
            Verdict::Deliver | Verdict::Pass | Verdict::HitForPass | Verdict::PassFor(_)
        )
    {
        crate::proxy::vcl::vsl::fetch_body(
            t,
            &parts.headers,
            parts.status.as_u16(),
            beresp.do_stream,
        );
    }
    let hfm = |ttl: f64| (ttl > 0.0).then(|| crate::vcl::run::value::to_duration(ttl));
    if beresp.fetch.do_esi
        && matches!(
            verdict,
            Verdict::Deliver | Verdict::Pass | Verdict::HitForPass | Verdict::PassFor(_)
        )
    {
        esi_on(txn);
    }
    let buffer = !beresp.do_stream;
    let outcome = |plan, hit_for_miss| BerespOutcome::Plan {
        plan,
        hit_for_miss,
        buffer,
    };
    match verdict {
        Verdict::Deliver if pass => outcome(Err(NoCacheReason::Vcl), None),
        Verdict::Deliver if beresp.uncacheable => outcome(Err(NoCacheReason::Vcl), hfm(beresp.ttl)),
        Verdict::Deliver => {
            let store = store_of(&beresp, &txn.proxy.cache);
            if let Some(v) = txn.vcl.as_deref_mut() {
                v.fetched = Some(rt::Fetched {
                    ttl: beresp.ttl,
                    grace: beresp.grace,
                    keep: beresp.keep,
                    at: std::time::Instant::now(),
                    store,
                });
            }
            outcome(
                plan(&beresp, &parts.headers, fresh, ex.partial_content, store),
                None,
            )
        }
        // Varnish's VRT_hit_for_pass: the URL is passed for `d` (its requests run vcl_pass);
        // this response is delivered, not stored.
        Verdict::PassFor(d) => {
            hit_for_pass(txn, pass, d);
            outcome(Err(NoCacheReason::Vcl), None)
        }
        Verdict::Pass | Verdict::HitForPass => {
            let ttl = if beresp.ttl > 0.0 {
                beresp.ttl
            } else {
                txn.proxy.config.cache.hit_for_miss_ttl.0.as_secs_f64()
            };
            // 2.1's `pass` and 3.0's `hit_for_pass` in vcl_fetch make a hit-for-pass
            // object (Varnish 2.1/3.0 cnt_fetch), for its TTL; 4.x's `pass` a hit-for-miss.
            if legacy {
                hit_for_pass(txn, pass, ttl);
                return outcome(Err(NoCacheReason::Vcl), None);
            }
            outcome(Err(NoCacheReason::Vcl), hfm(ttl))
        }
        other => leave(txn, other, m),
    }
}

/// The URL of the response a backend subroutine passed is hit-for-pass for `secs` (Varnish's
/// VRT_hit_for_pass; 2.1/3.0's pass object): its requests are passed until then. A pass
/// fetch (`pass`) marks nothing.
fn hit_for_pass(txn: &Txn, pass: bool, secs: f64) {
    if !pass
        && secs > 0.0
        && let Some(key) = txn.key.clone()
    {
        let d = crate::vcl::run::value::to_duration(secs);
        txn.proxy.cache.mark_hit_for_pass(key, d);
    }
}

/// What vcl_backend_response's `verdict` does when it neither stores nor delivers: a retry
/// (at most `max_retries`; past it vcl_backend_error runs on a 503, as in Varnish), abandon, restart, `error` (4.x: vcl_backend_error; 2.x's
/// vcl_fetch `error`: vcl_error), or a failure.
fn leave(txn: &mut Txn, verdict: Verdict, m: Method) -> BerespOutcome {
    let legacy = txn
        .vcl
        .as_deref()
        .is_some_and(|v| v.runtime.program.dialect.is_legacy());
    match verdict {
        Verdict::Retry => {
            let max_retries = txn.proxy.config.vcl.max_retries;
            let Some(v) = txn.vcl.as_deref_mut() else {
                return BerespOutcome::Step(failed(m, "no VCL state"));
            };
            // Counted past the limit too, as Varnish's `bo->retries++ < max_retries`.
            v.state.retries += 1;
            if v.state.retries > max_retries {
                // Varnish: `VCL_Error` and on to vcl_backend_error, with its 503 `beresp`
                // (a retry from there fails the fetch), not vcl_synth.
                if let Some(t) = v.bereq.as_ref().and_then(|b| b.vsl.as_deref()) {
                    t.log("VCL_Error", "Too many retries, delivering 503");
                }
                let failed = (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Backend fetch failed".to_string(),
                );
                return match run_backend_error(txn, failed, "too-many-retries") {
                    ErrorOutcome::Retry => BerespOutcome::Retry,
                    ErrorOutcome::Step(step) => BerespOutcome::Step(step),
                    ErrorOutcome::Store(made) => BerespOutcome::Made(made),
                };
            }
            retried(v);
            BerespOutcome::Retry
        }
        Verdict::Abandon => BerespOutcome::Step(Step::VclSynth(
            503,
            Some("Backend fetch abandoned".to_string()),
        )),
        Verdict::Restart => BerespOutcome::Step(Step::Restart),
        Verdict::Synth(status, reason) if legacy => {
            BerespOutcome::Step(Step::VclSynth(status, reason))
        }
        Verdict::Synth(status, reason) => match vcl_error(txn, status, reason) {
            ErrorOutcome::Retry => BerespOutcome::Retry,
            ErrorOutcome::Step(step) => BerespOutcome::Step(step),
            ErrorOutcome::Store(made) => BerespOutcome::Made(made),
        },
        Verdict::Fail(why) => BerespOutcome::Step(failed(m, &why)),
        other => BerespOutcome::Step(failed(m, &format!("returned {}", other.as_str()))),
    }
}

/// `beresp` as vcl_backend_response first sees it: the response's status and fields (taken
/// out of `parts`), its lifetimes as `fresh` computed them, whether it is cacheable.
fn beresp(
    txn: &Txn,
    parts: &mut Parts,
    fresh: &policy::VclFreshness,
    ex: &policy::Exchange,
    pass: bool,
    was_304: bool,
    legacy: bool,
) -> Beresp {
    // 2.x: cacheable statuses with a lifetime (Varnish 2.1's list), and a 206 to a Range
    // Shellac sent itself (a piece, a slice).
    let cacheable = !pass
        && fresh.ttl > 0.0
        && (matches!(
            parts.status.as_u16(),
            200 | 203 | 300 | 301 | 302 | 307 | 404 | 410
        ) || (parts.status == StatusCode::PARTIAL_CONTENT && ex.partial_content));
    let (ttl, grace, keep) = pass_lifetimes(fresh, pass, legacy);
    let mut beresp = Beresp {
        ttl,
        grace,
        keep,
        uncacheable: if legacy { !cacheable } else { pass },
        age: fresh.initial_age.as_secs_f64(),
        was_304,
        do_stream: !legacy,
        // `beresp.reason` reads the backend's own phrase, stored with the object by `took`.
        reason: super::super::backend_reason(parts),
        ..new_beresp(txn, parts.status, std::mem::take(&mut parts.headers))
    };
    // A revalidated copy's own status line (`cache::status_line`, among the stored fields a
    // 304 was merged into): VCL sees the wide status and reason it was stored with, as
    // Varnish's beresp is the stored object then, never the field.
    if let Some(line) = beresp
        .headers
        .remove(status_line::FIELD)
        .and_then(|v| StatusLine::parse(v.as_bytes(), beresp.status))
    {
        beresp.wide_status = line.wide;
        beresp.reason = Some(line.reason);
    }
    beresp
}

/// `beresp.ttl`, `beresp.grace` and `beresp.keep` as vcl_backend_response first reads them
/// (seconds): the response's own (`fresh`), except on a 4.x pass (`pass`: vcl_recv's, or a
/// hit-for-pass's), which has none.
///
/// A pass's object is private, and Varnish gives it no lifetime:
/// - Varnish 5.0 on (varnish-cache d9b0919, PR #2015, 2016): RFC2616_Ttl reads neither
///   Cache-Control nor Expires for a private object and logs no `TTL RFC` record: ttl -1
///   (VCL reads a negative ttl as 0), grace 0, keep 0.
/// - Since 2020 (PR #3226, backported to 6.0 in #3280), and so in trunk: RFC2616_Ttl still
///   reads the `Age` field first, into the object's origin time, so `beresp.age` is the
///   `Age` and `beresp.ttl` (0 less the age) is minus the `Age`; varnishtest trunk/b00002
///   reads `0.000` from a response without one.
/// - Varnish 4.0 and 4.1 set ttl -1 after computing it (read as 0) and kept the computed
///   grace and keep; Shellac's 4.0 and 4.1 programs both follow trunk.
///
/// A 2.x program keeps Varnish 2.1's: its cnt_fetch computed a pass's TTL as a miss's
/// (`beresp.ttl` reads the origin's; only `beresp.cacheable` is false). Varnish 3.0 set a
/// pass's to -1 and read it so; the one 2.1/3.0 dialect keeps 2.1's value.
fn pass_lifetimes(fresh: &policy::VclFreshness, pass: bool, legacy: bool) -> (f64, f64, f64) {
    if pass && !legacy {
        // `0.0 -`: no age reads `0.000`, not `-0.000`.
        return (0.0 - fresh.initial_age.as_secs_f64(), 0.0, 0.0);
    }
    (
        fresh.ttl,
        fresh.grace.as_secs_f64(),
        fresh.keep.as_secs_f64(),
    )
}

/// What vcl_backend_response left in `beresp` taken up: saint mode, the status, fields and
/// reason back into `parts`, the fetch chain's gzip switches.
fn took(txn: &mut Txn, parts: &mut Parts, beresp: &mut Beresp, pass: bool) {
    // Saint mode (Varnish 2.1): the backend that answered is held off for this object — a
    // looked-up one; a pass has no object to hold it off for.
    if let Some(secs) = beresp.saintmode.filter(|s| *s > 0.0)
        && !pass
        && let (Some(backend), Some(key)) = (&txn.backend, &txn.key)
    {
        let until = std::time::Instant::now() + crate::vcl::run::value::to_duration(secs);
        backend.saint.hold(key, until);
    }
    parts.status = beresp.status;
    parts.headers = std::mem::take(&mut beresp.headers);
    if let Some(r) = beresp.reason.as_deref().and_then(reason_phrase) {
        parts.extensions.insert(r);
    }
    // The wide status and the reason VCL left, when they are not the status's own
    // (`cache::status_line`): stored with the object, and read back by the delivery of this
    // response (`deliver::respond`), which removes the field.
    if let Some(value) = own_status_line(beresp) {
        parts.headers.insert(status_line::FIELD, value);
    }
    // The fetch chain's gzip filters: only what the program asks for (Varnish compresses
    // nothing by itself); `do_gzip` / `do_gunzip` only under `http_gzip_support`, a
    // `beresp.filters` list whatever it is (`vcl/filters.rs`).
    let switches = beresp.fetch.switches_apply();
    txn.filters.coding.gzip = Some(switches && beresp.fetch.do_gzip);
    txn.filters.coding.gunzip = switches && beresp.fetch.do_gunzip;
}

/// ESI processing of the fetched body, as `beresp.do_esi` asks (the URL is the backend
/// request's, for the log).
fn esi_on(txn: &mut Txn) {
    let url = match txn.vcl.as_deref().and_then(|v| v.bereq.as_ref()) {
        Some(b) => b
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string(),
        None => txn
            .req
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string(),
    };
    let vsl = txn
        .vcl
        .as_deref()
        .and_then(|v| v.bereq.as_ref())
        .and_then(|b| b.vsl.clone());
    crate::proxy::filter::esi::turn_on(
        &mut txn.filters,
        (&txn.proxy.config.esi, &txn.proxy.counters),
        &url,
        vsl,
    );
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::pass_lifetimes;
    use crate::cache::policy::VclFreshness;

    /// A 4.x pass has no lifetime but its age; a 4.x miss and any 2.x fetch keep the
    /// response's (trunk/b00002, Varnish 2.1's cnt_fetch).
    #[test]
    fn a_4x_pass_has_no_lifetime_but_its_age() {
        let fresh = VclFreshness {
            ttl: 113.0,
            grace: Duration::from_secs(30),
            keep: Duration::from_secs(5),
            initial_age: Duration::from_secs(7),
            ..VclFreshness::made()
        };
        assert_eq!(pass_lifetimes(&fresh, true, false), (-7.0, 0.0, 0.0));
        assert_eq!(pass_lifetimes(&fresh, false, false), (113.0, 30.0, 5.0));
        assert_eq!(pass_lifetimes(&fresh, true, true), (113.0, 30.0, 5.0));
        let no_age = VclFreshness::made();
        let (ttl, ..) = pass_lifetimes(&no_age, true, false);
        assert!(ttl == 0.0 && ttl.is_sign_positive(), "{ttl}");
    }
}
