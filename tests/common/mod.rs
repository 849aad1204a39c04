//! Test harness in the spirit of varnishtest: a scripted origin, the real proxy and clients,
//! all on ephemeral loopback ports, speaking HTTP over sockets.
#![allow(dead_code)]

pub mod binary;
mod client;
pub mod compile;
pub mod h2;
pub mod log_stream;
mod origin;
pub mod pages;
pub mod pebble;
mod proxy;
pub mod raw_origin;
pub mod redis_cluster;
pub mod tls;
pub mod tools;
pub mod vcl;

pub use client::*;
pub use origin::*;
pub use proxy::*;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Waits (bounded: 10 s) until `path` holds at least `n` lines; returns them.
pub async fn wait_lines(path: &std::path::Path, n: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for _ in 0..200 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        lines = text.lines().map(str::to_string).collect();
        if lines.len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    lines
}

/// Waits (bounded: 10 s) until `cond` holds for `sh`'s stats; panics naming `what` if not.
pub async fn until_stats(sh: &Shellac, what: &str, cond: impl Fn(&HashMap<String, u64>) -> bool) {
    for _ in 0..200 {
        if cond(&sh.stats().await) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}: {:?}", sh.stats().await);
}

/// Polls `f` every 50 ms until it is true or `limit` has passed; whether it became true.
pub async fn eventually<F, Fut>(limit: Duration, f: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A loopback port free now (bound and released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Ports free now on 127.0.0.1, below the ephemeral range (from the process ID on, so
/// binaries running at once tend to pick different ones; a later call in the same process
/// goes on from where the last one stopped), for a tool that must be given fixed addresses to
/// bind itself (pebble, systemd-socket-activate). Released at once like [`free_port`]'s, but
/// no socket bound to port 0 (every other listener of the tests) can be given one of them
/// before the tool binds it.
pub fn free_ports_below_ephemeral(n: usize) -> Vec<u16> {
    static NEXT: std::sync::Mutex<u32> = std::sync::Mutex::new(0);
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let base: u16 = 10_000;
    let span = u32::from(low.saturating_sub(base).max(1000));
    let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
    let start = std::process::id() % span;
    let mut out = Vec::new();
    while out.len() < n && *next < span {
        let port = base + ((start + *next) % span) as u16;
        *next += 1;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            out.push(port);
        }
    }
    assert_eq!(out.len(), n, "no free ports below {low}");
    out
}

/// A loopback port where every connection is refused for the rest of the test process: bound
/// by a socket that never listens, kept open (leaked) so no other socket can bind it. A port
/// from [`free_port`] is released at once, and another test's listener can take it (a "gone"
/// backend of tests/vcl once answered 404 from another test's admin listener).
pub fn refused_port() -> u16 {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .expect("a TCP socket");
    let any = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    socket.bind(&any.into()).expect("bind a loopback port");
    let port = socket
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .expect("its address")
        .port();
    std::mem::forget(socket);
    port
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("shellac-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A directory under the system temp dir, removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "shellac-test-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self, file: &str) -> std::path::PathBuf {
        self.0.join(file)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
