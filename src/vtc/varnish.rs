//! `varnish vN`: a real Shellac process in Varnish's place. Its VCL is checked with
//! `shellac check` when the file gives it (`-vcl`, `-vcl+backend`: the harness's backend
//! declarations for the servers first; `-errvcl`, 2.1's `-badvcl`: it must be refused), and
//! `-start` runs `shellac serve` on a generated configuration (loopback port 0, an admin
//! listener, the VCL file, the Varnish parameters that map to Shellac settings). A VCL given
//! while it runs, or a parameter change, is a reload (`POST /reload`): the cache stays, as
//! Varnish's does across `vcl.use`. `-stop` ends the process (SIGTERM, then SIGKILL), by
//! its id.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::client::AdminClient;

use super::check::{Checked, check_vcl, first_error};
use super::context::{Flavour, Halt, Shared, Step, fail, kill, skip};
use super::outcome::Wiring;
use super::params::Settings;
use super::process::Running;
use super::sock::sock_text;
use super::stream::Where;

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
    /// Its listen addresses (`-a`) in order: `IP:PORT` or a Unix socket's path;
    /// `127.0.0.1:0` until the file gives one.
    listen: Vec<String>,
    /// Whether a `-a` replaced the default address.
    listen_given: bool,
    child: Option<Running>,
}

/// Where a `varnish vN` listens when the file does not say (varnishtest's default).
const DEFAULT_LISTEN: &str = "127.0.0.1:0";

/// Whether a listen address is a Unix socket's path.
fn is_unix(addr: &str) -> bool {
    addr.starts_with('/')
}

/// The Varnish backend declarations `-vcl+backend` puts first: one per server that listens.
pub fn backend_decls(servers: &[(String, Where)]) -> String {
    let mut out = String::new();
    for (name, a) in servers {
        out.push_str(&format!("backend {name} {{ {} }}\n", a.backend_fields()));
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
            settings: Settings::for_file(shared.vsl.load(std::sync::atomic::Ordering::Relaxed)),
            vcl: None,
            vcl_nbr: 0,
            vcls: BTreeMap::new(),
            active: String::new(),
            b_backend: None,
            listen: vec![DEFAULT_LISTEN.into()],
            listen_given: false,
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

    /// `-a ADDRESS` (`IP:PORT` or a Unix socket's path), after those given before: the first
    /// replaces the default.
    pub fn set_listen(&mut self, addr: String) {
        if !self.listen_given {
            self.listen.clear();
            self.listen_given = true;
        }
        self.listen.push(addr);
    }

    /// The addresses of the configuration: the file's, and when all are Unix sockets a
    /// loopback TCP port that no macro names (Shellac's configuration needs one `listen`
    /// address; the file's clients never see it).
    fn config_listen(&self) -> Vec<String> {
        let mut all = self.listen.clone();
        if all.iter().all(|l| is_unix(l)) {
            all.push(DEFAULT_LISTEN.into());
        }
        all
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
            Some(&self.config_listen()),
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
            let addr = if b.starts_with('/') {
                Where::Unix(b.into())
            } else {
                Where::Tcp(super::sock::resolve(&b)?)
            };
            let decl = backend_decls(&[("default".into(), addr)]);
            let text = self.compose(shared, "4.1", "", &decl);
            self.load(shared, &text)?;
        }
        if self.vcl.is_none() {
            return fail(format!("{}: no VCL loaded before -start", self.name));
        }
        self.write_config()?;
        let running = Running::start(
            shared,
            &self.name,
            &self.shellac,
            &self.config_path(),
            &self.dir,
        )?;
        let admin = running.admin;
        shared.set_admin(&self.name, Some(admin));
        let n = &self.name;
        // The TCP addresses are logged in the configuration's order.
        let mut tcp = running.addrs.iter();
        for (i, l) in self.listen.iter().enumerate() {
            // A Unix socket's: `0.0.0.0`, `0` and its path, as varnishtest defines them.
            let (addr, port, sock) = if is_unix(l) {
                ("0.0.0.0".to_string(), "0".to_string(), l.clone())
            } else {
                let Some(a) = tcp.next() else {
                    return fail(format!("{n}: shellac serve did not log its listener {l}"));
                };
                let sock = match shared.flavour {
                    Flavour::Trunk => sock_text(*a),
                    Flavour::Legacy => format!("{} {}", a.ip(), a.port()),
                };
                (a.ip().to_string(), a.port().to_string(), sock)
            };
            shared.log(n, format!("Listen on {sock}"));
            let mut names = vec![format!("{n}_a{i}")];
            if i == 0 {
                names.push(n.to_string());
            }
            for prefix in names {
                shared.define(n, &format!("{prefix}_addr"), addr.clone());
                shared.define(n, &format!("{prefix}_port"), port.clone());
                shared.define(n, &format!("{prefix}_sock"), sock.clone());
            }
        }
        shared.log(n, format!("admin {admin}"));
        self.child = Some(running);
        Ok(())
    }

    /// `-stop`: the process ends (its cache with it, as a Varnish child's).
    pub fn stop(&mut self, shared: &Shared) -> Step {
        let Some(r) = self.child.take() else {
            return Ok(());
        };
        // A restart listens where this one did.
        let mut tcp = r.addrs.iter();
        for l in self.listen.iter_mut().filter(|l| !is_unix(l)) {
            if let Some(a) = tcp.next() {
                *l = sock_text(*a);
            }
        }
        shared.set_admin(&self.name, None);
        for m in ["addr", "port", "sock"] {
            shared.undefine(&self.name, &format!("{}_{m}", self.name));
            for i in 0..self.listen.len() {
                shared.undefine(&self.name, &format!("{}_a{i}_{m}", self.name));
            }
        }
        r.stop(shared, &self.name)
    }
}

impl Drop for Varnish {
    fn drop(&mut self) {
        if let Some(mut r) = self.child.take() {
            kill(r.child.id());
            let _ = r.child.wait();
        }
    }
}
