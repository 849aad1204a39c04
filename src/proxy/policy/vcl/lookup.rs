//! After the lookup: vcl_hit (a stored object found, or one another request fetched),
//! vcl_miss and vcl_pass, each turning the subroutine's action into the next step.

use std::sync::Arc;
use std::time::Instant;

use super::client::{make_bereq, run_client, settle};
use crate::cache::Object;
use crate::cache::busy::LeaderGuard;
use crate::cache::policy::NoCacheReason;
use crate::proxy::txn::{FetchMode, Step, Txn};
use crate::proxy::vcl::env::ObjEdit;
use crate::vcl::run::Verdict;
use crate::vcl::types::Method;

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
