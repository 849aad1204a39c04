//! The storage decision's tests of the operator's overrides: rule lifetimes, `override_origin`,
//! and that no lifetime of theirs makes an error cacheable.

use super::tests::DATE;
use super::*;
use http::HeaderValue;
use http::header::HeaderName;
use std::time::Duration;

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
