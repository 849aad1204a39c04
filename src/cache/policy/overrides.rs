//! The storage decision of the builtin policy with the operator's overrides: RFC 9111's
//! reading (`rfc9111.rs`) and refusals, then the lifetimes a `[[rule]]` or the `[cache]`
//! settings give (`ttl`, `min_ttl`, `max_ttl`, `default_ttl`, grace, keep,
//! `override_origin`), and cache deception armor withholding a rule's forcing actions.

use std::time::Duration;

use http::StatusCode;
use http::header::{self, HeaderMap, HeaderName};

use super::plan::{Exchange, NoCacheReason, StorePlan, shared_with_authorization};
use super::rfc9111::{
    AgeReading, Lifetime, has_validator, heuristic, heuristically_cacheable, lifetime, stale_ok,
    stripped, vary_names,
};
use crate::config::CacheConfig;
use crate::http::cache_control::CacheControl;

/// Operator overrides from policy rules (response phase). All `None`/false: the origin and
/// the builtin policy decide.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Fresh for this long from now, whatever the origin said about freshness.
    pub ttl: Option<Duration>,
    /// At least this fresh from now (also when the origin sent no or an expired lifetime).
    pub min_ttl: Option<Duration>,
    /// At most this fresh (replaces `cache.max_ttl`).
    pub max_ttl: Option<Duration>,
    pub grace: Option<Duration>,
    pub keep: Option<Duration>,
    /// Store despite `no-store`, `private`, `no-cache` and non-default statuses.
    pub override_origin: bool,
    /// The last rule that applied, for `Cache-Status` detail.
    pub rule: Option<String>,
    /// Cache deception armor withheld the rules' caching actions ([`Overrides::armor`]).
    pub armored: bool,
    /// The storage a rule's `storage` names (the last rule that names one).
    pub storage: Option<String>,
    /// That storage's id (`cache/stores.rs`), resolved by the caller; `0`: `s0`.
    pub store: u8,
}

impl Overrides {
    /// Cache deception armor (`cache::armor`): the rules' caching actions — `ttl`, `min_ttl`,
    /// `override_origin` — apply only if the response's `Content-Type` fits the extension
    /// `path_and_query` claims; otherwise they are withheld (`armored`) and the origin's word
    /// and the builtin policy decide alone. `max_ttl`, `grace` and `keep` only shorten or
    /// shape what may be stored anyway, and stay.
    pub fn armor(&mut self, path_and_query: &str, headers: &HeaderMap) {
        let forcing = self.ttl.is_some() || self.min_ttl.is_some() || self.override_origin;
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if forcing && !crate::cache::armor::fits(path_and_query, content_type) {
            self.ttl = None;
            self.min_ttl = None;
            self.override_origin = false;
            self.armored = true;
        }
    }
}

/// [`evaluate`] with what the exchange adds and operator overrides applied.
///
/// A rule's `ttl` / `min_ttl` only changes how long a response the builtin policy would store
/// stays fresh (and may store one that merely lacks freshness or arrived expired); refusals
/// for the status, a failed status, `no-store`, `private` and `no-cache` stand unless the rule
/// says `override_origin`; the refusal of a response to a request with `Authorization` (RFC 9111
/// §3.5) stands even then.
pub fn evaluate_with(
    status: StatusCode,
    headers: &HeaderMap,
    ex: &Exchange,
    cfg: &CacheConfig,
    o: &Overrides,
) -> Result<StorePlan, NoCacheReason> {
    let code = status.as_u16();
    if !(200..600).contains(&code) || (code == 206 && !ex.partial_content) || code == 304 {
        return Err(NoCacheReason::Status);
    }
    if ex.failed_status && !o.override_origin {
        return Err(NoCacheReason::Status);
    }
    let cc = CacheControl::targeted(headers, &cfg.targeted_cache_control);
    refused_by_origin(headers, ex, &cc, o)?;
    let strip = stripped(&cc);
    if headers.contains_key(header::SET_COOKIE) && !strip.contains(&header::SET_COOKIE) {
        return Err(NoCacheReason::SetCookie);
    }
    let vary = vary_names(headers).ok_or(NoCacheReason::VaryStar)?;
    // RFC 9111 §4.2.3, §4.2.1
    let reading = lifetime(headers, &cc, ex, AgeReading::Rfc9111);
    let initial_age = reading.initial_age;
    let revalidate = cc.no_cache && !o.override_origin;
    // Without explicit freshness only the heuristically cacheable statuses may be stored
    // (RFC 9111 §3, §4.2.2); only `override_origin` stores others.
    if reading.explicit.is_none() && !heuristically_cacheable(status) && !o.override_origin {
        return Err(NoCacheReason::Status);
    }
    if revalidate {
        return always_revalidated(initial_age, (strip, vary), cfg, o);
    }
    let lifetime = fresh_for(status, headers, &reading, ex, cfg, o)?;
    let stale_ok = stale_ok(&cc);
    Ok(StorePlan {
        ttl: lifetime,
        initial_age,
        strip,
        vary,
        stale_ok,
        grace: o.grace.or(cc.stale_while_revalidate).unwrap_or(cfg.grace.0),
        keep: o.keep.unwrap_or(cfg.keep.0),
        stale_if_error: cc.stale_if_error,
        prefetch: crate::cache::Prefetch::CONFIGURED,
        transient: o.store == crate::cache::stores::TRANSIENT,
        store: o.store,
    })
}

