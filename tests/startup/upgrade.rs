//! `shellac upgrade` with a load running through it: the binary at the running process's path
//! is replaced by another file (as dpkg does), the upgrade hands the listening sockets and the
//! disk tier to the new process, and the clients see no failed request and no refused
//! connection; the hit ratio after the upgrade is the one before (the disk tier's index is
//! the old process's, opened from the region summaries: no region scanned). A new binary that
//! cannot start leaves the old process serving, and `shellac upgrade` says why.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::binary::{BIN, Served};
use crate::common::{Origin, Reply, temp_dir};

const KEYS: u64 = 200;

/// Kills a process by id when dropped (the new process outlives the one the test started).
struct KillOnDrop(Option<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    hits: AtomicU64,
    failed: AtomicU64,
    refused: AtomicU64,
    /// A keep-alive connection the server closed between two requests (allowed by HTTP; the
    /// request is sent again on a new connection, as every client does).
    reconnects: AtomicU64,
}

/// One keep-alive GET; `Err(true)` when the connection was closed before any byte of the
/// answer (safe to retry), `Err(false)` for anything else.
async fn get_on(conn: &mut TcpStream, path: &str) -> Result<(u16, bool), bool> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: upgrade.test\r\n\r\n");
    if conn.write_all(req.as_bytes()).await.is_err() {
        return Err(true);
    }
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match tokio::time::timeout(Duration::from_secs(10), conn.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Err(buf.is_empty()),
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => return Err(false),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or(false)?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(false)?;
    while buf.len() < head_end + len {
        match tokio::time::timeout(Duration::from_secs(10), conn.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => return Err(false),
        }
    }
    let hit = head
        .lines()
        .any(|l| l.starts_with("cache-status:") && l.contains("; hit"));
    Ok((status, hit))
}

