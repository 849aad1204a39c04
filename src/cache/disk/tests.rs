//! Engine tests on real files: persistence (clean and crashed), reclaim, corruption, expiry,
//! removal, I/O errors, large objects.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};

use super::*;
use crate::cache::ban::BanList;
use crate::cache::{Body, CacheKey, Object, Storage};
use crate::config::units::Size;
use crate::config::{Admission, DiskConfig};
use crate::stats::Counters;

pub(super) struct TempDir(PathBuf);

impl TempDir {
    pub(super) fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "shellac-disk-{name}-{}-{}",
            std::process::id(),
            engine::now_ms()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    pub(super) fn config(&self, size: u64, region: u64) -> DiskConfig {
        DiskConfig {
            path: self.0.join("cache.dat"),
            size: Size(size),
            region_size: Size(region),
            admission: Admission::Always,
            on_open_error: Default::default(),
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) fn object(body: Vec<u8>, ttl: Duration, initial_age: Duration) -> Arc<Object> {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("text/plain"));
    let len = body.len() as u64;
    let chunks: Vec<Bytes> = body.chunks(64 * 1024).map(Bytes::copy_from_slice).collect();
    Arc::new(Object {
        status: StatusCode::OK,
        headers: crate::cache::StoredFields::from_map(&headers),
        body: Body::Memory(chunks.into()),
        body_len: len,
        vary: None,
        initial_age: initial_age.into(),
        ttl: ttl.into(),
        stale_ok: false,
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

pub(super) fn body_for(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

pub(super) fn key(i: usize) -> CacheKey {
    CacheKey::new("disk.test", &format!("/object/{i}"))
}

pub(super) const HOUR: Duration = Duration::from_secs(3600);

/// A 3,000-byte object, fresh for an hour.
pub(super) fn small(i: usize) -> Arc<Object> {
    object(body_for(i, 3000), HOUR, Duration::ZERO)
}

/// Overwrites `bytes` at `at` in the file at `path` (damage, old formats).
pub(super) fn write_file(path: &std::path::Path, at: u64, bytes: &[u8]) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(bytes, at).unwrap();
}

pub(super) async fn body_of(object: &Object) -> Vec<u8> {
    match &object.body {
        Body::Memory(chunks) => chunks.iter().flat_map(|c| c.to_vec()).collect(),
        Body::Disk(disk) => {
            let mut reader = DiskReader::new((**disk).clone());
            let mut out = Vec::new();
            while let Some(chunk) = std::future::poll_fn(|cx| reader.poll_chunk(cx)).await {
                out.extend_from_slice(&chunk.expect("chunk reads"));
            }
            out
        }
    }
}

fn open(config: &DiskConfig) -> (DiskStorage, Arc<Counters>) {
    let (disk, counters, _) = open_with_bans(config, 100);
    (disk, counters)
}

/// Opens the tier with a ban list of at most `max_bans` (filled with the persisted bans).
pub(super) fn open_with_bans(
    config: &DiskConfig,
    max_bans: usize,
) -> (DiskStorage, Arc<Counters>, Arc<BanList>) {
    let counters = Arc::new(Counters::default());
    let bans = Arc::new(BanList::new(max_bans));
    let disk = DiskStorage::open(config, counters.clone(), bans.clone()).expect("disk tier opens");
    (disk, counters, bans)
}

#[tokio::test]
async fn objects_survive_clean_close_and_crash() {
    let dir = TempDir::new("persist");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, _) = open(&config);
    for i in 0..50 {
        assert!(disk.admit(key(i), object(body_for(i, 5000), HOUR, Duration::ZERO)));
    }
    assert!(disk.flush(Duration::from_secs(10)));
    for i in 0..50 {
        let got = disk.lookup_io(&key(i)).await.expect("written object found");
        assert_eq!(body_of(&got).await, body_for(i, 5000));
        assert!(got.state.from_disk());
    }
    disk.close();

    // Clean restart: summaries only.
    let (disk, counters) = open(&config);
    assert_eq!(counters.disk_recovered_objects.get(), 50);
    for i in 50..80 {
        disk.admit(key(i), object(body_for(i, 7000), HOUR, Duration::ZERO));
    }
    assert!(disk.flush(Duration::from_secs(10)));
    // Crash: the open region has no summary; recovery scans its entry headers.
    disk.crash();
    let (disk, counters) = open(&config);
    assert_eq!(counters.disk_recovered_objects.get(), 80);
    for i in 0..80 {
        let len = if i < 50 { 5000 } else { 7000 };
        let got = disk
            .lookup_io(&key(i))
            .await
            .expect("recovered object found");
        assert_eq!(body_of(&got).await, body_for(i, len), "object {i}");
        assert_eq!(got.headers.map()["content-type"], "text/plain");
    }
    assert!(disk.lookup_io(&key(1000)).await.is_none());
    disk.close();
}

#[tokio::test]
async fn whole_regions_are_reclaimed_and_writes_stay_near_one_to_one() {
    let dir = TempDir::new("reclaim");
    let config = dir.config(4 << 20, 1 << 20);
    let (disk, counters) = open(&config);
    for i in 0..1000 {
        disk.admit(key(i), object(body_for(i, 8 * 1024), HOUR, Duration::ZERO));
        if i % 100 == 99 {
            assert!(disk.flush(Duration::from_secs(10)));
        }
    }
    assert!(disk.flush(Duration::from_secs(10)));
    assert!(counters.disk_regions_reclaimed.get() > 0);
    let stats = disk.stats();
    assert!(stats.bytes <= 4 << 20, "{stats:?}");
    assert!(stats.objects < 1000 && stats.objects > 200, "{stats:?}");
    assert!(disk.lookup_io(&key(0)).await.is_none(), "oldest reclaimed");
    assert!(disk.lookup_io(&key(999)).await.is_some(), "newest kept");
    let wa = counters.disk_bytes_written.get() as f64 / counters.disk_bytes_admitted.get() as f64;
    assert!(wa < 1.2, "write amplification {wa}");
    disk.close();
    // Recovery agrees with what was indexed before.
    let (disk, counters) = open(&config);
    assert_eq!(counters.disk_recovered_objects.get(), stats.objects);
    assert!(disk.lookup_io(&key(999)).await.is_some());
    disk.close();
}

#[tokio::test]
async fn corruption_is_detected_and_never_served() {
    let dir = TempDir::new("corrupt");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, counters) = open(&config);
    disk.admit(key(1), object(body_for(1, 3000), HOUR, Duration::ZERO));
    disk.admit(key(2), object(body_for(2, 3000), HOUR, Duration::ZERO));
    assert!(disk.flush(Duration::from_secs(10)));
    let loc = disk
        .engine()
        .index_get(format::key_hash(&key(1)))
        .expect("indexed");
    let at = disk.engine().region_base(loc.region) + loc.offset as u64 + loc.len as u64 - 100;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&config.path)
        .unwrap();
    file.write_all_at(b"CORRUPTED", at).unwrap();
    assert!(disk.lookup_io(&key(1)).await.is_none());
    assert_eq!(counters.disk_checksum_fail.get(), 1);
    // Dropped from the index: the next lookup does not even read.
    assert!(disk.lookup_io(&key(1)).await.is_none());
    assert_eq!(counters.disk_checksum_fail.get(), 1);
    assert!(disk.lookup_io(&key(2)).await.is_some());
    disk.close();
}

#[tokio::test]
async fn garbage_file_never_panics_and_starts_empty() {
    let dir = TempDir::new("garbage");
    let config = dir.config(4 << 20, 1 << 20);
    let (disk, _) = open(&config);
    for i in 0..20 {
        disk.admit(key(i), object(body_for(i, 2000), HOUR, Duration::ZERO));
    }
    disk.close();
    // Scribble over every region header and trailer area, then reopen.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&config.path)
        .unwrap();
    for r in 0..4u64 {
        let base = format::DATA_START + r * (1 << 20);
        file.write_all_at(&[0xA5; 100], base + 10).unwrap();
        file.write_all_at(&[0x5A; 100], base + (1 << 20) - 50)
            .unwrap();
    }
    let (disk, counters) = open(&config);
    assert_eq!(counters.disk_recovered_objects.get(), 0);
    assert!(disk.lookup_io(&key(3)).await.is_none());
    // Still usable.
    disk.admit(key(3), object(body_for(3, 2000), HOUR, Duration::ZERO));
    assert!(disk.flush(Duration::from_secs(10)));
    assert!(disk.lookup_io(&key(3)).await.is_some());
    disk.close();
    // A truncated file is reformatted, not misread.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&config.path)
        .unwrap()
        .set_len(5000)
        .unwrap();
    let (disk, counters) = open(&config);
    assert_eq!(counters.disk_recovered_objects.get(), 0);
    disk.close();
}

#[tokio::test]
async fn expiry_and_removal_hold_across_restart() {
    let dir = TempDir::new("expiry");
    let config = dir.config(4 << 20, 1 << 20);
    let (disk, _) = open(&config);
    // Already stale when written (age equals its lifetime).
    disk.admit(key(1), object(b"old".to_vec(), HOUR, HOUR));
    disk.admit(key(2), object(b"fresh".to_vec(), HOUR, Duration::ZERO));
    disk.admit(key(3), object(b"removed".to_vec(), HOUR, Duration::ZERO));
    assert!(disk.flush(Duration::from_secs(10)));
    assert!(
        disk.lookup_io(&key(1)).await.is_none(),
        "expired never served"
    );
    assert!(disk.remove(&key(3)));
    assert!(disk.lookup_io(&key(3)).await.is_none());
    assert!(disk.flush(Duration::from_secs(10)));
    disk.crash();
    let (disk, counters) = open(&config);
    assert_eq!(counters.disk_recovered_objects.get(), 1);
    assert!(disk.lookup_io(&key(1)).await.is_none());
    assert!(
        disk.lookup_io(&key(3)).await.is_none(),
        "removal survives a crash"
    );
    let fresh = disk.lookup_io(&key(2)).await.expect("fresh one kept");
    assert_eq!(body_of(&fresh).await, b"fresh");
    disk.close();
}

#[tokio::test]
async fn large_objects_stream_in_verified_chunks() {
    let dir = TempDir::new("large");
    let config = dir.config(32 << 20, 8 << 20);
    let (disk, _) = open(&config);
    let big = body_for(7, 3 * 1024 * 1024 + 123);
    disk.admit(key(7), object(big.clone(), HOUR, Duration::ZERO));
    assert!(disk.flush(Duration::from_secs(10)));
    let got = disk.lookup_io(&key(7)).await.expect("found");
    assert!(
        matches!(got.body, Body::Disk(_)),
        "large bodies stay on disk"
    );
    assert!(got.promoted().is_none());
    assert_eq!(body_of(&got).await, big);
    disk.close();

    // Corrupt the middle of the body: after a restart the object is verified before it is
    // handed out, so it is never served.
    let (disk, counters) = open(&config);
    let loc = disk
        .engine()
        .index_get(format::key_hash(&key(7)))
        .expect("recovered");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&config.path)
        .unwrap();
    let at = disk.engine().region_base(loc.region) + loc.offset as u64 + 2 * 1024 * 1024;
    file.write_all_at(&[0u8; 16], at).unwrap();
    assert!(disk.lookup_io(&key(7)).await.is_none());
    assert_eq!(counters.disk_checksum_fail.get(), 1);
    disk.close();
}