/// The refusals of what the origin said (`Cache-Control` targeted at this cache): the
/// request's `Authorization`, then — unless a rule says `override_origin` — `no-store`,
/// `private`, and `no-cache` without a validator.
fn refused_by_origin(
    headers: &HeaderMap,
    ex: &Exchange,
    cc: &CacheControl,
    o: &Overrides,
) -> Result<(), NoCacheReason> {
    // RFC 9111 §3.5 whatever the rule says about the origin's directives: `override_origin`
    // overrides what the *origin* said, the credentials are the *request's* (issue 32). Only
    // a request rule's `cache = true` (the operator vouching that they do not change the
    // answer) lifts it, by not counting the request as authorised at all.
    if ex.authorization && !shared_with_authorization(cc) {
        return Err(NoCacheReason::Authorization);
    }
    if !o.override_origin {
        if cc.no_store {
            return Err(NoCacheReason::NoStore);
        }
        if cc.private {
            return Err(NoCacheReason::Private);
        }
        // no-cache: stored, but reused only after validation with the origin (RFC 9111
        // §5.2.2.4) — worth storing only with a validator to revalidate with.
        if cc.no_cache && !has_validator(headers) {
            return Err(NoCacheReason::NoCache);
        }
    }
    Ok(())
}

/// A `no-cache` response (without `override_origin`): stale from the start and never served
/// stale (RFC 9111 §4.2.4), kept for `keep` so that every use revalidates.
fn always_revalidated(
    initial_age: Duration,
    (strip, vary): (Vec<HeaderName>, Vec<HeaderName>),
    cfg: &CacheConfig,
    o: &Overrides,
) -> Result<StorePlan, NoCacheReason> {
    // Lookup finds it stale within `keep` and sends its validators. A rule's lifetimes do not
    // apply without `override_origin`.
    let keep = o.keep.unwrap_or(cfg.keep.0);
    if keep.is_zero() {
        return Err(NoCacheReason::NoCache);
    }
    Ok(StorePlan {
        ttl: Duration::ZERO,
        initial_age,
        strip,
        vary,
        stale_ok: false,
        grace: Duration::ZERO,
        keep,
        stale_if_error: None,
        prefetch: crate::cache::Prefetch::CONFIGURED,
        transient: o.store == crate::cache::stores::TRANSIENT,
        store: o.store,
    })
}

/// How long the response stays fresh, counted from its age on arrival: a rule's `ttl`, else
/// the origin's (or the heuristic, or `cache.default_ttl`) raised to `min_ttl`, capped at
/// `max_ttl`. A response with no freshness, or expired on arrival, is not stored.
fn fresh_for(
    status: StatusCode,
    headers: &HeaderMap,
    reading: &Lifetime,
    ex: &Exchange,
    cfg: &CacheConfig,
    o: &Overrides,
) -> Result<Duration, NoCacheReason> {
    let initial_age = reading.initial_age;
    // Lifetimes the operator chose — a rule's `ttl` / `min_ttl`, `cache.default_ttl` — apply to
    // the heuristically cacheable statuses short of 5xx, unless the rule says
    // `override_origin`: otherwise `min_ttl` for pages would keep a bare 500 error page (or
    // one with an Expires date in the past) for minutes. Any other status keeps exactly the
    // freshness the origin gave it.
    let operator_lifetimes =
        o.override_origin || (heuristically_cacheable(status) && !status.is_server_error());
    let (ttl, min_ttl, default_ttl) = if operator_lifetimes {
        let default_ttl = (!cfg.default_ttl.0.is_zero()).then_some(cfg.default_ttl.0);
        (o.ttl, o.min_ttl, default_ttl)
    } else {
        (None, None, None)
    };
    // Operator lifetimes count from now: they are added to the age already accrued.
    let lifetime = if let Some(ttl) = ttl {
        ttl + initial_age
    } else {
        let origin = reading
            .explicit
            .or_else(|| heuristic(headers, reading.date, ex.response_time, cfg).or(default_ttl));
        match (origin, min_ttl) {
            (Some(l), Some(min)) => l.max(min + initial_age),
            (None, Some(min)) => min + initial_age,
            (Some(l), None) => l,
            (None, None) => return Err(NoCacheReason::NoFreshness),
        }
    };
    let lifetime = match o.max_ttl.or(cfg.max_ttl.map(|d| d.0)) {
        Some(max) => lifetime.min(max + initial_age),
        None => lifetime,
    };
    if lifetime <= initial_age {
        return Err(NoCacheReason::Expired);
    }
    Ok(lifetime)
}
