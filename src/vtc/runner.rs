//! The runner: each file split, checked for scope and run on a thread of its own with its
//! own temporary directory, macros and time limit; files run a few at a time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use super::context::{Flavour, Halt, Shared, lock};
use super::outcome::{Options, Outcome, Verdict, Wiring};
use super::{exec, lex, scope};

/// Runs files; holds the temporary directory their files go under.
pub struct Runner {
    pub(super) opts: Options,
    pub(super) wiring: Wiring,
    pub(super) root: PathBuf,
    seq: AtomicU64,
}

static RUNNERS: AtomicUsize = AtomicUsize::new(0);

impl Runner {
    /// A runner with its own temporary directory; asks `opts.shellac` what it can do.
    pub fn new(opts: Options) -> std::io::Result<Runner> {
        let root = std::env::temp_dir().join(format!(
            "shellac-vtc.{}.{}",
            std::process::id(),
            RUNNERS.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&root)?;
        let wiring = probe(&opts.shellac, &root);
        Ok(Runner {
            opts,
            wiring,
            root,
            seq: AtomicU64::new(0),
        })
    }

    pub fn wiring(&self) -> Wiring {
        self.wiring
    }

    /// Runs one file.
    pub fn run_file(&self, path: &Path) -> Outcome {
        let t0 = Instant::now();
        let done = |verdict, log, errvcl| Outcome {
            file: path.to_path_buf(),
            verdict,
            duration: t0.elapsed(),
            log,
            errvcl,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => return done(Verdict::Fail(format!("cannot read: {e}")), vec![], vec![]),
        };
        let cmds = match lex::split(&text, 1) {
            Ok(c) => c,
            Err(e) => {
                return done(
                    Verdict::Skip(format!("VTC syntax the runner cannot split: {e}")),
                    vec![],
                    vec![],
                );
            }
        };
        let flavour = match cmds.first().map(lex::Command::name) {
            Some("test") => Flavour::Legacy,
            _ => Flavour::Trunk,
        };
        if let Some(why) = scope::out_of_scope(&cmds, flavour, self.wiring) {
            return done(Verdict::Skip(why), vec![], vec![]);
        }
        if let Some(why) = scope::refused(&cmds) {
            return done(Verdict::Aside(why), vec![], vec![]);
        }
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let stem = path
            .file_stem()
            .map_or_else(|| "vtc".into(), |s| s.to_string_lossy().into_owned());
        let tmpdir = self.root.join(format!("{stem}.{n}"));
        if let Err(e) = std::fs::create_dir_all(&tmpdir) {
            return done(
                Verdict::Fail(format!("{}: {e}", tmpdir.display())),
                vec![],
                vec![],
            );
        }
        let shared = Arc::new(Shared::new(flavour, self.opts.timeout, tmpdir.clone()));
        // A port nothing listens on: connections to `${bad_backend}` are refused at once.
        let bad = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .and_then(|s| {
                s.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())?;
                Ok(s)
            });
        let bad_port = bad
            .as_ref()
            .ok()
            .and_then(|s| s.local_addr().ok())
            .and_then(|a| a.as_socket())
            .map_or(9, |a| a.port());
        define_macros(&shared, path, &tmpdir, n, bad_port);
        if cmds.iter().any(|c| c.name() == "logexpect") {
            shared.vsl.store(true, Ordering::Relaxed);
        }
        if flavour == Flavour::Legacy && !text.to_ascii_lowercase().contains("req.http.host ==") {
            shared.legacy_host.store(true, Ordering::Relaxed);
        }
        let (tx, rx) = mpsc::channel();
        let (s2, shellac, wiring) = (shared.clone(), self.opts.shellac.clone(), self.wiring);
        let spawned = std::thread::Builder::new()
            .name("vtc-top".into())
            .spawn(move || {
                let mut top = exec::Top::new(s2, shellac, wiring);
                let _ = top.run(&cmds);
                let _ = tx.send(top.errvcl);
            });
        if let Err(e) = spawned {
            return done(
                Verdict::Fail(format!("cannot start a thread: {e}")),
                vec![],
                vec![],
            );
        }
        let limit = self.opts.timeout;
        let errvcl = match rx.recv_timeout(limit + Duration::from_secs(1)) {
            Ok(e) => e,
            Err(_) => {
                shared.halt(
                    "top",
                    &Halt::Fail(format!("time limit of {} s reached", limit.as_secs())),
                );
                rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default()
            }
        };
        drop(bad);
        let verdict = match shared.outcome() {
            None => Verdict::Pass,
            Some(Halt::Fail(m)) => Verdict::Fail(m),
            Some(Halt::Skip(m)) => Verdict::Skip(m),
            Some(Halt::Stopped) => Verdict::Fail("stopped".into()),
        };
        let log = if self.opts.verbose || matches!(verdict, Verdict::Fail(_)) {
            shared.log_lines()
        } else {
            Vec::new()
        };
        let _ = std::fs::remove_dir_all(&tmpdir);
        done(verdict, log, errvcl)
    }

