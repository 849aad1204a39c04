//! Incident 1 at this machine's scale, Shellac and nginx side by side: fill each proxy with many
//! 4–16 KB objects through the proxy, with and without eviction, then restart it (after
//! `kill -9` and after a clean stop) and measure how fast the same key set hits again; report
//! p50/p99 miss latency during the fills, disk write volume per byte admitted (from
//! `/proc/<pid>/io` of the server's processes and from `/proc/diskstats`), and nginx's cache
//! loader walk.
//!
//! ```sh
//! cargo build --release && cargo run --release --example disk_restart -- 50000
//! ```
//!
//! One load generator (this program: 16 keep-alive HTTP/1.1 clients) and one origin (in this
//! process) for both servers. With 2+ CPUs this process pins itself to CPU 1 and runs the proxy
//! under test with `taskset -c 0` (`PIN=0` turns that off). Environment: `SHELLAC` (binary,
//! default `target/release/shellac`), `NGINX` (default: `nginx` from PATH or /usr/sbin;
//! missing → nginx skipped), `SERVERS` (`shellac,nginx`), `NGINX_LOADER_WAIT` (seconds to wait
//! for nginx's cache loader to finish after each restart, default 400; 0 = don't wait),
//! `LOAD_WAIT` (seconds to wait for the 1-minute load average to drop below 1.0 before
//! starting, default 120), `DROP_CACHES=1` (before each restart, `sync` and drop the page
//! cache, as after a reboot; needs root and slows everything else on the machine for a while),
//! `P99_PAIRS=k` (only fills A and B, `k` rounds, medians; with `SHELLAC_ALT=bin` a second
//! binary alternates with the first), `RESTART_PAIRS=k` (only fill B, then `k` restarts after
//! `kill -9` per binary on its data file, alternating with `SHELLAC_ALT`: see
//! `disk_restart/pairs.rs`).
//!
//! Everything runs on loopback ports; every process started is stopped by PID (also on
//! Ctrl-C or a panic); the temp dir is removed at the end.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

#[path = "disk_restart/client.rs"]
mod client;
#[path = "disk_restart/nginx.rs"]
mod nginx;
#[path = "disk_restart/pairs.rs"]
mod pairs;
#[path = "disk_restart/procs.rs"]
mod procs;

use client::*;
use nginx::*;
use procs::*;

const CONCURRENCY: usize = 16;
const PROXY_CPU: usize = 0;
const LOAD_CPU: usize = 1;

fn size_of(path: &str) -> usize {
    let h = xxhash_rust::xxh3::xxh3_64(path.as_bytes());
    4096 + (h % (12 * 1024 + 1)) as usize
}

async fn origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind origin");
    let addr = listener.local_addr().expect("origin addr");
    let blob = Bytes::from(vec![b'o'; 16 * 1024 + 1]);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let blob = blob.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let len = size_of(req.uri().path());
                    let body = blob.slice(..len);
                    async move {
                        let mut resp = hyper::Response::new(Full::new(body));
                        resp.headers_mut().insert(
                            "cache-control",
                            http::HeaderValue::from_static("max-age=86400"),
                        );
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

// ---------------------------------------------------------------------------------------------
// Machine: load average, disk statistics
// ---------------------------------------------------------------------------------------------

fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Sectors written (×512 bytes) to the block device holding `dir`, from /proc/diskstats.
fn device_written(dir: &Path) -> Option<u64> {
    let dev = std::fs::metadata(dir).ok()?.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() > 9 && f[0] == major.to_string() && f[1] == minor.to_string() {
            return f[9].parse::<u64>().ok().map(|s| s * 512);
        }
    }
    None
}

/// With `DROP_CACHES=1`, before each restart: `sync` and drop the page cache (as after a
/// reboot), so the restarted server reads its index and objects from the device.
fn maybe_drop_caches() -> &'static str {
    if std::env::var("DROP_CACHES").is_ok_and(|v| v == "1") {
        sync_all();
        if std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok() {
            return ", page cache dropped before start";
        }
        return ", DROP_CACHES failed (not root?)";
    }
    ""
}

fn sync_all() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

/// A fill measured for disk writes: the server's own (write_bytes − cancelled) and the device's
/// (all processes on the machine; `sync` before and after).
struct Fill {
    run: Run,
    proc_written: u64,
    proc_cancelled: u64,
    dev_written: Option<u64>,
    load: (f64, f64),
}

