//! `kill -9` of the real binary: what was written is kept, and bans, purges, tag purges and
//! Vary variants issued or stored before it still apply after it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_heavy_writes_keeps_what_was_written() {
    let origin = Origin::start(|s| Reply::ok(&body_of(&s.path)).cc("max-age=3600")).await;
    let dir = TempDir::new("kill9");
    let config = dir.path("shellac.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n[cache]\nmemory_size = \"1MiB\"\nmax_object_size = \"256KiB\"\n\n[storage.disk]\npath = \"{}\"\nsize = \"16MiB\"\nregion_size = \"1MiB\"\nadmission = \"always\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            dir.path("cache.dat").display(),
            origin.addr.port()
        ),
    )
    .unwrap();

    // Phase 1: objects that are on disk (indexed) before the crash must survive it.
    let shellac = Proc::start(&config);
    for i in 0..200 {
        get(shellac.proxy, &format!("/before/{i}")).await;
    }
    let mut indexed = 0;
    for _ in 0..400 {
        indexed = shellac.stat("n_object_disk").await;
        if indexed >= 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(indexed, 200);

    // Phase 2: heavy writes from 8 clients; kill -9 while they run. Each writer returns every
    // path it asked for, the one the kill interrupted included (its object may be on disk).
    let proxy = shellac.proxy;
    let writers: Vec<_> = (0..8)
        .map(|w| {
            tokio::spawn(async move {
                let mut asked = Vec::new();
                for i in 0..1000 {
                    let path = format!("/during/{w}/{i}");
                    asked.push(path.clone());
                    let fut = tokio::time::timeout(Duration::from_secs(5), async {
                        request_or_error(proxy, &path).await
                    });
                    if !matches!(fut.await, Ok(true)) {
                        break;
                    }
                }
                asked
            })
        })
        .collect();
    let mut admitted = 0;
    for _ in 0..1000 {
        admitted = shellac.stat("disk_admit").await;
        if admitted >= 400 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        admitted >= 400,
        "only {admitted} objects written before the kill"
    );
    // Indexed = completely written to the file (the writer indexes an entry once its last
    // byte is written): these must all be found again.
    let indexed = shellac.stat("n_object_disk").await;
    assert!(indexed > 200, "{indexed} indexed");
    shellac.kill9();
    let mut asked = Vec::new();
    for w in writers {
        asked.extend(w.await.expect("writer task"));
    }

    // Restart: everything from phase 1 is a disk hit; of phase 2, exactly what was recovered
    // is served from disk (no refetch), the rest is fetched again, and all of it is right.
    let shellac = Proc::start(&config);
    let recovered = shellac.stat("disk_recovered_objects").await;
    assert!(
        recovered >= indexed,
        "{recovered} recovered, {indexed} were on disk before the kill"
    );
    let fetched = origin.count();
    for i in 0..200 {
        let path = format!("/before/{i}");
        let r = get(shellac.proxy, &path).await;
        assert_eq!(r.text(), body_of(&path));
        assert!(
            r.cache_status().ends_with("detail=disk"),
            "{path}: {}",
            r.cache_status()
        );
    }
    assert_eq!(origin.count(), fetched);
    let (mut from_disk, mut refetched) = (0, 0);
    for path in &asked {
        let before = origin.count_path(path);
        let r = get(shellac.proxy, path).await;
        assert_eq!(r.text(), body_of(path));
        if r.cache_status().ends_with("detail=disk") {
            from_disk += 1;
            assert_eq!(origin.count_path(path), before, "{path}: a disk hit");
        } else {
            refetched += 1;
            assert!(
                r.cache_status().contains("fwd=miss"),
                "{path}: {}",
                r.cache_status()
            );
            assert_eq!(origin.count_path(path), before + 1, "{path}: fetched again");
        }
    }
    assert_eq!(
        200 + from_disk,
        recovered,
        "every recovered object is served from disk ({refetched} refetched)"
    );
    assert_eq!(shellac.stat("cache_hit_disk").await, 200 + from_disk);
    assert_eq!(origin.count(), fetched + refetched as usize);
    assert_eq!(shellac.stat("disk_checksum_fail").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bans_and_purges_issued_before_a_kill_9_still_apply_after_it() {
    let origin = Origin::start(|s| Reply::ok(&body_of(&s.path)).cc("max-age=3600")).await;
    let dir = TempDir::new("ban-kill9");
    let config = binary_config(&dir, origin.addr);
    let shellac = Proc::start(&config);
    for i in 0..10 {
        get(shellac.proxy, &format!("/news/{i}")).await;
        get(shellac.proxy, &format!("/sport/{i}")).await;
    }
    wait_proc_disk_objects(&shellac, 20).await;
    let purged = request(shellac.proxy, "PURGE", "/sport/9", &[], b"").await;
    assert_eq!(purged.status, 200);
    let r = request(shellac.admin, "POST", "/ban", &[], b"req.url ~ ^/news/").await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Fetched again after the ban: this copy is newer than the ban and must survive it.
    let again = get(shellac.proxy, "/news/0").await;
    assert!(
        again.cache_status().contains("fwd=miss"),
        "{}",
        again.cache_status()
    );
    // The purged and the banned copy left the disk index at once; the new /news/0 is indexed
    // once written, and with it the purge's tombstone queued before it.
    wait_proc_disk_objects(&shellac, 19).await;
    shellac.kill9();

    let shellac = Proc::start(&config);
    assert_eq!(shellac.stat("ban_recovered").await, 1);
    let fetched = origin.count();
    let r = get(shellac.proxy, "/news/0").await;
    assert_eq!(r.text(), body_of("/news/0"));
    assert!(
        r.cache_status().ends_with("detail=disk"),
        "stored after the ban: {}",
        r.cache_status()
    );
    for i in 0..9 {
        let path = format!("/sport/{i}");
        let r = get(shellac.proxy, &path).await;
        assert!(
            r.cache_status().ends_with("detail=disk"),
            "{path}: {}",
            r.cache_status()
        );
    }
    assert_eq!(origin.count(), fetched, "no backend fetch for hits");
    let purged = get(shellac.proxy, "/sport/9").await;
    assert!(
        purged.cache_status().contains("fwd=miss"),
        "purged: {}",
        purged.cache_status()
    );
    let fetched = fetched + 1;
    for i in 1..10 {
        let path = format!("/news/{i}");
        let r = get(shellac.proxy, &path).await;
        assert_eq!(r.text(), body_of(&path));
        assert!(
            r.cache_status().contains("fwd=miss"),
            "{path} banned: {}",
            r.cache_status()
        );
    }
    assert_eq!(origin.count(), fetched + 9);
    assert_eq!(shellac.stat("ban_objects").await, 9);
    let bans: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/bans").await.body).unwrap();
    assert_eq!(bans["bans"][0]["expr"], "req.url ~ ^/news/");
    assert_eq!(shellac.stat("disk_checksum_fail").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_variants_are_hits_right_after_a_kill_9() {
    let origin = Origin::start(by_language).await;
    let dir = TempDir::new("vary-kill9");
    let config = binary_config(&dir, origin.addr);
    let shellac = Proc::start(&config);
    for lang in ["fr", "de"] {
        get_lang(shellac.proxy, lang).await;
    }
    wait_proc_disk_objects(&shellac, 2).await;
    shellac.kill9();

    let shellac = Proc::start(&config);
    assert_eq!(shellac.stat("disk_recovered_variants").await, 2);
    for lang in ["fr", "de"] {
        let r = get_lang(shellac.proxy, lang).await;
        assert_eq!(r.text(), format!("/page in {lang}"));
        assert!(
            r.cache_status().ends_with("detail=disk"),
            "{lang}: {}",
            r.cache_status()
        );
    }
    assert_eq!(origin.count(), 2); // The rebuilt list also lets a PURGE reach every variant on disk.
    let purged = request(shellac.proxy, "PURGE", "/page", &[], b"").await;
    assert_eq!(purged.status, 200);
    assert!(
        purged.text().contains("purged 2 objects"),
        "{}",
        purged.text()
    );
    let fr = get_lang(shellac.proxy, "fr").await;
    assert!(
        fr.cache_status().contains("fwd=miss"),
        "{}",
        fr.cache_status()
    );
    assert_eq!(origin.count(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_purge_after_a_kill_9_reaches_objects_on_disk() {
    let origin = Origin::start(|s| {
        let reply = Reply::ok(&body_of(&s.path)).cc("max-age=3600");
        match s.path.as_str() {
            "/product/1" => reply.header("surrogate-key", "all product-1"),
            "/product/2" => reply.header("surrogate-key", "all"),
            _ => reply,
        }
    })
    .await;
    let dir = TempDir::new("tags-kill9");
    let config = binary_config(&dir, origin.addr);
    let shellac = Proc::start(&config);
    for path in ["/product/1", "/product/2", "/other"] {
        get(shellac.proxy, path).await;
    }
    wait_proc_disk_objects(&shellac, 3).await;
    shellac.kill9();

    let shellac = Proc::start(&config);
    assert_eq!(shellac.stat("disk_recovered_tagged").await, 2);
    let purged = request(
        shellac.proxy,
        "PURGE",
        "/",
        &[("surrogate-key", "all")],
        b"",
    )
    .await;
    assert_eq!(purged.status, 200);
    assert!(
        purged.text().contains("purged 2 objects"),
        "{}",
        purged.text()
    );
    let fetched = origin.count();
    for path in ["/product/1", "/product/2"] {
        let r = get(shellac.proxy, path).await;
        assert!(
            r.cache_status().contains("fwd=miss"),
            "{path}: {}",
            r.cache_status()
        );
    }
    let other = get(shellac.proxy, "/other").await;
    assert!(
        other.cache_status().ends_with("detail=disk"),
        "{}",
        other.cache_status()
    );
    assert_eq!(origin.count(), fetched + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_answered_200_survives_a_kill_9_right_after_the_answer() {
    let origin = Origin::start(|s| Reply::ok(&body_of(&s.path)).cc("max-age=3600")).await;
    let dir = TempDir::new("ban-200-kill9");
    let config = binary_config(&dir, origin.addr);
    let shellac = Proc::start(&config);
    get(shellac.proxy, "/news/1").await;
    get(shellac.proxy, "/sport/1").await;
    wait_proc_disk_objects(&shellac, 2).await;
    let r = request(shellac.admin, "POST", "/ban", &[], b"req.url ~ ^/news/").await;
    assert_eq!(r.status, 200, "{}", r.text());
    // No wait: the 200 means the ban list holding it is synced.
    shellac.kill9();

    let shellac = Proc::start(&config);
    assert_eq!(shellac.stat("ban_recovered").await, 1);
    let news = get(shellac.proxy, "/news/1").await;
    assert!(
        news.cache_status().contains("fwd=miss"),
        "{}",
        news.cache_status()
    );
    let sport = get(shellac.proxy, "/sport/1").await;
    assert!(
        sport.cache_status().ends_with("detail=disk"),
        "{}",
        sport.cache_status()
    );
    assert_eq!(origin.count_path("/news/1"), 2);
}
