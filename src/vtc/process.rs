//! The `shellac serve` process of a `varnish vN`: started on its configuration with its log
//! followed (the listening addresses are read from it), stopped by its id (SIGTERM, then
//! SIGKILL after 3 s), and dying with the runner (`PR_SET_PDEATHSIG`).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::context::{Halt, Shared, Step, fail, kill, lock};

/// A running `shellac serve`.
pub(super) struct Running {
    pub child: Child,
    /// Its TCP listeners' addresses, in the configuration's order (the log names them so,
    /// before the admin listener).
    pub addrs: Vec<SocketAddr>,
    pub admin: SocketAddr,
    /// The last lines of its log, for messages.
    tail: Arc<Mutex<Vec<String>>>,
}

impl Running {
    /// Runs `shellac serve --config CONFIG` in `dir` for `varnish NAME` and waits (10 s at
    /// most) until its log names the proxy's and the admin listener's addresses.
    pub(super) fn start(
        shared: &Arc<Shared>,
        name: &str,
        shellac: &Path,
        config: &Path,
        dir: &Path,
    ) -> Step<Running> {
        let mut cmd = Command::new(shellac);
        cmd.arg("serve")
            .arg("--config")
            .arg(config)
            .current_dir(dir)
            // `SHELLAC_VTC_LOG` (a `SHELLAC_LOG` filter) shows more of a failing file's
            // Shellac: `SHELLAC_VTC_LOG=shellac=trace shellac vtc FILE`.
            .env(
                "SHELLAC_LOG",
                std::env::var("SHELLAC_VTC_LOG").unwrap_or_else(|_| "info".to_string()),
            )
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: the closure runs in the forked child before exec and only calls prctl(2),
        // which is async-signal-safe; it allocates nothing and touches no shared state.
        unsafe {
            cmd.pre_exec(|| {
                // The process dies with the runner's thread that started it, whatever happens
                // to the runner.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = super::sock::spawn(&mut cmd)
            .map_err(|e| Halt::Fail(format!("cannot run {}: {e}", shellac.display())))?;
        shared.watch_pid(child.id());
        shared.log(name, format!("PID: {}", child.id()));
        shared.define(name, &format!("{name}_pid"), child.id().to_string());
        let tail = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        if let Some(stderr) = child.stderr.take() {
            let (shared, name, tail) = (shared.clone(), name.to_string(), tail.clone());
            std::thread::spawn(move || read_log(stderr, &shared, &name, &tail, tx));
        }
        let (mut addrs, mut admin) = (Vec::new(), None);
        let until = Instant::now() + Duration::from_secs(10);
        while addrs.is_empty() || admin.is_none() {
            shared.check()?;
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Listening::Proxy(a)) => addrs.push(a),
                Ok(Listening::Admin(a)) => admin = Some(a),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        shared.unwatch_pid(child.id());
                        return fail(format!(
                            "{}: shellac serve exited ({status}) before listening: {}",
                            name,
                            lock(&tail).join(" / ")
                        ));
                    }
                    if Instant::now() > until {
                        kill(child.id());
                        let _ = child.wait();
                        shared.unwatch_pid(child.id());
                        return fail(format!("{}: shellac serve did not listen in 10 s", name));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait();
                    shared.unwatch_pid(child.id());
                    return fail(format!(
                        "{}: shellac serve exited ({status:?}): {}",
                        name,
                        lock(&tail).join(" / ")
                    ));
                }
            }
        }
        let Some(admin) = admin else {
            return fail("unreachable: listening addresses");
        };
        Ok(Running {
            child,
            addrs,
            admin,
            tail,
        })
    }

    /// Ends the process (its cache with it): SIGTERM, SIGKILL after 3 s. Fails when it had
    /// exited on its own.
    pub(super) fn stop(mut self, shared: &Shared, name: &str) -> Step {
        let pid = self.child.id();
        let crashed = match self.child.try_wait() {
            Ok(Some(status)) => Some(status),
            _ => None,
        };
        if let Ok(p) = libc::pid_t::try_from(pid) {
            // SAFETY: kill(2) with plain integers on our own not-yet-reaped child.
            unsafe {
                libc::kill(p, libc::SIGTERM);
            }
        }
        let until = Instant::now() + Duration::from_secs(3);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    kill(pid);
                    break self.child.wait().ok();
                }
            }
        };
        shared.unwatch_pid(pid);
        shared.log(name, format!("stopped: {status:?}"));
        if let Some(status) = crashed {
            return fail(format!(
                "{}: shellac exited on its own during the test ({status}): {}",
                name,
                lock(&self.tail).join(" / ")
            ));
        }
        Ok(())
    }
}

enum Listening {
    Proxy(SocketAddr),
    Admin(SocketAddr),
}

/// Follows the process's log: into the file's log, the last lines kept for messages, the
/// listening addresses sent back.
fn read_log(
    stderr: std::process::ChildStderr,
    shared: &Shared,
    name: &str,
    tail: &Mutex<Vec<String>>,
    tx: mpsc::Sender<Listening>,
) {
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        // Drop the timestamp: the file's log has its own.
        let text = line
            .split_once("Z ")
            .map_or(line.as_str(), |(_, rest)| rest.trim_start());
        shared.log(name, format!("shellac| {text}"));
        {
            let mut t = lock(tail);
            t.push(text.to_string());
            if t.len() > 8 {
                t.remove(0);
            }
        }
        for (marker, proxy) in [
            ("proxy listening on ", true),
            ("admin listening on ", false),
        ] {
            if let Some(rest) = text.split(marker).nth(1)
                && let Some(a) = rest
                    .split_whitespace()
                    .next()
                    .and_then(|a| a.parse::<SocketAddr>().ok())
            {
                let _ = tx.send(if proxy {
                    Listening::Proxy(a)
                } else {
                    Listening::Admin(a)
                });
            }
        }
    }
}
