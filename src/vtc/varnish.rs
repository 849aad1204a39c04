//! `varnish vN`: a real Shellac process in Varnish's place. Its VCL is checked with
//! `shellac check` when the file gives it (`-vcl`, `-vcl+backend`: the harness's backend
//! declarations for the servers first; `-errvcl`, 2.1's `-badvcl`: it must be refused), and
//! `-start` runs `shellac serve` on a generated configuration (loopback port 0, an admin
//! listener, the VCL file, the Varnish parameters that map to Shellac settings). A VCL given
//! while it runs, or a parameter change, is a reload (`POST /reload`): the cache stays, as
//! Varnish's does across `vcl.use`. `-stop` ends the process (SIGTERM, then SIGKILL), by
//! its id.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::client::AdminClient;

use super::Wiring;
use super::context::{Flavour, Halt, Shared, Step, fail, kill, lock, skip};
use super::params::Settings;
use super::sock::sock_text;

/// How one VCL check came out.
pub struct Checked {
    pub accepted: bool,
    pub output: String,
}

pub struct Varnish {
    pub name: String,
    dir: PathBuf,
    shellac: PathBuf,
    wiring: Wiring,
    /// The Shellac settings the file's Varnish parameters map to.
    pub settings: Settings,
    /// The VCL in use (its file), and how many were given.
    vcl: Option<PathBuf>,
    vcl_nbr: u32,
    /// The VCLs loaded, by name (`-vcl` ones are vcl1, vcl2, ... in the order given, refused
    /// ones counting, as Varnish names them; `vcl.load NAME` / `vcl.inline NAME` name theirs).
    vcls: BTreeMap<String, PathBuf>,
    /// The name of the VCL in use.
    active: String,
    /// `-b ADDRESS`: Varnish's builtin VCL with this one backend.
    b_backend: Option<String>,
    listen: String,
    child: Option<Running>,
}

struct Running {
    child: Child,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    tail: Arc<Mutex<Vec<String>>>,
}

/// The Varnish backend declarations `-vcl+backend` puts first: one per server that listens.
pub fn backend_decls(servers: &[(String, SocketAddr)]) -> String {
    let mut out = String::new();
    for (name, a) in servers {
        out.push_str(&format!(
            "backend {name} {{ .host = \"{}\"; .port = \"{}\"; }}\n",
            a.ip(),
            a.port()
        ));
    }
    out
}

