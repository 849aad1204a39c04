//! The config parser never panics, whatever the file holds, and every error names a position.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shellac::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(errors) = Config::parse(text, "fuzz.toml") {
        assert!(!errors.is_empty());
    }
});
