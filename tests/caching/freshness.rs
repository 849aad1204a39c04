//! Freshness rules (RFC 9111): `s-maxage`, `max-age`, `Expires` (obsolete and invalid forms),
//! `Age`, heuristic freshness, the default and maximum TTL, targeted Cache-Control and
//! CDN-Cache-Control. What may be stored at all is in `storability`.

use std::time::Duration;

use crate::common::*;
use shellac::config::units::Dur;

/// Requests `path` twice and returns (origin requests, second response's Cache-Status).
pub(super) async fn twice(
    reply: impl Fn() -> Reply + Send + Sync + 'static,
    tweak: impl FnOnce(&mut shellac::config::Config),
) -> (usize, String) {
    let origin = Origin::start(move |_| reply()).await;
    let shellac = Shellac::start(origin.addr, tweak).await;
    get(shellac.addr, "/r").await;
    let second = get(shellac.addr, "/r").await;
    let out = (origin.count(), second.cache_status().to_string());
    shellac.stop().await;
    out
}

fn now_date() -> String {
    httpdate::fmt_http_date(std::time::SystemTime::now())
}

fn date_in(secs: i64) -> String {
    let now = std::time::SystemTime::now();
    let t = if secs >= 0 {
        now + Duration::from_secs(secs as u64)
    } else {
        now - Duration::from_secs((-secs) as u64)
    };
    httpdate::fmt_http_date(t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s_maxage_wins_over_max_age() {
    let (n, status) = twice(|| Reply::ok("x").cc("max-age=10, s-maxage=500"), |_| {}).await;
    assert_eq!(n, 1);
    assert!(hit_ttl_near(&status, 500, 10), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_age_is_used() {
    let (n, status) = twice(|| Reply::ok("x").cc("max-age=300"), |_| {}).await;
    assert_eq!(n, 1);
    assert!(hit_ttl_near(&status, 300, 10), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expires_relative_to_date() {
    let (n, status) = twice(
        || {
            Reply::ok("x")
                .header("date", &now_date())
                .header("expires", &date_in(120))
        },
        |_| {},
    )
    .await;
    assert_eq!(n, 1);
    assert!(status.contains("hit"), "{status}");
}

/// `date_in(secs)` rewritten in the obsolete RFC 850 and asctime formats, and in lower case.
fn obsolete_forms(imf: &str) -> Vec<String> {
    // "Sun, 06 Nov 1994 08:49:37 GMT"
    let p: Vec<&str> = imf.split([' ', ',']).filter(|t| !t.is_empty()).collect();
    let (wday, day, mon, year, time) = (p[0], p[1], p[2], p[3], p[4]);
    let full = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ]
    .into_iter()
    .find(|d| d.starts_with(wday))
    .unwrap();
    let day_num: u32 = day.parse().unwrap();
    vec![
        format!("{full}, {day}-{mon}-{} {time} GMT", &year[2..]),
        format!("{wday} {mon} {day_num:>2} {time} {year}"),
        imf.to_lowercase(),
    ]
}

/// Issue 23: an Expires in an obsolete format (RFC 850, asctime) or in lower case is read as
/// the date it names, not as an invalid (already expired) one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expires_in_obsolete_formats_is_understood() {
    for expires in obsolete_forms(&date_in(600)) {
        let e = expires.clone();
        let (n, status) = twice(
            move || {
                Reply::ok("x")
                    .header("date", &now_date())
                    .header("expires", &e)
            },
            |_| {},
        )
        .await;
        assert_eq!(n, 1, "Expires: {expires} → {status}");
        assert!(status.contains("hit"), "{expires}: {status}");
    }
    for expires in obsolete_forms(&date_in(-600)) {
        let e = expires.clone();
        let (n, status) = twice(
            move || {
                Reply::ok("x")
                    .header("date", &now_date())
                    .header("expires", &e)
            },
            |_| {},
        )
        .await;
        assert_eq!(n, 2, "Expires: {expires} is in the past → {status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expires_in_the_past_is_not_stored() {
    let (n, status) = twice(
        || {
            Reply::ok("x")
                .header("date", &now_date())
                .header("expires", &date_in(-60))
        },
        |_| {},
    )
    .await;
    assert_eq!(n, 2);
    assert!(status.contains("detail=expired"), "{status}");
}

/// Issue 23: an `Age` that is not a non-negative integer is ignored, not read as its numeric
/// prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn age_that_is_not_an_integer_is_ignored() {
    for garbage in ["3599a", "3599.5", "-3599"] {
        let (n, status) = twice(
            move || Reply::ok("x").cc("max-age=3600").header("age", garbage),
            |_| {},
        )
        .await;
        assert_eq!(n, 1, "{garbage}");
        let ttl: u64 = status
            .split("ttl=")
            .nth(1)
            .and_then(|t| t.split(';').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        assert!(ttl >= 3590, "Age {garbage} is no age: {status}");
    }
}

/// Issue 32: an `Age` given as a list or on several lines counts as its first value
/// (`0, 7200` is 0 and fresh; `7200, 0` is 7200 and stale; two lines `0` then `7200`: 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn age_list_or_lines_use_the_first_value() {
    for (lines, fresh) in [
        (&["0, 7200"][..], true),
        (&["7200, 0"][..], false),
        (&["0", "7200"][..], true),
        (&["7200", "0"][..], false),
    ] {
        let (n, status) = twice(
            move || {
                lines
                    .iter()
                    .fold(Reply::ok("x").cc("max-age=3600"), |r, l| r.header("age", l))
            },
            |_| {},
        )
        .await;
        if fresh {
            assert_eq!(n, 1, "Age {lines:?} is fresh: {status}");
            assert!(status.contains("hit"), "{lines:?}: {status}");
        } else {
            assert_eq!(n, 2, "Age {lines:?} is stale: {status}");
            assert!(status.contains("detail=expired"), "{lines:?}: {status}");
        }
    }
}

/// Issue 32: the three HTTP-date formats in any letter case are valid dates (here far in the
/// future, so the response is stored and the second request a hit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_expires_means_expired_valid_shapes_are_stored() {
    for expires in [
        "Thu, 18 Aug 2050 02:01:18 GMT",
        "Thursday, 18-Aug-50 02:01:18 GMT",
        "Thu Aug  8 02:01:18 2050",
        "Thu Aug 18 02:01:18 2050",
        "thu, 18 aug 2050 02:01:18 gmt",
        "THURSDAY, 18-AUG-50 02:01:18 GMT",
        "THU AUG  8 02:01:18 2050",
    ] {
        let (n, status) = twice(
            move || {
                Reply::ok("x")
                    .header("date", &now_date())
                    .header("expires", expires)
            },
            |_| {},
        )
        .await;
        assert_eq!(n, 1, "Expires: {expires} → {status}");
        assert!(status.contains("hit"), "{expires}: {status}");
    }
}

/// Issue 32 (RFC 9111 §5.3): an `Expires` that is not an HTTP-date — whatever date it seems to
/// name — is already expired, and so is one given on two lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_expires_means_expired() {
    for lines in [
        &["Thu, 18 Aug 2050 02:01:18 UTC"][..],
        &["Thu, 18 Aug 2050 02:01:18 AEST"][..],
        &["Thu, 18 Aug 50 02:01:18 GMT"][..],
        &["Thu 18 Aug 2050 02:01:18 GMT"][..],
        &["Thu, 18  Aug  2050 02:01:18 GMT"][..],
        &["Thu, 18-Aug-2050 02:01:18 GMT"][..],
        &["Thu, 18 Aug 2050 02.01.18 GMT"][..],
        &["Thu, 18 Aug 2050 2:01:18 GMT"][..],
        &[
            "Thu, 18 Aug 2050 02:01:18 GMT",
            "Thu, 18 Aug 2050 02:01:18 GMT",
        ][..],
    ] {
        let (n, status) = twice(
            move || {
                lines
                    .iter()
                    .fold(Reply::ok("x").header("date", &now_date()), |r, l| {
                        r.header("expires", l)
                    })
            },
            |_| {},
        )
        .await;
        assert_eq!(n, 2, "Expires: {lines:?} is invalid → {status}");
        assert!(status.contains("detail=expired"), "{lines:?}: {status}");
    }
}

/// Issue 32: the same parser reads `Last-Modified`: one that is not an HTTP-date (or is given
/// twice) gives no heuristic freshness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_last_modified_gives_no_heuristic_freshness() {
    let ten_hours_ago = date_in(-36_000);
    let utc = ten_hours_ago.replace("GMT", "UTC");
    let no_comma = ten_hours_ago.replacen(',', "", 1);
    for lines in [vec![utc], vec![no_comma], vec![ten_hours_ago.clone(); 2]] {
        let shown = format!("{lines:?}");
        let (n, status) = twice(
            move || {
                lines
                    .iter()
                    .fold(Reply::ok("x").header("date", &now_date()), |r, l| {
                        r.header("last-modified", l)
                    })
            },
            |_| {},
        )
        .await;
        assert_eq!(n, 2, "Last-Modified: {shown} → {status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heuristic_freshness_from_last_modified() {
    let (n, status) = twice(
        || {
            Reply::ok("x")
                .header("date", &now_date())
                .header("last-modified", &date_in(-36_000))
        },
        |_| {},
    )
    .await;
    assert_eq!(n, 1, "10% of 10 h = 1 h of heuristic freshness");
    assert!(status.contains("hit"), "{status}");
}

/// Issue 23: 414 and 501 are heuristically cacheable too (RFC 9110 §15.1); a 500 is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heuristic_freshness_for_414_and_501_not_500() {
    for (status, stored) in [(414, true), (501, true), (500, false)] {
        let (n, cache_status) = twice(
            move || {
                Reply::ok("x")
                    .status(status)
                    .header("date", &now_date())
                    .header("last-modified", &date_in(-36_000))
            },
            |_| {},
        )
        .await;
        assert_eq!(n, if stored { 1 } else { 2 }, "{status}: {cache_status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_freshness_is_not_stored_by_default() {
    let (n, status) = twice(|| Reply::ok("x"), |_| {}).await;
    assert_eq!(n, 2);
    assert!(status.contains("detail=no-freshness"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_ttl_is_opt_in() {
    let (n, status) = twice(
        || Reply::ok("x"),
        |c| c.cache.default_ttl = Dur(Duration::from_secs(30)),
    )
    .await;
    assert_eq!(n, 1);
    assert!(hit_ttl_near(&status, 30, 10), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_ttl_clamps() {
    let (n, status) = twice(
        || Reply::ok("x").cc("max-age=86400"),
        |c| c.cache.max_ttl = Some(Dur(Duration::from_secs(60))),
    )
    .await;
    assert_eq!(n, 1);
    assert!(hit_ttl_near(&status, 60, 10), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_objects_are_fetched_again() {
    let origin = Origin::start(|_| Reply::ok("x").cc("max-age=1")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/").await;
    assert!(get(shellac.addr, "/").await.cache_status().contains("hit"));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        get(shellac.addr, "/")
            .await
            .cache_status()
            .contains("fwd=miss")
    );
    assert_eq!(origin.count(), 2);
    assert_eq!(shellac.stat("cache_expired").await, 1);
    shellac.stop().await;
}

/// RFC 9213: a targeted field (CDN-Cache-Control, Surrogate-Control) replaces Cache-Control
/// for Shellac; Surrogate-Control never reaches clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targeted_cache_control_takes_precedence() {
    let origin = Origin::start(|s| {
        let r = Reply::ok("x").cc("no-store");
        if s.path == "/cdn" {
            r.header("cdn-cache-control", "max-age=60")
        } else {
            r.header("surrogate-control", "max-age=30")
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    for path in ["/cdn", "/surrogate"] {
        let first = get(shellac.addr, path).await;
        assert_eq!(first.header("surrogate-control"), None);
        assert_eq!(
            first.header("cache-control"),
            Some("no-store"),
            "Cache-Control still reaches clients"
        );
        assert!(
            get(shellac.addr, path).await.cache_status().contains("hit"),
            "{path}"
        );
    }
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// Issue 23: CDN-Cache-Control is a Structured Field Dictionary (RFC 9213 §2.1). A member of
/// the wrong type is ignored (so is Cache-Control, which the valid targeted field replaces);
/// a field that is not a Dictionary is ignored whole and Cache-Control applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_cache_control_is_parsed_as_a_structured_field() {
    let origin = Origin::start(|s| {
        let cdn = match s.path.as_str() {
            "/string" => "max-age=\"3600\"",
            "/decimal" => "max-age=3600.0",
            "/invalid" => "Max-Age=3600",
            _ => "max-age=3600;unit=s",
        };
        Reply::ok("x")
            .cc("max-age=60")
            .header("cdn-cache-control", cdn)
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let ttl = |status: &str| -> Option<u64> {
        status
            .split("ttl=")
            .nth(1)
            .and_then(|t| t.split(';').next())
            .and_then(|t| t.trim().parse().ok())
    };
    for path in ["/string", "/decimal"] {
        let r = get(shellac.addr, path).await;
        assert!(
            r.cache_status().contains("detail=no-freshness"),
            "{path}: {}",
            r.cache_status()
        );
    }
    get(shellac.addr, "/invalid").await;
    let hit = get(shellac.addr, "/invalid").await;
    assert!(
        ttl(hit.cache_status()).is_some_and(|t| (55..=60).contains(&t)),
        "Cache-Control's 60 s: {}",
        hit.cache_status()
    );
    get(shellac.addr, "/params").await;
    let hit = get(shellac.addr, "/params").await;
    assert!(
        ttl(hit.cache_status()).is_some_and(|t| t > 3500),
        "parameters are ignored: {}",
        hit.cache_status()
    );
    shellac.stop().await;
}
