//! The storage decision's tests of age: the `Age` field as RFC 9111 reads it, the age a
//! response arrives with, and the lifetimes VCL reads as Varnish does.

use super::rfc9111::{age_field, parse_age};
use super::tests::{DATE, eval};
use super::*;
use http::HeaderValue;
use http::header;
use http::header::HeaderName;
use std::time::Duration;

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
