//! Idle keep-alive client connections (`server.idle_release`): after `idle_release` without a
//! request a connection gives back its HTTP session (hyper's buffers, the gate, the request
//! state) and keeps only its socket; the next request on it is served by a new session, as if
//! nothing happened. Asserted on responses and on `client_idle_released` / `client_conn`.
//! Also the send buffer a near client gets at accept (`server.near_send_buffer`, counter
//! `client_conn_near`).
//! Also the PROXY protocol in front and towards backends, and Unix socket listeners. The
//! helpers are here; the tests in `idle`, `accept` and `proxy_protocol` (test names
//! `MODULE::NAME`).

mod accept;
#[path = "../common/mod.rs"]
mod common;
mod idle;
mod proxy_protocol;

use std::time::Duration;

use common::*;
use shellac::config::units::Dur;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const RELEASE: Duration = Duration::from_millis(150);

/// Longer than a release takes on an unloaded machine (one timer tick after `RELEASE`): how
/// long the tests wait to show that something was *not* released.
const AFTER_RELEASE: Duration = Duration::from_millis(700);

/// Waits (up to 10 s, for a slow CI machine) until `client_idle_released` reaches `n`.
async fn released(shellac: &Shellac, n: u64) {
    for _ in 0..500 {
        if shellac.stat("client_idle_released").await >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(shellac.stat("client_idle_released").await, n);
}

/// Waits (up to 10 s) until `client_idle_released` reaches at least `n`.
async fn released_at_least(shellac: &Shellac, n: u64) {
    until_stats(shellac, "client_idle_released", |s| {
        s.get("client_idle_released").copied().unwrap_or(0) >= n
    })
    .await;
}

async fn start(origin: &Origin, tweak: impl FnOnce(&mut shellac::config::Config)) -> Shellac {
    Shellac::start(origin.addr, |c| {
        c.server.idle_release = Dur(RELEASE);
        tweak(c);
    })
    .await
}

/// Reads exactly `n` complete responses with `Content-Length` bodies from `s`.
async fn read_responses<S: tokio::io::AsyncRead + Unpin>(s: &mut S, n: usize) -> Vec<String> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while out.len() < n {
        let mut chunk = [0u8; 4096];
        let got = tokio::time::timeout(Duration::from_secs(5), s.read(&mut chunk))
            .await
            .expect("response within 5 s")
            .expect("read");
        assert!(got > 0, "connection closed after {} responses", out.len());
        buf.extend_from_slice(&chunk[..got]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if buf.len() < end + 4 + len {
                break;
            }
            let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
            out.push(format!("{head}\r\n\r\n{body}"));
            buf.drain(..end + 4 + len);
        }
    }
    out
}

/// Waits (up to 10 s) until the stat `name` reaches `n`.
async fn stat_reaches(shellac: &Shellac, name: &str, n: u64) {
    for _ in 0..500 {
        if shellac.stat(name).await == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(shellac.stat(name).await, n, "{name}");
}
