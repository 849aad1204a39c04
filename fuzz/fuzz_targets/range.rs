//! `parse_range` never panics, and what it returns is within the body and bounded in count.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shellac::proxy::partial::{MAX_RANGES, RangeSpec, parse_range};

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (len, text) = data.split_at(8);
    let len = u64::from_le_bytes(len.try_into().unwrap_or([0; 8])) % (1 << 40);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    if let RangeSpec::Ranges(ranges) = parse_range(text, len) {
        assert!(!ranges.is_empty() && ranges.len() <= MAX_RANGES);
        for (start, end) in ranges {
            assert!(start <= end && end < len, "{start}-{end} of {len}");
        }
    }
});
