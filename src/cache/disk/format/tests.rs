//! The layout's tests: every record round-trips, and every cut or corrupted one is refused.

use super::*;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

fn meta() -> Meta {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("text/html"));
    headers.append("x-a", HeaderValue::from_static("1"));
    headers.append("x-a", HeaderValue::from_static("2"));
    Meta {
        status: StatusCode::NOT_FOUND,
        headers,
        vary: vec![
            (
                HeaderName::from_static("accept-encoding"),
                Some(HeaderValue::from_static("gzip")),
            ),
            (HeaderName::from_static("cookie"), None),
        ],
        initial_age_ms: 1500,
        ttl_ms: 60_000,
        stored_ms: 1_700_000_000_000,
        stale_ok: true,
        prefetch: crate::cache::Prefetch::before(std::time::Duration::from_secs(30)),
        grace_ms: 10_000,
        keep_ms: 3_600_000,
        stale_if_error_ms: Some(5),
        chunk_hashes: vec![1, 2, 3],
    }
}

#[test]
fn meta_round_trips_and_rejects_every_truncation() {
    let m = meta();
    let bytes = m.encode();
    assert_eq!(Meta::decode(&bytes), Some(m));
    for cut in 0..bytes.len() {
        assert_eq!(Meta::decode(&bytes[..cut]), None, "cut at {cut}");
    }
}

#[test]
fn headers_detect_any_flipped_bit() {
    let h = EntryHeader {
        kind: KIND_OBJECT,
        flags: FLAG_KEY_RECORD,
        seq: 7,
        hash: 42,
        key_len: 10,
        meta_len: 100,
        body_len: 12345,
        expires_ms: 99,
        meta_hash: 5,
    };
    let b = h.encode();
    assert_eq!(EntryHeader::decode(&b), Some(h));
    for i in 0..b.len() * 8 {
        let mut c = b;
        c[i / 8] ^= 1 << (i % 8);
        assert_eq!(EntryHeader::decode(&c), None, "bit {i}");
    }
    let t = Trailer {
        index: 3,
        seq: 9,
        instance: 11,
        summary_offset: 8192,
        entries: 2,
        summary_len: 100,
        summary_hash: 77,
    };
    assert_eq!(Trailer::decode(&t.encode()), Some(t));
    let r = RegionHeader {
        index: 1,
        seq: 2,
        instance: 3,
    };
    assert_eq!(RegionHeader::decode(&r.encode()), Some(r));
    let s = Superblock {
        region_size: 1 << 20,
        regions: 4,
        instance: 5,
    };
    assert_eq!(Superblock::decode(&s.encode()), Some(s));
    assert_eq!(Superblock::decode(&[0u8; 10]), None);
}

#[test]
fn padding_reaches_the_next_block_and_scans_as_pad() {
    let mut buf = vec![0u8; 4000];
    pad_to_block(&mut buf, 8192);
    assert_eq!(buf.len(), 4096);
    match record_at(&buf[4000..]) {
        Record::Pad(n) => assert_eq!(n, 96),
        _ => panic!("not a pad"),
    }
    assert!(matches!(record_at(&[0u8; 64]), Record::End));
    assert!(matches!(record_at(&[]), Record::End));
}

#[test]
fn keys_are_unambiguous() {
    let a = CacheKey::new("ab", "/c");
    let b = CacheKey::new("a", "b/c");
    assert_ne!(encode_key(&a), encode_key(&b));
    assert!(key_matches(&encode_key(&a), &a));
    assert_ne!(key_hash(&a), key_hash(&b));
    assert_ne!(key_hash(&a), key_hash(&a.with_variant(7)));
}

#[test]
fn keys_decode_back() {
    let k = CacheKey::new("Example.COM:80", "/a?b=c").with_variant(99);
    let bytes = encode_key(&k);
    assert_eq!(decode_key(&bytes), Some(k));
    assert_eq!(key_variant(&bytes), Some(99));
    assert_eq!(decode_key(&bytes[..9]), None);
}

#[test]
fn other_versions_are_recognised_not_read() {
    let s = Superblock {
        region_size: 1 << 20,
        regions: 4,
        instance: 5,
    };
    let mut b = s.encode();
    assert_eq!(Superblock::version_of(&b), Some(FORMAT_VERSION));
    b[8..12].copy_from_slice(&2u32.to_le_bytes());
    let h = checksum(&b[..32]);
    b[32..40].copy_from_slice(&h.to_le_bytes());
    assert_eq!(Superblock::decode(&b), None);
    assert_eq!(Superblock::version_of(&b), Some(2));
    assert_eq!(Superblock::version_of(&[0u8; 64]), None);
}

#[test]
fn summary_round_trips() {
    let e = EntryInfo {
        hash: 1,
        offset: 4096,
        len: 128,
        expires_ms: 5,
        kind: KIND_TOMBSTONE,
    };
    let mut b = Vec::new();
    e.encode_into(&mut b);
    e.encode_into(&mut b);
    assert_eq!(EntryInfo::decode_summary(&b), Some(vec![e, e]));
    assert_eq!(EntryInfo::decode_summary(&b[..40]), None);
}