/// A client: keep-alive requests over the keys until `stop`, counting into `tally`.
async fn client(addr: SocketAddr, start: u64, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let mut i = start;
    let mut conn: Option<TcpStream> = None;
    while !stop.load(Ordering::Relaxed) {
        let path = format!("/obj/{}", i % KEYS);
        let mut tries = 0;
        loop {
            tries += 1;
            let c = match conn.take() {
                Some(c) => c,
                None => match TcpStream::connect(addr).await {
                    Ok(c) => c,
                    Err(_) => {
                        tally.refused.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                },
            };
            let mut c = c;
            match get_on(&mut c, &path).await {
                Ok((200, hit)) => {
                    tally.ok.fetch_add(1, Ordering::Relaxed);
                    if hit {
                        tally.hits.fetch_add(1, Ordering::Relaxed);
                    }
                    conn = Some(c);
                    break;
                }
                Err(true) if tries == 1 => {
                    tally.reconnects.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    tally.failed.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
        i += 1;
    }
}

fn config(dir: &std::path::Path, origin: SocketAddr) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n[cache]\nmemory_size = \"64MiB\"\n\n[storage.disk]\npath = \"{}\"\nsize = \"64MiB\"\nregion_size = \"4MiB\"\nadmission = \"always\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
        dir.join("cache.dat").display(),
        origin.port()
    )
}

async fn stats(admin: SocketAddr) -> serde_json::Value {
    let out = tokio::process::Command::new(BIN)
        .args(["stats", "--all", "--admin", &admin.to_string()])
        .output()
        .await
        .unwrap();
    let mut map = serde_json::Map::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut parts = line.split_whitespace();
        if let (Some(k), Some(v)) = (parts.next(), parts.next()) {
            map.insert(
                k.to_string(),
                v.parse::<u64>().map_or(serde_json::Value::Null, Into::into),
            );
        }
    }
    serde_json::Value::Object(map)
}

fn stat(v: &serde_json::Value, name: &str) -> u64 {
    v[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upgrade_under_load_fails_no_request_refuses_no_connection_and_keeps_the_hits() {
    let origin = Origin::start(|_| Reply::ok(&"x".repeat(2000)).cc("max-age=3600")).await;
    let dir = temp_dir("upgrade-load");
    // The binary at a path of its own, to be replaced while it runs.
    let exe = dir.join("shellac");
    std::fs::copy(BIN, &exe).unwrap();
    let conf = dir.join("shellac.toml");
    std::fs::write(&conf, config(&dir, origin.addr)).unwrap();
    let mut cmd = Command::new(&exe);
    cmd.args(["serve", "--config", conf.to_str().unwrap()]);
    let old = Served::start(cmd);
    let (proxy, admin) = (old.proxy, old.admin);

    // Warm: every key fetched once, written through to the disk tier.
    let tally = Arc::new(Tally::default());
    let mut conn = TcpStream::connect(proxy).await.unwrap();
    for k in 0..KEYS {
        assert_eq!(
            get_on(&mut conn, &format!("/obj/{k}")).await.unwrap().0,
            200
        );
    }
    drop(conn);
    let mut on_disk = 0;
    for _ in 0..200 {
        on_disk = stat(&stats(admin).await, "n_object_disk");
        if on_disk >= KEYS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        on_disk, KEYS,
        "every object written to disk before the upgrade"
    );
    assert_eq!(origin.count() as u64, KEYS);

    // The load, before the upgrade.
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..4 {
        clients.push(tokio::spawn(client(
            proxy,
            c * 50,
            stop.clone(),
            tally.clone(),
        )));
    }
    while tally.ok.load(Ordering::Relaxed) < 2000 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = (
        tally.ok.load(Ordering::Relaxed),
        tally.hits.load(Ordering::Relaxed),
    );

    // Another build at the same path (a new file renamed over the old one, as dpkg does).
    let staged = dir.join("shellac.new");
    std::fs::copy(BIN, &staged).unwrap();
    std::fs::rename(&staged, &exe).unwrap();
    let out = tokio::process::Command::new(BIN)
        .args(["upgrade", "--admin", &admin.to_string()])
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let new_pid: u32 = said
        .split("→ pid ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("new pid in {said:?}"));
    let _new = KillOnDrop(Some(new_pid));
    assert_ne!(new_pid, old.pid());
    let at_upgrade = (
        tally.ok.load(Ordering::Relaxed),
        tally.hits.load(Ordering::Relaxed),
    );

    // The load goes on against the new process.
    while tally.ok.load(Ordering::Relaxed) < at_upgrade.0 + 3000 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let end = (
        tally.ok.load(Ordering::Relaxed),
        tally.hits.load(Ordering::Relaxed),
    );
    let ratio = |a: (u64, u64), b: (u64, u64)| (b.1 - a.1) as f64 / (b.0 - a.0) as f64;
    let (ratio_before, ratio_after) = (ratio((0, 0), before), ratio(at_upgrade, end));
    let (failed, refused, reconnects) = (
        tally.failed.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed),
        tally.reconnects.load(Ordering::Relaxed),
    );
    eprintln!(
        "upgrade under load: {} requests ({} after the upgrade), {failed} failed, {refused} refused, {reconnects} keep-alive reconnects; hit ratio {ratio_before:.4} before, {ratio_after:.4} after",
        end.0,
        end.0 - at_upgrade.0
    );
    assert_eq!(failed, 0);
    assert_eq!(refused, 0);
    assert!(
        ratio_after >= ratio_before - 0.001,
        "{ratio_before} → {ratio_after}"
    );
    // Nothing fetched again: the new process answered from the disk tier it was handed.
    assert_eq!(origin.count() as u64, KEYS);

    // The old process drained and exited.
    let mut gone = false;
    for _ in 0..200 {
        if !std::path::Path::new(&format!("/proc/{}", old.pid())).exists()
            || std::fs::read_to_string(format!("/proc/{}/stat", old.pid()))
                .is_ok_and(|s| s.contains(") Z "))
        {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the old process exits after draining");

    // The new process: same addresses, the old index read from the region summaries. Asked
    // once the old one is gone: both accept on the admin socket they share until the old one
    // stops, 200 ms after the upgrade, and a quick load can end within that (the full run once
    // read the old process's zero here).
    let s = stats(admin).await;
    assert_eq!(stat(&s, "disk_recovery_scanned_regions"), 0);
    assert_eq!(stat(&s, "disk_recovered_objects"), KEYS);
    let _ = Command::new("kill")
        .args(["-TERM", &new_pid.to_string()])
        .status();
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_binary_that_cannot_start_leaves_the_old_one_serving() {
    let origin = Origin::start(|_| Reply::ok("x").cc("max-age=3600")).await;
    let dir = temp_dir("upgrade-fails");
    let exe = dir.join("shellac");
    std::fs::copy(BIN, &exe).unwrap();
    let conf = dir.join("shellac.toml");
    std::fs::write(&conf, config(&dir, origin.addr)).unwrap();
    let mut cmd = Command::new(&exe);
    cmd.args(["serve", "--config", conf.to_str().unwrap()]);
    let old = Served::start(cmd);
    let mut conn = TcpStream::connect(old.proxy).await.unwrap();
    assert_eq!(get_on(&mut conn, "/a").await.unwrap().0, 200);

    // A "binary" that is not one.
    std::fs::write(
        dir.join("broken"),
        "#!/bin/sh\necho 'cannot start' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(
        dir.join("broken"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::rename(dir.join("broken"), &exe).unwrap();
    let out = Command::new(BIN)
        .args(["upgrade", "--admin", &old.admin.to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("upgrade failed, the running process serves on"),
        "{err}"
    );
    assert!(err.contains("did not start"), "{err}");

    // Still serving, on the same keep-alive connection and on new ones, disk tier included.
    assert_eq!(get_on(&mut conn, "/a").await.unwrap().0, 200);
    let mut fresh = TcpStream::connect(old.proxy).await.unwrap();
    assert_eq!(get_on(&mut fresh, "/b").await.unwrap().0, 200);
    let s = stats(old.admin).await;
    assert!(stat(&s, "n_object") >= 2);
    old.stop();
    std::fs::remove_dir_all(&dir).ok();
}
