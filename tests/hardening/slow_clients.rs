//! Slow clients from slowhttptest (Debian package), in short bounded runs: slowloris (slow
//! headers), R-U-Dead-Yet (slow body) and slow read, all three at once. While they run, normal
//! requests are answered, and afterwards the counter of the timeout that closes each kind of
//! connection has moved.
//! Skipped, with a message, where slowhttptest is not installed; a failure instead where
//! `SHELLAC_REQUIRE_TOOLS=1` (`.ci/run` sets it and installs the package).
//! `bench/slow.sh` runs the same modes longer and with more connections.

use std::process::{Command, Stdio};

use shellac::config::units::{Dur, Size};

use super::*;

fn slowhttptest_installed() -> Option<()> {
    Command::new("slowhttptest")
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()
        .map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowhttptest_attacks_leave_the_service_available() {
    if tools::require(slowhttptest_installed(), "slowhttptest", "slowhttptest").is_none() {
        return;
    }
    // A 1 MiB cacheable object: large enough that a slow reader fills the socket buffers.
    let big: &'static [u8] = Box::leak(
        [
            b"HTTP/1.1 200 OK\r\ncache-control: max-age=600\r\ncontent-length: 1048576\r\n\r\n"
                .to_vec(),
            vec![b'b'; 1 << 20],
        ]
        .concat()
        .into_boxed_slice(),
    );
    let origin = RawOrigin::start(move |_| big.to_vec()).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.header_read_timeout = Dur(Duration::from_secs(2));
        c.server.body_timeout = Dur(Duration::from_secs(2));
        c.server.body_min_rate = Size(1024);
        c.server.send_timeout = Dur(Duration::from_secs(2));
        c.server.idle_timeout = Dur(Duration::from_secs(3));
    })
    .await;
    let url = format!("http://{}/big", shellac.addr);
    let modes: [(&str, &[&str], &str); 3] = [
        ("slowloris", &["-H", "-i", "1"], "client_header_timeout"),
        (
            "slow body",
            &["-B", "-i", "1", "-s", "100000"],
            "client_body_timeout",
        ),
        (
            "slow read",
            &["-X", "-k", "3", "-n", "5", "-w", "1", "-y", "2", "-z", "1"],
            "client_send_timeout",
        ),
    ];
    // The three attacks at once (one run's time, not three): 100 connections each for 6 s
    // (slowhttptest stops by itself; killed if the test ends first).
    let mut attacks = Vec::new();
    for (mode, args, counter) in modes {
        let before = shellac.stat(counter).await;
        let attack = tokio::process::Command::new("slowhttptest")
            .args(args)
            .args(["-c", "100", "-r", "100", "-l", "6", "-p", "3", "-u", &url])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start slowhttptest");
        attacks.push((mode, counter, before, attack));
    }
    // While they run: ten ordinary requests, each answered (a generous bound, not a timing
    // assertion: an unavailable service would not answer at all).
    tokio::time::sleep(Duration::from_secs(1)).await;
    for _ in 0..10 {
        let resp = tokio::time::timeout(Duration::from_secs(10), get(shellac.addr, "/ok"))
            .await
            .unwrap_or_else(|_| panic!("under three attacks: a normal request was not answered"));
        assert_eq!(resp.status, 200);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    for (mode, counter, before, mut attack) in attacks {
        let finished = tokio::time::timeout(Duration::from_secs(60), attack.wait()).await;
        assert!(
            finished.is_ok(),
            "{mode}: slowhttptest did not stop by itself"
        );
        // The slow connections were closed by the timeout meant for them.
        let mut waited = 0;
        while shellac.stat(counter).await == before && waited < 100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            waited += 1;
        }
        assert!(
            shellac.stat(counter).await > before,
            "{mode}: {counter} did not move"
        );
    }
    shellac.stop().await;
    origin.stop();
}
