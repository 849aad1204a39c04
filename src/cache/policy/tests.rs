//! The storage decision's tests: RFC 9111's reading and the refusals (the operator's
//! overrides: `overrides_tests.rs`; the Age field and the reading VCL starts from:
//! `age_tests.rs`).

use super::*;
use http::HeaderValue;
use http::header;
use http::header::HeaderName;
use std::time::Duration;

pub(super) fn eval(pairs: &[(&str, &str)], status: u16) -> Result<StorePlan, NoCacheReason> {
    eval_with(pairs, status, &CacheConfig::default())
}

fn eval_with(
    pairs: &[(&str, &str)],
    status: u16,
    cfg: &CacheConfig,
) -> Result<StorePlan, NoCacheReason> {
    let now = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    evaluate(StatusCode::from_u16(status).unwrap(), &h, now, now, cfg)
}

pub(super) const DATE: (&str, &str) = ("date", "Sun, 22 Nov 2026 00:00:00 GMT");

#[test]
fn explicit_freshness_order() {
    let p = eval(&[DATE, ("cache-control", "max-age=60, s-maxage=30")], 200).unwrap();
    assert_eq!(p.ttl, Duration::from_secs(30));
    let p = eval(
        &[
            DATE,
            ("cache-control", "max-age=60"),
            ("expires", "Sun, 22 Nov 2026 01:00:00 GMT"),
        ],
        200,
    )
    .unwrap();
    assert_eq!(p.ttl, Duration::from_secs(60));
    let p = eval(&[DATE, ("expires", "Sun, 22 Nov 2026 01:00:00 GMT")], 200).unwrap();
    assert_eq!(p.ttl, Duration::from_secs(3600));
    assert_eq!(
        eval(&[DATE, ("expires", "0")], 200),
        Err(NoCacheReason::Expired)
    );
    assert_eq!(
        eval(&[DATE, ("cache-control", "max-age=0")], 200),
        Err(NoCacheReason::Expired)
    );
}

