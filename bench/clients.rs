//! Load shapes wrk cannot make, for `bench/run.sh` (issue 8): an exact number of distinct keys,
//! a burst of simultaneous requests for one cold key, and thousands of idle keep-alive
//! connections. Plain HTTP/1.1 over tokio sockets, one request in flight per connection.
//!
//! ```text
//! clients unique ADDR PREFIX N CONNS     # GET PREFIX0 .. PREFIX{N-1}, each once, over CONNS
//! clients burst  ADDR PATH N             # N connections, then all send GET PATH at once
//! clients idle   ADDR PATH N SECONDS     # N connections, one GET each, then held idle
//! ```
//! Results are printed as `KEY value` lines (times in ms) for the script to parse. Every mode
//! stops by itself: after N requests, or after SECONDS (idle), or at a 60 s I/O timeout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Barrier;

const IO_TIMEOUT: Duration = Duration::from_secs(60);

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: clients unique ADDR PREFIX N CONNS | burst ADDR PATH N | idle ADDR PATH N SECONDS";
    let mode = args.first().ok_or(usage)?.clone();
    let addr: SocketAddr = args.get(1).ok_or(usage)?.parse()?;
    let num = |i: usize| -> Result<u64> { Ok(args.get(i).ok_or(usage)?.parse()?) };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match mode.as_str() {
        "unique" => rt.block_on(unique(
            addr,
            args.get(2).ok_or(usage)?.clone(),
            num(3)?,
            num(4)?,
        )),
        "burst" => rt.block_on(burst(addr, args.get(2).ok_or(usage)?.clone(), num(3)?)),
        "idle" => rt.block_on(idle(
            addr,
            args.get(2).ok_or(usage)?.clone(),
            num(3)?,
            num(4)?,
        )),
        _ => Err(usage.into()),
    }
}

/// One keep-alive client connection with a read buffer.
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

    async fn send(&mut self, path: &str) -> Result<()> {
        let req = format!("GET {path} HTTP/1.1\r\nHost: bench.test\r\n\r\n");
        self.stream.write_all(req.as_bytes()).await?;
        Ok(())
    }

    /// Reads one response; returns its status. Bodies are framed by Content-Length or chunked.
    async fn response(&mut self) -> Result<u16> {
        tokio::time::timeout(IO_TIMEOUT, self.read_response()).await?
    }

    async fn read_response(&mut self) -> Result<u16> {
        let head_end = loop {
            if let Some(i) = memchr::memmem::find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            self.fill().await?;
        };
        let head = std::str::from_utf8(&self.buf[..head_end])?.to_ascii_lowercase();
        let status: u16 = head.get(9..12).ok_or("short status line")?.parse()?;
        let field = |name: &str| {
            head.lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
        };
        self.buf.drain(..head_end);
        if let Some(len) = field("content-length:") {
            let len: usize = len.parse()?;
            while self.buf.len() < len {
                self.fill().await?;
            }
            self.buf.drain(..len);
        } else if field("transfer-encoding:").is_some_and(|te| te.contains("chunked")) {
            loop {
                let line_end = loop {
                    if let Some(i) = memchr::memmem::find(&self.buf, b"\r\n") {
                        break i;
                    }
                    self.fill().await?;
                };
                let size_text = std::str::from_utf8(&self.buf[..line_end])?;
                let size =
                    usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)?;
                // chunk line + data + CRLF (the last chunk: "0\r\n\r\n", no trailers expected)
                let need = line_end + 2 + size + 2;
                while self.buf.len() < need {
                    self.fill().await?;
                }
                self.buf.drain(..need);
                if size == 0 {
                    break;
                }
            }
        } else if status != 304 && status != 204 {
            return Err("response without Content-Length or chunked framing".into());
        }
        Ok(status)
    }

    async fn fill(&mut self) -> Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            return Err("connection closed by server".into());
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}

fn pctl(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1000.0
}

fn report_latencies(mut us: Vec<u64>) {
    us.sort_unstable();
    println!("P50_MS {:.3}", pctl(&us, 50.0));
    println!("P99_MS {:.3}", pctl(&us, 99.0));
    println!("P999_MS {:.3}", pctl(&us, 99.9));
    println!("MAX_MS {:.3}", pctl(&us, 100.0));
}