impl Varnish {
    pub fn new(shared: &Shared, name: &str, shellac: &Path, wiring: Wiring) -> Step<Varnish> {
        let dir = shared.tmpdir.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| Halt::Fail(format!("{}: {e}", dir.display())))?;
        shared.define(name, &format!("{name}_name"), dir.display().to_string());
        Ok(Varnish {
            name: name.to_string(),
            dir,
            shellac: shellac.to_path_buf(),
            wiring,
            settings: Settings::default(),
            vcl: None,
            vcl_nbr: 0,
            vcls: BTreeMap::new(),
            active: String::new(),
            b_backend: None,
            listen: "127.0.0.1:0".into(),
            child: None,
        })
    }

    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// The name of the VCL in use.
    pub fn active_vcl(&self) -> &str {
        &self.active
    }

    /// The admin client of the running process.
    pub fn admin(&self) -> Step<AdminClient> {
        match &self.child {
            Some(r) => Ok(AdminClient {
                addr: r.admin,
                token: None,
            }),
            None => fail(format!("{}: not running", self.name)),
        }
    }

    /// The text of a VCL the file gives, as the harness loads it.
    pub fn compose(&self, shared: &Shared, syntax: &str, body: &str, backends: &str) -> String {
        match shared.flavour {
            Flavour::Trunk => format!("vcl {syntax};\n{backends}\n{body}\n"),
            Flavour::Legacy => format!("{backends}\n{body}\n"),
        }
    }

    /// Writes `text` as the next VCL file and checks it with `shellac check`.
    pub fn check(&mut self, shared: &Shared, text: &str) -> Step<(PathBuf, Checked)> {
        self.vcl_nbr += 1;
        let name = format!("vcl{}", self.vcl_nbr);
        let (path, c) = check_vcl(
            &self.shellac,
            self.wiring,
            &self.settings,
            &self.dir,
            &name,
            text,
        )?;
        shared.log(
            &self.name,
            format!(
                "shellac check {name}: {}",
                if c.accepted { "accepted" } else { "refused" }
            ),
        );
        for l in c.output.lines().take(40) {
            shared.log(&self.name, format!("| {l}"));
        }
        Ok((path, c))
    }

    /// `-vcl` / `-vcl+backend`: the VCL must be accepted; it is used from now on.
    pub fn load(&mut self, shared: &Shared, text: &str) -> Step {
        let (path, c) = self.check(shared, text)?;
        if !c.accepted && first_error(&c.output).contains(".toml:") {
            return fail(format!(
                "Shellac refuses the settings the Varnish parameters map to: {}",
                first_error(&c.output)
            ));
        }
        if !c.accepted {
            if c.output.contains("Unsupported") || c.output.contains("not supported") {
                // Still a failure (valid VCL Shellac refuses), but say why.
                return fail(format!(
                    "VCL compilation failed expected success (Shellac does not support it): {}",
                    first_error(&c.output)
                ));
            }
            return fail(format!(
                "VCL compilation failed expected success: {}",
                first_error(&c.output)
            ));
        }
        self.active = format!("vcl{}", self.vcl_nbr);
        self.vcls.insert(self.active.clone(), path.clone());
        self.vcl = Some(path);
        if self.running() {
            self.reload(shared)?;
        }
        Ok(())
    }

    /// `vcl.load NAME FILE` / `vcl.inline NAME VCL`: checked and kept under NAME (Varnish's
    /// CLI status: 200, or 106 with the errors).
    pub fn cli_load(&mut self, shared: &Shared, name: &str, text: &str) -> Step<(u32, String)> {
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Ok((106, format!("Illegal character in VCL name ({name})")));
        }
        if self.vcls.contains_key(name) {
            return Ok((106, format!("Already a VCL named {name}")));
        }
        let (path, c) = check_vcl(
            &self.shellac,
            self.wiring,
            &self.settings,
            &self.dir,
            &format!("cli-{name}"),
            text,
        )?;
        shared.log(
            &self.name,
            format!(
                "shellac check {name}: {}",
                if c.accepted { "accepted" } else { "refused" }
            ),
        );
        if !c.accepted {
            return Ok((106, c.output));
        }
        self.vcls.insert(name.to_string(), path);
        Ok((200, String::new()))
    }

    /// `vcl.use NAME`: that VCL from now on (a reload while running).
    pub fn cli_use(&mut self, shared: &Shared, name: &str) -> Step<(u32, String)> {
        let Some(path) = self.vcls.get(name).cloned() else {
            return Ok((106, format!("No VCL named {name} known")));
        };
        self.vcl = Some(path);
        self.active = name.to_string();
        if self.running() {
            self.reload(shared)?;
        }
        Ok((200, String::new()))
    }

    /// `vcl.discard NAME`: forgotten, unless in use (300, as Varnish).
    pub fn cli_discard(&mut self, name: &str) -> (u32, String) {
        if name == self.active {
            return (300, format!("Cannot discard active VCL {name}"));
        }
        match self.vcls.remove(name) {
            Some(_) => (200, String::new()),
            None => (106, format!("No VCL named {name} known")),
        }
    }

    /// `-b ADDRESS`.
    pub fn set_b_backend(&mut self, addr: String) {
        self.b_backend = Some(addr);
    }

    /// `-a ADDRESS`.
    pub fn set_listen(&mut self, addr: String) {
        self.listen = addr;
    }

    /// Writes the configuration and re-reads it in the running process.
    pub fn reload(&mut self, shared: &Shared) -> Step {
        self.write_config()?;
        let admin = self.admin()?;
        let r = admin
            .request_with_body("POST", "/reload", b"")
            .map_err(|e| Halt::Fail(format!("{}: reload: {e}", self.name)))?;
        shared.log(
            &self.name,
            format!("reload: {} {}", r.status, r.body.trim()),
        );
        if r.status != 200 {
            return fail(format!("{}: reload refused: {}", self.name, r.body.trim()));
        }
        Ok(())
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("shellac.toml")
    }

    fn write_config(&self) -> Step {
        // A reload keeps the addresses as the process was started with (port 0 included):
        // they cannot change without a restart.
        let toml = self.settings.toml(
            Some(&self.listen),
            Some("127.0.0.1:0"),
            self.vcl.as_deref(),
            &self.dir,
        );
        std::fs::write(self.config_path(), toml)
            .map_err(|e| Halt::Fail(format!("{}: {e}", self.config_path().display())))
    }

    /// `-start`.
    pub fn start(&mut self, shared: &Arc<Shared>) -> Step {
        if self.running() {
            return fail(format!("{}: already running", self.name));
        }
        if !self.wiring.serve {
            return skip(
                "VCL not wired: `shellac serve` cannot run VCL (`[vcl] file`) on main yet",
            );
        }
        if self.vcl.is_none()
            && let Some(b) = self.b_backend.clone()
        {
            let addr = super::sock::resolve(&b)?;
            let decl = backend_decls(&[("default".into(), addr)]);
            let text = self.compose(shared, "4.1", "", &decl);
            self.load(shared, &text)?;
        }
        if self.vcl.is_none() {
            return fail(format!("{}: no VCL loaded before -start", self.name));
        }
        self.write_config()?;
        let mut cmd = Command::new(&self.shellac);
        cmd.arg("serve")
            .arg("--config")
            .arg(self.config_path())
            .current_dir(&self.dir)
            .env("SHELLAC_LOG", "info")
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
        let mut child = cmd
            .spawn()
            .map_err(|e| Halt::Fail(format!("cannot run {}: {e}", self.shellac.display())))?;
        shared.watch_pid(child.id());
        shared.log(&self.name, format!("PID: {}", child.id()));
        shared.define(
            &self.name,
            &format!("{}_pid", self.name),
            child.id().to_string(),
        );
        let tail = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        if let Some(stderr) = child.stderr.take() {
            let (shared, name, tail) = (shared.clone(), self.name.clone(), tail.clone());
            std::thread::spawn(move || read_log(stderr, &shared, &name, &tail, tx));
        }
        let (mut addr, mut admin) = (None, None);
        let until = Instant::now() + Duration::from_secs(10);
        while addr.is_none() || admin.is_none() {
            shared.check()?;
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Listening::Proxy(a)) => addr = addr.or(Some(a)),
                Ok(Listening::Admin(a)) => admin = Some(a),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        shared.unwatch_pid(child.id());
                        return fail(format!(
                            "{}: shellac serve exited ({status}) before listening: {}",
                            self.name,
                            lock(&tail).join(" / ")
                        ));
                    }
                    if Instant::now() > until {
                        kill(child.id());
                        let _ = child.wait();
                        shared.unwatch_pid(child.id());
                        return fail(format!(
                            "{}: shellac serve did not listen in 10 s",
                            self.name
                        ));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait();
                    shared.unwatch_pid(child.id());
                    return fail(format!(
                        "{}: shellac serve exited ({status:?}): {}",
                        self.name,
                        lock(&tail).join(" / ")
                    ));
                }
            }
        }
        let (Some(addr), Some(admin)) = (addr, admin) else {
            return fail("unreachable: listening addresses");
        };
        shared.log(&self.name, format!("Listen on {addr}, admin {admin}"));
        let n = &self.name;
        shared.define(n, &format!("{n}_addr"), addr.ip().to_string());
        shared.define(n, &format!("{n}_port"), addr.port().to_string());
        let sock = match shared.flavour {
            Flavour::Trunk => sock_text(addr),
            Flavour::Legacy => format!("{} {}", addr.ip(), addr.port()),
        };
        shared.define(n, &format!("{n}_sock"), sock.clone());
        shared.define(n, &format!("{n}_a0_addr"), addr.ip().to_string());
        shared.define(n, &format!("{n}_a0_port"), addr.port().to_string());
        shared.define(n, &format!("{n}_a0_sock"), sock);
        self.child = Some(Running {
            child,
            addr,
            admin,
            tail,
        });
        Ok(())
    }

    /// `-stop`: the process ends (its cache with it, as a Varnish child's).
    pub fn stop(&mut self, shared: &Shared) -> Step {
        let Some(mut r) = self.child.take() else {
            return Ok(());
        };
        // A restart listens where this one did.
        self.listen = sock_text(r.addr);
        for m in ["addr", "port", "sock"] {
            shared.undefine(&self.name, &format!("{}_{m}", self.name));
        }
        let pid = r.child.id();
        let crashed = match r.child.try_wait() {
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
            match r.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    kill(pid);
                    break r.child.wait().ok();
                }
            }
        };
        shared.unwatch_pid(pid);
        shared.log(&self.name, format!("stopped: {status:?}"));
        if let Some(status) = crashed {
            return fail(format!(
                "{}: shellac exited on its own during the test ({status}): {}",
                self.name,
                lock(&r.tail).join(" / ")
            ));
        }
        Ok(())
    }
}

