//! Engine tests for what recovery rebuilds from key records besides the index: the variant
//! lists and the tag index (after a clean stop and a crash, damaged records), and old-format
//! files.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};

use super::tests::{HOUR, TempDir, body_of, key, object, open_with_bans, small, write_file};
use super::*;
use crate::cache::{CacheKey, Object, Storage};

fn variant(lang: &str, v: u64) -> (CacheKey, Arc<Object>) {
    let mut o = object(lang.as_bytes().to_vec(), HOUR, Duration::ZERO);
    Arc::get_mut(&mut o).expect("fresh object").vary = Some(Box::new(vec![(
        HeaderName::from_static("accept-language"),
        Some(HeaderValue::from_str(lang).unwrap()),
    )]));
    (CacheKey::new("disk.test", "/page").with_variant(v), o)
}

fn sorted(mut v: Vec<(CacheKey, Vec<HeaderName>)>) -> Vec<(u64, Vec<HeaderName>)> {
    v.sort_by_key(|(k, _)| k.variant);
    v.into_iter().map(|(k, n)| (k.variant, n)).collect()
}

#[tokio::test]
async fn variant_lists_are_rebuilt_after_a_clean_stop_and_a_crash() {
    let dir = TempDir::new("vary");
    let config = dir.config(8 << 20, 1 << 20);
    let names = vec![HeaderName::from_static("accept-language")];
    let want = vec![(11, names.clone()), (22, names.clone())];
    let (disk, _, _) = open_with_bans(&config, 100);
    for (lang, v) in [("fr", 11), ("de", 22)] {
        let (k, o) = variant(lang, v);
        disk.admit(k, o);
    }
    disk.admit(key(1), small(1));
    assert!(disk.flush(Duration::from_secs(10)));
    disk.crash();
    // Crash: the open region is scanned, variant entries' metadata read for their names.
    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_recovered_variants.get(), 2);
    assert_eq!(sorted(disk.take_index().variants), want);
    assert!(disk.take_index().variants.is_empty(), "handed over once");
    disk.close();
    // Clean stop: the sealed summary carries them.
    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_recovered_variants.get(), 2);
    assert_eq!(sorted(disk.take_index().variants), want);
    let (k, _) = variant("fr", 11);
    let got = disk.lookup_io(&k).await.expect("variant on disk");
    assert_eq!(body_of(&got).await, b"fr");
    // A removed variant is not listed again.
    assert!(disk.remove(&k));
    assert!(disk.flush(Duration::from_secs(10)));
    disk.close();
    let (disk, _, _) = open_with_bans(&config, 100);
    assert_eq!(sorted(disk.take_index().variants), want[1..]);
    disk.close();
}

#[tokio::test]
async fn damaged_vary_records_never_register_a_wrong_variant() {
    let dir = TempDir::new("vary-damage");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, _, _) = open_with_bans(&config, 100);
    let (fr, o) = variant("fr", 11);
    disk.admit(fr.clone(), o);
    let (de, o) = variant("de", 22);
    disk.admit(de.clone(), o);
    assert!(disk.flush(Duration::from_secs(10)));
    let loc_de = disk
        .engine()
        .index_get(format::key_hash(&de))
        .expect("indexed");
    let base = disk.engine().region_base(loc_de.region);
    disk.close();

    // The summary's vary part damaged: the summary fails its checksum, the region is walked
    // by its entry headers and the names are read from the (verified) entries instead.
    let file = std::fs::read(&config.path).unwrap();
    let region = &file[base as usize..base as usize + (1 << 20)];
    let needle = format::encode_key(&fr);
    let in_summary = region
        .windows(needle.len())
        .rposition(|w| w == needle.as_slice())
        .expect("vary record in the summary");
    write_file(&config.path, base + in_summary as u64, b"XX");
    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_recovered_variants.get(), 2);
    disk.close();

    // The de entry's metadata damaged: that variant is not registered (and not served).
    let meta_at = base + loc_de.offset as u64 + format::ENTRY_HEADER as u64 + needle.len() as u64;
    write_file(&config.path, meta_at + 4, b"YY");
    // Damage the summary again so recovery reads the entries.
    write_file(&config.path, base + in_summary as u64, b"ZZ");
    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(sorted(disk.take_index().variants).len(), 1);
    assert!(counters.disk_checksum_fail.get() >= 1);
    assert!(disk.lookup_io(&de).await.is_none(), "never served");
    assert!(disk.lookup_io(&fr).await.is_some());
    disk.close();
}

#[tokio::test]
async fn an_old_format_file_is_dropped_with_a_count_never_misread() {
    let dir = TempDir::new("old-format");
    let config = dir.config(4 << 20, 1 << 20);
    let (disk, _, _) = open_with_bans(&config, 100);
    disk.admit(key(1), small(1));
    assert!(disk.flush(Duration::from_secs(10)));
    disk.close();
    // Rewrite the superblock as version 2 (the layout before ban lists and vary records).
    let mut head = std::fs::read(&config.path).unwrap()[..64].to_vec();
    head[8..12].copy_from_slice(&2u32.to_le_bytes());
    let sum = format::checksum(&head[..32]);
    head[32..40].copy_from_slice(&sum.to_le_bytes());
    write_file(&config.path, 0, &head);
    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_reset.get(), 1);
    assert_eq!(counters.disk_recovered_objects.get(), 0);
    assert!(disk.lookup_io(&key(1)).await.is_none());
    disk.close();
    // Reformatted as the current version.
    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_reset.get(), 0);
    disk.close();
}

fn tagged(i: usize, tags: &str) -> (CacheKey, Arc<Object>) {
    let mut o = small(i);
    let mut headers = http::HeaderMap::new();
    headers.insert("surrogate-key", HeaderValue::from_str(tags).unwrap());
    Arc::get_mut(&mut o).expect("fresh object").headers =
        crate::cache::StoredFields::from_map(&headers);
    (key(i), o)
}

#[tokio::test]
async fn surrogate_keys_are_found_again_after_a_clean_stop_and_a_crash() {
    let dir = TempDir::new("tags");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, _, _) = open_with_bans(&config, 100);
    for (i, tags) in [(1, "home product-1"), (2, "product-2")] {
        let (k, o) = tagged(i, tags);
        disk.admit(k, o);
    }
    disk.admit(key(3), small(3));
    assert!(disk.flush(Duration::from_secs(10)));
    disk.crash();
    let want = vec![
        (key(1), vec!["home".to_string(), "product-1".to_string()]),
        (key(2), vec!["product-2".to_string()]),
    ];
    // Crash: read from the flagged entries of the open region.
    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_recovered_tagged.get(), 2);
    let mut got = disk.take_index().tagged;
    got.sort_by(|a, b| a.0.path_and_query().cmp(b.0.path_and_query()));
    assert_eq!(got, want);
    // Removed objects are not re-tagged.
    assert!(disk.remove(&key(2)));
    assert!(disk.flush(Duration::from_secs(10)));
    disk.close();
    // Clean stop: from the summary.
    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_recovered_tagged.get(), 1);
    assert_eq!(disk.take_index().tagged, want[..1]);
    disk.close();
}
