//! The top level of a VTC file: its commands in order (`varnishtest`, `server`, `client`,
//! `varnish`, `delay`, `barrier`, `loop`, `feature`), then the end of the file as
//! varnishtest does it — clients waited for, `varnish` processes stopped (one that died on
//! its own fails the test), servers cancelled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::check::first_error;
use super::cli;
use super::client::Client;
use super::context::{Halt, Shared, Step, fail, skip};
use super::counters;
use super::lex::{self, Command};
use super::outcome::{ErrvclCase, Wiring};
use super::params::ParamError;
use super::peer::Arg;
use super::server::Server;
use super::spec;
use super::varnish::{Varnish, backend_decls};

pub struct Top {
    pub shared: Arc<Shared>,
    shellac: std::path::PathBuf,
    wiring: Wiring,
    servers: BTreeMap<String, Server>,
    clients: BTreeMap<String, Client>,
    varnishes: BTreeMap<String, Varnish>,
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
            "feature" => feature(&shared, &texts[1..]),
            "shell" | "process" | "logexpect" | "varnishlog" | "haproxy" | "syslog" | "tunnel"
            | "filewrite" | "setenv" | "random" | "stream" => skip(format!(
                "`{name}` (line {line}) is outside what Shellac's runner covers"
            )),
            other => skip(format!(
                "VTC command {other:?} (line {line}) is not implemented by the runner"
            )),
        }
    }

    fn varnish(&mut self, args: &[Arg]) -> Step {
        let n = entity_name(args, 'v', "Varnish")?;
        if !self.varnishes.contains_key(&n) {
            let v = Varnish::new(&self.shared, &n, &self.shellac, self.wiring)?;
            self.varnishes.insert(n.clone(), v);
        }
        let shared = self.shared.clone();
        let bound: Vec<(String, std::net::SocketAddr)> = self
            .servers
            .values()
            .filter_map(|s| s.addr.map(|a| (s.name().to_string(), a)))
            .collect();
        let Some(v) = self.varnishes.get_mut(&n) else {
            return fail("unreachable: varnish");
        };
        let mut syntax = "4.1".to_string();
        let rest = &args[2..];
        let mut i = 0;
        let text = |i: usize| -> Step<&str> {
            rest.get(i)
                .map(|a| a.0.as_str())
                .ok_or_else(|| Halt::Fail(format!("{} needs an argument", rest[i - 1].0)))
        };
        while i < rest.len() {
            shared.check()?;
            let (opt, line) = (rest[i].0.as_str(), rest[i].2);
            match opt {
                "-arg" => {
                    i += 1;
                    varnishd_args(v, text(i)?)?;
                }
                "-storage" => {
                    i += 1;
                    for s in text(i)?.split_whitespace() {
                        let s = s.strip_prefix("-s").unwrap_or(s);
                        param_result(v.settings.storage(s))?;
                    }
                }
                "-syntax" => {
                    i += 1;
                    syntax = text(i)?.to_string();
                }
                "-vcl" => {
                    i += 1;
                    let vcl = v.compose(&shared, &syntax, text(i)?, "");
                    v.load(&shared, &vcl)?;
                }
                "-vcl+backend" => {
                    i += 1;
                    let vcl = v.compose(&shared, &syntax, text(i)?, &backend_decls(&bound));
                    v.load(&shared, &vcl)?;
                }
                "-errvcl" | "-badvcl" => {
                    let expected = if opt == "-errvcl" {
                        i += 1;
                        Some(text(i)?.to_string())
                    } else {
                        None
                    };
                    i += 1;
                    let vcl = v.compose(&shared, &syntax, text(i)?, "");
                    let (_, c) = v.check(&shared, &vcl)?;
                    let matched = expected.as_ref().is_some_and(|m| c.output.contains(m));
                    self.errvcl.push(ErrvclCase {
                        line,
                        expected: expected.clone(),
                        rejected: !c.accepted,
                        message_matched: matched,
                        message: first_error(&c.output),
                    });
                    if c.accepted {
                        return fail(format!(
                            "VCL compilation succeeded expected failure (line {line}{})",
                            expected.map_or(String::new(), |m| format!(", Varnish says {m:?}"))
                        ));
                    }
                    shared.log(&n, "VCL compilation failed (as expected)");
                }
                "-start" => v.start(&shared)?,
                "-stop" | "-wait" => v.stop(&shared)?,
                "-cli" | "-cliok" => {
                    i += 1;
                    let a = cli::run(v, &shared, text(i)?, false)?;
                    shared.log(&n, format!("CLI {:03} <{}>", a.status, rest[i].0));
                    if opt == "-cliok" && a.status != cli::OK {
                        return fail(format!(
                            "FAIL CLI response {} expected {} ({})",
                            a.status,
                            cli::OK,
                            a.text.trim()
                        ));
                    }
                }
                "-clierr" => {
                    let want: u32 = text(i + 1)?
                        .parse()
                        .map_err(|_| Halt::Fail("-clierr: not a status".into()))?;
                    i += 2;
                    let a = cli::run(v, &shared, text(i)?, false)?;
                    shared.log(&n, format!("CLI {:03} <{}>", a.status, rest[i].0));
                    if a.status != want {
                        return fail(format!(
                            "FAIL CLI response {} expected {want} ({})",
                            a.status,
                            a.text.trim()
                        ));
                    }
                }
                "-cliexpect" => {
                    let re = super::expect::regex(text(i + 1)?)?;
                    i += 2;
                    let a = cli::run(v, &shared, text(i)?, true)?;
                    if !re.is_match(&a.text) {
                        return fail(format!(
                            "Expect failed: {:?} on {:?}",
                            rest[i - 1].0,
                            a.text
                        ));
                    }
                }
                "-expect" => {
                    let lhs = text(i + 1)?;
                    if lhs.starts_with('!') {
                        return skip(format!("-expect {lhs}: Varnish's counter namespace"));
                    }
                    let op = text(i + 2)?.to_string();
                    let rhs = text(i + 3)?.to_string();
                    i += 3;
                    expect_counter(v, &shared, lhs, &op, &rhs)?;
                }
                "-vsl_catchup" | "-vsc" => {
                    // Varnish's log and counter dumps: nothing to wait for or show here.
                    if opt == "-vsc" {
                        i += 1;
                    }
                }
                "-wait-running" => {
                    if !v.running() {
                        return fail(format!("{n}: not running"));
                    }
                }
                "-wait-stopped" => {
                    if v.running() {
                        return fail(format!("{n}: still running"));
                    }
                }
                "-clijson" | "-cleanup" | "-expectexit" | "-jail" | "-proto" => {
                    return skip(format!("varnish {opt}: Varnish's management process"));
                }
                other => return skip(format!("varnish option {other} is not implemented")),
            }
            i += 1;
        }
        Ok(())
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
            "ipv4"
            | "64bit"
            | "SO_RCVTIMEO_WORKS"
            | "!sanitizer"
            | "!asan"
            | "!coverage"
            | "!workspace_emulator"
            | "!tsan"
            | "!msan"
            | "!ubsan" => {}
            "ignore_unknown_macro" => shared
                .ignore_unknown_macro
                .store(true, std::sync::atomic::Ordering::Relaxed),
            other => return skip(format!("feature {other}")),
        }
    }
    Ok(())
}

