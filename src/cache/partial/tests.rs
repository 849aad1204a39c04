//! The partial content store's tests: pieces merge, validators must agree, the budget holds.

use super::*;
use crate::cache::Body;

fn piece(start: u64, body: &'static [u8], etag: Option<&'static str>) -> Piece {
    let mut headers = HeaderMap::new();
    if let Some(e) = etag {
        headers.insert(header::ETAG, HeaderValue::from_static(e));
    }
    Piece {
        start,
        length: 10,
        body: Bytes::from_static(body),
        validator: Validator::of(&headers),
        headers,
        vary: Vec::new(),
        initial_age: Duration::ZERO,
        ttl: Duration::from_secs(60),
        received: Instant::now(),
    }
}

fn held(a: Added) -> Arc<Partial> {
    match a {
        Added::Held(p) => p,
        _ => panic!("not held"),
    }
}

#[test]
fn pieces_combine_while_the_validator_holds() {
    let store = Partials::new(1 << 20);
    let key = CacheKey::new("a", "/v");
    let p = held(store.add(&key, piece(4, b"45678", Some("\"v1\""))));
    assert_eq!(p.get(5, 7).as_deref(), Some(&b"567"[..]));
    assert_eq!(p.get(3, 5), None, "byte 3 is not held");
    assert_eq!(p.only_gap(), None, "two gaps: 0-3 and 9");
    let p = held(store.add(&key, piece(0, b"0123", Some("\"v1\""))));
    assert_eq!(p.pieces.len(), 1, "adjacent pieces join");
    assert_eq!(p.only_gap(), Some((9, 9)));
    let (before, after) = p.around((9, 9));
    assert_eq!((before.len(), after.len()), (1, 0));
    // Another representation replaces what was held.
    let p = held(store.add(&key, piece(2, b"ab", Some("\"v2\""))));
    assert_eq!(p.pieces, vec![(2, Bytes::from_static(b"ab"))]);
    // Without a strong validator nothing is combined.
    let p = held(store.add(&key, piece(4, b"cd", None)));
    assert_eq!(p.pieces.len(), 1);
    let p = held(store.add(&key, piece(6, b"ef", None)));
    assert_eq!(p.pieces, vec![(6, Bytes::from_static(b"ef"))]);
}

#[test]
fn overlapping_pieces_merge_and_complete_the_object() {
    let store = Partials::new(1 << 20);
    let key = CacheKey::new("a", "/v");
    store.add(&key, piece(0, b"01234", Some("\"v\"")));
    store.add(&key, piece(3, b"XX567", Some("\"v\"")));
    let p = store.get(&key).unwrap();
    assert_eq!(
        p.get(0, 7).as_deref(),
        Some(&b"012XX567"[..]),
        "newest bytes win"
    );
    match store.add(&key, piece(6, b"6789", Some("\"v\""))) {
        Added::Complete(object) => {
            assert_eq!(object.status, StatusCode::OK);
            assert_eq!(object.body_len, 10);
            let Body::Memory(chunks) = &object.body else {
                panic!("memory body")
            };
            let all: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
            assert_eq!(all, b"012XX56789");
        }
        _ => panic!("complete"),
    }
    assert!(store.get(&key).is_none(), "the entry became an object");
}

#[test]
fn merge_keeps_pieces_apart_that_do_not_touch() {
    let p = merge(
        &[(0, Bytes::from_static(b"ab"))],
        5,
        Bytes::from_static(b"fg"),
    );
    assert_eq!(p.len(), 2);
    let p = merge(&p, 2, Bytes::from_static(b"cde"));
    assert_eq!(p, vec![(0, Bytes::from_static(b"abcdefg"))]);
}

#[test]
fn content_range_and_validators() {
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_RANGE,
        HeaderValue::from_static("bytes 4-9/10"),
    );
    assert_eq!(content_range(&h), Some((4, 9, 10)));
    for bad in [
        "bytes 4-9/*",
        "bytes */10",
        "bytes 9-4/10",
        "bytes 4-10/10",
        "items 1-2/3",
    ] {
        h.insert(header::CONTENT_RANGE, HeaderValue::from_static(bad));
        assert_eq!(content_range(&h), None, "{bad}");
    }
    let mut h = HeaderMap::new();
    h.insert(header::ETAG, HeaderValue::from_static("W/\"weak\""));
    assert_eq!(Validator::of(&h), None);
    h.insert(
        header::LAST_MODIFIED,
        HeaderValue::from_static("Sun, 22 Nov 2026 00:00:00 GMT"),
    );
    h.insert(
        header::DATE,
        HeaderValue::from_static("Sun, 22 Nov 2026 00:00:30 GMT"),
    );
    assert_eq!(Validator::of(&h), None, "modified 30 s before: weak");
    h.insert(
        header::DATE,
        HeaderValue::from_static("Sun, 22 Nov 2026 00:01:00 GMT"),
    );
    assert!(matches!(
        Validator::of(&h),
        Some(Validator::LastModified(_))
    ));
}

#[test]
fn the_store_is_bounded() {
    let store = Partials::new(16);
    let key = CacheKey::new("a", "/big");
    let mut p = piece(0, b"0123456789", Some("\"v\""));
    p.length = 100;
    assert!(matches!(store.add(&key, p), Added::Dropped));
    assert!(store.is_empty());
}
