//! The top level of a VTC file: its commands in order (`varnishtest`, `server`, `client`,
//! `varnish`, `delay`, `barrier`, `loop`, `feature`), then the end of the file as
//! varnishtest does it — clients waited for, `varnish` processes stopped (one that died on
//! its own fails the test), servers cancelled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod varnish_cmd;

use super::client::Client;
use super::context::{FEATURES, Halt, Shared, Step, fail, skip};
use super::lex::{self, Command};
use super::logexp::LogExpect;
use super::outcome::{ErrvclCase, Wiring};
use super::peer::Arg;
use super::server::Server;
use super::spec;
use super::varnish::Varnish;

pub struct Top {
    pub shared: Arc<Shared>,
    shellac: std::path::PathBuf,
    wiring: Wiring,
    servers: BTreeMap<String, Server>,
    clients: BTreeMap<String, Client>,
    varnishes: BTreeMap<String, Varnish>,
    logexpects: BTreeMap<String, LogExpect>,
    pub errvcl: Vec<ErrvclCase>,
}

impl Top {
    pub fn new(shared: Arc<Shared>, shellac: std::path::PathBuf, wiring: Wiring) -> Top {
        Top {
            shared,
            shellac,
            wiring,
            servers: BTreeMap::new(),
            clients: BTreeMap::new(),
            varnishes: BTreeMap::new(),
            logexpects: BTreeMap::new(),
            errvcl: Vec::new(),
        }
    }

    /// Runs the file's commands, then its end.
    pub fn run(&mut self, cmds: &[Command]) -> Step {
        let r = self.commands(cmds);
        if let Err(h) = &r {
            self.shared.halt("top", h);
        }
        self.finish();
        r
    }

    fn commands(&mut self, cmds: &[Command]) -> Step {
        for cmd in cmds {
            self.shared.check()?;
            let args = cmd
                .words
                .iter()
                .map(|w| Ok((self.shared.expand(&w.text)?, w.block, w.line)))
                .collect::<Step<Vec<Arg>>>()?;
            self.command(&args, cmd.line)?;
        }
        Ok(())
    }

    fn command(&mut self, args: &[Arg], line: u32) -> Step {
        let name = args[0].0.as_str();
        let texts: Vec<String> = args.iter().map(|a| a.0.clone()).collect();
        let shared = self.shared.clone();
        if let Some(r) = spec::common(&shared, "top", &texts, line, &mut |block, l| {
            let cmds = lex::split(block, l).map_err(|e| Halt::Fail(format!("VTC syntax: {e}")))?;
            self.commands(&cmds)
        }) {
            return r;
        }
        match name {
            "varnishtest" | "test" | "vtest" => {
                if let Some(d) = texts.get(1) {
                    self.shared.log("top", format!("TEST {d}"));
                }
                Ok(())
            }
            "server" => {
                let n = entity_name(args, 's', "Server")?;
                let s = self
                    .servers
                    .entry(n.clone())
                    .or_insert_with(|| Server::new(&n));
                s.command(&shared, &args[2..])
            }
            "client" => {
                let n = entity_name(args, 'c', "Client")?;
                let c = self
                    .clients
                    .entry(n.clone())
                    .or_insert_with(|| Client::new(&n));
                c.command(&shared, &args[2..])
            }
            "varnish" => self.varnish(args),
            "logexpect" => {
                let n = entity_name(args, 'l', "Logexpect")?;
                let l = self
                    .logexpects
                    .entry(n.clone())
                    .or_insert_with(|| LogExpect::new(&n));
                l.command(&shared, &args[2..])
            }
            "feature" => feature(&shared, &texts[1..]),
            "shell" | "process" | "varnishlog" | "haproxy" | "syslog" | "tunnel" | "filewrite"
            | "setenv" | "random" | "stream" => skip(format!(
                "`{name}` (line {line}) is outside what Shellac's runner covers"
            )),
            other => skip(format!(
                "VTC command {other:?} (line {line}) is not implemented by the runner"
            )),
        }
    }

