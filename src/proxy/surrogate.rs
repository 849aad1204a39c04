//! The origin's surrogate controls (W3C Edge Architecture 1.0), with `esi.surrogate_control`
//! on: every backend request names Shellac an ESI processor (`Surrogate-Capability:
//! shellac="ESI/1.0"`, after any the client's request carried from a surrogate in front),
//! and a response whose `Surrogate-Control` says `content="ESI/1.0"` (for all surrogates or
//! `;shellac`) is processed as ESI, as if the policy had turned it on. The field is then
//! rewritten to the directives meant for Shellac, without their `;shellac`, so the storage
//! decision reads its `max-age` / `no-store` as it reads any `Surrogate-Control`
//! (`cache.targeted_cache_control`); it is never delivered (`deliver.rs`).

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};

use crate::config::esi::EsiConfig;
use crate::http::surrogate_control::{SurrogateControl, capability};

/// The device token Shellac answers to.
pub const TOKEN: &str = "shellac";

const CONTROL: HeaderName = HeaderName::from_static("surrogate-control");
const CAPABILITY: HeaderName = HeaderName::from_static("surrogate-capability");

/// Names Shellac in the backend request's `Surrogate-Capability`.
pub(super) fn on_request(config: &EsiConfig, headers: &mut HeaderMap) {
    if config.surrogate_control
        && let Ok(v) = HeaderValue::from_str(&capability(TOKEN))
    {
        headers.append(CAPABILITY, v);
    }
}

/// Reads the backend response's `Surrogate-Control` (before the policy sees the response),
/// leaving the field with Shellac's other directives; whether it turns ESI on
/// (`content="ESI/1.0"`).
pub(super) fn on_response(config: &EsiConfig, headers: &mut HeaderMap) -> bool {
    if !config.surrogate_control || !headers.contains_key(&CONTROL) {
        return false;
    }
    let sc = SurrogateControl::parse(
        headers.get_all(&CONTROL).iter().map(HeaderValue::as_bytes),
        TOKEN,
    );
    headers.remove(&CONTROL);
    if !sc.directives.is_empty()
        && let Ok(v) = HeaderValue::from_str(&sc.directives.join(", "))
    {
        headers.insert(CONTROL, v);
    }
    sc.esi
}
