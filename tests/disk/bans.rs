//! The ban list on disk: damage is detected and never unbans; the sweeper retires a ban once
//! nothing older is on disk.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_ban_list_is_detected_and_never_unbans() {
    use shellac::cache::disk::format::{BAN_SLOT, BLOCK};
    use std::os::unix::fs::FileExt;
    let origin = Origin::start(|s| Reply::ok(&body_of(&s.path)).cc("max-age=3600")).await;
    let dir = TempDir::new("ban-damage");
    let data = dir.path("cache.dat");
    let start = || async {
        Shellac::start(origin.addr, |c| {
            disk(c, &data, 8 << 20, 1 << 20, Admission::Always)
        })
        .await
    };
    let scribble = |at: u64| {
        let file = std::fs::OpenOptions::new().write(true).open(&data).unwrap();
        file.write_all_at(b"scribble", at + 40).unwrap();
    };
    let shellac = start().await;
    get(shellac.addr, "/news/1").await;
    get(shellac.addr, "/sport/1").await;
    wait_disk_objects(&shellac, 2).await;
    let r = request(shellac.admin, "POST", "/ban", &[], b"req.url ~ ^/news/").await;
    assert_eq!(r.status, 200, "{}", r.text());
    shellac.stop().await;

    // One copy damaged: detected, and the other copy keeps the ban.
    scribble(BLOCK);
    let shellac = start().await;
    assert_eq!(shellac.stat("disk_checksum_fail").await, 1);
    assert_eq!(shellac.stat("ban_recovered").await, 1);
    let news = get(shellac.addr, "/news/1").await;
    assert!(
        news.cache_status().contains("fwd=miss"),
        "{}",
        news.cache_status()
    );
    let sport = get(shellac.addr, "/sport/1").await;
    assert!(
        sport.cache_status().ends_with("detail=disk"),
        "{}",
        sport.cache_status()
    );
    shellac.stop().await;

    // Both copies damaged: which bans existed is unknown, so nothing on disk is served.
    scribble(BLOCK);
    scribble(BLOCK + BAN_SLOT);
    let shellac = start().await;
    assert_eq!(shellac.stat("disk_reset").await, 1);
    assert_eq!(shellac.stat("disk_recovered_objects").await, 0);
    let fetched = origin.count();
    for path in ["/news/1", "/sport/1"] {
        let r = get(shellac.addr, path).await;
        assert!(
            r.cache_status().contains("fwd=miss"),
            "{path}: {}",
            r.cache_status()
        );
    }
    assert_eq!(origin.count(), fetched + 2);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_retires_a_ban_once_nothing_older_is_on_disk() {
    // 60 KB fill objects: few requests fill the disk (a miss took ~45 ms in this harness, so
    // 1,200 small ones took a minute).
    let origin = Origin::start(|s| {
        let body = if s.path.starts_with("/fill/") {
            "x".repeat(60_000)
        } else {
            body_of(&s.path)
        };
        Reply::ok(&body).cc("max-age=3600")
    })
    .await;
    let dir = TempDir::new("ban-retire");
    let data = dir.path("cache.dat");
    let shellac = Shellac::start(origin.addr, |c| {
        c.invalidation.ban_sweep_interval = Dur(Duration::from_millis(100));
        disk(c, &data, 4 << 20, 1 << 20, Admission::Always)
    })
    .await;
    get(shellac.addr, "/news/1").await;
    wait_disk_objects(&shellac, 1).await;
    let r = request(shellac.admin, "POST", "/ban", &[], b"req.url ~ ^/news/").await;
    assert_eq!(r.status, 200, "{}", r.text());
    // 6 MB through a 4 MiB disk: every region holding anything older than the ban is
    // reclaimed.
    for i in 0..100 {
        get(shellac.addr, &format!("/fill/{i}")).await;
    }
    let mut retired = 0;
    for _ in 0..400 {
        retired = shellac.stat("ban_retired").await;
        if retired == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(retired, 1);
    assert!(shellac.stat("disk_regions_reclaimed").await >= 1);
    let bans: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/bans").await.body).unwrap();
    assert_eq!(bans["bans"].as_array().map(Vec::len), Some(0));
    shellac.stop().await;
    // Not read back: the persisted list was rewritten without it.
    let shellac = Shellac::start(origin.addr, |c| {
        disk(c, &data, 4 << 20, 1 << 20, Admission::Always)
    })
    .await;
    assert_eq!(shellac.stat("ban_recovered").await, 0);
    shellac.stop().await;
}
