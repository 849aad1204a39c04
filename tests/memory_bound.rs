//! The memory tier's bound in resident memory (issue 23, item 8): the real binary, a
//! `memory_size` of 32 MiB (16 MiB with 2 KB objects), filled with distinct objects three times
//! its size (so everything is evicted about three times over), must not grow its RSS by more
//! than 1.1× the setting beyond what it used before the fill with objects of 100 KB and more,
//! 1.2× with small (2 KB) ones. Before the fix, objects of 100 KB to 1 MB took RSS to 1.3-1.6× the setting:
//! their bodies were kept as slices of hyper's read buffers (and charged their length only),
//! and glibc kept freed large blocks. Small objects measured 1.06-1.08× on a machine with idle
//! cores and 1.13-1.14× with both cores busy (issue 32: an outside check saw 1.145×, and this
//! test's former 1.1× failed under load): README says ~1.15× for them (bench/RESULTS.md).
//! The 2 KB case fills 16 MiB (25,166 requests, not 50,332: it was most of this binary's time
//! in CI, every request through the debug build); its ratio measured the same at 16 and
//! 32 MiB (1.07× and 1.06× at load ~11).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::binary::Served;
use common::raw_origin::RawOrigin;
use common::*;

const MIB: u64 = 1 << 20;
/// Clients fetching at once (the fills in flight).
const CLIENTS: usize = 16;

/// The `field` (`VmRSS`, `RssAnon`, `RssFile`) of process `pid`'s status, in bytes.
fn rss_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect(field);
    kib * 1024
}

/// Resident memory of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    rss_field(pid, "VmRSS")
}

/// Fetches `paths` over `CLIENTS` keep-alive connections; every answer must be 200 with a
/// body of `size` bytes.
async fn fetch_all(addr: std::net::SocketAddr, paths: Vec<String>, size: usize) {
    let paths = Arc::new(paths);
    let next = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (paths, next) = (paths.clone(), next.clone());
            tokio::spawn(async move {
                let mut conn = Conn::open(addr).await;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(path) = paths.get(i) else {
                        return;
                    };
                    let r = conn.send("GET", path, &[], b"").await;
                    assert_eq!(r.status, 200, "{path}");
                    assert_eq!(r.body.len(), size, "{path}");
                }
            })
        })
        .collect();
    for c in clients {
        c.await.expect("client");
    }
}

/// Fills a memory tier of `memory_size` bytes three times over with `size`-byte objects and
/// checks that RSS grew by at most `tenths` / 10 of it.
async fn rss_stays_within_the_bound(size: usize, memory_size: u64, tenths: u64) {
    // Each response in one write (a head and body written apart would wait for a delayed ACK).
    let origin = RawOrigin::start(move |request| {
        let len = if request.starts_with(b"GET /warm/") {
            100
        } else {
            size
        };
        let mut response = format!(
            "HTTP/1.1 200 OK\r\ncache-control: max-age=3600\r\ncontent-length: {len}\r\n\r\n"
        )
        .into_bytes();
        response.resize(response.len() + len, b'm');
        response
    })
    .await;
    let dir = TempDir::new(&format!("memory-bound-{size}"));
    let config = dir.path("shellac.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\nthreads = 1\n\n[cache]\nmemory_size = \"{}MiB\"\nmax_object_size = \"2MiB\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            memory_size / MIB,
            origin.addr.port()
        ),
    )
    .expect("write config");
    let shellac = Served::serve(&["--config", config.to_str().expect("UTF-8 temp path")]);
    // Warm up with the same concurrency (connections to clients and origin, their buffers),
    // small objects that leave the cache nearly empty, then take the base.
    let warm = (0..CLIENTS * 4).map(|i| format!("/warm/{i}")).collect();
    fetch_all(shellac.proxy, warm, 100.min(size)).await;
    let base = rss(shellac.pid());
    let base_parts = (
        rss_field(shellac.pid(), "RssAnon"),
        rss_field(shellac.pid(), "RssFile"),
    );
    let n = (3 * memory_size).div_ceil(size as u64) as usize;
    let fill = (0..n).map(|i| format!("/fill/{i}")).collect();
    fetch_all(shellac.proxy, fill, size).await;
    let after = rss(shellac.pid());
    let after_parts = (
        rss_field(shellac.pid(), "RssAnon"),
        rss_field(shellac.pid(), "RssFile"),
    );
    eprintln!(
        "{size}-byte objects: RssAnon {:.1} -> {:.1} MiB, RssFile {:.1} -> {:.1} MiB",
        base_parts.0 as f64 / MIB as f64,
        after_parts.0 as f64 / MIB as f64,
        base_parts.1 as f64 / MIB as f64,
        after_parts.1 as f64 / MIB as f64,
    );

    let stat = |name: &'static str| {
        let admin = shellac.admin;
        async move {
            let r = get(admin, "/stats").await;
            let v: serde_json::Value = serde_json::from_slice(&r.body).expect("stats JSON");
            v[name].as_u64().unwrap_or_else(|| panic!("{name}"))
        }
    };
    let (held, evicted, charged) = (
        stat("n_object").await,
        stat("n_lru_nuked").await,
        stat("cache_bytes").await,
    );
    assert!(charged <= memory_size, "{charged} bytes charged");
    assert!(
        evicted >= 2 * held,
        "the fill evicts several times over: {evicted} evicted, {held} held"
    );
    let growth = after.saturating_sub(base);
    assert!(
        growth * 10 <= memory_size * tenths,
        "{size}-byte objects: RSS grew by {:.2} MiB ({:.2}x memory_size): base {:.1} MiB, \
         after {:.1} MiB, {held} objects held, {charged} bytes charged",
        growth as f64 / MIB as f64,
        growth as f64 / memory_size as f64,
        base as f64 / MIB as f64,
        after as f64 / MIB as f64,
    );
    eprintln!(
        "{size}-byte objects: RSS growth {:.2}x memory_size",
        growth as f64 / memory_size as f64
    );
    shellac.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rss_stays_within_the_bound_with_2_kb_objects() {
    rss_stays_within_the_bound(2_000, 16 * MIB, 12).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rss_stays_within_the_bound_with_100_kb_objects() {
    rss_stays_within_the_bound(100_000, 32 * MIB, 11).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rss_stays_within_the_bound_with_1_mb_objects() {
    rss_stays_within_the_bound(1_000_000, 32 * MIB, 11).await;
}
