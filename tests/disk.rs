//! The disk tier end to end: restarts (clean and `kill -9` of the real binary), corruption,
//! a filesystem without room, a 21 MB object streamed from disk, expiry across a restart.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::binary::Served;
use common::*;
use shellac::config::units::{Dur, Size};
use shellac::config::{Admission, Config, DiskConfig};

fn disk(config: &mut Config, path: &Path, size: u64, region: u64, admission: Admission) {
    config.storage.disk = Some(DiskConfig {
        path: path.to_path_buf(),
        size: Size(size),
        region_size: Size(region),
        admission,
        on_open_error: Default::default(),
    });
}

/// Waits (bounded) until the disk tier has indexed at least `n` objects.
async fn wait_disk_objects(shellac: &Shellac, n: u64) {
    for _ in 0..400 {
        if shellac.stat("n_object_disk").await >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "disk tier indexed {} objects, expected {n}",
        shellac.stat("n_object_disk").await
    );
}

fn body_of(path: &str) -> String {
    format!("body of {path} ").repeat(300)
}

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

/// The real binary on a config file (`common::binary::Served`), with the counters these
/// tests read.
struct Proc(Served);

impl std::ops::Deref for Proc {
    type Target = Served;
    fn deref(&self) -> &Served {
        &self.0
    }
}

impl Proc {
    fn start(config: &Path) -> Proc {
        Proc(Served::serve(&[
            "--config",
            config.to_str().expect("temp paths are UTF-8"),
        ]))
    }

    async fn stat(&self, name: &str) -> u64 {
        let resp = get(self.admin, "/stats").await;
        let map: std::collections::HashMap<String, serde_json::Value> =
            serde_json::from_slice(&resp.body).expect("stats JSON");
        map[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name} is not a count"))
    }

    fn kill9(self) {
        self.0.kill9();
    }
}

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

/// A GET that reports failure instead of panicking (the proxy may be killed under it).
async fn request_or_error(addr: SocketAddr, path: &str) -> bool {
    use http_body_util::{BodyExt, Empty};
    let Ok(stream) = tokio::net::TcpStream::connect(addr).await else {
        return false;
    };
    let Ok((mut sender, conn)) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await
    else {
        return false;
    };
    tokio::spawn(conn);
    let Ok(req) = http::Request::get(path)
        .header("host", "test.example")
        .body(Empty::<bytes::Bytes>::new())
    else {
        return false;
    };
    match sender.send_request(req).await {
        Ok(resp) => resp.into_body().collect().await.is_ok(),
        Err(_) => false,
    }
}

/// A config file for the real binary: small memory tier, a 16 MiB disk tier written through,
/// no ban sweeps while a test runs (bans act at lookup only, so counts are exact).
fn binary_config(dir: &TempDir, origin: SocketAddr) -> std::path::PathBuf {
    let config = dir.path("shellac.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n[cache]\nmemory_size = \"1MiB\"\nmax_object_size = \"256KiB\"\n\n[invalidation]\nban_sweep_interval = \"1h\"\n\n[storage.disk]\npath = \"{}\"\nsize = \"16MiB\"\nregion_size = \"1MiB\"\nadmission = \"always\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            dir.path("cache.dat").display(),
            origin.port()
        ),
    )
    .unwrap();
    config
}

/// Waits (bounded) until the `n_object_disk` of the process is exactly `n`.
async fn wait_proc_disk_objects(p: &Proc, n: u64) {
    for _ in 0..400 {
        if p.stat("n_object_disk").await == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "disk tier indexed {} objects, expected {n}",
        p.stat("n_object_disk").await
    );
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

fn by_language(s: &Seen) -> Reply {
    let lang = s
        .headers
        .get("accept-language")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none")
        .to_string();
    Reply::ok(&format!("{} in {lang}", s.path))
        .cc("max-age=3600")
        .header("vary", "Accept-Language")
}

async fn get_lang(addr: SocketAddr, lang: &str) -> Resp {
    get_with(addr, "/page", &[("accept-language", lang)]).await
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
