//! Load shapes for `bench/fleet.sh` (issue 22): three Shellac nodes sharing a Redis Cluster.
//!
//! ```text
//! fleet_load storm    NODES PREFIX N CONNS        # each key PREFIXi asked of every node at once
//! fleet_load hits     FILL READ PREFIX N          # N keys fetched on FILL, then read once on READ
//! fleet_load purge    NODES ADMINS PREFIX M       # M purges, each timed until no node has it
//! fleet_load failover FILL NODES PREFIX N SECS PID KILL_MS   # shared reads; SIGKILL PID meanwhile
//! ```
//! NODES / ADMINS are comma-separated `host:port` lists. Results are `KEY value` lines (times
//! in ms). Every mode stops by itself (N requests, SECS, or a 10 s I/O timeout per request).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const IO_TIMEOUT: Duration = Duration::from_secs(10);

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: fleet_load storm|hits|purge|failover ... (see bench/fleet_load.rs)";
    let arg = |i: usize| -> Result<String> { Ok(args.get(i).ok_or(usage)?.clone()) };
    let num = |i: usize| -> Result<u64> { Ok(arg(i)?.parse()?) };
    let addrs = |i: usize| -> Result<Vec<SocketAddr>> {
        arg(i)?
            .split(',')
            .map(|a| a.parse().map_err(Into::into))
            .collect()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match arg(0)?.as_str() {
        "storm" => rt.block_on(storm(addrs(1)?, arg(2)?, num(3)?, num(4)?)),
        "hits" => rt.block_on(hits(addrs(1)?[0], addrs(2)?[0], arg(3)?, num(4)?)),
        "purge" => rt.block_on(purge(addrs(1)?, addrs(2)?, arg(3)?, num(4)?)),
        "failover" => rt.block_on(failover(
            addrs(1)?[0],
            addrs(2)?,
            arg(3)?,
            num(4)?,
            (num(5)?, num(6)? as u32, num(7)?),
        )),
        _ => Err(usage.into()),
    }
}

/// What one response said.
struct Answer {
    status: u16,
    cache_status: String,
}

/// One keep-alive connection.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Result<Conn> {
        let stream = tokio::time::timeout(IO_TIMEOUT, TcpStream::connect(addr)).await??;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(16 * 1024),
        })
    }

    async fn request(&mut self, method: &str, path: &str, host: &str) -> Result<Answer> {
        self.send(method, path, host).await?;
        tokio::time::timeout(IO_TIMEOUT, self.read()).await?
    }

    async fn send(&mut self, method: &str, path: &str, host: &str) -> Result<()> {
        let req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n\r\n");
        self.stream.write_all(req.as_bytes()).await?;
        Ok(())
    }

    async fn read(&mut self) -> Result<Answer> {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).to_string();
                let status: u16 = head.get(9..12).ok_or("short status line")?.parse()?;
                let mut len = 0usize;
                let mut cache_status = String::new();
                for line in head.lines().skip(1) {
                    let Some((name, value)) = line.split_once(':') else {
                        continue;
                    };
                    match name.to_ascii_lowercase().as_str() {
                        "content-length" => len = value.trim().parse()?,
                        "cache-status" => cache_status = value.trim().to_string(),
                        "transfer-encoding" => return Err("chunked answers not expected".into()),
                        _ => {}
                    }
                }
                while self.buf.len() < end + 4 + len {
                    self.fill().await?;
                }
                self.buf.drain(..end + 4 + len);
                return Ok(Answer {
                    status,
                    cache_status,
                });
            }
            self.fill().await?;
        }
    }

    async fn fill(&mut self) -> Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            return Err("connection closed".into());
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Percentiles (ms) of durations.
fn report(name: &str, mut d: Vec<Duration>) {
    if d.is_empty() {
        println!("{name}_count 0");
        return;
    }
    d.sort();
    let at = |q: f64| d[((d.len() as f64 * q) as usize).min(d.len() - 1)].as_secs_f64() * 1e3;
    println!("{name}_count {}", d.len());
    println!("{name}_p50_ms {:.3}", at(0.50));
    println!("{name}_p90_ms {:.3}", at(0.90));
    println!("{name}_p99_ms {:.3}", at(0.99));
    println!("{name}_max_ms {:.3}", d[d.len() - 1].as_secs_f64() * 1e3);
}