/// Writes `text` as `dir/NAME.vcl` and checks it with `shellac check --file-only`: as the
/// `[vcl] file` of a configuration with `settings` when `serve` takes VCL (the path `serve`
/// compiles it by), else the VCL file itself.
pub fn check_vcl(
    shellac: &Path,
    wiring: Wiring,
    settings: &Settings,
    dir: &Path,
    name: &str,
    text: &str,
) -> Step<(PathBuf, Checked)> {
    let path = dir.join(format!("{name}.vcl"));
    std::fs::write(&path, text).map_err(|e| Halt::Fail(format!("{}: {e}", path.display())))?;
    let target = if wiring.serve {
        let cfg = dir.join(format!("check-{name}.toml"));
        std::fs::write(&cfg, settings.toml(None, None, Some(&path), dir))
            .map_err(|e| Halt::Fail(format!("{}: {e}", cfg.display())))?;
        cfg
    } else if wiring.check {
        path.clone()
    } else {
        return skip(
            "VCL not wired: neither `shellac check FILE.vcl` nor `[vcl] file` is on main yet",
        );
    };
    let mut cmd = Command::new(shellac);
    cmd.arg("check")
        .arg("--file-only")
        .arg(&target)
        .env("NO_COLOR", "1");
    let (success, output) = output_within(&mut cmd, CHECK_LIMIT)
        .map_err(|e| Halt::Fail(format!("shellac check {}: {e}", target.display())))?;
    Ok((
        path,
        Checked {
            accepted: success,
            output,
        },
    ))
}

