//! Why a response was not a plain hit or miss: the words, their `/stats` names and
//! descriptions, and one counter per word.

use super::counter::Counter;

/// Why a response was not a plain hit or miss: the `detail=` words of `Cache-Status`
/// (`NoCacheReason::as_str` and the coalescing details), the `/stats` name and a description. Counted per
/// response; exported as `pass_reason_<word>` in `/stats` and as the `reason` label of
/// `shellac_pass_reason_total` in `/metrics`.
pub const PASS_REASONS: &[(&str, &str, &str)] = &[
    (
        "method",
        "pass_reason_method",
        "Request method other than GET or HEAD",
    ),
    (
        "authorization",
        "pass_reason_authorization",
        "Response to a request with Authorization not stored: it did not say public, s-maxage or must-revalidate",
    ),
    (
        "request-no-store",
        "pass_reason_request_no_store",
        "Request said Cache-Control: no-store",
    ),
    ("no-store", "pass_reason_no_store", "Response said no-store"),
    ("private", "pass_reason_private", "Response said private"),
    (
        "no-cache",
        "pass_reason_no_cache",
        "Response said no-cache and had no validator (ETag, Last-Modified) to revalidate it with",
    ),
    (
        "set-cookie",
        "pass_reason_set_cookie",
        "Response set a cookie",
    ),
    (
        "status",
        "pass_reason_status",
        "Response status not cacheable without explicit freshness, or one the director restarts on",
    ),
    (
        "no-freshness",
        "pass_reason_no_freshness",
        "Response had no freshness information (and default_ttl is 0)",
    ),
    (
        "expired",
        "pass_reason_expired",
        "Response was already stale when it arrived",
    ),
    (
        "vary-star",
        "pass_reason_vary_star",
        "Response said Vary: *",
    ),
    (
        "too-large",
        "pass_reason_too_large",
        "Response larger than max_object_size",
    ),
    (
        "upgrade",
        "pass_reason_upgrade",
        "Protocol upgrade request (WebSocket): passed, tunnelled after the backend's 101",
    ),
    (
        "hit-for-miss",
        "pass_reason_hit_for_miss",
        "URL recently uncacheable: fetched without coalescing",
    ),
    (
        "vary-miss",
        "pass_reason_vary_miss",
        "Another Vary variant was being fetched: fetched alone",
    ),
    ("other", "pass_reason_other", "Any other reason"),
];

/// One counter per [`PASS_REASONS`] entry.
#[derive(Debug)]
pub struct PassReasons([Counter; PASS_REASONS.len()]);

impl Default for PassReasons {
    fn default() -> Self {
        PassReasons(std::array::from_fn(|_| Counter::default()))
    }
}

impl PassReasons {
    /// Counts one response for `reason` (a `PASS_REASONS` word; anything else is `other`).
    pub fn inc(&self, reason: &str) {
        let last = PASS_REASONS.len() - 1;
        let i = PASS_REASONS
            .iter()
            .position(|(w, _, _)| *w == reason)
            .unwrap_or(last);
        self.0[i].inc();
    }

    /// (word, `/stats` name, count) in `PASS_REASONS` order.
    pub fn snapshot(&self) -> impl Iterator<Item = (&'static str, &'static str, u64)> + '_ {
        PASS_REASONS
            .iter()
            .zip(self.0.iter())
            .map(|((w, name, _), c)| (*w, *name, c.get()))
    }
}
