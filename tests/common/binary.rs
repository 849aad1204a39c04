//! The real `shellac` binary as a child process: `serve` started, its proxy and admin
//! addresses read from its log, signals, a bounded stop, and a kill if a test panics first (so
//! no process outlives the test holding its output pipe); a long-running command's output
//! ([`Lines`]).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_shellac");

/// `cmd` run to its end: (exit code, -1 when a signal ended it; stdout; stderr).
pub fn output(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("run shellac");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `shellac ARGS` run to its end: (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    output(Command::new(BIN).args(args))
}

/// A `shellac ARGS` that runs until stopped (`shellac log`), its stdout read line by line;
/// killed on drop (so a failed test leaves no process behind).
pub struct Lines {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Lines {
    /// Starts `shellac ARGS` with stdout piped.
    pub fn spawn(args: &[&str]) -> Lines {
        let mut child = Command::new(BIN)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start shellac");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Lines { child, lines }
    }

    /// The next line it prints (waiting at most 10 s; `None`: none came).
    pub fn next(&self) -> Option<String> {
        self.lines.recv_timeout(Duration::from_secs(10)).ok()
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `shellac serve`.
pub struct Served {
    child: Child,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    /// Its log (stderr) after the two address lines, one line at a time.
    pub log: mpsc::Receiver<String>,
    /// The lines logged before the two address lines (work started at once, such as the
    /// first connection to a Redis cluster, may log there).
    pub early: Vec<String>,
}

impl Served {
    /// `shellac serve ARGS`.
    pub fn serve(args: &[&str]) -> Served {
        let mut cmd = Command::new(BIN);
        cmd.arg("serve").args(args);
        Served::start(cmd)
    }

    /// Starts `cmd` (the binary, or a shell that execs it) with `SHELLAC_LOG=info` and waits
    /// (at most 20 s per line) for its `proxy listening on` and `admin listening on` lines.
    pub fn start(cmd: Command) -> Served {
        Served::try_start(cmd)
            .unwrap_or_else(|log| panic!("shellac logs its addresses; it exited:\n{log}"))
    }

    /// [`Served::start`], or the lines it logged when it exited before both addresses (a
    /// port it was given is taken, say).
    pub fn try_start(mut cmd: Command) -> Result<Served, String> {
        cmd.env("SHELLAC_LOG", "info").stderr(Stdio::piped());
        let mut child = spawn_copied(&mut cmd);
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let (mut proxy, mut admin) = (None, None);
        let mut early = Vec::new();
        while proxy.is_none() || admin.is_none() {
            let line = match log.recv_timeout(Duration::from_secs(20)) {
                Ok(line) => line,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = child.wait();
                    return Err(early.join("\n"));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("shellac logs its addresses"),
            };
            // Regression (issue 23, defect 6): colour codes were written to pipes and files.
            assert!(
                !line.contains('\x1b'),
                "colour codes in a log that is not a terminal: {line:?}"
            );
            if let Some(a) = line.split("proxy listening on ").nth(1) {
                proxy = a.trim().parse().ok();
            }
            if let Some(a) = line.split("admin listening on ").nth(1) {
                admin = a.trim().parse().ok();
            }
            early.push(line);
        }
        Ok(Served {
            child,
            proxy: proxy.expect("proxy address"),
            admin: admin.expect("admin address"),
            log,
            early,
        })
    }

    /// Its process id (to read `/proc/PID/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its stdout, when `cmd` piped it (once).
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// Sends a signal with kill(1), e.g. `"-HUP"`.
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// SIGKILL (a crash: nothing is flushed), and waits for it.
    pub fn kill9(mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits (at most 5 s) for a clean exit.
    pub fn stop(mut self) {
        self.signal("-TERM");
        for _ in 0..100 {
            if let Some(status) = self.child.try_wait().expect("wait for shellac") {
                assert!(status.success(), "{status:?}");
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("shellac did not stop on SIGTERM");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Spawns `cmd`, retrying while its program is "Text file busy": a test that just copied the
/// binary (tests/startup/upgrade.rs) can lose the race with another test's fork, whose child holds the
/// copy's write descriptor open until its own exec (bounded: 2 s).
fn spawn_copied(cmd: &mut Command) -> Child {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            r => return r.expect("start shellac"),
        }
    }
}
