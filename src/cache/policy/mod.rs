//! RFC 9111 storage and freshness decisions for a shared cache, plus Shellac's builtin policy:
//! `rfc9111.rs` reads a response (age, lifetimes, directives), `overrides.rs` decides with
//! the operator's overrides (`[[rule]]`s, `[cache]`), `varnish.rs` gives VCL its starting
//! point, `plan.rs` holds the types every decision shares.
//!
//! Defaults follow the RFC exactly: a response without explicit freshness, a heuristic
//! (Last-Modified) or an operator's opt-in `default_ttl` is not stored.

#[cfg(test)]
mod age_tests;
mod overrides;
#[cfg(test)]
mod overrides_tests;
mod plan;
mod rfc9111;
#[cfg(test)]
mod tests;
mod varnish;

use std::time::SystemTime;

use http::StatusCode;
use http::header::HeaderMap;

use crate::config::CacheConfig;

pub use overrides::{Overrides, evaluate_with};
pub use plan::{Exchange, NoCacheReason, StorePlan, shared_with_authorization};
pub use rfc9111::{MAX_AGE, age_field, heuristically_cacheable, merge_304, vary_names};
pub use varnish::{VclFreshness, vcl_freshness};

/// Decides whether a backend response may be stored, and for how long, by RFC 9111 and the
/// builtin policy alone.
///
/// `request_time` is when the request was sent, `response_time` when the head arrived.
pub fn evaluate(
    status: StatusCode,
    headers: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
    cfg: &CacheConfig,
) -> Result<StorePlan, NoCacheReason> {
    evaluate_with(
        status,
        headers,
        &Exchange::at(request_time, response_time),
        cfg,
        &Overrides::default(),
    )
}
