//! Durations, sizes and `refresh_ahead` in every spelling, and their limits.

use super::*;

#[test]
fn refresh_ahead_spellings() {
    let p = RefreshAhead::parse;
    assert_eq!(p("off"), Ok(RefreshAhead::Off));
    assert_eq!(p("0s"), Ok(RefreshAhead::Off));
    assert_eq!(p("10%"), Ok(RefreshAhead::Percent(10)));
    assert_eq!(p("30s"), Ok(RefreshAhead::Before(Duration::from_secs(30))));
    for bad in ["0%", "100%", "150%", "1.5%", "-1%", "soon", "-5s"] {
        assert!(p(bad).is_err(), "{bad}");
    }
    let ttl = Duration::from_secs(600);
    assert_eq!(RefreshAhead::Off.window(ttl), None);
    assert_eq!(
        RefreshAhead::Percent(10).window(ttl),
        Some(Duration::from_secs(60))
    );
    assert_eq!(
        RefreshAhead::Before(Duration::from_secs(30)).window(ttl),
        Some(Duration::from_secs(30))
    );
}

#[test]
fn durations() {
    assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
    assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
    assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
    assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86400));
    assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
    assert_eq!(parse_duration(".5s").unwrap(), Duration::from_millis(500));
    assert_eq!(parse_duration("0.1s").unwrap(), Duration::from_millis(100));
    assert!(parse_duration("10 parsecs").is_err());
    assert!(parse_duration("").is_err());
    assert!(parse_duration(".").is_err());
    assert!(parse_duration("1.2.3s").is_err());
    assert!(parse_duration("99999999999d").is_err());
    assert!(parse_duration("-5s").unwrap_err().contains("negative"));
}

/// Issue 23 #12: every spelling of a duration meets one cap; none panics.
#[test]
fn every_spelling_of_a_duration_is_capped() {
    let ten_years = MAX_DURATION;
    assert_eq!(parse_duration("3650d").unwrap(), ten_years);
    assert!(parse_duration("3651d").is_err());
    assert!(parse_duration("315360000.000000001s").is_err());
    assert!(parse_duration(&"9".repeat(40)).is_err());
    assert_eq!(duration_from_secs(315_360_000).unwrap(), ten_years);
    assert!(duration_from_secs(315_360_001).is_err());
    assert!(duration_from_secs(i64::MAX).is_err());
    assert!(duration_from_secs(-1).unwrap_err().contains("negative"));
    for bad in [
        1e20,
        f64::INFINITY,
        f64::NAN,
        -1.0,
        f64::NEG_INFINITY,
        f64::MAX,
    ] {
        assert!(duration_from_secs_f64(bad).is_err(), "{bad}");
    }
    assert_eq!(
        duration_from_secs_f64(0.25).unwrap(),
        Duration::from_millis(250)
    );
    // Through serde, as a file spells them.
    #[derive(Deserialize, Debug)]
    struct T {
        #[allow(dead_code)]
        d: Dur,
    }
    for text in [
        "d = 1e20",
        "d = inf",
        "d = nan",
        "d = -0.5",
        "d = 9223372036854775807",
        "d = -9223372036854775808",
        "d = \"1e20\"",
        "d = \"-1s\"",
    ] {
        assert!(toml::from_str::<T>(text).is_err(), "{text}");
    }
    for text in ["d = 315360000", "d = 1.5", "d = \"3650d\"", "d = 0"] {
        let t: T = toml::from_str(text).unwrap();
        assert!(std::time::Instant::now().checked_add(t.d.0).is_some());
        assert!(std::time::SystemTime::now().checked_add(t.d.0).is_some());
    }
}

#[test]
fn sizes() {
    assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
    assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
    assert_eq!(parse_size("64k").unwrap(), 65536);
    assert_eq!(parse_size("100").unwrap(), 100);
    assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
    assert_eq!(
        parse_size("9007199254740993").unwrap(),
        9_007_199_254_740_993
    );
    assert!(parse_size("12 bananas").is_err());
    assert!(parse_size("-1").is_err());
    assert!(parse_size("2000PB").is_err());
    assert!(size_from_int(-1).is_err());
    assert_eq!(format_size(256 << 20), "256 MiB");
    assert_eq!(format_size(6451), "6.3 KiB");
}

#[test]
fn exact_texts_round_trip() {
    for d in [
        Duration::ZERO,
        Duration::from_millis(250),
        Duration::from_secs(90),
        Duration::from_secs(7200),
        Duration::from_secs(86400 * 14),
        Duration::new(1, 500),
        MAX_DURATION,
    ] {
        assert_eq!(parse_duration(&duration_text(d)).unwrap(), d, "{d:?}");
    }
    assert_eq!(duration_text(Duration::from_secs(7200)), "2h");
    assert_eq!(duration_text(Duration::from_millis(1500)), "1500ms");
    for b in [0, 1, 1000, 1024, 256 << 20, (1 << 30) + 1, MAX_SIZE] {
        assert_eq!(parse_size(&size_text(b)).unwrap(), b, "{b}");
    }
    assert_eq!(size_text(256 << 20), "256MiB");
    assert_eq!(size_text(1000), "1000B");
}

#[test]
fn duration_format() {
    assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
    assert_eq!(format_duration(Duration::from_millis(3500)), "3500ms");
    assert_eq!(format_duration(Duration::new(0, 1500)), "0.0000015s");
}