    /// Runs `files`, `opts.jobs` at a time; `each` sees every outcome as it comes.
    pub fn run_all(&self, files: &[PathBuf], each: &(dyn Fn(&Outcome) + Sync)) -> Vec<Outcome> {
        spread(self.opts.jobs, files, |_, f| {
            let o = self.run_file(f);
            each(&o);
            o
        })
    }
}

/// `work` done on every item, `jobs` items at a time (each on the next free thread), the
/// results in the items' order.
pub(super) fn spread<I: Sync, T: Send>(
    jobs: usize,
    items: &[I],
    work: impl Fn(usize, &I) -> T + Sync,
) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, T)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = work(i, item);
                    lock(&results).push((i, r));
                }
            });
        }
    });
    let mut out = results.into_inner().unwrap_or_else(|e| e.into_inner());
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

pub(super) fn define_macros(shared: &Shared, path: &Path, tmpdir: &Path, n: u64, bad_port: u16) {
    shared.define("top", "tmpdir", tmpdir.display().to_string());
    let testdir = path.parent().map_or_else(PathBuf::new, Path::to_path_buf);
    shared.define("top", "testdir", testdir.display().to_string());
    if let Ok(cwd) = std::env::current_dir() {
        shared.define("top", "pwd", cwd.display().to_string());
    }
    shared.define("top", "localhost", "127.0.0.1");
    // TEST-NET-1 (RFC 5737): never routed. 2.1's harness used 10.255.255.255, which a private
    // network may route (an egress filter answered it on one test machine).
    shared.define("top", "bad_ip", "192.0.2.255");
    shared.define("top", "bad_backend", format!("127.0.0.1:{bad_port}"));
    shared.define("top", "listen_addr", "127.0.0.1:0");
    shared.define(
        "top",
        "vtcid",
        format!("vtc.{}.{n:08x}", std::process::id()),
    );
}

/// Asks `shellac` what it can do with VCL: each way must accept a valid VCL and refuse an
/// invalid one.
fn probe(shellac: &Path, dir: &Path) -> Wiring {
    let good = dir.join("probe-good.vcl");
    let bad = dir.join("probe-bad.vcl");
    let _ = std::fs::write(
        &good,
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; .port = \"9\"; }\n",
    );
    let _ = std::fs::write(
        &bad,
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; .port = \"9\"; }\nsub vcl_recv { nonsense; }\n",
    );
    let check = |file: &Path| {
        let mut cmd = Command::new(shellac);
        cmd.arg("check").arg("--file-only").arg(file);
        super::check::output_within(&mut cmd, Duration::from_secs(30)).is_ok_and(|(ok, _)| ok)
    };
    let vcl_check = check(&good) && !check(&bad);
    let cfg = |vcl: &Path, name: &str| {
        let p = dir.join(name);
        let _ = std::fs::write(&p, format!("[vcl]\nfile = \"{}\"\n", vcl.display()));
        p
    };
    let serve = check(&cfg(&good, "probe-good.toml")) && !check(&cfg(&bad, "probe-bad.toml"));
    Wiring {
        serve,
        check: vcl_check,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::spread;

    /// Every item once, the results in the items' order, never more than `jobs` at once.
    #[test]
    fn spread_keeps_the_order_and_the_job_limit() {
        let items: Vec<u64> = (0..40).collect();
        for jobs in [0, 1, 3, 64] {
            let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let out = spread(jobs, &items, |i, x| {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // Later items finish first, so the order comes from the index, not from time.
                std::thread::sleep(std::time::Duration::from_micros(40 - *x));
                running.fetch_sub(1, Ordering::SeqCst);
                (i, x * 2)
            });
            let want: Vec<(usize, u64)> = items.iter().map(|&x| (x as usize, x * 2)).collect();
            assert_eq!(out, want, "jobs {jobs}");
            assert!(most.load(Ordering::SeqCst) <= jobs.max(1), "jobs {jobs}");
        }
        assert!(spread(2, &[] as &[u8], |_, _| 0).is_empty());
    }
}
