//! Engine tests for what recovery rebuilds besides the index: the ban list (durable, ordered by
//! stream position, expired, damaged copies), the variant lists, and old-format files.

use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};

use super::tests::{HOUR, TempDir, body_for, body_of, key, object, open_with_bans};
use super::*;
use crate::cache::ban::BanError;
use crate::cache::{CacheKey, Object, Storage};

fn news(i: usize) -> CacheKey {
    CacheKey::new("disk.test", &format!("/news/{i}"))
}

fn sport(i: usize) -> CacheKey {
    CacheKey::new("disk.test", &format!("/sport/{i}"))
}

fn small(i: usize) -> Arc<Object> {
    object(body_for(i, 3000), HOUR, Duration::ZERO)
}

/// Adds `expr` to the list and persists it, as `Cache::ban` does.
fn ban(disk: &DiskStorage, bans: &BanList, expr: &str) -> Result<(), BanError> {
    let b = bans.add(expr)?;
    disk.persist_ban(b)
}

fn write_file(path: &std::path::Path, at: u64, bytes: &[u8]) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(bytes, at).unwrap();
}

#[tokio::test]
async fn bans_survive_a_crash_and_cover_only_entries_written_before_them() {
    let dir = TempDir::new("ban-crash");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, _, bans) = open_with_bans(&config, 100);
    for i in 0..5 {
        disk.admit(news(i), small(i));
        disk.admit(sport(i), small(i));
    }
    assert!(disk.flush(Duration::from_secs(10)));
    let stored_before = small(7);
    std::thread::sleep(Duration::from_millis(2));
    ban(&disk, &bans, "req.url ~ ^/news/").expect("persisted");
    // Stored after the ban: not covered.
    disk.admit(news(9), small(9));
    // Stored before the ban, written after it: dropped by the writer, never written.
    disk.admit(news(7), stored_before);
    assert!(disk.flush(Duration::from_secs(10)));
    disk.crash();

    let (disk, counters, bans) = open_with_bans(&config, 100);
    assert_eq!(counters.ban_recovered.get(), 1);
    assert_eq!(bans.len(), 1);
    assert_eq!(bans.list()[0].2, "req.url ~ ^/news/");
    for i in 0..5 {
        assert!(disk.lookup_io(&news(i)).await.is_none(), "news {i} banned");
        let s = disk.lookup_io(&sport(i)).await.expect("sport kept");
        assert_eq!(body_of(&s).await, body_for(i, 3000));
    }
    assert_eq!(counters.ban_objects.get(), 5);
    assert!(
        disk.lookup_io(&news(9)).await.is_some(),
        "stored after the ban"
    );
    assert!(disk.lookup_io(&news(7)).await.is_none(), "never written");
    disk.close();
}

#[test]
fn objects_older_than_a_ban_are_not_written_after_it() {
    let dir = TempDir::new("ban-filter");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, counters, bans) = open_with_bans(&config, 100);
    let old = small(1);
    std::thread::sleep(Duration::from_millis(2));
    ban(&disk, &bans, "req.url ~ ^/news/").expect("persisted");
    disk.admit(news(1), old);
    assert!(disk.flush(Duration::from_secs(10)));
    assert_eq!(counters.ban_objects.get(), 1);
    assert_eq!(counters.disk_admit.get(), 0);
    disk.close();
}

#[tokio::test]
async fn a_damaged_ban_list_copy_is_detected_and_never_loses_a_ban() {
    let dir = TempDir::new("ban-damage");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, _, bans) = open_with_bans(&config, 100);
    disk.admit(news(1), small(1));
    disk.admit(sport(1), small(1));
    assert!(disk.flush(Duration::from_secs(10)));
    ban(&disk, &bans, "req.url ~ ^/news/").expect("persisted");
    disk.close();

    // Copy A scribbled: copy B still holds the ban.
    write_file(&config.path, format::BLOCK + 40, b"scribble");
    let (disk, counters, bans) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_checksum_fail.get(), 1);
    assert_eq!(counters.disk_reset.get(), 0);
    assert_eq!(bans.len(), 1);
    assert!(disk.lookup_io(&news(1)).await.is_none());
    assert!(disk.lookup_io(&sport(1)).await.is_some());
    disk.close();

    // Both copies scribbled: no ban can be trusted to be known, so nothing on disk is served.
    write_file(&config.path, format::BLOCK + 40, b"scribble");
    write_file(
        &config.path,
        format::BLOCK + format::BAN_SLOT + 40,
        b"scribble",
    );
    let (disk, counters, bans) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_reset.get(), 1);
    assert_eq!(counters.disk_recovered_objects.get(), 0);
    assert!(bans.is_empty());
    assert!(disk.lookup_io(&sport(1)).await.is_none());
    assert!(disk.lookup_io(&news(1)).await.is_none());
    // And the file is usable again.
    disk.admit(sport(2), small(2));
    assert!(disk.flush(Duration::from_secs(10)));
    disk.close();
    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_recovered_objects.get(), 1);
    assert_eq!(counters.disk_reset.get(), 0);
    disk.close();
}

