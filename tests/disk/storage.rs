//! What the tier stores and how: second-request admission, corruption never served, a disk
//! without room, a 21 MB object streamed from disk, short-lived objects kept off it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_request_admission_skips_one_hit_wonders() {
    let origin = Origin::start(|s| Reply::ok(&body_of(&s.path)).cc("max-age=3600")).await;
    let dir = TempDir::new("admission");
    let data = dir.path("cache.dat");
    // A memory tier of 64 KiB: objects of ~5 KiB are evicted quickly.
    let shellac = Shellac::start(origin.addr, |c| {
        c.cache.memory_size = Size(64 << 10);
        c.cache.max_object_size = Size(32 << 10);
        disk(c, &data, 8 << 20, 1 << 20, Admission::SecondRequest)
    })
    .await;
    for i in 0..30 {
        get(shellac.addr, &format!("/once/{i}")).await;
    }
    let stats = shellac.stats().await;
    assert_eq!(stats["disk_admit_skip"], 30);
    assert_eq!(stats["disk_admit"], 0, "one-hit wonders are not written");
    // Requested again after eviction: now admitted.
    for i in 0..30 {
        get(shellac.addr, &format!("/once/{i}")).await;
    }
    wait_disk_objects(&shellac, 1).await;
    assert!(shellac.stat("disk_admit").await >= 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corruption_in_the_data_file_is_never_served() {
    let origin = Origin::start(|s| Reply::ok(&body_of(&s.path)).cc("max-age=3600")).await;
    let dir = TempDir::new("corrupt");
    let data = dir.path("cache.dat");
    let start = || async {
        Shellac::start(origin.addr, |c| {
            disk(c, &data, 4 << 20, 1 << 20, Admission::Always)
        })
        .await
    };
    let shellac = start().await;
    get(shellac.addr, "/victim").await;
    get(shellac.addr, "/bystander").await;
    wait_disk_objects(&shellac, 2).await;
    shellac.stop().await;

    // Flip bytes in the middle of the stored body of /victim.
    let mut file = std::fs::read(&data).unwrap();
    let needle = body_of("/victim");
    let at = file
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .expect("body on disk");
    file[at + 1000..at + 1008].copy_from_slice(b"CORRUPT!");
    std::fs::write(&data, &file).unwrap();

    let shellac = start().await;
    let r = get(shellac.addr, "/victim").await;
    assert_eq!(
        r.text(),
        body_of("/victim"),
        "refetched, never the corrupt copy"
    );
    assert!(
        r.cache_status().contains("fwd=miss"),
        "{}",
        r.cache_status()
    );
    assert_eq!(origin.count_path("/victim"), 2);
    let b = get(shellac.addr, "/bystander").await;
    assert!(
        b.cache_status().ends_with("detail=disk"),
        "{}",
        b.cache_status()
    );
    assert_eq!(shellac.stat("disk_checksum_fail").await, 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_without_room_leaves_the_proxy_serving() {
    let origin = Origin::start(|_| Reply::ok("still here").cc("max-age=60")).await;
    let dir = TempDir::new("full");
    let data = dir.path("cache.dat");
    // 64 TiB cannot be preallocated here: the tier is refused at start-up, before any write;
    // with on_open_error = "memory-only" the proxy serves from memory (the default refuses to
    // start: tests/startup/main.rs).
    let shellac = Shellac::start(origin.addr, |c| {
        disk(c, &data, 64 << 40, 1 << 30, Admission::Always);
        if let Some(d) = c.storage.disk.as_mut() {
            d.on_open_error = shellac::config::OnOpenError::MemoryOnly;
        }
    })
    .await;
    assert_eq!(get(shellac.addr, "/").await.text(), "still here");
    let hit = get(shellac.addr, "/").await;
    assert_eq!(hit.text(), "still here");
    assert!(hit.cache_status().contains("hit"));
    let stats = shellac.stats().await;
    assert_eq!(stats["disk_io_error"], 1);
    assert_eq!(stats["disk_capacity_bytes"], 0);
    assert!(std::fs::metadata(&data).map_or(0, |m| m.len()) < 1 << 20);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_21_mb_object_streams_from_disk() {
    const LEN: u64 = 21 * 1000 * 1000;
    let origin = Origin::start(|_| {
        Reply::ok("").cc("max-age=3600").body(ReplyBody::Generated {
            len: LEN,
            chunk: 64 * 1024,
        })
    })
    .await;
    let dir = TempDir::new("large");
    let data = dir.path("cache.dat");
    let start = || async {
        Shellac::start(origin.addr, |c| {
            // Memory cannot hold it: the object lives on disk only.
            c.cache.memory_size = Size(8 << 20);
            c.cache.max_object_size = Size(30 << 20);
            disk(c, &data, 128 << 20, 32 << 20, Admission::Always)
        })
        .await
    };
    let shellac = start().await;
    let first = get(shellac.addr, "/video.flv").await;
    assert_eq!(first.body.len() as u64, LEN);
    wait_disk_objects(&shellac, 1).await;
    let hit = get(shellac.addr, "/video.flv").await;
    assert!(
        hit.cache_status().ends_with("detail=disk"),
        "{}",
        hit.cache_status()
    );
    assert_eq!(hit.header("content-length"), Some("21000000"));
    assert_eq!(hit.body.len() as u64, LEN);
    assert!(hit.body.iter().all(|b| *b == b'x'));
    shellac.stop().await;

    let shellac = start().await;
    let hit = get(shellac.addr, "/video.flv").await;
    assert!(
        hit.cache_status().ends_with("detail=disk"),
        "{}",
        hit.cache_status()
    );
    assert_eq!(hit.body.len() as u64, LEN);
    assert!(hit.body.iter().all(|b| *b == b'x'));
    assert_eq!(origin.count(), 1);
    // A range is cut from the stream of verified chunks.
    let part = get_with(
        shellac.addr,
        "/video.flv",
        &[("range", "bytes=20000000-20000099")],
    )
    .await;
    assert_eq!(part.status, 206);
    assert_eq!(
        part.header("content-range"),
        Some("bytes 20000000-20000099/21000000")
    );
    assert_eq!(part.body.len(), 100);
    assert!(
        part.cache_status().ends_with("detail=disk"),
        "{}",
        part.cache_status()
    );
    assert_eq!(
        shellac.stat("n_object").await,
        0,
        "never loaded into memory"
    );
    shellac.stop().await;
}

/// `cache.shortlived` (Varnish's `shortlived`, mapped from varnishtest's `-p shortlived`): an
/// object whose freshness, grace and keep add up to less than it is kept in memory only —
/// served from memory, never written to the disk tier. Off (0s) by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_shortlived_keeps_short_lived_objects_off_the_disk() {
    let origin = Origin::start(|s| {
        let cc = if s.path == "/short" {
            "max-age=5"
        } else {
            "max-age=3600"
        };
        Reply::ok(&body_of(&s.path)).cc(cc)
    })
    .await;
    let dir = TempDir::new("shortlived");
    let data = dir.path("cache.dat");
    let shellac = Shellac::start(origin.addr, |c| {
        disk(c, &data, 8 << 20, 1 << 20, Admission::Always);
        c.cache.keep = Dur(Duration::ZERO);
        c.cache.shortlived = Dur(Duration::from_secs(10));
    })
    .await;
    for path in ["/short", "/long"] {
        get(shellac.addr, path).await;
        let hit = get(shellac.addr, path).await;
        assert!(
            hit.cache_status().contains("hit"),
            "{path}: {}",
            hit.cache_status()
        );
        assert_eq!(hit.text(), body_of(path));
    }
    assert_eq!(shellac.stat("disk_transient").await, 1);
    wait_disk_objects(&shellac, 1).await;
    assert_eq!(shellac.stat("n_object_disk").await, 1, "only /long");
    shellac.stop().await;
}
