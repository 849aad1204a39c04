//! The access log: formats exactly as configured, X-Forwarded-For, decision reasons, reopen
//! (logrotate), and drops counted (never waiting) when the writer is blocked.

use std::time::Duration;

use crate::common::*;
use shellac::config::invalidation::Network;

/// Replaces the `[...]` time field so lines can be compared exactly.
fn without_time(line: &str) -> String {
    match (line.find('['), line.find(']')) {
        (Some(a), Some(b)) if a < b => format!("{}[TIME]{}", &line[..a], &line[b + 1..]),
        _ => line.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn combined_format_is_ncsa() {
    let dir = temp_dir("log-combined");
    let path = dir.join("access.log");
    let origin = Origin::start(|s| match s.path.as_str() {
        "/private" => Reply::ok("secret").cc("private"),
        _ => Reply::ok("hello").cc("max-age=60"),
    })
    .await;
    let log = path.to_str().unwrap().to_string();
    let shellac = Shellac::start(origin.addr, |c| c.log.access_log = log).await;
    get_with(
        shellac.addr,
        "/page?x=1",
        &[
            ("referer", "http://ref.example/"),
            ("user-agent", "curl/8.0"),
        ],
    )
    .await;
    get(shellac.addr, "/page?x=1").await;
    get(shellac.addr, "/private").await;
    // Lines from different workers may interleave (one writer pass apart): compare sorted.
    let lines = wait_lines(&path, 3).await;
    let mut lines: Vec<String> = lines.iter().map(|l| without_time(l)).collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "127.0.0.1 - - [TIME] \"GET /page?x=1 HTTP/1.1\" 200 5 \"-\" \"-\"",
            "127.0.0.1 - - [TIME] \"GET /page?x=1 HTTP/1.1\" 200 5 \"http://ref.example/\" \"curl/8.0\"",
            "127.0.0.1 - - [TIME] \"GET /private HTTP/1.1\" 200 6 \"-\" \"-\"",
        ]
    );
    let time = std::fs::read_to_string(&path).unwrap();
    let first = time.lines().next().unwrap();
    let stamp = &first[first.find('[').unwrap() + 1..first.find(']').unwrap()];
    // dd/Mon/yyyy:hh:mm:ss +0000
    assert_eq!(stamp.len(), 26, "{stamp}");
    assert!(stamp.ends_with(" +0000"), "{stamp}");
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_format_with_forwarded_for_cache_decision_and_backend() {
    let dir = temp_dir("log-custom");
    let path = dir.join("access.log");
    let origin = Origin::start(|s| match s.path.as_str() {
        "/nostore" => Reply::ok("abc").cc("no-store"),
        _ => Reply::ok("hello").cc("max-age=60"),
    })
    .await;
    let log = path.to_str().unwrap().to_string();
    let shellac = Shellac::start(origin.addr, |c| {
        c.log.access_log = log;
        c.log.format = "%{X-Forwarded-For}i|%h|%r|%s|%b|%{cache}x|%{reason}x|%{backend}x|%{Cache-Status}o|%{host}x".into();
        c.backends[0].name = "app".into();
        // The client is the load balancer in front of Shellac: its X-Forwarded-For is kept.
        c.server.trusted_proxies = vec![Network::parse("127.0.0.1").unwrap()];
    })
    .await;
    let xff = [("x-forwarded-for", "203.0.113.7, 10.0.0.1")];
    get_with(shellac.addr, "/a", &xff).await;
    get_with(shellac.addr, "/a", &xff).await;
    get(shellac.addr, "/nostore").await;
    request(shellac.addr, "POST", "/form", &[], b"x=1").await;
    let mut lines: Vec<String> = wait_lines(&path, 4)
        .await
        .iter()
        .map(|l| match l.find("ttl=") {
            Some(i) => format!(
                "{}ttl=N{}",
                &l[..i],
                &l[i + 4..].trim_start_matches(char::is_numeric)
            ),
            None => l.clone(),
        })
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "-|127.0.0.1|GET /nostore HTTP/1.1|200|3|pass|no-store|app|shellac; fwd=miss; detail=no-store|test.example",
            "-|127.0.0.1|POST /form HTTP/1.1|200|5|pass|method|app|shellac; fwd=method; detail=method|test.example",
            "203.0.113.7, 10.0.0.1|127.0.0.1|GET /a HTTP/1.1|200|5|hit|-|-|shellac; hit; ttl=N|test.example",
            "203.0.113.7, 10.0.0.1|127.0.0.1|GET /a HTTP/1.1|200|5|miss|-|app|shellac; fwd=miss; stored|test.example",
        ]
    );
    let stats = shellac.stats().await;
    assert_eq!(stats["pass_reason_no_store"], 1);
    assert_eq!(stats["pass_reason_method"], 1);
    assert_eq!(stats["log_dropped"], 0);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synth_errors_are_logged_with_their_reason() {
    let dir = temp_dir("log-synth");
    let path = dir.join("access.log");
    let log = path.to_str().unwrap().to_string();
    // Port 1 on loopback refuses connections.
    let shellac = Shellac::start("127.0.0.1:1".parse().unwrap(), |c| {
        c.log.access_log = log;
        c.log.format = "%s %{cache}x %{reason}x %{backend}x".into();
    })
    .await;
    assert_eq!(get(shellac.addr, "/").await.status, 503);
    let lines = wait_lines(&path, 1).await;
    assert_eq!(lines, vec!["503 synth backend-connect-failed default"]);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines() {
    let dir = temp_dir("log-json");
    let path = dir.join("access.log");
    let origin = Origin::start(|_| Reply::ok("hello").cc("max-age=60")).await;
    let log = path.to_str().unwrap().to_string();
    let shellac = Shellac::start(origin.addr, |c| {
        c.log.access_log = log;
        c.log.format = "json".into();
        c.server.trusted_proxies = vec![Network::parse("127.0.0.0/8").unwrap()];
    })
    .await;
    get_with(shellac.addr, "/j", &[("x-forwarded-for", "198.51.100.2")]).await;
    let lines = wait_lines(&path, 1).await;
    assert_eq!(lines.len(), 1);
    let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(v["method"], "GET");
    assert_eq!(v["url"], "/j");
    assert_eq!(v["status"], 200);
    assert_eq!(v["bytes"], 5);
    assert_eq!(v["cache"], "miss");
    assert_eq!(v["backend"], "default");
    assert_eq!(v["x_forwarded_for"], "198.51.100.2");
    assert_eq!(v["complete"], true);
    assert!(v["time"].as_str().unwrap().ends_with('Z'));
    assert!(v["duration_us"].as_u64().unwrap() >= v["ttfb_us"].as_u64().unwrap());
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_after_logrotate_moves_the_file() {
    let dir = temp_dir("log-reopen");
    let path = dir.join("access.log");
    let rotated = dir.join("access.log.1");
    let origin = Origin::start(|_| Reply::ok("hello").cc("max-age=60")).await;
    let log = path.to_str().unwrap().to_string();
    let shellac = Shellac::start(origin.addr, |c| {
        c.log.access_log = log;
        c.log.format = "%U".into();
    })
    .await;
    get(shellac.addr, "/before").await;
    assert_eq!(wait_lines(&path, 1).await, vec!["/before"]);
    std::fs::rename(&path, &rotated).unwrap();
    shellac.reopen_logs();
    // The reopen is handled by the writer before the next records it drains.
    for _ in 0..200 {
        if path.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    get(shellac.addr, "/after").await;
    assert_eq!(wait_lines(&path, 1).await, vec!["/after"]);
    assert_eq!(
        std::fs::read_to_string(&rotated).unwrap(),
        "/before\n",
        "the rotated file keeps only what was written before"
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// Incident 4 of the brief: the log must never make a request wait. With the writer stuck on
/// a pipe nobody reads, requests still complete, and every record is either written or
/// counted in `log_dropped`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_writer_drops_and_counts_never_waits() {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;

    let dir = temp_dir("log-fifo");
    let fifo = dir.join("access.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Open the read end first (non-blocking) so Shellac's open for writing does not block; then
    // read nothing until every request is done.
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let origin = Origin::start(|_| Reply::ok("hello").cc("max-age=60")).await;
    let log = fifo.to_str().unwrap().to_string();
    let padding = "x".repeat(1000);
    let shellac = Shellac::start(origin.addr, |c| {
        c.log.access_log = log;
        // ~1 KB per line: the pipe (64 KiB) and the writer's buffer fill after ~130 lines.
        c.log.format = format!("%U {padding}");
        c.log.buffer = 16;
    })
    .await;
    const N: u64 = 600;
    let mut conn = Conn::open(shellac.addr).await;
    for i in 0..N {
        let resp =
            tokio::time::timeout(Duration::from_secs(10), conn.send("GET", "/same", &[], b""))
                .await
                .unwrap_or_else(|_| panic!("request {i} waited for the log"));
        assert_eq!(resp.status, 200);
    }
    drop(conn);
    // Records are queued when the response body is dropped, just after the client has it.
    let mut dropped = 0;
    for _ in 0..100 {
        dropped = shellac.stat("log_dropped").await;
        if dropped > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        dropped > 0,
        "a blocked writer must make the buffers overflow"
    );
    assert!(
        dropped < N,
        "some records were written before the pipe filled"
    );

    // Unblock the writer: read everything it wrote. Every record is written or dropped.
    let mut text = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..500 {
        match reader.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => text.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        let lines = text.iter().filter(|b| **b == b'\n').count() as u64;
        let dropped = shellac.stat("log_dropped").await;
        if lines + dropped == N {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let lines = text.iter().filter(|b| **b == b'\n').count() as u64;
    let dropped = shellac.stat("log_dropped").await;
    assert_eq!(lines + dropped, N, "written {lines} + dropped {dropped}");
    assert!(String::from_utf8_lossy(&text).starts_with("/same xxx"));
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// SIGTERM's path: stop accepting, let the response in flight finish, then flush the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_in_flight_requests_and_flushes_the_log() {
    use std::sync::Arc;
    use tokio::sync::Notify;

    let dir = temp_dir("log-shutdown");
    let path = dir.join("access.log");
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let origin = Origin::start(move |_| {
        Reply::ok("").cc("no-store").body(ReplyBody::Gated {
            first: b"first-".to_vec(),
            gate: g.clone(),
            rest: b"last".to_vec(),
        })
    })
    .await;
    let log = path.to_str().unwrap().to_string();
    let shellac = Shellac::start(origin.addr, |c| {
        c.log.access_log = log;
        c.log.format = "%U %s %B".into();
    })
    .await;
    let addr = shellac.addr;
    let mut conn = Conn::open(addr).await;
    let resp = conn.send_head("GET", "/slow", &[], b"").await;
    assert_eq!(resp.status(), 200);
    let stopping = tokio::spawn(shellac.stop_with(Duration::from_secs(20)));
    let mut refused = false;
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "no new connections once shutdown began");
    gate.notify_one();
    use http_body_util::BodyExt;
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"first-last", "the request in flight completed");
    drop(conn);
    tokio::time::timeout(Duration::from_secs(20), stopping)
        .await
        .expect("shutdown ends once the connection is done")
        .unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "/slow 200 10\n");
    std::fs::remove_dir_all(&dir).ok();
}

/// Regression (issue 23, defect 11): a miss whose backend resets mid-body was announced as
/// `stored` in the head already sent; the log said `miss` too, although nothing was stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_aborted_mid_body_is_logged_as_not_stored() {
    let dir = temp_dir("log-aborted");
    let path = dir.join("access.log");
    // An origin that promises 100,000 bytes, sends 10 and closes the connection.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin_addr = listener.local_addr().unwrap();
    let fetches = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = fetches.clone();
    let origin = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(
                    b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ncontent-length: 100000\r\n\r\n0123456789",
                )
                .await;
            let _ = s.flush().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(s);
        }
    });
    let log = path.to_str().unwrap().to_string();
    let shellac = Shellac::start(origin_addr, |c| {
        c.log.access_log = log;
        c.log.format = "%s|%{cache}x|%{reason}x|%{Cache-Status}o".into();
    })
    .await;
    for _ in 0..2 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut c = tokio::net::TcpStream::connect(shellac.addr).await.unwrap();
        c.write_all(b"GET /big HTTP/1.1\r\nhost: test.example\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut got)).await;
        assert!(got.starts_with(b"HTTP/1.1 200"), "{got:?}");
        assert!(
            got.len() < 100_000,
            "the truncated body never looks complete"
        );
    }
    let lines = wait_lines(&path, 2).await;
    assert_eq!(
        lines,
        vec![
            "200|pass|aborted|shellac; fwd=miss; stored",
            "200|pass|aborted|shellac; fwd=miss; stored",
        ],
        "the second request was a miss again: nothing was stored"
    );
    assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 2);
    shellac.stop().await;
    origin.abort();
    std::fs::remove_dir_all(&dir).ok();
}