#[tokio::test]
async fn write_errors_suspend_admission_and_reads_go_on() {
    let dir = TempDir::new("ioerr");
    let config = dir.config(4 << 20, 1 << 20);
    let (disk, counters) = open(&config);
    disk.admit(key(1), object(b"kept".to_vec(), HOUR, Duration::ZERO));
    assert!(disk.flush(Duration::from_secs(10)));
    // Swap the data file's descriptor for a read-only one: every write now fails (EBADF).
    let ro = std::fs::File::open(&config.path).unwrap();
    let fd = disk.engine().raw_fd();
    // SAFETY: dup2 onto a descriptor this test's engine owns; both stay open.
    assert!(unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&ro), fd) } >= 0);
    disk.admit(key(2), object(b"lost".to_vec(), HOUR, Duration::ZERO));
    disk.flush(Duration::from_secs(10));
    assert!(counters.disk_io_error.get() >= 1);
    // Suspended: refused at once, counted.
    let rejected = counters.disk_reject.get();
    assert!(!disk.admit(key(3), object(b"x".to_vec(), HOUR, Duration::ZERO)));
    assert_eq!(counters.disk_reject.get(), rejected + 1);
    assert!(disk.lookup_io(&key(2)).await.is_none());
    let kept = disk.lookup_io(&key(1)).await.expect("reads still work");
    assert_eq!(body_of(&kept).await, b"kept");
    disk.close();
}

