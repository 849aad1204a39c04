//! Judgement helpers of the request machine: what the request's own `Cache-Control` asks,
//! whether a stored object may answer this request (bans, Vary, Authorization, freshness,
//! grace, keep), and the `Accept-Encoding` normalisation that makes clients share variants.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{self, HeaderValue};

use super::txn::{Step, Txn};
use crate::cache::{CacheKey, Object};
use crate::http::accept_encoding::Coding;
use crate::http::cache_control::CacheControl;
use crate::http::fields::has_field;

impl Txn {
    /// Reads the request's own `Cache-Control` (and `Pragma: no-cache`) when
    /// `cache.request_cache_control` makes them count.
    pub(super) fn read_request_directives(&mut self) {
        let cfg = &self.proxy.config.cache;
        if cfg.request_cache_control {
            let mut cc = CacheControl::from_headers(&self.req.headers);
            // Pragma: no-cache counts only without Cache-Control (RFC 9111 §5.4).
            if !has_field(&self.req.headers, &header::CACHE_CONTROL)
                && has_field(&self.req.headers, &header::PRAGMA)
                && self
                    .req
                    .headers
                    .get_all(header::PRAGMA)
                    .iter()
                    .any(|v| v.as_bytes().eq_ignore_ascii_case(b"no-cache"))
            {
                cc.no_cache = true;
            }
            self.req_cc = Some(cc);
        }
    }

    /// What the stored `object` under `key` can do for this request: a fresh hit, a grace
    /// delivery, or nothing (remembering a stale copy within `keep` for revalidation and as a
    /// fallback). `count` counts a stale object once per request.
    pub(super) fn classify(
        &mut self,
        key: &CacheKey,
        object: Arc<Object>,
        now: Instant,
        count: bool,
    ) -> Option<Step> {
        if self
            .proxy
            .cache
            .check_bans(key, &object, Some(&self.req.headers))
            == crate::cache::ban::BanCheck::Banned
        {
            self.proxy.counters.ban_objects.inc();
            return None;
        }
        let ignore_vary = self.policy.lookup_flags(self).ignore_vary;
        if !ignore_vary && !object.vary_matches(&self.req.headers) {
            return None;
        }
        if self.authorized && !self.shared_with_authorization(&object) {
            // Stored for requests without credentials (or without leave to share): this
            // request's answer may differ, so it is not reused for it, nor revalidated.
            return None;
        }
        // The request's limits (VCL's `req.ttl` / `req.max_age` and `req.grace`): a positive
        // TTL limit below the object's TTL ends its freshness there (the object counts as if
        // stored with that TTL, so its grace runs from then); a non-negative grace limit
        // below the object's grace shortens that. Unset (or out of those ranges) they change
        // nothing.
        let limits = self.policy.limits(self);
        let (req_ttl, req_grace) = (limits.ttl, limits.grace);
        let ttl_cap = req_ttl
            .filter(|&l| l > 0.0 && l < object.ttl.get().as_secs_f64())
            .map(Duration::from_secs_f64);
        let fresh = match ttl_cap {
            Some(cap) => object.age(now) < cap,
            None => object.is_fresh(now),
        } || self
            .waited_since
            .is_some_and(|since| object.stored_at >= since);
        if let Some(cc) = &self.req_cc {
            let age = object.age(now);
            let wants_validation = cc.no_cache
                || cc.max_age.is_some_and(|m| age > m)
                || cc.min_fresh.is_some_and(|m| object.remaining_ttl(now) < m);
            if wants_validation {
                self.stale = Some(object);
                return None;
            }
            if !fresh
                && object.stale_ok
                && let Some(max_stale) = cc.max_stale
                && max_stale.is_none_or(|m| age.saturating_sub(object.ttl.get()) <= m)
            {
                return Some(Step::Hit(object));
            }
        }
        if fresh {
            return Some(Step::Hit(object));
        }
        if count {
            self.proxy.counters.cache_expired.inc();
        }
        let graced = object.stale_ok && {
            let grace = match req_grace {
                Some(limit) if limit >= 0.0 && limit < object.grace.get().as_secs_f64() => {
                    Duration::from_secs_f64(limit)
                }
                _ => object.grace.get(),
            };
            object.age(now) < ttl_cap.unwrap_or_else(|| object.ttl.get()) + grace
        };
        // (`count` is false for the leader's second look: the fetch in progress is its own.)
        if graced && !self.policy.grace_applies(self, key, !count) {
            // The policy fetches it anew (2.x: unless grace is what Varnish 2.1 kept it for).
            self.stale = Some(object);
            return None;
        }
        if graced {
            return Some(Step::Grace(object));
        }
        if object.within_keep(now) {
            self.stale = Some(object);
        }
        None
    }