/// Each key asked of every node at the same moment, CONNS keys at a time.
async fn storm(nodes: Vec<SocketAddr>, prefix: String, n: u64, conns: u64) -> Result<()> {
    let next = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (next, errors, nodes, prefix) =
            (next.clone(), errors.clone(), nodes.clone(), prefix.clone());
        tasks.push(tokio::spawn(async move {
            let mut conns = Vec::new();
            for a in &nodes {
                conns.push(Conn::open(*a).await?);
            }
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, Box<dyn std::error::Error + Send + Sync>>(());
                }
                let path = format!("{prefix}{i}");
                let answers = futures_join(&mut conns, &path).await;
                for a in answers {
                    if !matches!(a, Ok(ref a) if a.status == 200) {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    println!("storm_keys {n}");
    println!("storm_requests {}", n * nodes.len() as u64);
    println!("storm_errors {}", errors.load(Ordering::Relaxed));
    println!("storm_seconds {:.2}", started.elapsed().as_secs_f64());
    Ok(())
}

/// Sends `path` on every connection at once and waits for all the answers.
async fn futures_join(conns: &mut [Conn], path: &str) -> Vec<Result<Answer>> {
    let mut out = Vec::new();
    // Every request written first, the answers read after: they reach the nodes together.
    let mut sent = Vec::new();
    for c in conns.iter_mut() {
        sent.push(c.send("GET", path, "bench.test").await);
    }
    for (c, s) in conns.iter_mut().zip(sent) {
        out.push(match s {
            Ok(()) => tokio::time::timeout(IO_TIMEOUT, c.read())
                .await
                .unwrap_or_else(|_| Err("timeout".into())),
            Err(e) => Err(e),
        });
    }
    out
}

/// Fills N keys through one node, then reads each once on another: shared-tier hits.
async fn hits(fill: SocketAddr, read: SocketAddr, prefix: String, n: u64) -> Result<()> {
    fill_keys(fill, &prefix, n).await?;
    let mut c = Conn::open(read).await?;
    let (mut times, mut other) = (Vec::new(), 0);
    for i in 0..n {
        let t = Instant::now();
        let a = c
            .request("GET", &format!("{prefix}{i}"), "bench.test")
            .await?;
        let d = t.elapsed();
        if a.status == 200 && a.cache_status.contains("detail=shared") {
            times.push(d);
        } else {
            other += 1;
        }
    }
    // The second half alone: the fill's background writes are long over by then.
    let later = times[times.len() / 2..].to_vec();
    report("shared_hit", times);
    report("shared_hit_second_half", later);
    println!("not_shared_hits {other}");
    Ok(())
}

/// GETs PREFIX0..N on `node` over 8 connections, then waits a second for the background
/// writes to the shared tier.
async fn fill_keys(node: SocketAddr, prefix: &str, n: u64) -> Result<()> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (next, prefix) = (next.clone(), prefix.to_string());
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::open(node).await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, Box<dyn std::error::Error + Send + Sync>>(());
                }
                c.request("GET", &format!("{prefix}{i}"), "bench.test")
                    .await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(())
}

/// M purges, each sent to one node in turn: the time until its answer, and until no node's
/// `GET /cache` (local tiers and shared tier) finds the URL.
async fn purge(
    nodes: Vec<SocketAddr>,
    admins: Vec<SocketAddr>,
    prefix: String,
    m: u64,
) -> Result<()> {
    let mut conns = Vec::new();
    for a in &nodes {
        conns.push(Conn::open(*a).await?);
    }
    let mut admin = Vec::new();
    for a in &admins {
        admin.push(Conn::open(*a).await?);
    }
    let (mut answered, mut visible) = (Vec::new(), Vec::new());
    for i in 0..m {
        let path = format!("{prefix}{i}");
        for c in conns.iter_mut() {
            c.request("GET", &path, "bench.test").await?;
        }
        let t = Instant::now();
        let n = (i as usize) % conns.len();
        let a = conns[n].request("PURGE", &path, "bench.test").await?;
        if a.status != 200 {
            return Err(format!("PURGE {path}: {}", a.status).into());
        }
        answered.push(t.elapsed());
        let url = format!("/cache?url={path}&host=bench.test");
        let limit = Instant::now() + Duration::from_secs(5);
        for c in admin.iter_mut() {
            while c.request("GET", &url, "admin").await?.status != 404 {
                if Instant::now() > limit {
                    return Err(format!("{path} still cached 5 s after its purge").into());
                }
                tokio::time::sleep(Duration::from_micros(500)).await;
            }
        }
        visible.push(t.elapsed());
    }
    report("purge_answered", answered);
    report("purge_visible_everywhere", visible);
    Ok(())
}

/// Keys filled through `fill`, then read from `nodes`, each key once (a local miss the
/// shared tier answers), for SECS or until the keys run out; KILL_MS after the start the
/// process PID gets SIGKILL (a Redis master).
async fn failover(
    fill: SocketAddr,
    nodes: Vec<SocketAddr>,
    prefix: String,
    n: u64,
    (secs, pid, kill_ms): (u64, u32, u64),
) -> Result<()> {
    fill_keys(fill, &prefix, n).await?;
    let start = Instant::now();
    let stop = start + Duration::from_secs(secs);
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..8u64 {
        let (next, prefix, addr) = (
            next.clone(),
            prefix.clone(),
            nodes[(w as usize) % nodes.len()],
        );
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::open(addr).await?;
            let mut seen = Vec::new();
            let mut errors = 0u64;
            while Instant::now() < stop {
                // Each key once: every read is a local miss that the shared tier answers.
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let t = Instant::now();
                match c
                    .request("GET", &format!("{prefix}{i}"), "bench.test")
                    .await
                {
                    Ok(a) if a.status == 200 => seen.push((t - start, t.elapsed())),
                    _ => {
                        errors += 1;
                        c = Conn::open(addr).await?;
                    }
                }
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((seen, errors))
        }));
    }
    tokio::time::sleep(Duration::from_millis(kill_ms)).await;
    let killed = start.elapsed();
    std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()?;
    let (mut all, mut errors) = (Vec::new(), 0);
    for t in tasks {
        let (seen, e) = t.await??;
        all.extend(seen);
        errors += e;
    }
    let window =
        |(at, _): &(Duration, Duration)| *at >= killed && *at < killed + Duration::from_secs(5);
    let during: Vec<Duration> = all.iter().filter(|x| window(x)).map(|(_, d)| *d).collect();
    println!("failover_requests {}", all.len());
    println!("failover_errors {errors}");
    report("failover_all", all.iter().map(|(_, d)| *d).collect());
    report("failover_5s_after_kill", during);
    Ok(())
}
