//! RFC 9111's reading of a backend response as Varnish presents it to VCL before
//! `vcl_backend_response` (`beresp.ttl`, `beresp.grace`, `beresp.keep`): Varnish's list of
//! cacheable statuses, no refusals (they are the program's to make). The program's
//! `beresp.*` are then the storage decision (`proxy/policy/vcl/backend_response.rs`).

use std::time::Duration;

use http::StatusCode;
use http::header::{HeaderMap, HeaderName};

use super::plan::Exchange;
use super::rfc9111::{
    AgeReading, Lifetime, heuristic, heuristically_cacheable, lifetime, stale_ok, stripped,
};
use crate::config::CacheConfig;
use crate::http::cache_control::CacheControl;

/// A backend response's freshness as VCL sees it before `vcl_backend_response` (`beresp.ttl`,
/// `beresp.grace`, `beresp.keep`) and what storing it needs. Unlike [`evaluate_with`] nothing
/// is refused here: `no-store`, `private`, `Set-Cookie` and the rest are the VCL's to judge
/// (the built-in VCL does, as Varnish's does).
#[derive(Clone, Debug, PartialEq)]
pub struct VclFreshness {
    /// Seconds of freshness left: the lifetime (`s-maxage`, `max-age`, `Expires`, else the
    /// heuristic or `cache.default_ttl` for the heuristically cacheable statuses) less the
    /// age; with no lifetime (a status Varnish does not cache) 0 less the age.
    pub ttl: f64,
    pub grace: Duration,
    pub keep: Duration,
    pub initial_age: Duration,
    /// May be served stale at all (not after must-revalidate, proxy-revalidate, s-maxage).
    pub stale_ok: bool,
    pub stale_if_error: Option<Duration>,
    /// `no-cache="f"` / `private="f"`: fields dropped before storing.
    pub strip: Vec<HeaderName>,
}

impl VclFreshness {
    /// The freshness of a response VCL made itself (vcl_backend_error's object): no lifetime
    /// but the one VCL gives it, no age, no field dropped, servable stale.
    pub fn made() -> VclFreshness {
        VclFreshness {
            ttl: 0.0,
            grace: Duration::ZERO,
            keep: Duration::ZERO,
            initial_age: Duration::ZERO,
            stale_ok: true,
            stale_if_error: None,
            strip: Vec::new(),
        }
    }
}

/// See [`VclFreshness`]. `legacy`: a 2.x program, which follows Varnish 2.1's list of
/// cacheable statuses.
pub fn vcl_freshness(
    status: StatusCode,
    headers: &HeaderMap,
    ex: &Exchange,
    cfg: &CacheConfig,
    legacy: bool,
) -> VclFreshness {
    let cc = CacheControl::targeted(headers, &cfg.targeted_cache_control);
    let Lifetime {
        date,
        initial_age,
        explicit,
    } = lifetime(headers, &cc, ex, AgeReading::Varnish);
    let response_time = ex.response_time;
    // Varnish's list (RFC 9111 lets a cache decline any status): other statuses get no
    // lifetime even with `max-age`. In 4.x a redirect that may be temporary gets only an
    // explicit one; Varnish 2.1 gave 302 and 307 the default TTL too.
    let code = status.as_u16();
    // A 206 to a Range Shellac sent itself (a piece, a slice: `Exchange::partial_content`)
    // is bytes of the representation, with its lifetime (Varnish stores no 206).
    let storable = if code == 206 {
        ex.partial_content
    } else if legacy {
        matches!(code, 200 | 203 | 300 | 301 | 302 | 307 | 404 | 410)
    } else {
        matches!(
            code,
            200 | 203 | 204 | 300 | 301 | 302 | 307 | 404 | 410 | 414
        )
    };
    let default_ttl = (!cfg.default_ttl.0.is_zero()).then_some(cfg.default_ttl.0);
    let lifetime = if !storable {
        None
    } else if explicit.is_some() {
        explicit
    } else if code == 302 || code == 307 {
        if legacy { default_ttl } else { None }
    } else if heuristically_cacheable(status) && !status.is_server_error() {
        heuristic(headers, date, response_time, cfg).or(default_ttl)
    } else {
        None
    };
    let lifetime = match (lifetime, cfg.max_ttl.map(|d| d.0)) {
        (Some(l), Some(max)) => Some(l.min(max + initial_age)),
        (l, _) => l,
    };
    // Without a lifetime it reads as Varnish's does: none left, less the age.
    let ttl = lifetime.unwrap_or(Duration::ZERO).as_secs_f64() - initial_age.as_secs_f64();
    VclFreshness {
        ttl,
        // `stale-while-revalidate` counts only for a response with a lifetime, as in Varnish.
        grace: cc
            .stale_while_revalidate
            .filter(|_| lifetime.is_some())
            .unwrap_or(cfg.grace.0),
        keep: cfg.keep.0,
        initial_age,
        stale_ok: stale_ok(&cc),
        stale_if_error: cc.stale_if_error,
        strip: stripped(&cc),
    }
}
