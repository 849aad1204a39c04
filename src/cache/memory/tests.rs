//! The memory tier's tests: budget, eviction, the compact form built on first use.

use super::*;
use crate::cache::{Body, Prefetch, StoredFields};
use bytes::Bytes;
use http::HeaderMap;
use http::StatusCode;
use std::time::{Duration, Instant};

fn object_with(size: usize, headers: &HeaderMap) -> Arc<Object> {
    let body = if size == 0 {
        Default::default()
    } else {
        smallvec::smallvec![Bytes::from(vec![b'x'; size])]
    };
    Arc::new(Object {
        status: http::StatusCode::OK,
        headers: StoredFields::from_map(headers),
        body: crate::cache::Body::Memory(body),
        body_len: size as u64,
        vary: None,
        initial_age: crate::cache::Span::ZERO,
        ttl: Duration::from_secs(60).into(),
        stale_ok: true,
        grace: crate::cache::Span::ZERO,
        stale_if_error: crate::cache::MaybeSpan::NONE,
        keep: crate::cache::Span::ZERO,
        stored_at: Instant::now(),
        state: Default::default(),
        prepared: Default::default(),
        hits: Default::default(),
        prefetch: crate::cache::Prefetch::CONFIGURED,
    })
}

fn object(size: usize) -> Arc<Object> {
    object_with(size, &HeaderMap::new())
}

#[test]
fn bounded_in_bytes_and_counts_evictions() {
    let counters = Arc::new(Counters::default());
    let m = MemoryStorage::new(1 << 20, 64 << 10, counters.clone());
    for i in 0..200 {
        m.insert(CacheKey::new("h", &format!("/{i}")), object(16 << 10));
    }
    let s = m.stats();
    assert!(s.bytes <= 1 << 20, "{} bytes", s.bytes);
    assert!(s.objects < 200);
    assert_eq!(counters.n_lru_nuked.get() + s.objects, 200);
}

#[test]
fn small_objects_are_bounded_and_counted_too() {
    let counters = Arc::new(Counters::default());
    let m = MemoryStorage::new(1 << 20, 64 << 10, counters.clone());
    for i in 0..5000 {
        m.insert(CacheKey::new("h", &format!("/{i}")), object(100));
    }
    let s = m.stats();
    assert!(s.bytes <= 1 << 20, "{} bytes", s.bytes);
    assert!(s.objects > 100 && s.objects < 5000, "{} objects", s.objects);
    assert_eq!(counters.n_lru_nuked.get() + s.objects, 5000);
}

/// Objects built by lookups are charged when built, and the shard stays within budget:
/// a lookup that takes it over evicts as an insert would.
#[test]
fn objects_built_by_lookups_stay_within_budget() {
    let counters = Arc::new(Counters::default());
    let m = MemoryStorage::new(1 << 20, 64 << 10, counters.clone());
    let keys: Vec<_> = (0..3000)
        .map(|i| CacheKey::new("h", &format!("/{i}")))
        .collect();
    for key in &keys {
        m.insert(key.clone(), object(100));
    }
    // Entries that were never looked up are charged their block only: all fit.
    assert_eq!(m.stats().objects, 3000);
    assert_eq!(counters.n_lru_nuked.get(), 0);
    let mut found = 0;
    for key in &keys {
        found += usize::from(m.lookup(key).is_some());
        assert!(m.stats().bytes <= 1 << 20, "{} bytes", m.stats().bytes);
    }
    let s = m.stats();
    assert!(counters.n_lru_nuked.get() > 1000, "{counters:?}");
    assert_eq!(counters.n_lru_nuked.get() + s.objects, 3000);
    // Cold entries (never looked up) go first, so about a budget's worth of objects is found.
    assert!(found > 500, "{found} found");
}