#[tokio::test]
async fn bans_expire_once_nothing_older_is_on_disk() {
    let dir = TempDir::new("ban-expire");
    let config = dir.config(4 << 20, 1 << 20);
    let (disk, counters, bans) = open_with_bans(&config, 100);
    disk.admit(news(1), small(1));
    assert!(disk.flush(Duration::from_secs(10)));
    ban(&disk, &bans, "req.url ~ ^/news/").expect("persisted");
    assert_eq!(
        disk.retire_bans(Instant::now(), Instant::now()),
        0,
        "news/1 is older"
    );
    // Write enough to reclaim every region that held anything older than the ban.
    for i in 0..700 {
        disk.admit(key(i), object(body_for(i, 8 * 1024), HOUR, Duration::ZERO));
        if i % 100 == 99 {
            assert!(disk.flush(Duration::from_secs(10)));
        }
    }
    assert!(disk.flush(Duration::from_secs(10)));
    assert!(counters.disk_regions_reclaimed.get() >= 1);
    assert_eq!(disk.retire_bans(Instant::now(), Instant::now()), 1);
    assert!(bans.is_empty());
    disk.close();
    let (disk, counters, bans) = open_with_bans(&config, 100);
    assert_eq!(
        counters.ban_recovered.get(),
        0,
        "the rewritten list is empty"
    );
    assert!(bans.is_empty());
    disk.close();
}

#[tokio::test]
async fn bans_no_object_predates_are_dropped_at_recovery() {
    let dir = TempDir::new("ban-recovery-expire");
    let config = dir.config(4 << 20, 1 << 20);
    let (disk, _, bans) = open_with_bans(&config, 100);
    disk.admit(news(1), small(1));
    assert!(disk.flush(Duration::from_secs(10)));
    ban(&disk, &bans, "req.url ~ ^/news/").expect("persisted");
    for i in 0..700 {
        disk.admit(key(i), object(body_for(i, 8 * 1024), HOUR, Duration::ZERO));
        if i % 100 == 99 {
            assert!(disk.flush(Duration::from_secs(10)));
        }
    }
    assert!(disk.flush(Duration::from_secs(10)));
    disk.crash();
    let (disk, counters, bans) = open_with_bans(&config, 100);
    assert_eq!(counters.ban_retired.get(), 1);
    assert_eq!(counters.ban_recovered.get(), 0);
    assert!(bans.is_empty());
    assert!(disk.lookup_io(&key(699)).await.is_some());
    disk.close();
}

#[tokio::test]
async fn bans_over_the_bound_are_replaced_by_dropping_what_they_cover() {
    let dir = TempDir::new("ban-fold");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, _, bans) = open_with_bans(&config, 100);
    disk.admit(sport(1), small(1));
    assert!(disk.flush(Duration::from_secs(10)));
    ban(&disk, &bans, "req.url ~ ^/nothing-a").expect("persisted");
    disk.admit(sport(2), small(2));
    assert!(disk.flush(Duration::from_secs(10)));
    ban(&disk, &bans, "req.url ~ ^/nothing-b").expect("persisted");
    disk.admit(sport(3), small(3));
    assert!(disk.flush(Duration::from_secs(10)));
    disk.close();

    // Room for one ban: the older one is folded, dropping sport/1 (written before it).
    let (disk, counters, bans) = open_with_bans(&config, 1);
    assert_eq!(counters.ban_recovered_folded.get(), 1);
    assert_eq!(counters.ban_recovered.get(), 1);
    assert_eq!(bans.list()[0].2, "req.url ~ ^/nothing-b");
    assert!(disk.lookup_io(&sport(1)).await.is_none());
    assert!(disk.lookup_io(&sport(2)).await.is_some());
    assert!(disk.lookup_io(&sport(3)).await.is_some());
    disk.close();
}

#[test]
fn a_ban_list_over_its_bound_on_disk_refuses_the_ban() {
    let dir = TempDir::new("ban-full");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, counters, bans) = open_with_bans(&config, 100);
    let long = format!("req.url == /{}", "x".repeat(600 * 1024));
    ban(&disk, &bans, &long).expect("fits");
    let err = ban(&disk, &bans, &long).expect_err("does not fit 1 MiB");
    assert!(matches!(err, BanError::PersistFull(_)), "{err:?}");
    assert_eq!(bans.len(), 1, "not applied");
    assert_eq!(counters.ban_persist_full.get(), 1);
    disk.close();
}

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

