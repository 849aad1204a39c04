//! Incident 1 at this machine's scale: fill Shellac (the real release binary) with many 4–16 KB
//! objects through the proxy while the memory tier evicts continuously, then restart it and
//! measure how fast the same key set hits again; report p50/p99 miss latency with and without
//! eviction, disk write rate and write amplification.
//!
//! ```sh
//! cargo build --release && cargo run --release --example disk_restart -- 50000
//! ```
//!
//! Everything runs on loopback ephemeral ports; every process started is stopped by PID.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

const CONCURRENCY: usize = 16;

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

struct Proc {
    child: Child,
    proxy: SocketAddr,
    admin: SocketAddr,
    /// From spawn to both listeners bound (includes disk recovery).
    ready_after: Duration,
}

impl Proc {
    fn start(bin: &Path, config: &Path) -> Proc {
        let started = Instant::now();
        let mut child = Command::new(bin)
            .args(["serve", "--config"])
            .arg(config)
            .env("SHELLAC_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .expect("start shellac");
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
            child,
            proxy: proxy.expect("proxy"),
            admin: admin.expect("admin"),
            ready_after: started.elapsed(),
        }
    }

    fn signal(&mut self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status();
        for _ in 0..600 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn stats(admin: SocketAddr) -> HashMap<String, u64> {
    let mut c = Client::open(admin).await;
    let (_, body) = c.get("/stats").await.expect("stats");
    serde_json::from_slice(&body).expect("stats JSON")
}

struct Client {
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
}

impl Client {
    async fn open(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        Client { sender }
    }

    /// (cache-status, body)
    async fn get(&mut self, path: &str) -> Option<(String, Bytes)> {
        let req = hyper::Request::get(path)
            .header("host", "bench.example")
            .body(Empty::new())
            .ok()?;
        self.sender.ready().await.ok()?;
        let resp = self.sender.send_request(req).await.ok()?;
        let status = resp
            .headers()
            .get("cache-status")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = resp.into_body().collect().await.ok()?.to_bytes();
        Some((status, body))
    }
}

/// One result per request: (completed at, since start; latency; was a hit).
type Sample = (Duration, Duration, bool);

/// Requests every path once, `CONCURRENCY` keep-alive connections in parallel.
async fn run(addr: SocketAddr, paths: Arc<Vec<String>>) -> (Vec<Sample>, Duration) {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENCY {
        let (paths, next) = (paths.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut client = Client::open(addr).await;
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = paths.get(i) else {
                    return out;
                };
                let t = Instant::now();
                let Some((status, body)) = client.get(path).await else {
                    return out;
                };
                assert_eq!(body.len(), size_of(path), "{path}");
                out.push((start.elapsed(), t.elapsed(), status.contains("hit")));
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("client task"));
    }
    all.sort_by_key(|s| s.0);
    (all, start.elapsed())
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

fn write_config(
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

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000);
    let bin = PathBuf::from(std::env::var("SHELLAC").unwrap_or("target/release/shellac".into()));
    let dir = std::env::temp_dir().join(format!("shellac-disk-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let origin = origin().await;
    let paths: Vec<String> = (0..n).map(|i| format!("/obj/{i}")).collect();
    let bytes: usize = paths.iter().map(|p| size_of(p)).sum();
    let mut shuffled = paths.clone();
    // Deterministic shuffle for the replay.
    shuffled.sort_by_key(|p| xxhash_rust::xxh3::xxh3_64(format!("r{p}").as_bytes()));
    let (paths, shuffled) = (Arc::new(paths), Arc::new(shuffled));
    println!(
        "objects: {n}, body bytes: {:.1} MiB",
        bytes as f64 / 1048576.0
    );
    let data_mib = bytes / (1 << 20);
    let disk_big = format!("{}MiB", (data_mib * 2).max(256).next_multiple_of(16));
    let disk_small = format!("{}MiB", (data_mib / 2).max(64).next_multiple_of(16));

    // A: no eviction (memory holds everything), no disk.
    let cfg = write_config(&dir, origin, "4GiB", None);
    let mut p = Proc::start(&bin, &cfg);
    let (a, a_took) = run(p.proxy, paths.clone()).await;
    p.signal("-TERM");
    println!(
        "| A fill, no eviction, no disk | {} req | {:.0} req/s | p50 {} ms | p99 {} ms |",
        a.len(),
        a.len() as f64 / a_took.as_secs_f64(),
        ms(percentile(&a, 0.5)),
        ms(percentile(&a, 0.99))
    );

    // B: memory 32 MiB (evicting throughout), disk holds everything; ends with kill -9.
    let cfg = write_config(&dir, origin, "32MiB", Some((&disk_big, "16MiB")));
    let mut p = Proc::start(&bin, &cfg);
    let (b, b_took) = run(p.proxy, paths.clone()).await;
    wait_flushed(p.admin).await;
    let s = stats(p.admin).await;
    println!(
        "| B fill, memory evicting, disk {disk_big} | {} req | {:.0} req/s | p50 {} ms | p99 {} ms | evicted {} | disk objects {} | written {:.1} MiB ({:.1} MiB/s) | WA {:.3} |",
        b.len(),
        b.len() as f64 / b_took.as_secs_f64(),
        ms(percentile(&b, 0.5)),
        ms(percentile(&b, 0.99)),
        s["n_lru_nuked"],
        s["n_object_disk"],
        s["disk_bytes_written"] as f64 / 1048576.0,
        s["disk_bytes_written"] as f64 / 1048576.0 / b_took.as_secs_f64(),
        s["disk_bytes_written"] as f64 / s["disk_bytes_admitted"].max(1) as f64
    );
    p.signal("-KILL");

    // C: restart after kill -9, replay the same keys (shuffled); then a clean stop.
    for (label, end) in [
        ("C restart after kill -9", "-TERM"),
        ("D restart after clean stop", "-TERM"),
    ] {
        let mut p = Proc::start(&bin, &cfg);
        let (c, c_took) = run(p.proxy, shuffled.clone()).await;
        let s = stats(p.admin).await;
        let hits = c.iter().filter(|s| s.2).count();
        let first = &c[..1000.min(c.len())];
        println!(
            "| {label} | ready after {} ms (recovery {} ms, {} objects) | first 1000: {:.1}% hits | all: {:.1}% hits | ≥95% (1000-window) at {} ms | replay p99 {} ms | {:.0} req/s |",
            p.ready_after.as_millis(),
            s["disk_recovery_ms"],
            s["disk_recovered_objects"],
            100.0 * first.iter().filter(|s| s.2).count() as f64 / first.len() as f64,
            100.0 * hits as f64 / c.len() as f64,
            warm_after(&c, p.ready_after).map_or("never".into(), |d| d.as_millis().to_string()),
            ms(percentile(&c, 0.99)),
            c.len() as f64 / c_took.as_secs_f64()
        );
        p.signal(end);
    }

    // E: disk smaller than the data: whole-region reclaim runs throughout the fill.
    let _ = std::fs::remove_file(dir.join("cache.dat"));
    let cfg = write_config(&dir, origin, "32MiB", Some((&disk_small, "16MiB")));
    let mut p = Proc::start(&bin, &cfg);
    let (e, e_took) = run(p.proxy, paths.clone()).await;
    wait_flushed(p.admin).await;
    let s = stats(p.admin).await;
    println!(
        "| E fill, memory evicting, disk {disk_small} reclaiming | {} req | {:.0} req/s | p50 {} ms | p99 {} ms | regions reclaimed {} | disk objects {} | written {:.1} MiB ({:.1} MiB/s) | WA {:.3} |",
        e.len(),
        e.len() as f64 / e_took.as_secs_f64(),
        ms(percentile(&e, 0.5)),
        ms(percentile(&e, 0.99)),
        s["disk_regions_reclaimed"],
        s["n_object_disk"],
        s["disk_bytes_written"] as f64 / 1048576.0,
        s["disk_bytes_written"] as f64 / 1048576.0 / e_took.as_secs_f64(),
        s["disk_bytes_written"] as f64 / s["disk_bytes_admitted"].max(1) as f64
    );
    p.signal("-TERM");
    let _ = std::fs::remove_dir_all(&dir);
}