/// A compact entry's object is the stored object, field for field.
#[test]
fn a_compact_object_comes_back_as_stored() {
    let m = MemoryStorage::new(1 << 20, 64 << 10, Arc::new(Counters::default()));
    let mut headers = HeaderMap::new();
    headers.insert("cache-control", "max-age=60".parse().unwrap());
    headers.append("set-cookie", "a=1".parse().unwrap());
    headers.append("set-cookie", "b=2".parse().unwrap());
    headers.insert("etag", "\"v1\"".parse().unwrap());
    let stored_at = Instant::now() - Duration::from_millis(1500);
    let original = Object {
        status: StatusCode::NOT_FOUND,
        headers: StoredFields::from_map(&headers),
        body: Body::Memory(smallvec::smallvec![Bytes::from_static(b"not here")]),
        body_len: 8,
        vary: crate::cache::boxed_vary(vec![(
            http::header::ACCEPT_ENCODING,
            Some("gzip".parse().unwrap()),
        )]),
        initial_age: Duration::from_secs(3).into(),
        ttl: Duration::from_secs(365 * 86400).into(),
        stale_ok: false,
        grace: Duration::from_millis(2500).into(),
        stale_if_error: Some(Duration::from_secs(30)).into(),
        keep: Duration::from_secs(40 * 86400 + 1).into(),
        stored_at,
        state: Default::default(),
        prepared: Default::default(),
        hits: Default::default(),
        prefetch: Prefetch::before(Duration::from_secs(30)),
    };
    original.state.mark_on_disk();
    let key = CacheKey::new("Example.COM:80", "/a?b=1").with_variant(7);
    m.insert(key.clone(), Arc::new(original));
    assert!(m.lookup(&CacheKey::new("example.com", "/a?b=1")).is_none());
    let got = m.lookup(&key).expect("stored");
    assert_eq!(got.status, StatusCode::NOT_FOUND);
    assert_eq!(got.headers.map(), &headers);
    let Body::Memory(chunks) = &got.body else {
        panic!("body in memory")
    };
    assert_eq!(&chunks[..], &[Bytes::from_static(b"not here")]);
    assert_eq!(got.body_len, 8);
    assert_eq!(got.vary().len(), 1);
    assert_eq!(got.initial_age.get(), Duration::from_secs(3));
    assert_eq!(got.ttl.get(), Duration::from_secs(365 * 86400));
    assert!(!got.stale_ok);
    assert_eq!(got.prefetch, Prefetch::before(Duration::from_secs(30)));
    assert_eq!(got.grace.get(), Duration::from_millis(2500));
    assert_eq!(got.stale_if_error.get(), Some(Duration::from_secs(30)));
    assert_eq!(got.keep.get(), Duration::from_secs(40 * 86400 + 1));
    assert_eq!(got.stored_at, stored_at);
    assert!(got.state.on_disk());
    assert!(got.state.hit());
    // Built once: the next hit gets the same object.
    assert!(Arc::ptr_eq(&got, &m.lookup(&key).unwrap()));
}

#[test]
fn large_and_empty_bodies() {
    let m = MemoryStorage::new(1 << 22, 1 << 20, Arc::new(Counters::default()));
    let large = object(COMPACT_BODY as usize + 1);
    m.insert(CacheKey::new("h", "/large"), large.clone());
    // Not compact: the very object stored.
    assert!(Arc::ptr_eq(
        &large,
        &m.lookup(&CacheKey::new("h", "/large")).unwrap()
    ));
    m.insert(CacheKey::new("h", "/empty"), object(0));
    let empty = m.lookup(&CacheKey::new("h", "/empty")).unwrap();
    assert_eq!(empty.body_len, 0);
    assert!(matches!(&empty.body, Body::Memory(c) if c.is_empty()));
}

#[test]
fn replace_remove_scan_and_stats() {
    let m = MemoryStorage::new(1 << 22, 1 << 20, Arc::new(Counters::default()));
    let key = CacheKey::new("h", "/x");
    m.insert(key.clone(), object(10));
    let table = m
        .shards
        .iter()
        .map(|s| s.read().table.allocation_size())
        .sum::<usize>();
    let slot = |key: &CacheKey| (table + m.find(key).unwrap().footprint()) as u64;
    // Never looked up: the entry alone.
    assert_eq!(m.stats().bytes, slot(&key));
    m.insert(key.clone(), object(20));
    assert_eq!(m.stats().objects, 1);
    assert_eq!(m.stats().bytes, slot(&key));
    // The first lookup builds the object and charges it, once.
    let found = m.lookup(&key).unwrap();
    assert_eq!(found.body_len, 20);
    assert_eq!(m.stats().bytes, slot(&key) + found.weight());
    m.lookup(&key).unwrap();
    assert_eq!(m.stats().bytes, slot(&key) + found.weight());
    m.insert(CacheKey::new("h", "/y"), object(5000));
    let mut seen = Vec::new();
    m.scan(&mut |k, o| seen.push((k.to_string(), o.body_len)));
    seen.sort();
    assert_eq!(seen, [("h/x".to_string(), 20), ("h/y".to_string(), 5000)]);
    assert!(m.remove(&key));
    assert!(!m.remove(&key));
    assert!(m.lookup(&key).is_none());
    assert_eq!(m.stats().objects, 1);
    assert!(m.remove(&CacheKey::new("h", "/y")));
    // What is left is the index's tables, which keep their size.
    let tables = m
        .shards
        .iter()
        .map(|s| s.read().table.allocation_size())
        .sum::<usize>();
    assert!(tables > 0);
    assert_eq!(m.stats().bytes, tables as u64);
}