#[test]
fn bans_expire_once_everything_older_on_disk_has_expired() {
    let dir = TempDir::new("ban-expired-objects");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, _, bans) = open_with_bans(&config, 100);
    let lifetime = Duration::from_secs(1);
    let admitted = Instant::now();
    disk.admit(news(1), object(body_for(1, 100), lifetime, Duration::ZERO));
    assert!(disk.flush(Duration::from_secs(10)));
    ban(&disk, &bans, "req.url ~ ^/news/").expect("persisted");
    let retired = disk.retire_bans(Instant::now(), Instant::now());
    // Asked before news/1's lifetime was over (the margin covers the wall clock's
    // milliseconds), it can still be served: the ban stays. A slow machine (valgrind) may get
    // here later; then the ban may go at once.
    if admitted.elapsed() + Duration::from_millis(20) < lifetime {
        assert_eq!(retired, 0, "news/1 can still be served");
    }
    if retired == 0 {
        // Past its lifetime news/1 is never read again, though its region is not reclaimed.
        std::thread::sleep(lifetime.saturating_sub(admitted.elapsed()) + Duration::from_millis(50));
        assert_eq!(disk.retire_bans(Instant::now(), Instant::now()), 1);
    }
    assert!(bans.is_empty());
    disk.close();
}

#[test]
fn a_ban_that_cannot_be_written_is_applied_and_reported_not_durable() {
    let dir = TempDir::new("ban-ioerr");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, counters, bans) = open_with_bans(&config, 100);
    // Swap the data file's descriptor for a read-only one: every write now fails (EBADF).
    let ro = std::fs::File::open(&config.path).unwrap();
    let fd = disk.engine().raw_fd();
    // SAFETY: dup2 onto a descriptor this test's engine owns; both stay open.
    assert!(unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&ro), fd) } >= 0);
    let err = ban(&disk, &bans, "req.url ~ ^/news/").expect_err("write fails");
    assert!(matches!(err, BanError::NotDurable(_)), "{err:?}");
    assert_eq!(bans.len(), 1, "still applied in this process");
    assert!(counters.disk_io_error.get() >= 1);
    disk.close();
}

#[tokio::test]
async fn a_persisted_ban_that_no_longer_compiles_drops_what_it_covered() {
    let dir = TempDir::new("ban-invalid");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, _, _) = open_with_bans(&config, 100);
    disk.admit(sport(1), small(1));
    assert!(disk.flush(Duration::from_secs(10)));
    let loc = disk
        .engine()
        .index_get(format::key_hash(&sport(1)))
        .expect("indexed");
    disk.admit(sport(2), small(2));
    assert!(disk.flush(Duration::from_secs(10)));
    // A list whose one ban sits after sport/1 but before sport/2 and cannot be parsed.
    let after_first = format::stream_pos(loc.seq, loc.offset as u64 + loc.len as u64);
    let records = [format::BanRecord {
        pos: after_first,
        created_ms: 1,
        expr: "req.url ~ (".into(),
    }];
    disk.engine().write_bans(99, &records).expect("written");
    disk.close();
    let (disk, counters, bans) = open_with_bans(&config, 100);
    assert_eq!(counters.ban_recovered_folded.get(), 1);
    assert!(bans.is_empty());
    assert!(
        disk.lookup_io(&sport(1)).await.is_none(),
        "covered: dropped"
    );
    assert!(
        disk.lookup_io(&sport(2)).await.is_some(),
        "written after it: kept"
    );
    disk.close();
}

/// Where `key`'s entry is in the file: (file offset, entry length, body offset in the entry).
fn entry_at(disk: &DiskStorage, path: &std::path::Path, key: &CacheKey) -> (u64, u64, u64) {
    let loc = disk
        .engine
        .index_get(format::key_hash(key))
        .expect("indexed");
    let at = disk.engine.region_base(loc.region) + loc.offset as u64;
    let mut head = [0u8; format::ENTRY_HEADER];
    let file = std::fs::File::open(path).unwrap();
    file.read_exact_at(&mut head, at).unwrap();
    let h = format::EntryHeader::decode(&head).expect("entry header");
    (at, loc.len as u64, h.body_offset())
}

