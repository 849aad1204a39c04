//! The config parser never panics, whatever the file holds, and every error names a position.
//! A file it accepts is written back (`Config::to_toml`) to a file it accepts again, with the
//! same settings: so no accepted value is outside what its own syntax can say (a duration
//! over the 10-year cap, issue 23 #12, fails this), and every duration survives the
//! arithmetic the proxy does with it (`Instant::now() + d`, `SystemTime::now() + d`).
#![no_main]

use std::time::{Duration, Instant, SystemTime};

use libfuzzer_sys::fuzz_target;
use shellac::config::{Config, units};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let config = match Config::parse(text, "fuzz.toml") {
        Ok(c) => c,
        Err(errors) => {
            assert!(!errors.is_empty());
            return;
        }
    };
    let written = config.to_toml();
    let again = Config::parse(&written, "again.toml")
        .unwrap_or_else(|e| panic!("a valid config written back is invalid: {e:?}\n{written}"));
    assert_eq!(
        again.to_toml(),
        written,
        "written back, the settings changed"
    );
    for d in durations(&written) {
        assert!(d <= units::MAX_DURATION, "{d:?}");
        assert!(Instant::now().checked_add(d).is_some(), "{d:?}");
        assert!(SystemTime::now().checked_add(d).is_some(), "{d:?}");
    }
});

/// Every value in `text` (written by `to_toml`) that reads as a duration with a unit.
fn durations(text: &str) -> Vec<Duration> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .filter(|v| {
            v.ends_with(['s', 'm', 'h', 'd', 'w']) && v.starts_with(|c: char| c.is_ascii_digit())
        })
        .filter_map(|v| units::parse_duration(v).ok())
        .collect()
}
