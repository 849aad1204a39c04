//! The storage decision's tests: RFC 9111's reading, the refusals, the operator's overrides,
//! the Age field, and the reading VCL starts from.

use super::rfc9111::{age_field, parse_age};
use super::*;
use http::HeaderValue;
use http::header;
use http::header::HeaderName;
use std::time::Duration;

fn eval(pairs: &[(&str, &str)], status: u16) -> Result<StorePlan, NoCacheReason> {
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

const DATE: (&str, &str) = ("date", "Sun, 22 Nov 2026 00:00:00 GMT");

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
fn operator_overrides() {
    let o = |ttl: Option<u64>, min: Option<u64>, force: bool| Overrides {
        ttl: ttl.map(Duration::from_secs),
        min_ttl: min.map(Duration::from_secs),
        override_origin: force,
        ..Default::default()
    };
    let now = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
    let run = |pairs: &[(&str, &str)], ov: &Overrides| {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        evaluate_with(
            StatusCode::OK,
            &h,
            &Exchange::at(now, now),
            &CacheConfig::default(),
            ov,
        )
    };
    // Static files: 1 h whatever the origin says (with override_origin).
    assert_eq!(
        run(&[("cache-control", "no-store")], &o(Some(3600), None, true))
            .unwrap()
            .ttl,
        Duration::from_secs(3600)
    );
    assert_eq!(
        run(
            &[("cache-control", "no-store")],
            &o(Some(3600), None, false)
        ),
        Err(NoCacheReason::NoStore),
        "ttl alone never overrides no-store"
    );
    // Minimum TTL for pages with an Expires in the past.
    assert_eq!(
        run(
            &[DATE, ("expires", "Sat, 21 Nov 2026 00:00:00 GMT")],
            &o(None, Some(120), false)
        )
        .unwrap()
        .ttl,
        Duration::from_secs(120)
    );
    assert_eq!(
        run(
            &[DATE, ("cache-control", "max-age=600")],
            &o(None, Some(120), false)
        )
        .unwrap()
        .ttl,
        Duration::from_secs(600)
    );
    assert_eq!(
        run(&[("cache-control", "private")], &o(None, Some(120), false)),
        Err(NoCacheReason::Private)
    );
    // Set-Cookie is never overridden by ttl (strip_set_cookie removes it first).
    assert_eq!(
        run(&[("set-cookie", "a=b")], &o(Some(60), None, true)),
        Err(NoCacheReason::SetCookie)
    );
}

/// Issue 23, defect 1: a rule's `ttl` / `min_ttl` without `override_origin` stored a bare
/// 500 (and a restart's final 503) that the builtin policy refuses.
#[test]
fn rule_lifetimes_never_make_an_error_cacheable() {
    let now = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
    let run = |status: u16, pairs: &[(&str, &str)], ex: Exchange, o: &Overrides| {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        let status = StatusCode::from_u16(status).unwrap();
        evaluate_with(status, &h, &ex, &CacheConfig::default(), o)
    };
    let plain = Exchange::at(now, now);
    let min = Overrides {
        min_ttl: Some(Duration::from_secs(120)),
        ..Default::default()
    };
    let ttl = Overrides {
        ttl: Some(Duration::from_secs(3600)),
        ..Default::default()
    };
    for o in [&min, &ttl] {
        assert_eq!(run(500, &[DATE], plain, o), Err(NoCacheReason::Status));
        assert_eq!(
            run(
                503,
                &[DATE, ("expires", "Sat, 21 Nov 2026 00:00:00 GMT")],
                plain,
                o
            ),
            Err(NoCacheReason::Expired),
            "an explicit lifetime in the past is not lengthened for an error"
        );
        assert_eq!(
            run(500, &[DATE, ("cache-control", "max-age=60")], plain, o)
                .unwrap()
                .ttl,
            Duration::from_secs(60),
            "the origin's own lifetime for a 500, not the rule's"
        );
        // Heuristically cacheable statuses get the rule's lifetime.
        assert!(run(200, &[DATE], plain, o).is_ok());
        assert!(run(404, &[DATE], plain, o).is_ok());
    }
    // The director marks the status failed: never stored, whatever its freshness.
    let failed = Exchange {
        failed_status: true,
        ..plain
    };
    let fresh503 = [DATE, ("cache-control", "max-age=60")];
    assert!(run(503, &fresh503, plain, &Overrides::default()).is_ok());
    assert_eq!(
        run(503, &fresh503, failed, &Overrides::default()),
        Err(NoCacheReason::Status)
    );
    assert_eq!(
        run(200, &fresh503, failed, &min),
        Err(NoCacheReason::Status)
    );
    // Only override_origin stores such a status.
    let force = Overrides {
        ttl: Some(Duration::from_secs(3600)),
        override_origin: true,
        ..Default::default()
    };
    assert_eq!(
        run(500, &[DATE], plain, &force).unwrap().ttl,
        Duration::from_secs(3600)
    );
    assert!(run(503, &fresh503, failed, &force).is_ok());
}

#[test]
fn age_overflow_and_garbage() {
    assert_eq!(
        parse_age("99999999999999999999"),
        Some(Duration::from_secs(MAX_AGE))
    );
    assert_eq!(parse_age("10"), Some(Duration::from_secs(10)));
    assert_eq!(parse_age("-1"), None);
    assert_eq!(parse_age("1.5"), None);
    assert_eq!(parse_age("1a"), None);
    assert_eq!(parse_age("+1"), None);
    assert_eq!(parse_age(""), None);
    assert_eq!(
        eval(
            &[
                DATE,
                ("cache-control", "max-age=60"),
                ("age", "99999999999999999999")
            ],
            200
        ),
        Err(NoCacheReason::Expired)
    );
}

/// Issue 23: an `Age` that is not a non-negative integer is ignored as a whole (never read
/// as its numeric prefix). Issue 32: of a list or several lines, the first value counts.
#[test]
fn age_list_or_lines_use_the_first_value() {
    let age = |lines: &[&str]| {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(header::AGE, HeaderValue::from_str(l).unwrap());
        }
        age_field(&h).map(|d| d.as_secs())
    };
    for bad in [
        "1a", "1.5", "7200.0", "-7200", "abc", "a7200", "0x10", "", "1 2", "abc, 0",
    ] {
        assert_eq!(age(&[bad]), None, "{bad:?}");
    }
    assert_eq!(age(&[" 10 "]), Some(10));
    assert_eq!(age(&["0, 0"]), Some(0));
    assert_eq!(age(&["0, 7200"]), Some(0), "a list: the first value");
    assert_eq!(age(&["7200, 0"]), Some(7200));
    assert_eq!(age(&["0,7200"]), Some(0));
    assert_eq!(age(&["0", "7200"]), Some(0), "two lines: the first");
    assert_eq!(age(&["7200", "0"]), Some(7200));
    assert_eq!(age(&[]), None);
    // In the freshness decision: a garbage Age is no age at all.
    let p = eval(
        &[DATE, ("cache-control", "max-age=60"), ("age", "59a")],
        200,
    )
    .unwrap();
    assert_eq!(p.initial_age, Duration::ZERO);
    assert!(
        eval(
            &[DATE, ("cache-control", "max-age=60"), ("age", "0, 60")],
            200
        )
        .is_ok()
    );
    assert_eq!(
        eval(
            &[DATE, ("cache-control", "max-age=60"), ("age", "60, 0")],
            200
        ),
        Err(NoCacheReason::Expired)
    );
}