    /// `varnish vN OPTIONS...`: the process made on first use, then its options in order.
    fn varnish(&mut self, args: &[Arg]) -> Step {
        let n = entity_name(args, 'v', "Varnish")?;
        if !self.varnishes.contains_key(&n) {
            let v = Varnish::new(&self.shared, &n, &self.shellac, self.wiring)?;
            self.varnishes.insert(n.clone(), v);
        }
        let bound: Vec<(String, super::stream::Where)> = self
            .servers
            .values()
            .filter_map(|s| s.addr.clone().map(|a| (s.name().to_string(), a)))
            .collect();
        let Some(v) = self.varnishes.get_mut(&n) else {
            return fail("unreachable: varnish");
        };
        varnish_cmd::VarnishCommand {
            v,
            shared: &self.shared,
            name: &n,
            rest: &args[2..],
            bound: &bound,
            errvcl: &mut self.errvcl,
            i: 0,
            syntax: "4.1".to_string(),
        }
        .run()
    }

    /// The end of the file: clients finish, processes stop, servers are cancelled.
    fn finish(&mut self) {
        for c in self.clients.values_mut() {
            if let Err(h) = c.wait(&self.shared) {
                self.shared.halt("top", &h);
            }
        }
        // A server still waiting for a request the file never makes (s00008's "never used")
        // must not fail on the EOF the proxy's stop brings.
        for s in self.servers.values() {
            s.cancel();
        }
        for v in self.varnishes.values_mut() {
            if let Err(h) = v.stop(&self.shared) {
                self.shared.halt("top", &h);
            }
        }
        self.shared.end();
        // A logexpect nobody waited for is abandoned, as varnishtest cancels it.
        for l in self.logexpects.values_mut() {
            let _ = l.wait(&self.shared);
        }
        for s in self.servers.values_mut() {
            if let Some(t) = s.take_thread() {
                let _ = t.join();
            }
        }
    }
}

fn entity_name(args: &[Arg], first: char, what: &str) -> Step<String> {
    let n = args
        .get(1)
        .map(|a| a.0.clone())
        .ok_or_else(|| Halt::Fail(format!("{what} needs a name")))?;
    if !n.starts_with(first) {
        return fail(format!("{what} name must start with '{first}' ({n})"));
    }
    Ok(n)
}

/// `feature ...`: what this machine and runner have; a missing one skips the file, as in
/// varnishtest. `feature cmd CMD` asks `sh -c CMD` (a platform or tool check: exit 0 means
/// present), within 10 s.
fn feature(shared: &Shared, names: &[String]) -> Step {
    if names.first().map(String::as_str) == Some("cmd") {
        let Some(cmd) = names.get(1) else {
            return fail("feature cmd needs a command");
        };
        let ok = run_check(shared, cmd)?;
        shared.log("top", format!("feature cmd {cmd:?}: {ok}"));
        return if ok {
            Ok(())
        } else {
            skip(format!("feature cmd {cmd:?} is false here"))
        };
    }
    for f in names {
        match f.as_str() {
            "ignore_unknown_macro" => shared
                .ignore_unknown_macro
                .store(true, std::sync::atomic::Ordering::Relaxed),
            f if FEATURES.contains(&f) => {}
            other => return skip(format!("feature {other}")),
        }
    }
    Ok(())
}

/// Whether `sh -c CMD` exits 0 (killed after 10 s: false).
fn run_check(shared: &Shared, cmd: &str) -> Step<bool> {
    let mut sh = std::process::Command::new("/bin/sh");
    sh.arg("-c")
        .arg(cmd)
        .current_dir(&shared.tmpdir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = super::sock::spawn(&mut sh)
        .map_err(|e| Halt::Fail(format!("feature cmd: cannot run /bin/sh: {e}")))?;
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Ok(status.success());
        }
        if std::time::Instant::now() > until || shared.stopped() {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name of [`FEATURES`] is present when a file runs (the scope says the same:
    /// `scope::tests`); any other is a skip; `ignore_unknown_macro` turns its switch on.
    #[test]
    fn the_features_the_scope_admits_are_present_when_run() {
        let shared = Shared::new(
            super::super::context::Flavour::Trunk,
            Duration::from_secs(5),
            std::env::temp_dir(),
        );
        for f in FEATURES {
            assert!(feature(&shared, &[f.to_string()]).is_ok(), "{f}");
        }
        assert!(
            shared
                .ignore_unknown_macro
                .load(std::sync::atomic::Ordering::Relaxed)
        );
        assert!(matches!(
            feature(&shared, &["dns".to_string()]),
            Err(Halt::Skip(_))
        ));
    }
}
