//! Engine tests for the region a `kill -9` left open: a torn last entry is an incomplete
//! tail (not corruption), damage before it is still corruption, a complete last entry is kept.

use std::os::unix::fs::FileExt;
use std::time::Duration;

use super::tests::{
    HOUR, TempDir, body_for, body_of, key, object, open_with_bans, small, write_file,
};
use super::*;
use crate::cache::{CacheKey, Storage};

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