#[test]
fn a_second_process_cannot_open_the_same_file() {
    let dir = TempDir::new("lock");
    let config = dir.config(4 << 20, 1 << 20);
    let (disk, _) = open(&config);
    // flock locks are per open file description, so a second open in this process conflicts.
    let err = DiskStorage::open(
        &config,
        Arc::new(Counters::default()),
        Arc::new(BanList::new(100)),
    )
    .err()
    .expect("locked");
    assert!(err.to_string().contains("locked"), "{err}");
    disk.close();
    let (disk, _) = open(&config);
    disk.close();
}

/// `serve` rebuilds the index on a thread of its own early in start-up (`open_ahead`); the
/// storage opened afterwards is that one: every object of a crashed file found, and what the
/// recovery counted (the open region scanned) in the process's counters.
#[tokio::test]
async fn the_index_recovered_ahead_is_the_one_served() {
    let dir = TempDir::new("ahead");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, _) = open(&config);
    for i in 0..40 {
        assert!(disk.admit(key(i), object(body_for(i, 6000), HOUR, Duration::ZERO)));
    }
    assert!(disk.flush(Duration::from_secs(10)));
    disk.crash();
    open_ahead(&config);
    let (disk, counters) = open(&config);
    assert_eq!(counters.disk_recovered_objects.get(), 40);
    assert_eq!(counters.disk_recovery_scanned_regions.get(), 1);
    assert!(
        counters.disk_bytes_written.get() > 0,
        "the open region sealed"
    );
    for i in 0..40 {
        let got = disk.lookup_io(&key(i)).await.expect("recovered ahead");
        assert_eq!(body_of(&got).await, body_for(i, 6000), "object {i}");
    }
    disk.close();
}

