//! The Vary matcher: a request always matches the selection taken from itself (when every
//! field has one line), the variant hash is never 0 and depends only on the selected values.
#![no_main]

use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use shellac::cache::vary::variant_hash;
use shellac::cache::vary_matches;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let names: Vec<HeaderName> = lines
        .next()
        .unwrap_or("")
        .split(',')
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    let mut request = HeaderMap::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':')
            && let (Ok(k), Ok(v)) = (
                HeaderName::from_bytes(k.trim().as_bytes()),
                HeaderValue::from_str(v.trim()),
            )
        {
            request.append(k, v);
        }
    }
    let selection: Vec<(HeaderName, Option<HeaderValue>)> = names
        .iter()
        .map(|n| (n.clone(), request.get(n).cloned()))
        .collect();
    let single = names.iter().all(|n| request.get_all(n).iter().count() <= 1);
    if single {
        assert!(vary_matches(&selection, &request));
    }
    let h = variant_hash(&names, &request);
    assert_ne!(h, 0);
    assert_eq!(h, variant_hash(&names, &request.clone()));
});