#[test]
fn heuristic_and_default_ttl() {
    let p = eval(
        &[DATE, ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT")],
        200,
    )
    .unwrap();
    assert_eq!(p.ttl, Duration::from_secs(3600), "10% of 10 hours");
    assert_eq!(eval(&[DATE], 200), Err(NoCacheReason::NoFreshness));
    let cfg = CacheConfig {
        default_ttl: crate::config::units::Dur(Duration::from_secs(5)),
        ..Default::default()
    };
    assert_eq!(
        eval_with(&[DATE], 200, &cfg).unwrap().ttl,
        Duration::from_secs(5)
    );
    assert_eq!(eval_with(&[DATE], 302, &cfg), Err(NoCacheReason::Status));
    assert_eq!(
        eval(
            &[DATE, ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT")],
            500
        ),
        Err(NoCacheReason::Status)
    );
    assert!(
        eval(&[DATE, ("cache-control", "max-age=5")], 500).is_ok(),
        "explicit freshness allows any final status"
    );
}

/// Issue 23: every status RFC 9110 §15.1 calls heuristically cacheable gets heuristic
/// freshness (414 and 501 were missing); operator lifetimes stop short of 5xx.
#[test]
fn heuristic_freshness_for_every_heuristically_cacheable_status() {
    let lm = ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT");
    for code in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501] {
        let p = eval(&[DATE, lm], code).unwrap_or_else(|e| panic!("{code}: {e:?}"));
        assert_eq!(p.ttl, Duration::from_secs(3600), "{code}");
    }
    for code in [201, 202, 302, 303, 307, 400, 403, 500, 502, 503] {
        assert_eq!(
            eval(&[DATE, lm], code),
            Err(NoCacheReason::Status),
            "{code}"
        );
    }
    let cfg = CacheConfig {
        default_ttl: crate::config::units::Dur(Duration::from_secs(5)),
        ..Default::default()
    };
    assert!(eval_with(&[DATE], 414, &cfg).is_ok());
    assert_eq!(
        eval_with(&[DATE], 501, &cfg),
        Err(NoCacheReason::NoFreshness),
        "default_ttl never keeps a server error"
    );
}

/// Issue 23: the obsolete date formats (RFC 850, asctime) and any letter case are read, not
/// taken for an invalid (already expired) Expires.
#[test]
fn expires_in_obsolete_formats() {
    for expires in [
        "Sunday, 22-Nov-26 01:00:00 GMT",
        "Sun Nov 22 01:00:00 2026",
        "sun, 22 nov 2026 01:00:00 gmt",
    ] {
        let p =
            eval(&[DATE, ("expires", expires)], 200).unwrap_or_else(|e| panic!("{expires}: {e:?}"));
        assert_eq!(p.ttl, Duration::from_secs(3600), "{expires}");
    }
    let p = eval(
        &[
            ("date", "sunday, 22-nov-26 00:00:00 GMT"),
            ("last-modified", "Sat Nov 21 14:00:00 2026"),
        ],
        200,
    )
    .unwrap();
    assert_eq!(
        p.ttl,
        Duration::from_secs(3600),
        "Date and Last-Modified too"
    );
}

/// Issue 32: an Expires off the grammar (other zone, two-digit IMF year, missing comma,
/// doubled spaces, dashes, periods, one-digit hour) or on two lines is already expired; an
/// invalid or doubled Last-Modified gives no heuristic; an invalid Date is the receipt time.
#[test]
fn invalid_expires_means_expired() {
    for expires in [
        "Sun, 22 Nov 2026 01:00:00 UTC",
        "Sun, 22 Nov 2026 01:00:00 AEST",
        "Sun, 22 Nov 26 01:00:00 GMT",
        "Sun 22 Nov 2026 01:00:00 GMT",
        "Sun, 22  Nov 2026 01:00:00 GMT",
        "Sun, 22-Nov-2026 01:00:00 GMT",
        "Sun, 22 Nov 2026 01.00.00 GMT",
        "Sun, 22 Nov 2026 1:00:00 GMT",
    ] {
        assert_eq!(
            eval(&[DATE, ("expires", expires)], 200),
            Err(NoCacheReason::Expired),
            "{expires}"
        );
    }
    let two = ("expires", "Sun, 22 Nov 2026 01:00:00 GMT");
    assert_eq!(
        eval(&[DATE, two, two], 200),
        Err(NoCacheReason::Expired),
        "two Expires lines"
    );
    for lm in [
        &[("last-modified", "Sat, 21 Nov 2026 14:00:00 UTC")][..],
        &[("last-modified", "Sat, 21 Nov 2026 4:00:00 GMT")][..],
        &[
            ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT"),
            ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT"),
        ][..],
    ] {
        let mut pairs = vec![DATE];
        pairs.extend_from_slice(lm);
        assert_eq!(eval(&pairs, 200), Err(NoCacheReason::NoFreshness), "{lm:?}");
    }
    // An invalid Date is no Date: the receipt time stands in, so Expires − Date is 1 h.
    let p = eval(
        &[
            ("date", "Sun, 22 Nov 2026 00:00:00 UTC"),
            ("expires", "Sun, 22 Nov 2026 01:00:00 GMT"),
        ],
        200,
    )
    .unwrap();
    assert_eq!(p.ttl, Duration::from_secs(3600));
}

/// RFC 9213 §2.2: a valid targeted field replaces Cache-Control *and* Expires; a member of
/// the wrong type is ignored, not read as 0 (which would be "already stale").
#[test]
fn targeted_field_replaces_expires_and_ignores_wrong_types() {
    let expires = ("expires", "Sun, 22 Nov 2026 01:00:00 GMT");
    assert_eq!(
        eval(&[DATE, expires, ("cdn-cache-control", "public")], 200),
        Err(NoCacheReason::NoFreshness)
    );
    assert_eq!(
        eval(&[DATE, expires, ("cdn-cache-control", "max-age=60")], 200)
            .unwrap()
            .ttl,
        Duration::from_secs(60)
    );
    assert_eq!(
        eval(&[DATE, ("cdn-cache-control", "max-age=3600.0")], 200),
        Err(NoCacheReason::NoFreshness),
        "ignored, so no explicit lifetime at all"
    );
    assert_eq!(
        eval(
            &[
                DATE,
                ("cache-control", "max-age=60"),
                ("cdn-cache-control", "Max-Age=3600")
            ],
            200
        )
        .unwrap()
        .ttl,
        Duration::from_secs(60),
        "not a Dictionary: Cache-Control counts"
    );
}

#[test]
fn max_ttl_clamps() {
    let cfg = CacheConfig {
        max_ttl: Some(crate::config::units::Dur(Duration::from_secs(10))),
        ..Default::default()
    };
    assert_eq!(
        eval_with(&[DATE, ("cache-control", "max-age=600")], 200, &cfg)
            .unwrap()
            .ttl,
        Duration::from_secs(10)
    );
}

#[test]
fn refusals() {
    assert_eq!(
        eval(&[("cache-control", "no-store, max-age=60")], 200),
        Err(NoCacheReason::NoStore)
    );
    assert_eq!(
        eval(&[("cache-control", "private, max-age=60")], 200),
        Err(NoCacheReason::Private)
    );
    assert_eq!(
        eval(&[("cache-control", "no-cache, max-age=60")], 200),
        Err(NoCacheReason::NoCache),
        "no validator to revalidate with"
    );
    assert_eq!(
        eval(
            &[("cache-control", "max-age=60"), ("set-cookie", "a=b")],
            200
        ),
        Err(NoCacheReason::SetCookie)
    );
    assert_eq!(
        eval(&[("cache-control", "max-age=60"), ("vary", "*")], 200),
        Err(NoCacheReason::VaryStar)
    );
    assert_eq!(
        eval(&[("cache-control", "max-age=60")], 206),
        Err(NoCacheReason::Status)
    );
    let p = eval(
        &[
            ("cache-control", "max-age=60, no-cache=\"Set-Cookie\""),
            ("set-cookie", "a=b"),
        ],
        200,
    )
    .unwrap();
    assert_eq!(p.strip, vec![header::SET_COOKIE]);
}

/// RFC 9111 §3.5: a response to a request with Authorization is stored only with
/// `public`, `s-maxage` or `must-revalidate`.
#[test]
fn authorization_needs_leave_to_share() {
    let now = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
    let ex = Exchange {
        authorization: true,
        ..Exchange::at(now, now)
    };
    let run = |cc: &str, o: &Overrides| {
        let mut h = HeaderMap::new();
        h.insert(header::CACHE_CONTROL, HeaderValue::from_str(cc).unwrap());
        evaluate_with(StatusCode::OK, &h, &ex, &CacheConfig::default(), o)
    };
    let none = Overrides::default();
    assert_eq!(run("max-age=60", &none), Err(NoCacheReason::Authorization));
    for cc in [
        "public, max-age=60",
        "s-maxage=60",
        "max-age=60, must-revalidate",
    ] {
        assert!(run(cc, &none).is_ok(), "{cc}");
    }
    let force = Overrides {
        override_origin: true,
        ..Default::default()
    };
    assert_eq!(
        run("max-age=60", &force),
        Err(NoCacheReason::Authorization),
        "override_origin keeps RFC 9111 §3.5 (issue 32)"
    );
    assert_eq!(
        run("private, max-age=60", &force),
        Err(NoCacheReason::Authorization)
    );
    assert!(run("public, max-age=60", &force).is_ok());
    let vouched = Exchange {
        authorization: false,
        ..ex
    };
    let mut h = HeaderMap::new();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=60"),
    );
    assert!(
        evaluate_with(
            StatusCode::OK,
            &h,
            &vouched,
            &CacheConfig::default(),
            &force
        )
        .is_ok(),
        "cache = true: not counted as authorised"
    );
}

