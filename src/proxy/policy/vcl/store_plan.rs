//! How an object VCL delivers is stored: its lifetimes as `beresp.ttl`, `beresp.grace` and
//! `beresp.keep` left them, its `Vary`, 2.0's `obj.prefetch` — for a fetched response
//! (vcl_backend_response) and for vcl_backend_error's own object.

use http::header::HeaderMap;

use crate::cache::policy::{self, NoCacheReason, StorePlan};
use crate::cache::stores::{S0, TRANSIENT};
use crate::cache::{Cache, Prefetch};
use crate::proxy::vcl::Beresp;

/// How to store a response VCL delivers: its `beresp.ttl`, `beresp.grace` and `beresp.keep`
/// (from now), the `Vary` it has now (VCL may have changed it).
/// `store`: the storage `beresp.storage` names ([`store_of`]).
pub(super) fn plan(
    beresp: &Beresp,
    headers: &HeaderMap,
    fresh: policy::VclFreshness,
    partial_content: bool,
    store: u8,
) -> Result<StorePlan, NoCacheReason> {
    let code = beresp.status.as_u16();
    if !(200..1000).contains(&code) || (code == 206 && !partial_content) || code == 304 {
        return Err(NoCacheReason::Status);
    }
    let secs = crate::vcl::run::value::to_duration;
    if beresp.ttl + beresp.grace.max(0.0) + beresp.keep.max(0.0) <= 0.0 {
        return Err(NoCacheReason::Expired);
    }
    let vary = policy::vary_names(headers).ok_or(NoCacheReason::VaryStar)?;
    Ok(StorePlan {
        ttl: fresh.initial_age.saturating_add(secs(beresp.ttl)),
        initial_age: fresh.initial_age,
        strip: fresh.strip,
        vary,
        stale_ok: fresh.stale_ok,
        grace: secs(beresp.grace),
        keep: secs(beresp.keep),
        stale_if_error: fresh.stale_if_error,
        prefetch: prefetch(beresp),
        transient: store == TRANSIENT,
        store,
    })
}

/// The storage `beresp.storage` names (`cache/stores.rs`): `s0` when unset, and for a name
/// no configuration declared (`shellac check` refuses those in the file; a name from a
/// string, 3.0's `"Transient"` or `storage_hint`, is looked up as it is).
pub(super) fn store_of(beresp: &Beresp, cache: &Cache) -> u8 {
    let Some(name) = beresp.storage.as_deref() else {
        return S0;
    };
    match cache.storage.site_shares() {
        Some(shares) => shares.names.id(name).unwrap_or(S0),
        None if name.eq_ignore_ascii_case("transient") => TRANSIENT,
        None => S0,
    }
}

/// VCL 2.0's `obj.prefetch` as Varnish 2.0 read it (`VRT_l_obj_prefetch`): negative, that long
/// before expiry; positive, that long from now; zero, never. A value outside the object's
/// freshness (`beresp.ttl` as vcl_fetch leaves it) is ignored, as Varnish logged and ignored
/// it, which leaves `cache.refresh_ahead`; so does a file that never sets it.
fn prefetch(beresp: &Beresp) -> Prefetch {
    let secs = crate::vcl::run::value::to_duration;
    match beresp.prefetch {
        None => Prefetch::CONFIGURED,
        Some(0.0) => Prefetch::OFF,
        Some(a) if a < 0.0 && -a < beresp.ttl => Prefetch::before(secs(-a)),
        Some(a) if a > 0.0 && a < beresp.ttl => Prefetch::before(secs(beresp.ttl - a)),
        Some(_) => Prefetch::CONFIGURED,
    }
}