    /// Whether the request's own `Cache-Control` / `Pragma` count and say anything
    /// (`cache.request_cache_control`).
    pub(super) fn request_directives(&self) -> bool {
        self.req_cc
            .as_ref()
            .is_some_and(|cc| *cc != CacheControl::default())
    }

    /// Whether a stored response may answer a request with `Authorization`: it says `public`,
    /// `s-maxage` or `must-revalidate` (RFC 9111 §3.5), in the field the policy reads.
    pub(super) fn shared_with_authorization(&self, object: &Object) -> bool {
        let targets = &self.proxy.config.cache.targeted_cache_control;
        crate::cache::policy::shared_with_authorization(&CacheControl::targeted(
            object.headers.map(),
            targets,
        ))
    }
}

/// Rewrites `Accept-Encoding` to `gzip`, `br` or nothing — gzip whenever the client takes
/// it — before a VCL program's vcl_recv: the shape field VCL tests (`~ "gzip"`) and Varnish's
/// gzip washing keep, so a program that reads it sees what it expects.
pub(super) fn wash_accept_encoding(headers: &mut http::HeaderMap) {
    if !crate::http::fields::has_field(headers, &header::ACCEPT_ENCODING) {
        return;
    }
    let mut values = headers.get_all(header::ACCEPT_ENCODING).iter();
    match (values.next(), values.next()) {
        (None, _) => return,
        (Some(v), None) if v == "gzip" || v == "br" => return,
        _ => {}
    }
    let accepts = crate::http::accept_encoding::Accepts::parse(
        headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .map(HeaderValue::as_bytes),
    );
    let washed = [Coding::Gzip, Coding::Br]
        .into_iter()
        .find(|c| accepts.accepts(*c));
    headers.remove(header::ACCEPT_ENCODING);
    if let Some(c) = washed {
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static(c.as_str()),
        );
    }
}

/// The normalisation of `Accept-Encoding` the policy applies before lookup: washing under
/// VCL, the class of coding otherwise.
pub(super) fn normalize_for(vcl: bool, headers: &mut http::HeaderMap) {
    if vcl {
        wash_accept_encoding(headers);
    } else {
        normalize_accept_encoding(headers);
    }
}

/// Rewrites `Accept-Encoding` to the class of coding the client gets — `zstd`, `br`,
/// `gzip` or nothing (identity) — as `http::accept_encoding` reads it (q-values, `q=0`, `*`),
/// so clients that differ only in how they spell it share one variant: at most one per
/// coding.
pub(super) fn normalize_accept_encoding(headers: &mut http::HeaderMap) {
    // Fast paths: no field (nothing to do), or already normalised.
    if !crate::http::fields::has_field(headers, &header::ACCEPT_ENCODING) {
        return;
    }
    let mut values = headers.get_all(header::ACCEPT_ENCODING).iter();
    match (values.next(), values.next()) {
        (None, _) => return,
        (Some(v), None) if v == "gzip" || v == "br" || v == "zstd" => return,
        _ => {}
    }
    let class = crate::http::accept_encoding::Accepts::parse(
        headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .map(HeaderValue::as_bytes),
    )
    .class();
    headers.remove(header::ACCEPT_ENCODING);
    if class != Coding::Identity {
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static(class.as_str()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_encoding_is_normalised() {
        for (given, want) in [
            ("gzip, deflate, br, zstd", Some("zstd")),
            ("gzip, deflate, br", Some("br")),
            ("gzip, deflate", Some("gzip")),
            ("br;q=1.0, gzip;q=0", Some("br")),
            ("br;q=0.5, gzip", Some("gzip")),
            ("GZIP", Some("gzip")),
            ("*", Some("zstd")),
            ("identity", None),
            ("deflate", None),
        ] {
            let mut h = http::HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(given));
            normalize_accept_encoding(&mut h);
            assert_eq!(
                h.get(header::ACCEPT_ENCODING).map(|v| v.to_str().unwrap()),
                want,
                "{given}"
            );
        }
    }

    #[test]
    fn accept_encoding_is_washed_for_vcl() {
        for (given, want) in [
            ("gzip, deflate, br, zstd", Some("gzip")),
            ("br;q=1.0, gzip;q=0", Some("br")),
            ("GZIP", Some("gzip")),
            ("zstd", None),
            ("identity", None),
            ("deflate", None),
        ] {
            let mut h = http::HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(given));
            wash_accept_encoding(&mut h);
            assert_eq!(
                h.get(header::ACCEPT_ENCODING).map(|v| v.to_str().unwrap()),
                want,
                "{given}"
            );
        }
    }
}