/// Whether `sh -c CMD` exits 0 (killed after 10 s: false).
fn run_check(shared: &Shared, cmd: &str) -> Step<bool> {
    let mut child = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(&shared.tmpdir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
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

/// `-arg "..."`: the varnishd options that map (`-p`, `-s`, `-a`, `-b`, `-t`, `-l`).
fn varnishd_args(v: &mut Varnish, line: &str) -> Step {
    let words = cli::split_args(line);
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        let (flag, inline) = if w.len() > 2 && w.starts_with('-') {
            (&w[..2], Some(w[2..].to_string()))
        } else {
            (w, None)
        };
        let mut value = || -> Step<String> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            i += 1;
            words
                .get(i)
                .cloned()
                .ok_or_else(|| Halt::Fail(format!("varnishd {flag} needs a value")))
        };
        match flag {
            "-p" => {
                let p = value()?;
                let (name, val) = p
                    .split_once('=')
                    .ok_or_else(|| Halt::Fail(format!("-p {p}: expected NAME=VALUE")))?;
                param_result(v.settings.set(name, val))?;
            }
            "-s" => param_result(v.settings.storage(&value()?))?,
            "-t" => param_result(v.settings.set("default_ttl", &value()?))?,
            "-a" => {
                let a = value()?;
                if a.contains(['=', ',', '/']) {
                    return skip(format!("varnishd -a {a}: named, PROXY or Unix listeners"));
                }
                v.set_listen(a);
            }
            "-b" => {
                let b = value()?;
                v.set_b_backend(b);
            }
            // The size of Varnish's shared-memory log, and its hash table's kind (critbit,
            // simple_list, classic: how Varnish finds an object, not which): nothing to
            // set here.
            "-l" | "-h" => {
                value()?;
            }
            other => return skip(format!("varnishd option {other}")),
        }
        i += 1;
    }
    Ok(())
}