/// A `kill -9` while an entry was being written leaves its header (and maybe part of its
/// body) on disk and zeros after: recovery drops that last entry as an incomplete tail
/// (`disk_incomplete_tail`, logged at info), not as corruption, and keeps everything before it.
/// Cut points: right after the header (key and metadata missing), in the middle of the body
/// (a 600 KB body, three checksummed pieces), one byte before the body's end.
#[tokio::test]
async fn a_torn_tail_entry_after_a_crash_is_incomplete_not_corrupt() {
    let big = |i: usize| object(body_for(i, 600_000), HOUR, Duration::ZERO);
    for (cut, name) in [
        (Cut::AfterHeader, "torn-header"),
        (Cut::MidBody, "torn-body"),
        (Cut::LastByte, "torn-last-byte"),
    ] {
        let dir = TempDir::new(name);
        let config = dir.config(8 << 20, 2 << 20);
        let (disk, _, _) = open_with_bans(&config, 100);
        for i in 0..3 {
            disk.admit(key(i), small(i));
        }
        disk.admit(key(3), big(3));
        assert!(disk.flush(Duration::from_secs(10)));
        let (at, len, body) = entry_at(&disk, &config.path, &key(3));
        disk.crash();
        // What the writer had not written yet reads as zeros (a fresh file).
        let from = match cut {
            Cut::AfterHeader => format::ENTRY_HEADER as u64,
            Cut::MidBody => body + 300_000,
            Cut::LastByte => body + 600_000 - 1,
        };
        write_file(&config.path, at + from, &vec![0u8; (len - from) as usize]);

        let (disk, counters, _) = open_with_bans(&config, 100);
        assert_eq!(counters.disk_incomplete_tail.get(), 1, "{name}");
        assert_eq!(counters.disk_checksum_fail.get(), 0, "{name}");
        assert_eq!(counters.disk_recovered_objects.get(), 3, "{name}");
        for i in 0..3 {
            let got = disk.lookup_io(&key(i)).await.expect("complete entry kept");
            assert_eq!(body_of(&got).await, body_for(i, 3000), "{name}");
        }
        assert!(disk.lookup_io(&key(3)).await.is_none(), "{name}");
        assert_eq!(counters.disk_checksum_fail.get(), 0, "{name}");
        // The region was sealed without it: a later start finds nothing torn.
        disk.close();
        let (disk, counters, _) = open_with_bans(&config, 100);
        assert_eq!(counters.disk_incomplete_tail.get(), 0, "{name}");
        assert_eq!(counters.disk_recovered_objects.get(), 3, "{name}");
        disk.close();
    }
}

enum Cut {
    AfterHeader,
    MidBody,
    LastByte,
}

/// Damage inside the open region that is not its tail (a body scribbled in the middle of the
/// entries) is corruption: found when read, counted in `disk_checksum_fail`, never served;
/// the complete entries around it, the last one included, are kept.
#[tokio::test]
async fn damage_before_the_tail_is_still_corruption() {
    let dir = TempDir::new("mid-damage");
    let config = dir.config(8 << 20, 2 << 20);
    let (disk, _, _) = open_with_bans(&config, 100);
    for i in 0..5 {
        disk.admit(key(i), small(i));
    }
    assert!(disk.flush(Duration::from_secs(10)));
    let (at, _, body) = entry_at(&disk, &config.path, &key(2));
    disk.crash();
    write_file(&config.path, at + body + 100, b"scribble");

    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_incomplete_tail.get(), 0);
    assert_eq!(counters.disk_recovered_objects.get(), 5);
    assert!(disk.lookup_io(&key(2)).await.is_none(), "never served");
    assert_eq!(counters.disk_checksum_fail.get(), 1);
    for i in [0, 1, 3, 4] {
        let got = disk.lookup_io(&key(i)).await.expect("intact entry kept");
        assert_eq!(body_of(&got).await, body_for(i, 3000));
    }
    disk.close();
}

/// A clean stop leaves nothing torn, and the last entry of a crashed region that was written
/// whole is kept: the check never drops a complete entry.
#[tokio::test]
async fn a_complete_last_entry_is_kept_after_a_crash() {
    let dir = TempDir::new("complete-tail");
    let config = dir.config(8 << 20, 2 << 20);
    let (disk, _, _) = open_with_bans(&config, 100);
    disk.admit(key(0), small(0));
    disk.admit(key(1), object(body_for(1, 600_000), HOUR, Duration::ZERO));
    disk.admit(key(2), object(Vec::new(), HOUR, Duration::ZERO));
    assert!(disk.flush(Duration::from_secs(10)));
    disk.crash();
    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_incomplete_tail.get(), 0);
    assert_eq!(counters.disk_recovered_objects.get(), 3);
    let empty = disk.lookup_io(&key(2)).await.expect("empty body kept");
    assert_eq!(empty.body_len, 0);
    let big = disk.lookup_io(&key(1)).await.expect("large body kept");
    assert_eq!(body_of(&big).await, body_for(1, 600_000));
    disk.close();
    let (disk, counters, _) = open_with_bans(&config, 100);
    assert_eq!(counters.disk_incomplete_tail.get(), 0);
    assert_eq!(counters.disk_recovered_objects.get(), 3);
    disk.close();
}