/// How long one `shellac check` may take.
const CHECK_LIMIT: Duration = Duration::from_secs(30);

/// Runs `cmd` to its end: whether it exited 0, and its stdout then stderr. Killed (an
/// error) past `limit`.
pub(super) fn output_within(cmd: &mut Command, limit: Duration) -> std::io::Result<(bool, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(child.stdout.take().map(|s| Box::new(s) as _));
    let err = drain(child.stderr.take().map(|s| Box::new(s) as _));
    let until = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(format!(
                "did not finish in {} s",
                limit.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let text = |t: std::thread::JoinHandle<Vec<u8>>| {
        String::from_utf8_lossy(&t.join().unwrap_or_default()).into_owned()
    };
    Ok((status.success(), format!("{}{}", text(out), text(err))))
}

impl Drop for Varnish {
    fn drop(&mut self) {
        if let Some(mut r) = self.child.take() {
            kill(r.child.id());
            let _ = r.child.wait();
        }
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

/// The first error of a check's output, without the runner's temporary path: `vclN.vcl:L:C:
/// message` becomes `message (vclN.vcl:L:C)`, so that like errors read alike in the table.
pub fn first_error(output: &str) -> String {
    let line = output
        .lines()
        .find(|l| l.contains("error"))
        .or_else(|| output.lines().find(|l| l.contains(':')))
        .unwrap_or("")
        .trim();
    let line = line.strip_prefix("error: ").unwrap_or(line);
    let text = ["vcl:", "toml:"]
        .iter()
        .find_map(|ext| {
            let at = line.find(ext)?;
            let start = line[..at].rfind('/').map_or(0, |s| s + 1);
            let rest = &line[at + ext.len()..];
            // line:col: message
            let mut parts = rest.splitn(3, ':');
            let (l, c, msg) = (parts.next()?, parts.next()?, parts.next()?);
            Some(format!(
                "{} ({}{}:{l}:{c})",
                msg.trim(),
                &line[start..at],
                &ext[..ext.len() - 1],
            ))
        })
        .unwrap_or_else(|| line.to_string());
    text.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_errors_read_without_paths() {
        assert_eq!(
            super::first_error(
                "error: /tmp/shellac-vtc.1.0/b1.2/v1/vcl1.vcl:8:3: not supported: ESI\nmore"
            ),
            "not supported: ESI (vcl1.vcl:8:3)"
        );
        assert_eq!(
            super::first_error("x.toml: OK\nerror: /t/check1.toml:3:2: `cache.x`: bad"),
            "`cache.x`: bad (check1.toml:3:2)"
        );
    }
}
