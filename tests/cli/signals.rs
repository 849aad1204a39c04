//! Signals that come early: a SIGHUP (a process manager's reload) sent as soon as Shellac
//! says it listens is a reload, never the end of the process.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::common::binary::BIN;
use super::common::*;

/// Kills the child if the test ends first (a panic), so no process outlives it.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Regression (the cli test `sighup_and_reload_command_swap_the_config` failed once at load
/// 20 with "a new connection closed before its request"): Shellac registered its SIGHUP,
/// SIGUSR1 and SIGUSR2 handlers only after it logged its listeners and told systemd it was
/// ready, so a SIGHUP in between ended the process (SIGHUP's default action; 8 of 10 starts
/// when sent on the first `proxy listening on` line). Now the signal waits for the proxy
/// and reloads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sighup_as_soon_as_shellac_listens_reloads_it_and_never_ends_it() {
    let origin = Origin::start(|_| Reply::ok("A")).await;
    let dir = TempDir::new("cli-early-hup");
    let config = dir.path("shellac.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            origin.addr.port()
        ),
    )
    .unwrap();
    for _ in 0..3 {
        let mut child = Command::new(BIN)
            .args(["serve", "--config", config.to_str().unwrap()])
            .env("SHELLAC_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .expect("start shellac");
        let stderr = child.stderr.take().expect("stderr is piped");
        let pid = child.id() as libc::pid_t;
        let child = Killed(child);
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent && line.contains("proxy listening on") {
                    // SAFETY: kill(2) with the PID of a child not waited for yet.
                    unsafe { libc::kill(pid, libc::SIGHUP) };
                    sent = true;
                }
                let _ = tx.send(line);
            }
        });
        let mut proxy = None;
        let mut seen = Vec::new();
        loop {
            let Ok(line) = log.recv_timeout(Duration::from_secs(20)) else {
                panic!("shellac ended or went quiet after an early SIGHUP: {seen:#?}");
            };
            if let Some(a) = line.split("proxy listening on ").nth(1) {
                proxy = a.trim().parse::<std::net::SocketAddr>().ok();
            }
            let reloaded = line.contains("configuration reloaded");
            seen.push(line);
            if reloaded {
                break;
            }
        }
        assert_eq!(get(proxy.expect("proxy address"), "/").await.text(), "A");
        drop(child);
    }
}
