//! The servers under test as processes: started, pinned, registered, their I/O counters read,
//! stopped or killed (with their descendants) by PID.

use super::*;

// ---------------------------------------------------------------------------------------------
// Processes: every server started is registered here and killed (with its descendants) by PID
// on drop, on Ctrl-C and on exit.
// ---------------------------------------------------------------------------------------------

pub(super) static STARTED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// PIDs whose parent is `pid` (from /proc/*/stat), recursively, depth first.
pub(super) fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(child) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces; parse after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
            out.extend(descendants(child));
        }
    }
    out
}

pub(super) fn kill(pid: u32, sig: i32) {
    // SAFETY: plain kill(2) on a PID this program started (or a child of one).
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// SIGKILL to `pid` and everything below it (nginx workers survive their master's SIGKILL).
pub(super) fn kill_tree(pid: u32) {
    let kids = descendants(pid);
    kill(pid, libc::SIGKILL);
    for k in kids {
        kill(k, libc::SIGKILL);
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Shellac,
    Nginx,
}

pub(super) struct Proc {
    pub(super) kind: Kind,
    pub(super) child: Child,
    pub(super) proxy: SocketAddr,
    pub(super) admin: Option<SocketAddr>,
    pub(super) started: Instant,
    /// From spawn to accepting connections (Shellac: both listeners bound, after disk recovery).
    pub(super) ready_after: Duration,
}

pub(super) fn command(bin: &Path, pin: bool) -> Command {
    if pin {
        let mut c = Command::new("taskset");
        c.args(["-c", &PROXY_CPU.to_string()]).arg(bin);
        c
    } else {
        Command::new(bin)
    }
}

impl Proc {
    pub(super) fn register(child: &Child) {
        STARTED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child.id());
    }

    pub(super) fn shellac(bin: &Path, config: &Path, pin: bool) -> Proc {
        let started = Instant::now();
        let mut child = command(bin, pin)
            .args(["serve", "--config"])
            .arg(config)
            .env("SHELLAC_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .expect("start shellac");
        Proc::register(&child);
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let (mut proxy, mut admin) = (None, None);
        while proxy.is_none() || admin.is_none() {
            let line = rx
                .recv_timeout(Duration::from_secs(120))
                .expect("shellac logs its addresses");
            if let Some(a) = line.split("proxy listening on ").nth(1) {
                proxy = a.trim().parse().ok();
            }
            if let Some(a) = line.split("admin listening on ").nth(1) {
                admin = a.trim().parse().ok();
            }
        }
        Proc {
            kind: Kind::Shellac,
            child,
            proxy: proxy.expect("proxy"),
            admin,
            ready_after: started.elapsed(),
            started,
        }
    }

    pub(super) fn nginx(bin: &Path, prefix: &Path, port: u16, pin: bool) -> Proc {
        let started = Instant::now();
        let child = command(bin, pin)
            .arg("-p")
            .arg(prefix)
            .arg("-e")
            .arg(prefix.join("error.log"))
            .arg("-c")
            .arg(prefix.join("nginx.conf"))
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        Proc::register(&child);
        let proxy: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let mut p = Proc {
            kind: Kind::Nginx,
            child,
            proxy,
            admin: None,
            started,
            ready_after: Duration::ZERO,
        };
        for _ in 0..4000 {
            if std::net::TcpStream::connect(proxy).is_ok() {
                p.ready_after = started.elapsed();
                return p;
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                let log = std::fs::read_to_string(prefix.join("error.log")).unwrap_or_default();
                panic!("nginx exited ({status}) at start:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("nginx did not listen on {proxy} within 20 s");
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process and its descendants' (write_bytes, cancelled_write_bytes) from /proc/<pid>/io.
    pub(super) fn io(&self) -> (u64, u64) {
        let mut pids = vec![self.pid()];
        pids.extend(descendants(self.pid()));
        let mut sum = (0, 0);
        for pid in pids {
            let text = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
            for line in text.lines() {
                let mut it = line.split(':');
                let (Some(k), Some(v)) = (it.next(), it.next()) else {
                    continue;
                };
                let v: u64 = v.trim().parse().unwrap_or(0);
                match k {
                    "write_bytes" => sum.0 += v,
                    "cancelled_write_bytes" => sum.1 += v,
                    _ => {}
                }
            }
        }
        sum
    }

    /// Clean stop: SIGTERM for Shellac, SIGQUIT (graceful shutdown) for nginx; waits up to
    /// 60 s, then SIGKILLs what is left.
    pub(super) fn stop(&mut self) {
        let sig = match self.kind {
            Kind::Shellac => libc::SIGTERM,
            Kind::Nginx => libc::SIGQUIT,
        };
        let kids = descendants(self.pid());
        kill(self.pid(), sig);
        for _ in 0..1200 {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.crash_with(kids);
    }

    /// `kill -9` of the server and every process below it.
    pub(super) fn crash(&mut self) {
        let kids = descendants(self.pid());
        self.crash_with(kids);
    }

    pub(super) fn crash_with(&mut self, mut kids: Vec<u32>) {
        kids.extend(descendants(self.pid()));
        kill_tree(self.pid());
        for &k in &kids {
            kill(k, libc::SIGKILL);
        }
        let _ = self.child.wait();
        // Orphaned workers die (and are reaped) asynchronously: wait until they are gone and
        // the port is closed, so the next start can bind it (at most 10 s).
        for _ in 0..200 {
            let alive = kids.iter().any(|k| {
                std::fs::read_to_string(format!("/proc/{k}/stat")).is_ok_and(|s| {
                    s.rsplit_once(')')
                        .and_then(|(_, r)| r.split_whitespace().next())
                        .is_some_and(|state| state != "Z")
                })
            });
            if !alive && std::net::TcpStream::connect(self.proxy).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            kill_tree(self.pid());
        }
        let _ = self.child.wait();
        STARTED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| *p != self.child.id());
    }
}
