//! The load generator: keep-alive HTTP/1.1 clients, the replay of a key list, and what is computed
//! from its samples (percentiles, the ≥ 95% window, hits per second).

use super::*;

// ---------------------------------------------------------------------------------------------
// Load generator
// ---------------------------------------------------------------------------------------------

pub(super) struct Client {
    pub(super) addr: SocketAddr,
    pub(super) sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
}

impl Client {
    pub(super) async fn open(addr: SocketAddr) -> Option<Client> {
        let stream = TcpStream::connect(addr).await.ok()?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .ok()?;
        tokio::spawn(conn);
        Some(Client { addr, sender })
    }

    /// (was a hit, body) for one GET on this connection.
    pub(super) async fn try_get(&mut self, path: &str) -> Option<(bool, Bytes)> {
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
    pub(super) async fn get(&mut self, path: &str) -> Option<(bool, Bytes)> {
        if let Some(r) = self.try_get(path).await {
            return Some(r);
        }
        *self = Client::open(self.addr).await?;
        self.try_get(path).await
    }
}

pub(super) async fn stats(admin: SocketAddr) -> HashMap<String, u64> {
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
pub(super) type Sample = (Duration, Duration, bool);

pub(super) struct Run {
    pub(super) samples: Vec<Sample>,
    pub(super) took: Duration,
    pub(super) errors: usize,
}

/// Requests every path once, `CONCURRENCY` keep-alive connections in parallel.
pub(super) async fn run(addr: SocketAddr, paths: Arc<Vec<String>>) -> Run {
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

pub(super) fn percentile(samples: &[Sample], p: f64) -> Duration {
    let mut l: Vec<Duration> = samples.iter().map(|s| s.1).collect();
    l.sort();
    l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// Time from process start until a window of 1000 consecutive responses is ≥ 95% hits.
pub(super) fn warm_after(samples: &[Sample], ready: Duration) -> Option<Duration> {
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
pub(super) fn hits_per_second(samples: &[Sample], n: usize) -> String {
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

pub(super) fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

pub(super) fn mib(b: u64) -> f64 {
    b as f64 / 1048576.0
}