/// Objects that are hit survive a scan of one-time URLs through a full cache.
#[test]
fn hit_objects_outlive_a_scan() {
    let m = MemoryStorage::new(1 << 20, 64 << 10, Arc::new(Counters::default()));
    let hot: Vec<CacheKey> = (0..50)
        .map(|i| CacheKey::new("h", &format!("/hot{i}")))
        .collect();
    for key in &hot {
        m.insert(key.clone(), object(1000));
    }
    for i in 0..5000 {
        for key in hot.iter().skip(i % 10).step_by(10) {
            assert!(m.lookup(key).is_some(), "{key} evicted after {i} scanned");
        }
        m.insert(CacheKey::new("h", &format!("/scan{i}")), object(1000));
    }
}

fn site_key(site: u16, i: usize) -> CacheKey {
    let mut key = CacheKey::new(&format!("site{site}"), &format!("/{i}"));
    key.set_site(site);
    key
}

#[test]
fn a_site_over_its_share_evicts_its_own_objects_only() {
    let counters = Arc::new(Counters::default());
    let m = MemoryStorage::new(8 << 20, 64 << 10, counters.clone());
    let shares = m.site_shares().expect("accounts");
    shares.set_limits(&[(1, 256 << 10)]);
    for i in 0..20 {
        m.insert(site_key(2, i), object(16 << 10));
    }
    let other = shares.bytes(2);
    for i in 0..200 {
        m.insert(site_key(1, i), object(16 << 10));
        assert!(
            shares.bytes(1) <= 256 << 10,
            "{} after {i}",
            shares.bytes(1)
        );
    }
    for i in 0..20 {
        assert!(
            m.peek(&site_key(2, i)).is_some(),
            "site 2's /{i} was evicted"
        );
    }
    assert_eq!(shares.bytes(2), other);
    assert!(shares.evictions(1) >= 180, "{}", shares.evictions(1));
    assert_eq!(shares.evictions(2), 0);
    assert_eq!(counters.n_lru_nuked.get(), shares.evictions(1));
    // The newest objects of the site are those kept.
    assert!(m.peek(&site_key(1, 199)).is_some());
    // Every byte charged to a site is given back as its objects leave.
    for i in 0..200 {
        m.remove(&site_key(1, i));
    }
    for i in 0..20 {
        m.remove(&site_key(2, i));
    }
    assert_eq!((shares.bytes(1), shares.bytes(2)), (0, 0));
}

#[test]
fn a_sites_hits_are_kept_over_its_one_time_objects() {
    let m = MemoryStorage::new(8 << 20, 64 << 10, Arc::new(Counters::default()));
    let shares = m.site_shares().expect("accounts");
    shares.set_limits(&[(1, 256 << 10)]);
    m.insert(site_key(1, 0), object(16 << 10));
    for i in 1..100 {
        assert!(
            m.lookup(&site_key(1, 0)).is_some(),
            "the hit object left at {i}"
        );
        m.insert(site_key(1, i), object(16 << 10));
    }
}

#[test]
fn compact_objects_count_in_their_share_once_built() {
    let m = MemoryStorage::new(8 << 20, 64 << 10, Arc::new(Counters::default()));
    let shares = m.site_shares().expect("accounts");
    shares.set_limits(&[(1, 64 << 10)]);
    for i in 0..2000 {
        m.insert(site_key(1, i), object(1000));
        // The first lookup builds the object and charges its weight too.
        m.lookup(&site_key(1, i));
        assert!(shares.bytes(1) <= 64 << 10, "{} after {i}", shares.bytes(1));
    }
    assert!(shares.evictions(1) > 0);
}

#[test]
fn an_object_larger_than_its_sites_share_is_not_kept() {
    let m = MemoryStorage::new(8 << 20, 1 << 20, Arc::new(Counters::default()));
    let shares = m.site_shares().expect("accounts");
    shares.set_limits(&[(1, 64 << 10)]);
    m.insert(site_key(1, 0), object(128 << 10));
    assert!(m.peek(&site_key(1, 0)).is_none());
    assert_eq!(shares.bytes(1), 0);
    // Another site's (no share) is.
    m.insert(site_key(2, 0), object(128 << 10));
    assert!(m.peek(&site_key(2, 0)).is_some());
}