/// Received 0.999 s into the second its `Date` names: no age yet (the fraction is the
/// date's resolution); a second later, one second.
#[test]
fn the_fraction_of_the_dates_second_is_not_age() {
    let date = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
    let mut h = HeaderMap::new();
    h.insert(
        header::DATE,
        HeaderValue::from_static("Sun, 22 Nov 2026 00:00:00 GMT"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=1"));
    let cfg = CacheConfig::default();
    let at = |ms| date + Duration::from_millis(ms);
    let p = evaluate(StatusCode::OK, &h, at(990), at(999), &cfg).unwrap();
    assert_eq!(
        p.initial_age,
        Duration::from_millis(9),
        "only the response delay"
    );
    let p = evaluate(StatusCode::OK, &h, at(1500), at(1500), &cfg);
    assert_eq!(p.err(), Some(NoCacheReason::Expired), "a whole second old");
}

#[test]
fn age_is_corrected() {
    let p = eval(&[DATE, ("cache-control", "max-age=60"), ("age", "20")], 200).unwrap();
    assert_eq!(p.initial_age, Duration::from_secs(20));
    assert_eq!(
        eval(&[DATE, ("cache-control", "max-age=60"), ("age", "60")], 200),
        Err(NoCacheReason::Expired)
    );
}

/// What VCL reads as `beresp.ttl` and `beresp.grace` matches Varnish (varnishtest b00043):
/// the lifetime less the Age field exactly (a backend's few milliseconds do not show), a
/// status Varnish does not cache has no lifetime and no `stale-while-revalidate` grace.
#[test]
fn vcl_freshness_reads_as_varnish_does() {
    let cfg = CacheConfig::default();
    let sent = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
    let ex = Exchange {
        request_time: sent,
        response_time: sent + Duration::from_millis(3),
        failed_status: false,
        authorization: false,
        partial_content: false,
    };
    let fresh = |pairs: &[(&str, &str)], status: u16| {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        vcl_freshness(StatusCode::from_u16(status).unwrap(), &h, &ex, &cfg, false)
    };
    let swr = ("cache-control", "max-age=30, stale-while-revalidate=30");
    let f = fresh(&[swr], 200);
    assert_eq!((f.ttl, f.grace), (30.0, Duration::from_secs(30)));
    let f = fresh(&[swr, ("age", "40")], 200);
    assert_eq!((f.ttl, f.grace), (-10.0, Duration::from_secs(30)));
    let f = fresh(&[swr], 500);
    assert_eq!((f.ttl, f.grace), (0.0, cfg.grace.0));
    let f = fresh(&[("cache-control", "max-age=30")], 307);
    assert_eq!(f.ttl, 30.0);
    assert_eq!(fresh(&[], 307).ttl, 0.0);
    // Varnish 2.1 gave a 302 the default TTL (varnishtest 2.1.5/b00015), not a 204.
    let cfg = CacheConfig {
        default_ttl: crate::config::units::Dur(Duration::from_secs(120)),
        ..CacheConfig::default()
    };
    let h = HeaderMap::new();
    let found = StatusCode::FOUND;
    assert_eq!(vcl_freshness(found, &h, &ex, &cfg, true).ttl, 120.0);
    assert_eq!(vcl_freshness(found, &h, &ex, &cfg, false).ttl, 0.0);
    let no_content = StatusCode::NO_CONTENT;
    assert_eq!(vcl_freshness(no_content, &h, &ex, &cfg, true).ttl, 0.0);
    assert_eq!(vcl_freshness(no_content, &h, &ex, &cfg, false).ttl, 120.0);
}

/// Regression (varnishtest b00043 under load read `beresp.ttl` -1.000 for `max-age=0`): under
/// VCL the age is the Age field alone, as Varnish reads it. A backend that took 1.5 s, or a
/// `Date` from the second before the response arrived, adds no age.
#[test]
fn vcl_ttl_ignores_a_slow_backend_and_the_dates_second() {
    let cfg = CacheConfig::default();
    let sent = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
    let slow = Exchange {
        request_time: sent,
        response_time: sent + Duration::from_millis(1_500),
        failed_status: false,
        authorization: false,
        partial_content: false,
    };
    let mut h = HeaderMap::new();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=0"));
    h.insert(
        header::DATE,
        HeaderValue::from_static("Sun, 22 Nov 2026 00:00:00 GMT"),
    );
    assert_eq!(
        vcl_freshness(StatusCode::OK, &h, &slow, &cfg, false).ttl,
        0.0
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=30"),
    );
    h.insert(header::AGE, HeaderValue::from_static("5"));
    assert_eq!(
        vcl_freshness(StatusCode::OK, &h, &slow, &cfg, false).ttl,
        25.0
    );
    // The builtin policy still counts both, as RFC 9111 §4.2.3 says.
    let plan = evaluate_with(StatusCode::OK, &h, &slow, &cfg, &Overrides::default()).unwrap();
    assert_eq!(plan.initial_age, Duration::from_millis(6_500));
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