/// N distinct keys, each requested once, over `conns` keep-alive connections.
async fn unique(addr: SocketAddr, prefix: String, n: u64, conns: u64) -> Result<()> {
    let next = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conns.max(1) {
        let (next, errors, prefix) = (next.clone(), errors.clone(), prefix.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut conn: Option<Conn> = None;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let path = format!("{prefix}{i}");
                let t = Instant::now();
                let ok = async {
                    if conn.is_none() {
                        conn = Some(Conn::open(addr).await?);
                    }
                    let c = conn.as_mut().ok_or("no connection")?;
                    c.send(&path).await?;
                    c.response().await
                }
                .await;
                match ok {
                    Ok(200) => lat.push(t.elapsed().as_micros() as u64),
                    Ok(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        conn = None; // reconnect for the next key
                    }
                }
            }
            lat
        }));
    }
    let mut all = Vec::with_capacity(n as usize);
    for t in tasks {
        all.extend(t.await?);
    }
    let secs = started.elapsed().as_secs_f64();
    println!("REQUESTS {n}");
    println!("ERRORS {}", errors.load(Ordering::Relaxed));
    println!("SECONDS {secs:.3}");
    println!("RPS {:.0}", n as f64 / secs);
    report_latencies(all);
    Ok(())
}

/// N connections opened first; then every one sends `GET path` at the same moment.
async fn burst(addr: SocketAddr, path: String, n: u64) -> Result<()> {
    let mut conns = Vec::with_capacity(n as usize);
    for _ in 0..n {
        conns.push(Conn::open(addr).await?);
    }
    let barrier = Arc::new(Barrier::new(n as usize + 1));
    let mut tasks = Vec::new();
    for mut c in conns {
        let (barrier, path) = (barrier.clone(), path.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let t = Instant::now();
            let status = async {
                c.send(&path).await?;
                c.response().await
            }
            .await;
            (status.ok(), t.elapsed().as_micros() as u64)
        }));
    }
    let started = Instant::now();
    barrier.wait().await;
    let (mut times, mut bad) = (Vec::new(), 0u64);
    for t in tasks {
        let (status, us) = t.await?;
        if status != Some(200) {
            bad += 1;
        }
        times.push(us);
    }
    println!("REQUESTS {n}");
    println!("ERRORS {bad}");
    println!(
        "LAST_DONE_MS {:.3}",
        started.elapsed().as_secs_f64() * 1000.0
    );
    times.sort_unstable();
    println!("FIRST_MS {:.3}", pctl(&times, 0.0));
    report_latencies(times);
    Ok(())
}

/// N connections, one `GET path` each, then held idle for `secs`; prints `IDLE_READY n` as
/// soon as all are open so the script can measure while they are held.
async fn idle(addr: SocketAddr, path: String, n: u64, secs: u64) -> Result<()> {
    let mut conns = Vec::with_capacity(n as usize);
    let mut failed = 0u64;
    for _ in 0..n {
        let c = async {
            let mut c = Conn::open(addr).await?;
            c.send(&path).await?;
            match c.response().await? {
                200 => Ok::<_, Box<dyn std::error::Error + Send + Sync>>(c),
                s => Err(format!("status {s}").into()),
            }
        }
        .await;
        match c {
            Ok(c) => conns.push(c),
            Err(_) => failed += 1,
        }
    }
    println!("IDLE_READY {}", conns.len());
    println!("IDLE_FAILED {failed}");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    // Which of them did the server close while they sat idle?
    let mut closed = 0u64;
    for c in &mut conns {
        let mut probe = [0u8; 1];
        // Non-blocking: 0 bytes = closed by the peer, WouldBlock = still open and idle.
        match c.stream.try_read(&mut probe) {
            Ok(0) => closed += 1,
            Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => closed += 1,
            _ => {}
        }
    }
    println!("IDLE_CLOSED_BY_SERVER {closed}");
    Ok(())
}
