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

#[path = "disk_restart/pairs.rs"]
mod pairs;

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
// Processes: every server started is registered here and killed (with its descendants) by PID
// on drop, on Ctrl-C and on exit.
// ---------------------------------------------------------------------------------------------

static STARTED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// PIDs whose parent is `pid` (from /proc/*/stat), recursively, depth first.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(child) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces; parse after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
            out.extend(descendants(child));
        }
    }
    out
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: plain kill(2) on a PID this program started (or a child of one).
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// SIGKILL to `pid` and everything below it (nginx workers survive their master's SIGKILL).
fn kill_tree(pid: u32) {
    let kids = descendants(pid);
    kill(pid, libc::SIGKILL);
    for k in kids {
        kill(k, libc::SIGKILL);
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Shellac,
    Nginx,
}

struct Proc {
    kind: Kind,
    child: Child,
    proxy: SocketAddr,
    admin: Option<SocketAddr>,
    started: Instant,
    /// From spawn to accepting connections (Shellac: both listeners bound, after disk recovery).
    ready_after: Duration,
}

fn command(bin: &Path, pin: bool) -> Command {
    if pin {
        let mut c = Command::new("taskset");
        c.args(["-c", &PROXY_CPU.to_string()]).arg(bin);
        c
    } else {
        Command::new(bin)
    }
}

impl Proc {
    fn register(child: &Child) {
        STARTED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child.id());
    }

    fn shellac(bin: &Path, config: &Path, pin: bool) -> Proc {
        let started = Instant::now();
        let mut child = command(bin, pin)
            .args(["serve", "--config"])
            .arg(config)
            .env("SHELLAC_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .expect("start shellac");
        Proc::register(&child);
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let (mut proxy, mut admin) = (None, None);
        while proxy.is_none() || admin.is_none() {
            let line = rx
                .recv_timeout(Duration::from_secs(120))
                .expect("shellac logs its addresses");
            if let Some(a) = line.split("proxy listening on ").nth(1) {
                proxy = a.trim().parse().ok();
            }
            if let Some(a) = line.split("admin listening on ").nth(1) {
                admin = a.trim().parse().ok();
            }
        }
        Proc {
            kind: Kind::Shellac,
            child,
            proxy: proxy.expect("proxy"),
            admin,
            ready_after: started.elapsed(),
            started,
        }
    }

    fn nginx(bin: &Path, prefix: &Path, port: u16, pin: bool) -> Proc {
        let started = Instant::now();
        let child = command(bin, pin)
            .arg("-p")
            .arg(prefix)
            .arg("-e")
            .arg(prefix.join("error.log"))
            .arg("-c")
            .arg(prefix.join("nginx.conf"))
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        Proc::register(&child);
        let proxy: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let mut p = Proc {
            kind: Kind::Nginx,
            child,
            proxy,
            admin: None,
            started,
            ready_after: Duration::ZERO,
        };
        for _ in 0..4000 {
            if std::net::TcpStream::connect(proxy).is_ok() {
                p.ready_after = started.elapsed();
                return p;
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                let log = std::fs::read_to_string(prefix.join("error.log")).unwrap_or_default();
                panic!("nginx exited ({status}) at start:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("nginx did not listen on {proxy} within 20 s");
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process and its descendants' (write_bytes, cancelled_write_bytes) from /proc/<pid>/io.
    fn io(&self) -> (u64, u64) {
        let mut pids = vec![self.pid()];
        pids.extend(descendants(self.pid()));
        let mut sum = (0, 0);
        for pid in pids {
            let text = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
            for line in text.lines() {
                let mut it = line.split(':');
                let (Some(k), Some(v)) = (it.next(), it.next()) else {
                    continue;
                };
                let v: u64 = v.trim().parse().unwrap_or(0);
                match k {
                    "write_bytes" => sum.0 += v,
                    "cancelled_write_bytes" => sum.1 += v,
                    _ => {}
                }
            }
        }
        sum
    }

    /// Clean stop: SIGTERM for Shellac, SIGQUIT (graceful shutdown) for nginx; waits up to
    /// 60 s, then SIGKILLs what is left.
    fn stop(&mut self) {
        let sig = match self.kind {
            Kind::Shellac => libc::SIGTERM,
            Kind::Nginx => libc::SIGQUIT,
        };
        let kids = descendants(self.pid());
        kill(self.pid(), sig);
        for _ in 0..1200 {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.crash_with(kids);
    }

    /// `kill -9` of the server and every process below it.
    fn crash(&mut self) {
        let kids = descendants(self.pid());
        self.crash_with(kids);
    }

    fn crash_with(&mut self, mut kids: Vec<u32>) {
        kids.extend(descendants(self.pid()));
        kill_tree(self.pid());
        for &k in &kids {
            kill(k, libc::SIGKILL);
        }
        let _ = self.child.wait();
        // Orphaned workers die (and are reaped) asynchronously: wait until they are gone and
        // the port is closed, so the next start can bind it (at most 10 s).
        for _ in 0..200 {
            let alive = kids.iter().any(|k| {
                std::fs::read_to_string(format!("/proc/{k}/stat")).is_ok_and(|s| {
                    s.rsplit_once(')')
                        .and_then(|(_, r)| r.split_whitespace().next())
                        .is_some_and(|state| state != "Z")
                })
            });
            if !alive && std::net::TcpStream::connect(self.proxy).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            kill_tree(self.pid());
        }
        let _ = self.child.wait();
        STARTED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| *p != self.child.id());
    }
}

// ---------------------------------------------------------------------------------------------
// Load generator
// ---------------------------------------------------------------------------------------------

struct Client {
    addr: SocketAddr,
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
}

impl Client {
    async fn open(addr: SocketAddr) -> Option<Client> {
        let stream = TcpStream::connect(addr).await.ok()?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .ok()?;
        tokio::spawn(conn);
        Some(Client { addr, sender })
    }

    /// (was a hit, body) for one GET on this connection.
    async fn try_get(&mut self, path: &str) -> Option<(bool, Bytes)> {
        let req = hyper::Request::get(path)
            .header("host", "bench.example")
            .body(Empty::new())
            .ok()?;
        self.sender.ready().await.ok()?;
        let resp = self.sender.send_request(req).await.ok()?;
        let h = resp.headers();
        // Shellac: `Cache-Status: shellac; hit`; nginx: `X-Cache-Status: HIT`.
        let hit = h
            .get("cache-status")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("hit"))
            || h.get("x-cache-status").is_some_and(|v| v == "HIT");
        let body = resp.into_body().collect().await.ok()?.to_bytes();
        Some((hit, body))
    }

    /// One GET; on a failed connection, reconnects and tries once more.
    async fn get(&mut self, path: &str) -> Option<(bool, Bytes)> {
        if let Some(r) = self.try_get(path).await {
            return Some(r);
        }
        *self = Client::open(self.addr).await?;
        self.try_get(path).await
    }
}

async fn stats(admin: SocketAddr) -> HashMap<String, u64> {
    let mut c = Client::open(admin).await.expect("connect admin");
    let req = hyper::Request::get("/stats")
        .header("host", "admin")
        .body(Empty::new())
        .expect("request");
    let resp = c.sender.send_request(req).await.expect("stats");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    let all: HashMap<String, serde_json::Value> =
        serde_json::from_slice(&body).expect("stats JSON");
    // Counters are integers; anything else (ratios, nested objects) is left out.
    all.into_iter()
        .filter_map(|(k, v)| Some((k, v.as_u64()?)))
        .collect()
}

/// One result per request: (completed at, since start; latency; was a hit).
type Sample = (Duration, Duration, bool);

struct Run {
    samples: Vec<Sample>,
    took: Duration,
    errors: usize,
}

/// Requests every path once, `CONCURRENCY` keep-alive connections in parallel.
async fn run(addr: SocketAddr, paths: Arc<Vec<String>>) -> Run {
    let next = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENCY {
        let (paths, next, errors) = (paths.clone(), next.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let Some(mut client) = Client::open(addr).await else {
                errors.fetch_add(1, Ordering::Relaxed);
                return out;
            };
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = paths.get(i) else {
                    return out;
                };
                let t = Instant::now();
                match client.get(path).await {
                    Some((hit, body)) if body.len() == size_of(path) => {
                        out.push((start.elapsed(), t.elapsed(), hit));
                    }
                    Some(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {
                        // The connection could not be re-opened: this client stops.
                        errors.fetch_add(1, Ordering::Relaxed);
                        return out;
                    }
                }
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("client task"));
    }
    all.sort_by_key(|s| s.0);
    Run {
        samples: all,
        took: start.elapsed(),
        errors: errors.load(Ordering::Relaxed),
    }
}

fn percentile(samples: &[Sample], p: f64) -> Duration {
    let mut l: Vec<Duration> = samples.iter().map(|s| s.1).collect();
    l.sort();
    l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// Time from process start until a window of 1000 consecutive responses is ≥ 95% hits.
fn warm_after(samples: &[Sample], ready: Duration) -> Option<Duration> {
    let w = 1000.min(samples.len());
    if w == 0 {
        return None;
    }
    let mut hits = samples[..w].iter().filter(|s| s.2).count();
    if hits * 100 >= w * 95 {
        return Some(ready + samples[w - 1].0);
    }
    for i in w..samples.len() {
        hits += samples[i].2 as usize;
        hits -= samples[i - w].2 as usize;
        if hits * 100 >= w * 95 {
            return Some(ready + samples[i].0);
        }
    }
    None
}

/// Hit ratio (%) per second of the replay, first `n` seconds.
fn hits_per_second(samples: &[Sample], n: usize) -> String {
    let mut out = Vec::new();
    for s in 0..n {
        let (lo, hi) = (
            Duration::from_secs(s as u64),
            Duration::from_secs(s as u64 + 1),
        );
        let w: Vec<_> = samples.iter().filter(|x| x.0 >= lo && x.0 < hi).collect();
        if w.is_empty() {
            break;
        }
        let h = w.iter().filter(|x| x.2).count();
        out.push(format!("{:.1}", 100.0 * h as f64 / w.len() as f64));
    }
    out.join(" / ")
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn mib(b: u64) -> f64 {
    b as f64 / 1048576.0
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

// ---------------------------------------------------------------------------------------------
// nginx
// ---------------------------------------------------------------------------------------------

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// nginx as in bench/run.sh (one worker, `user www-data` as root, every path in `prefix`),
/// with `proxy_cache_path levels=1:2` and `max_size`.
fn write_nginx_config(prefix: &Path, origin: SocketAddr, port: u16, max_size_mib: u64) {
    // SAFETY: geteuid has no preconditions and touches no memory of ours.
    let user = if unsafe { libc::geteuid() } == 0 {
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        if passwd.lines().any(|l| l.starts_with("www-data:")) {
            "user www-data www-data;"
        } else {
            "user nobody nogroup;"
        }
    } else {
        ""
    };
    let p = prefix.display();
    let conf = format!(
        r#"{user}
worker_processes 1;
pid {p}/nginx.pid;
error_log {p}/error.log notice;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    client_body_temp_path {p}/client_body;
    proxy_temp_path       {p}/proxy;
    fastcgi_temp_path     {p}/fastcgi;
    uwsgi_temp_path       {p}/uwsgi;
    scgi_temp_path        {p}/scgi;

    # levels=1:2 as in incident 1; the zone holds ~8,000 keys per MiB; inactive long enough
    # that nothing ages out during the run; the cache manager evicts (LRU) above max_size.
    proxy_cache_path {p}/cache levels=1:2 keys_zone=bench:128m
                     max_size={max_size_mib}m inactive=7d use_temp_path=off;

    upstream origin {{
        server 127.0.0.1:{origin_port};
        keepalive 32;
    }}

    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            proxy_cache_valid 200 1d;
            add_header X-Cache-Status $upstream_cache_status always;
        }}
    }}
}}
"#,
        origin_port = origin.port()
    );
    std::fs::write(prefix.join("nginx.conf"), conf).expect("write nginx.conf");
}

/// (files, KiB allocated) of the nginx cache tree (`du`, outside any measured window).
fn cache_usage(dir: &Path) -> (u64, u64) {
    let mut files = 0;
    let mut kib = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                files += 1;
                kib += m.blocks() / 2;
            }
        }
    }
    (files, kib)
}