async fn measured_fill(p: &Proc, paths: Arc<Vec<String>>, dir: &Path) -> Fill {
    sync_all();
    let load0 = load1();
    let dev0 = device_written(dir);
    let io0 = p.io();
    let r = run(p.proxy, paths).await;
    if let Some(admin) = p.admin {
        wait_flushed(admin).await;
    } else {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let io1 = p.io();
    let load = (load0, load1());
    sync_all();
    let dev1 = device_written(dir);
    Fill {
        run: r,
        proc_written: io1.0.saturating_sub(io0.0),
        proc_cancelled: io1.1.saturating_sub(io0.1),
        dev_written: dev0.zip(dev1).map(|(a, b)| b.saturating_sub(a)),
        load,
    }
}

fn fill_row(label: &str, f: &Fill, body_bytes: u64) -> String {
    let r = &f.run;
    let per = |b: u64| b as f64 / body_bytes as f64;
    let net = f.proc_written.saturating_sub(f.proc_cancelled);
    format!(
        "| {label} | {} req, {} errors | {:.0} req/s | p50 {} ms | p99 {} ms | p99.9 {} ms | proc write_bytes {:.1} MiB − cancelled {:.1} MiB = {:.3}× body bytes ({:.1} MiB/s) | device {} | load {:.2}→{:.2} |",
        r.samples.len(),
        r.errors,
        r.samples.len() as f64 / r.took.as_secs_f64(),
        ms(percentile(&r.samples, 0.5)),
        ms(percentile(&r.samples, 0.99)),
        ms(percentile(&r.samples, 0.999)),
        mib(f.proc_written),
        mib(f.proc_cancelled),
        per(net),
        mib(net) / r.took.as_secs_f64(),
        f.dev_written.map_or("n/a".into(), |d| format!(
            "{:.1} MiB = {:.3}× body bytes",
            mib(d),
            per(d)
        )),
        f.load.0,
        f.load.1,
    )
}

fn replay_row(label: &str, p: &Proc, r: &Run, extra: &str) -> String {
    let c = &r.samples;
    let hits = c.iter().filter(|s| s.2).count();
    let first = &c[..1000.min(c.len())];
    format!(
        "| {label} | ready after {} ms{extra} | first 1000: {:.1}% hits | all: {:.1}% hits ({} req, {} errors) | ≥95% (1000-window) at {} ms after spawn | hits/s in seconds 1..: {} | replay p50 {} ms, p99 {} ms | {:.0} req/s | load {:.2} |",
        p.ready_after.as_millis(),
        100.0 * first.iter().filter(|s| s.2).count() as f64 / first.len().max(1) as f64,
        100.0 * hits as f64 / c.len().max(1) as f64,
        c.len(),
        r.errors,
        warm_after(c, p.ready_after).map_or("never".into(), |d| d.as_millis().to_string()),
        hits_per_second(c, 5),
        ms(percentile(c, 0.5)),
        ms(percentile(c, 0.99)),
        c.len() as f64 / r.took.as_secs_f64(),
        load1(),
    )
}

// ---------------------------------------------------------------------------------------------
// Shellac
// ---------------------------------------------------------------------------------------------

fn write_shellac_config(
    dir: &Path,
    origin: SocketAddr,
    memory: &str,
    disk: Option<(&str, &str)>,
) -> PathBuf {
    let mut text = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n[cache]\nmemory_size = \"{memory}\"\nmax_object_size = \"1MiB\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
        origin.port()
    );
    if let Some((size, region)) = disk {
        text.push_str(&format!(
            "\n[storage.disk]\npath = \"{}\"\nsize = \"{size}\"\nregion_size = \"{region}\"\nadmission = \"always\"\n",
            dir.join("cache.dat").display()
        ));
    }
    let path = dir.join("shellac.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

async fn wait_flushed(admin: SocketAddr) {
    let mut last = u64::MAX;
    for _ in 0..600 {
        let now = stats(admin).await["disk_bytes_written"];
        if now == last {
            return;
        }
        last = now;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Ctx {
    dir: PathBuf,
    origin: SocketAddr,
    paths: Arc<Vec<String>>,
    shuffled: Arc<Vec<String>>,
    body_bytes: u64,
    pin: bool,
}

/// `P99_PAIRS=k`: only the p99 question. Runs fill A (no eviction) and fill B (memory
/// evicting, disk written) back to back, `k` times, for each binary (`SHELLAC`, and
/// `SHELLAC_ALT` if set, alternating), and prints the medians. Nothing else is run.
async fn p99_pairs(ctx: &Ctx, bins: &[PathBuf], k: usize) {
    let data_mib = ctx.body_bytes / (1 << 20);
    let disk_big = format!("{}MiB", (data_mib * 2).max(256).next_multiple_of(16));
    let mem_all = format!("{}MiB", (data_mib * 2).max(4096));
    let dir = &ctx.dir;
    let mut results: Vec<Vec<(f64, f64)>> = vec![Vec::new(); bins.len()];
    for round in 1..=k {
        for (i, bin) in bins.iter().enumerate() {
            let mut p99 = [0.0; 2];
            for (j, (memory, disk)) in [
                (mem_all.as_str(), None),
                ("32MiB", Some((disk_big.as_str(), "16MiB"))),
            ]
            .into_iter()
            .enumerate()
            {
                let _ = std::fs::remove_file(dir.join("cache.dat"));
                let cfg = write_shellac_config(dir, ctx.origin, memory, disk);
                let mut p = Proc::shellac(bin, &cfg, ctx.pin);
                let f = measured_fill(&p, ctx.paths.clone(), dir).await;
                p.stop();
                p99[j] = percentile(&f.run.samples, 0.99).as_secs_f64() * 1000.0;
                println!(
                    "{}",
                    fill_row(
                        &format!(
                            "round {round} {} {}",
                            bin.display(),
                            ["A (no eviction)", "B (evicting, disk)"][j]
                        ),
                        &f,
                        ctx.body_bytes
                    )
                );
            }
            results[i].push((p99[0], p99[1]));
        }
    }
    let _ = std::fs::remove_file(dir.join("cache.dat"));
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    for (bin, r) in bins.iter().zip(results) {
        println!(
            "| {} | {k} rounds | median p99 A {:.2} ms | median p99 B {:.2} ms | median of B/A per round {:.2}× | per round B/A: {} |",
            bin.display(),
            median(r.iter().map(|x| x.0).collect()),
            median(r.iter().map(|x| x.1).collect()),
            median(r.iter().map(|x| x.1 / x.0).collect()),
            r.iter()
                .map(|x| format!("{:.2}", x.1 / x.0))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

async fn bench_shellac(ctx: &Ctx, bin: &Path) {
    let data_mib = ctx.body_bytes / (1 << 20);
    let disk_big = format!("{}MiB", (data_mib * 2).max(256).next_multiple_of(16));
    let disk_small = format!("{}MiB", (data_mib / 2).max(64).next_multiple_of(16));
    let mem_all = format!("{}MiB", (data_mib * 2).max(4096));
    let dir = &ctx.dir;

    // A: no eviction (memory holds everything), no disk.
    let cfg = write_shellac_config(dir, ctx.origin, &mem_all, None);
    let mut p = Proc::shellac(bin, &cfg, ctx.pin);
    let a = measured_fill(&p, ctx.paths.clone(), dir).await;
    p.stop();
    println!(
        "{}",
        fill_row(
            &format!("shellac A fill, memory {mem_all}, no eviction, no disk"),
            &a,
            ctx.body_bytes
        )
    );

    // B: memory 32 MiB (evicting throughout), disk holds everything; ends with kill -9.
    let cfg = write_shellac_config(dir, ctx.origin, "32MiB", Some((&disk_big, "16MiB")));
    let mut p = Proc::shellac(bin, &cfg, ctx.pin);
    let b = measured_fill(&p, ctx.paths.clone(), dir).await;
    let s = stats(p.admin.expect("admin")).await;
    println!(
        "{} evicted {} | disk objects {} | disk_bytes_written {:.1} MiB | WA (written/admitted) {:.3} | disk_reject {} |",
        fill_row(
            &format!("shellac B fill, memory 32 MiB evicting, disk {disk_big}"),
            &b,
            ctx.body_bytes
        ),
        s["n_lru_nuked"],
        s["n_object_disk"],
        mib(s["disk_bytes_written"]),
        s["disk_bytes_written"] as f64 / s["disk_bytes_admitted"].max(1) as f64,
        s["disk_reject"],
    );
    p.crash();

    // C/D: restart after kill -9, replay the same keys (shuffled); then after a clean stop.
    for label in [
        "shellac C restart after kill -9",
        "shellac D restart after clean stop",
    ] {
        let dropped = maybe_drop_caches();
        let mut p = Proc::shellac(bin, &cfg, ctx.pin);
        let r = run(p.proxy, ctx.shuffled.clone()).await;
        let s = stats(p.admin.expect("admin")).await;
        let extra = format!(
            " (recovery {} ms, {} objects{dropped})",
            s["disk_recovery_ms"], s["disk_recovered_objects"]
        );
        println!("{}", replay_row(label, &p, &r, &extra));
        p.stop();
    }

    // E: disk smaller than the data: whole-region reclaim runs throughout the fill.
    let _ = std::fs::remove_file(dir.join("cache.dat"));
    let cfg = write_shellac_config(dir, ctx.origin, "32MiB", Some((&disk_small, "16MiB")));
    let mut p = Proc::shellac(bin, &cfg, ctx.pin);
    let e = measured_fill(&p, ctx.paths.clone(), dir).await;
    let s = stats(p.admin.expect("admin")).await;
    println!(
        "{} regions reclaimed {} | disk objects {} | disk_bytes_written {:.1} MiB | WA (written/admitted) {:.3} | disk_reject {} |",
        fill_row(
            &format!("shellac E fill, memory 32 MiB evicting, disk {disk_small} reclaiming"),
            &e,
            ctx.body_bytes
        ),
        s["disk_regions_reclaimed"],
        s["n_object_disk"],
        mib(s["disk_bytes_written"]),
        s["disk_bytes_written"] as f64 / s["disk_bytes_admitted"].max(1) as f64,
        s["disk_reject"],
    );
    p.stop();
    let _ = std::fs::remove_file(dir.join("cache.dat"));
}

/// Pins the calling thread (and every thread it creates later) to `cpu`.
fn pin_self(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays in bounds for cpu < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn env_secs(name: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

/// Removes the temp dir when dropped (also when a phase panics).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pin = std::env::var("PIN").map_or(cpus >= 2, |v| v != "0") && pin_self(LOAD_CPU);
    // Built after pinning: every runtime thread (clients, origin) stays on LOAD_CPU.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(bench(n, pin, cpus));
    rt.shutdown_timeout(Duration::from_secs(5));
}

async fn bench(n: usize, pin: bool, cpus: usize) {
    let shellac =
        PathBuf::from(std::env::var("SHELLAC").unwrap_or("target/release/shellac".into()));
    let servers = std::env::var("SERVERS").unwrap_or("shellac,nginx".into());
    let nginx = if servers.contains("nginx") {
        find_nginx()
    } else {
        None
    };
    let dir = std::env::temp_dir().join(format!("shellac-disk-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let _cleanup = TempDir(dir.clone());
    // nginx workers (www-data) must traverse it.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    // Ctrl-C / SIGTERM: stop every process started, remove the temp dir.
    {
        let dir = dir.clone();
        tokio::spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("signal");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            for pid in STARTED.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                kill_tree(*pid);
            }
            let _ = std::fs::remove_dir_all(&dir);
            eprintln!("interrupted: stopped every server started");
            std::process::exit(130);
        });
    }

    let load_wait = env_secs("LOAD_WAIT", 120);
    let waited = Instant::now();
    while load1() >= 1.0 && waited.elapsed() < load_wait {
        tokio::time::sleep(Duration::from_secs(5)).await;
    }

    let origin = origin().await;
    let paths: Vec<String> = (0..n).map(|i| format!("/obj/{i}")).collect();
    let body_bytes: u64 = paths.iter().map(|p| size_of(p) as u64).sum();
    let mut shuffled = paths.clone();
    // Deterministic shuffle for the replay.
    shuffled.sort_by_key(|p| xxhash_rust::xxh3::xxh3_64(format!("r{p}").as_bytes()));
    let ctx = Ctx {
        dir: dir.clone(),
        origin,
        paths: Arc::new(paths),
        shuffled: Arc::new(shuffled),
        body_bytes,
        pin,
    };

    let nginx_version = nginx.as_ref().map(|b| {
        Command::new(b)
            .arg("-v")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string())
            .unwrap_or_default()
    });
    println!(
        "objects: {n}, body bytes: {:.1} MiB | cpus {} | pinning: {} | load average (1 min) {:.2} after waiting {} s | temp dir {} | nginx: {}",
        mib(body_bytes),
        cpus,
        if pin {
            format!("proxy on CPU {PROXY_CPU}, load generator + origin on CPU {LOAD_CPU}")
        } else {
            "off".into()
        },
        load1(),
        waited.elapsed().as_secs(),
        dir.display(),
        nginx_version.unwrap_or_else(|| if servers.contains("nginx") {
            "not found (apt-get install -y nginx, or NGINX=path): skipped".into()
        } else {
            "not selected".into()
        }),
    );

    if let Some(k) = std::env::var("P99_PAIRS").ok().and_then(|v| v.parse().ok()) {
        let mut bins = vec![shellac];
        bins.extend(std::env::var("SHELLAC_ALT").ok().map(PathBuf::from));
        p99_pairs(&ctx, &bins, k).await;
        return;
    }
    if let Some(k) = std::env::var("RESTART_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        let mut bins = vec![shellac];
        bins.extend(std::env::var("SHELLAC_ALT").ok().map(PathBuf::from));
        pairs::restart_pairs(&ctx, &bins, k).await;
        return;
    }
    if servers.contains("shellac") {
        bench_shellac(&ctx, &shellac).await;
    }
    if let Some(bin) = &nginx {
        bench_nginx(&ctx, bin, env_secs("NGINX_LOADER_WAIT", 400)).await;
    }
}