/// Issue 23 (RFC 9111 §5.2.2.4): a `no-cache` response with a validator is stored, stale
/// from the start and never servable stale, so every use revalidates.
#[test]
fn no_cache_is_stored_for_revalidation() {
    for validator in [
        ("etag", "\"v1\""),
        ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT"),
    ] {
        let p = eval(
            &[DATE, ("cache-control", "no-cache, max-age=600"), validator],
            200,
        )
        .unwrap_or_else(|e| panic!("{validator:?}: {e:?}"));
        assert_eq!(p.ttl, Duration::ZERO);
        assert!(!p.stale_ok);
        assert_eq!(p.grace, Duration::ZERO);
        assert_eq!(p.keep, Duration::from_secs(3600));
    }
    let etag = ("etag", "\"v1\"");
    assert!(eval(&[DATE, ("cache-control", "no-cache"), etag], 200).is_ok());
    assert_eq!(
        eval(&[DATE, ("cache-control", "no-cache"), etag], 500),
        Err(NoCacheReason::Status)
    );
    let cfg = CacheConfig {
        keep: crate::config::units::Dur(Duration::ZERO),
        ..Default::default()
    };
    assert_eq!(
        eval_with(&[DATE, ("cache-control", "no-cache"), etag], 200, &cfg),
        Err(NoCacheReason::NoCache),
        "nothing to keep it for"
    );
}

#[test]
fn stale_windows() {
    let p = eval(
        &[
            DATE,
            (
                "cache-control",
                "max-age=60, stale-while-revalidate=30, stale-if-error=300",
            ),
        ],
        200,
    )
    .unwrap();
    assert_eq!(p.grace, Duration::from_secs(30));
    assert_eq!(p.stale_if_error, Some(Duration::from_secs(300)));
    assert!(p.stale_ok);
    let p = eval(
        &[DATE, ("cache-control", "max-age=60, must-revalidate")],
        200,
    )
    .unwrap();
    assert!(!p.stale_ok);
    assert_eq!(
        p.grace,
        Duration::ZERO,
        "RFC default: no stale serving without permission"
    );
}

#[test]
fn every_no_cache_reason_has_a_pass_reason_counter() {
    use crate::stats::{Counters, PASS_REASONS};
    for r in NoCacheReason::ALL {
        assert!(
            PASS_REASONS.iter().any(|(w, _, _)| *w == r.as_str()),
            "{} missing from PASS_REASONS",
            r.as_str()
        );
    }
    let c = Counters::default();
    c.pass_reason.inc("no-store");
    c.pass_reason.inc("something new");
    let snap: Vec<_> = c.pass_reason.snapshot().collect();
    assert!(snap.contains(&("no-store", "pass_reason_no_store", 1)));
    assert!(snap.contains(&("other", "pass_reason_other", 1)));
}