/// Watches for nginx's cache loader process: (appeared, exited) since spawn; waits at most
/// `limit` from now for it to exit.
fn watch_loader(p: &Proc, limit: Duration) -> (Option<Duration>, Option<Duration>) {
    let deadline = Instant::now() + limit;
    let mut seen: Option<(u32, Duration)> = None;
    loop {
        let loader = descendants(p.pid()).into_iter().find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.contains("cache loader"))
        });
        match (loader, seen) {
            (Some(pid), None) => seen = Some((pid, p.started.elapsed())),
            (None, Some((_, at))) => return (Some(at), Some(p.started.elapsed())),
            _ => {}
        }
        if Instant::now() >= deadline {
            return (seen.map(|s| s.1), None);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

async fn bench_nginx(ctx: &Ctx, bin: &Path, loader_wait: Duration) {
    let prefix = ctx.dir.join("nginx");
    std::fs::create_dir_all(&prefix).expect("nginx dir");
    std::fs::set_permissions(&prefix, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let data_mib = ctx.body_bytes / (1 << 20);
    let (big, small) = ((data_mib * 2).max(256), (data_mib / 2).max(64));
    let port = free_port();

    // N1: fill, max_size twice the data (nothing evicted): the no-eviction baseline.
    write_nginx_config(&prefix, ctx.origin, port, big);
    let mut p = Proc::nginx(bin, &prefix, port, ctx.pin);
    let f = measured_fill(&p, ctx.paths.clone(), &ctx.dir).await;
    let (files, kib) = cache_usage(&prefix.join("cache"));
    println!(
        "{} cache files {files}, {:.1} MiB allocated |",
        fill_row(
            &format!("nginx N1 fill, max_size {big}m (no eviction)"),
            &f,
            ctx.body_bytes
        ),
        kib as f64 / 1024.0
    );
    p.crash();

    // N2/N3: restart after kill -9 (master and workers), then after a clean stop (SIGQUIT).
    for label in [
        "nginx N2 restart after kill -9",
        "nginx N3 restart after clean stop",
    ] {
        let dropped = maybe_drop_caches();
        let mut p = Proc::nginx(bin, &prefix, port, ctx.pin);
        let r = run(p.proxy, ctx.shuffled.clone()).await;
        let row = replay_row(label, &p, &r, dropped);
        let (started, done) = if loader_wait.is_zero() {
            (None, None)
        } else {
            let wait = loader_wait;
            tokio::task::block_in_place(|| watch_loader(&p, wait))
        };
        println!(
            "{row} cache loader finished (process exited) {} s after spawn{} |",
            done.map_or(
                format!("not within the {} s wait", loader_wait.as_secs()),
                |d| { format!("{:.1}", d.as_secs_f64()) }
            ),
            if started.is_none() && !loader_wait.is_zero() {
                " (loader process never seen)"
            } else {
                ""
            },
        );
        p.stop();
    }
    let _ = std::fs::remove_dir_all(prefix.join("cache"));

    // N4: fill with max_size half the data: the cache manager evicts throughout.
    write_nginx_config(&prefix, ctx.origin, port, small);
    let mut p = Proc::nginx(bin, &prefix, port, ctx.pin);
    let f = measured_fill(&p, ctx.paths.clone(), &ctx.dir).await;
    let (files, kib) = cache_usage(&prefix.join("cache"));
    println!(
        "{} cache files {files}, {:.1} MiB allocated at the end |",
        fill_row(
            &format!("nginx N4 fill, max_size {small}m (cache manager evicting)"),
            &f,
            ctx.body_bytes
        ),
        kib as f64 / 1024.0
    );
    // Not a clean stop: a graceful one waits for the cache loader, still in its 60 s delay.
    p.crash();
    let _ = std::fs::remove_dir_all(&prefix);
}

fn find_nginx() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("NGINX") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"])
        .map(|d| Path::new(d).join("nginx"))
        .find(|p| p.is_file())
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