fn param_result(r: Result<(), ParamError>) -> Step {
    match r {
        Ok(()) => Ok(()),
        Err(ParamError::Unmapped(why)) => skip(why),
        Err(ParamError::Invalid(why)) => fail(why),
    }
}

/// `-expect COUNTER OP VALUE|COUNTER`: true within 5 s (polled every 100 ms), as
/// varnishtest waits for it.
fn expect_counter(v: &Varnish, shared: &Shared, lhs: &str, op: &str, rhs: &str) -> Step {
    let left = counters::source(lhs, Some(v.active_vcl()))?;
    let right = match parse_number(rhs) {
        Some(n) => Err(n),
        None => Ok(counters::source(rhs, Some(v.active_vcl()))?),
    };
    if !matches!(op, "==" | "!=" | ">" | "<" | ">=" | "<=") {
        return fail(format!("comparison {op} unknown"));
    }
    let admin = v.admin()?;
    let mut last = (None, None);
    for _ in 0..50 {
        shared.check()?;
        let l = counters::read(&admin, &left)?;
        let r = match &right {
            Err(n) => Some(*n),
            Ok(src) => counters::read(&admin, src)?,
        };
        last = (l, r);
        if let (Some(l), Some(r)) = (l, r) {
            let good = match op {
                "==" => l == r,
                "!=" => l != r,
                ">" => l > r,
                "<" => l < r,
                ">=" => l >= r,
                _ => l <= r,
            };
            if good {
                shared.log(
                    &v.name,
                    format!("as expected: {lhs} ({l}) {op} {rhs} ({r})"),
                );
                return Ok(());
            }
        }
        shared.sleep(Duration::from_millis(100))?;
    }
    match last {
        (Some(l), Some(r)) => fail(format!("Not true: {lhs} ({l}) {op} {rhs} ({r})")),
        _ => fail(format!("stats field {lhs} unknown")),
    }
}

/// A number as `strtoumax(..., 0)` reads a whole word: decimal, `0x` hex, `0` octal.
fn parse_number(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok();
    }
    if s.len() > 1 && s.starts_with('0') {
        return u64::from_str_radix(&s[1..], 8).ok();
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn counter_numbers() {
        assert_eq!(super::parse_number("10"), Some(10));
        assert_eq!(super::parse_number("0x10"), Some(16));
        assert_eq!(super::parse_number("010"), Some(8));
        assert_eq!(super::parse_number("0"), Some(0));
        assert_eq!(super::parse_number("cache_hit"), None);
    }
}
