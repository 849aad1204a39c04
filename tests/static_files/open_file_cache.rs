//! The open-file cache (`open_file_cache`, `open_file_cache_valid`, nginx's `open_file_cache`)
//! end to end, with its counters in `/backends`: it never keeps more entries than it may,
//! counts what it pushes out, keeps "not found" answers, sees a file changed in place at
//! once and one replaced by another (renamed over it) only once its entry is no longer valid.

use std::time::Duration;

use shellac::config::units::Dur;

use super::common::*;
use super::{PASS, files};

/// The files backend's entry in `/backends`.
async fn counters(sh: &Shellac) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_slice(&get(sh.admin, "/backends").await.body).unwrap();
    v["backends"][0].clone()
}

fn n(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// A passed request (the files origin answers it, never the HTTP cache): (status, body).
async fn fetch(sh: &Shellac, path: &str) -> (u16, String) {
    let r = request(sh.addr, "GET", path, &[PASS], b"").await;
    (r.status, r.text())
}

/// Writes `body` to a new file and renames it over `path` (what deploy tools do).
fn replace(path: &std::path::Path, body: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_file_cache_is_bounded_counted_and_expires() {
    let dir = TempDir::new("open-cache");
    let www = dir.0.join("www");
    std::fs::create_dir_all(&www).unwrap();
    for i in 0..10 {
        std::fs::write(www.join(format!("f{i}.txt")), format!("file {i}")).unwrap();
    }
    std::fs::write(www.join("swap.txt"), "old").unwrap();
    std::fs::write(www.join("inplace.txt"), "before").unwrap();

    // Four entries, valid for an hour: nothing expires during the test.
    let sh = files(&www, |b| {
        // No sibling look-ups: one entry per file asked for.
        b.precompressed = false;
        b.open_file_cache = 4;
        b.open_file_cache_valid = Dur(Duration::from_secs(3600));
    })
    .await;
    for i in 0..10 {
        assert_eq!(
            fetch(&sh, &format!("/f{i}.txt")).await,
            (200, format!("file {i}"))
        );
    }
    let c = counters(&sh).await;
    assert_eq!(n(&c, "files_cache_miss"), 10, "{c}");
    assert_eq!(n(&c, "files_cache_entries"), 4, "{c}");
    assert_eq!(n(&c, "files_cache_evicted"), 6, "{c}");
    // The last file opened is kept: asked again, it is a hit.
    assert_eq!(fetch(&sh, "/f9.txt").await.0, 200);
    assert_eq!(n(&counters(&sh).await, "files_cache_hit"), 1);
    // A file replaced by another while its entry is valid (and kept: nothing else was
    // opened since): the kept descriptor still serves the old file.
    assert_eq!(fetch(&sh, "/swap.txt").await.1, "old");
    replace(&www.join("swap.txt"), "new and longer");
    assert_eq!(fetch(&sh, "/swap.txt").await.1, "old");
    // One changed in place is seen at once (its size and time are read on every request).
    assert_eq!(fetch(&sh, "/inplace.txt").await.1, "before");
    std::fs::write(www.join("inplace.txt"), "after, longer").unwrap();
    assert_eq!(fetch(&sh, "/inplace.txt").await.1, "after, longer");
    // "Not found" is kept too.
    assert_eq!(fetch(&sh, "/late.txt").await.0, 404);
    std::fs::write(www.join("late.txt"), "late").unwrap();
    assert_eq!(fetch(&sh, "/late.txt").await.0, 404);
    let c = counters(&sh).await;
    assert!(n(&c, "files_cache_entries") <= 4, "{c}");
    assert_eq!(n(&c, "files_cache_expired"), 0, "{c}");
    sh.stop().await;

    // Entries valid for 50 ms: the replaced file and the late one are found once their
    // entries are stale (looked up again and counted as expired).
    std::fs::remove_file(www.join("late.txt")).unwrap();
    let sh = files(&www, |b| {
        b.precompressed = false;
        b.open_file_cache_valid = Dur(Duration::from_millis(50));
    })
    .await;
    assert_eq!(fetch(&sh, "/swap.txt").await.1, "new and longer");
    assert_eq!(fetch(&sh, "/late.txt").await.0, 404);
    replace(&www.join("swap.txt"), "newest");
    std::fs::write(www.join("late.txt"), "late").unwrap();
    let seen = eventually(Duration::from_secs(20), || async {
        fetch(&sh, "/swap.txt").await.1 == "newest" && fetch(&sh, "/late.txt").await.0 == 200
    })
    .await;
    assert!(seen, "the replaced and the new file are seen");
    let c = counters(&sh).await;
    assert!(n(&c, "files_cache_expired") >= 2, "{c}");
    assert_eq!(n(&c, "files_cache_evicted"), 0, "{c}");
    sh.stop().await;
}
