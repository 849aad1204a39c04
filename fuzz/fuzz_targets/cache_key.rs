//! Target normalisation is idempotent, keeps valid targets valid, and the cache key builder
//! never panics; equal normal forms give equal keys.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shellac::cache::CacheKey;
use shellac::http::target::normalise;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (host, target) = text.split_once('\n').unwrap_or(("example.com", text));
    let normal = normalise(target);
    if let Some(n) = &normal {
        assert_eq!(normalise(n), None, "not idempotent: {target:?} -> {n:?}");
        assert!(n.len() <= target.len());
        if http::uri::PathAndQuery::try_from(target).is_ok() {
            assert!(http::uri::PathAndQuery::try_from(n.as_str()).is_ok(), "{n:?}");
        }
    }
    let pq = normal.as_deref().unwrap_or(target);
    let a = CacheKey::new(host, pq);
    let b = CacheKey::new(&host.to_ascii_uppercase(), pq);
    assert_eq!(a, b);
    let _ = a.to_string();
});