/// Recovery applies what the summaries say shard by shard (not entry by entry in region
/// order): for each key the newest entry still wins across regions, a removal (tombstone)
/// stays removed, and the counts are those the index had before the restart.
#[tokio::test]
async fn newest_copies_and_removals_win_when_the_index_is_rebuilt() {
    let dir = TempDir::new("newest");
    let config = dir.config(8 << 20, 1 << 20);
    let (disk, _) = open(&config);
    for i in 0..150 {
        disk.admit(key(i), object(body_for(i, 6000), HOUR, Duration::ZERO));
    }
    assert!(disk.flush(Duration::from_secs(10)));
    // Newer copies of the first 50 in later regions; the next 50 removed.
    for i in 0..50 {
        disk.admit(
            key(i),
            object(body_for(i + 1000, 7000), HOUR, Duration::ZERO),
        );
    }
    assert!(disk.flush(Duration::from_secs(10)));
    for i in 50..100 {
        assert!(disk.remove(&key(i)));
    }
    assert!(disk.flush(Duration::from_secs(10)));
    let before = disk.stats();
    disk.crash();
    for restart in ["after a crash", "after a clean stop"] {
        let (disk, _) = open(&config);
        let after = disk.stats();
        assert_eq!(
            (after.objects, after.bytes),
            (before.objects, before.bytes),
            "{restart}"
        );
        for i in 0..150 {
            let got = disk.lookup_io(&key(i)).await;
            match i {
                0..50 => assert_eq!(
                    body_of(&got.expect("newest copy")).await,
                    body_for(i + 1000, 7000),
                    "{restart}: object {i}"
                ),
                50..100 => assert!(got.is_none(), "{restart}: removed object {i} came back"),
                _ => assert_eq!(
                    body_of(&got.expect("kept")).await,
                    body_for(i, 6000),
                    "{restart}: object {i}"
                ),
            }
        }
        disk.close();
    }
}
