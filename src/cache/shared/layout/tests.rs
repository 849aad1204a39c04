//! The shared layout's tests: records round-trip, and a record that does not fit its key or its chunks is refused.

use super::*;

/// A soft purge makes an older copy stale from its moment, grace counted from there; a
/// copy stored after it stays fresh.
#[test]
fn a_soft_purge_mark_makes_older_copies_stale_from_its_moment() {
    let key = CacheKey::new("h", "/soft");
    let mut o = object(b"body");
    o.ttl = Span::new(Duration::from_secs(600));
    o.grace = Span::new(Duration::from_secs(60));
    o.stale_ok = true;
    let e = encode(&key, &o, 1, Instant::now()).unwrap();
    let now_ms = wall_ms();

    let mut meta = decode(&key, e.meta.clone()).unwrap();
    meta.soft_purged(now_ms + 1);
    let stale = meta.into_object(Vec::new()).unwrap();
    // A few milliseconds after the mark.
    let now = Instant::now() + Duration::from_millis(50);
    assert!(!stale.is_fresh(now));
    assert!(stale.within_grace(now), "within grace after the soft purge");
    assert!(
        !stale.within_grace(now + Duration::from_secs(61)),
        "grace from the purge"
    );

    // Purged 30 s ago (before this copy was stored): untouched.
    let mut meta = decode(&key, e.meta.clone()).unwrap();
    meta.soft_purged(now_ms - 30_000);
    assert!(
        meta.into_object(Vec::new())
            .unwrap()
            .is_fresh(Instant::now())
    );
}

fn object(body: &[u8]) -> Object {
    let mut o = crate::cache::test_object(&[("content-type", "text/html"), ("etag", "\"a\"")]);
    o.body = Body::Memory(crate::cache::body::store(
        &[Bytes::copy_from_slice(body)],
        body.len(),
    ));
    o.body_len = body.len() as u64;
    o.grace = Span::new(Duration::from_secs(5));
    o.vary = Some(Box::new(vec![(
        HeaderName::from_static("accept-language"),
        Some(HeaderValue::from_static("fr")),
    )]));
    o
}

fn body_of(o: &Object) -> Vec<u8> {
    let Body::Memory(c) = &o.body else {
        panic!("memory body")
    };
    c.iter().flat_map(|c| c.iter().copied()).collect()
}

#[test]
fn small_objects_round_trip_inline() {
    let key = CacheKey::new("Example.com", "/a?b").with_variant(7);
    let o = object(b"hello");
    let e = encode(&key, &o, 42, Instant::now()).unwrap();
    assert!(e.chunks.is_empty());
    let meta = decode(&key, e.meta).unwrap();
    assert_eq!(meta.generation, 42);
    let back = meta.into_object(Vec::new()).unwrap();
    assert_eq!(body_of(&back), b"hello");
    assert_eq!(back.status, o.status);
    assert_eq!(back.headers.block(), o.headers.block());
    assert_eq!(back.vary(), o.vary());
    assert_eq!((back.ttl, back.grace, back.keep), (o.ttl, o.grace, o.keep));
    assert!(back.is_fresh(Instant::now()));
    assert_eq!(back.prefetch, crate::cache::Prefetch::CONFIGURED);
}

/// VCL 2.0's `obj.prefetch` travels with the object through the shared tier.
#[test]
fn an_objects_own_prefetch_round_trips() {
    let key = CacheKey::new("h", "/p");
    for body in [&b"small"[..], &vec![7u8; CHUNK_SIZE + 3][..]] {
        let mut o = object(body);
        o.prefetch = crate::cache::Prefetch::before(Duration::from_secs(30));
        let e = encode(&key, &o, 1, Instant::now()).unwrap();
        let chunks: Vec<Option<Bytes>> = e.chunks.iter().cloned().map(Some).collect();
        let back = decode(&key, e.meta).unwrap().into_object(chunks).unwrap();
        assert_eq!(back.prefetch, o.prefetch);
        assert_eq!(body_of(&back), body);
    }
}

#[test]
fn large_bodies_are_chunked_and_every_chunk_counts() {
    let key = CacheKey::new("h", "/big");
    let body: Vec<u8> = (0..CHUNK_SIZE * 2 + 10).map(|i| (i % 251) as u8).collect();
    let e = encode(&key, &object(&body), 1, Instant::now()).unwrap();
    assert_eq!(e.chunks.len(), 3);
    let chunks: Vec<Option<Bytes>> = e.chunks.iter().cloned().map(Some).collect();
    let back = decode(&key, e.meta.clone())
        .unwrap()
        .into_object(chunks.clone());
    assert_eq!(body_of(&back.unwrap()), body);
    // A missing chunk, a chunk of another write, a short list: a miss.
    let mut missing = chunks.clone();
    missing[1] = None;
    let other = encode(
        &key,
        &object(&vec![9; CHUNK_SIZE * 2 + 10]),
        2,
        Instant::now(),
    )
    .unwrap();
    let mut mixed = chunks.clone();
    mixed[2] = Some(other.chunks[2].clone());
    for bad in [missing, mixed, chunks[..2].to_vec()] {
        let meta = decode(&key, e.meta.clone()).unwrap();
        assert_eq!(meta.into_object(bad).unwrap_err(), Refused::Body);
    }
}

#[test]
fn records_are_checked() {
    let key = CacheKey::new("h", "/a");
    let e = encode(&key, &object(b"x"), 1, Instant::now()).unwrap();
    assert_eq!(
        decode(&CacheKey::new("h", "/b"), e.meta.clone()).unwrap_err(),
        Refused::OtherKey
    );
    assert_eq!(
        decode(&key.with_variant(3), e.meta.clone()).unwrap_err(),
        Refused::OtherKey
    );
    // Every truncation is refused, none panics.
    for n in 0..e.meta.len() {
        assert!(decode(&key, e.meta.slice(..n)).is_err(), "{n}");
    }
    let mut bad = e.meta.to_vec();
    let at = bad.windows(12).position(|w| w == b"content-type").unwrap();
    bad[at] = b'\n';
    assert!(decode(&key, Bytes::from(bad)).is_err());
}

#[test]
fn keys_share_a_slot_and_tags_round_trip() {
    let url = CacheKey::new("h", "/a");
    let k = UrlKeys::new("p:", &url);
    let tag = |k: &[u8]| {
        let s = String::from_utf8(k.to_vec()).unwrap();
        s[s.find('{').unwrap()..=s.find('}').unwrap()].to_string()
    };
    let t = tag(&k.index());
    for key in [k.meta(0), k.meta(9), k.chunk(9, 3, 1), k.lease(0)] {
        assert_eq!(tag(&key), t);
    }
    assert_ne!(
        tag(&UrlKeys::new("p:", &CacheKey::new("h", "/b")).index()),
        t
    );
    assert_eq!(tag_member_key(&tag_member(&url)), Some(url));
    assert_eq!(tag_member_key(b"99:x"), None);
}

#[test]
fn redis_keeps_objects_for_their_whole_stale_life() {
    let o = object(b"x");
    let ttl = redis_ttl(&o, Instant::now()).unwrap();
    assert!(ttl > Duration::from_secs(64) && ttl <= Duration::from_secs(65));
    let mut old = object(b"x");
    old.initial_age = Span::new(Duration::from_secs(100));
    assert_eq!(redis_ttl(&old, Instant::now()), None);
}
