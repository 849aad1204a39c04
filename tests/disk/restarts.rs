//! A clean restart: objects read back and promoted, expiry held across it, Vary variants hits
//! at once.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_survive_a_clean_restart_and_are_promoted() {
    let origin = Origin::start(|s| Reply::ok(&body_of(&s.path)).cc("max-age=3600")).await;
    let dir = TempDir::new("clean-restart");
    let data = dir.path("cache.dat");
    let shellac = Shellac::start(origin.addr, |c| {
        disk(c, &data, 8 << 20, 1 << 20, Admission::Always)
    })
    .await;
    for i in 0..40 {
        let r = get(shellac.addr, &format!("/page/{i}")).await;
        assert_eq!(r.text(), body_of(&format!("/page/{i}")));
    }
    wait_disk_objects(&shellac, 40).await;
    shellac.stop().await;

    let shellac = Shellac::start(origin.addr, |c| {
        disk(c, &data, 8 << 20, 1 << 20, Admission::Always)
    })
    .await;
    assert_eq!(shellac.stat("disk_recovered_objects").await, 40);
    for i in 0..40 {
        let path = format!("/page/{i}");
        let r = get(shellac.addr, &path).await;
        assert_eq!(r.text(), body_of(&path));
        assert!(
            r.cache_status().starts_with("shellac; hit;")
                && r.cache_status().ends_with("detail=disk"),
            "{}",
            r.cache_status()
        );
        // Promoted: the next hit is answered by memory.
        let again = get(shellac.addr, &path).await;
        assert!(
            !again.cache_status().contains("disk"),
            "{}",
            again.cache_status()
        );
    }
    assert_eq!(
        origin.count(),
        40,
        "nothing fetched again after the restart"
    );
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_hit_disk"], 40);
    assert_eq!(stats["cache_hit_memory"], 40);
    assert_eq!(stats["disk_checksum_fail"], 0);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_holds_across_a_restart() {
    let origin = Origin::start(|s| {
        let cc = if s.path == "/short" {
            "max-age=1"
        } else {
            "max-age=3600"
        };
        Reply::ok(&s.path).cc(cc)
    })
    .await;
    let dir = TempDir::new("expiry");
    let data = dir.path("cache.dat");
    let start = || async {
        Shellac::start(origin.addr, |c| {
            // No stale copies kept for revalidation: expired means gone.
            c.cache.keep = Dur(Duration::ZERO);
            disk(c, &data, 4 << 20, 1 << 20, Admission::Always)
        })
        .await
    };
    let shellac = start().await;
    get(shellac.addr, "/short").await;
    get(shellac.addr, "/long").await;
    wait_disk_objects(&shellac, 2).await;
    shellac.stop().await;
    // /short's lifetime is 1 s; wait it out while stopped.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let shellac = start().await;
    assert_eq!(shellac.stat("disk_recovered_objects").await, 1);
    let long = get(shellac.addr, "/long").await;
    assert!(
        long.cache_status().ends_with("detail=disk"),
        "{}",
        long.cache_status()
    );
    let short = get(shellac.addr, "/short").await;
    assert!(
        short.cache_status().contains("fwd=miss"),
        "{}",
        short.cache_status()
    );
    assert_eq!(origin.count_path("/short"), 2);
    assert_eq!(origin.count_path("/long"), 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_variants_are_hits_right_after_a_clean_restart() {
    let origin = Origin::start(by_language).await;
    let dir = TempDir::new("vary-clean");
    let data = dir.path("cache.dat");
    let start = || async {
        Shellac::start(origin.addr, |c| {
            disk(c, &data, 8 << 20, 1 << 20, Admission::Always)
        })
        .await
    };
    let shellac = start().await;
    for lang in ["fr", "de", "en"] {
        assert_eq!(
            get_lang(shellac.addr, lang).await.text(),
            format!("/page in {lang}")
        );
    }
    wait_disk_objects(&shellac, 3).await;
    shellac.stop().await;

    let shellac = start().await;
    assert_eq!(shellac.stat("disk_recovered_variants").await, 3);
    for lang in ["fr", "de", "en"] {
        let r = get_lang(shellac.addr, lang).await;
        assert_eq!(r.text(), format!("/page in {lang}"));
        assert!(
            r.cache_status().ends_with("detail=disk"),
            "{lang}: {}",
            r.cache_status()
        );
    }
    assert_eq!(origin.count(), 3, "every variant answered from disk");
    // A language never fetched is a miss, and becomes a fourth variant.
    let it = get_lang(shellac.addr, "it").await;
    assert_eq!(it.text(), "/page in it");
    assert!(
        it.cache_status().contains("fwd=miss"),
        "{}",
        it.cache_status()
    );
    assert_eq!(origin.count(), 4);
    shellac.stop().await;
}
