//! Every `-errvcl` / `-badvcl` of a set of files, checked on its own: the VCL Varnish must
//! refuse, composed as the harness gives it (`vcl 4.1;` or `-syntax` first for trunk's
//! files), its macros given plausible values (servers and `varnish` instances on loopback),
//! then `shellac check` must refuse it too. A case is out of scope when its VCL needs what
//! the runner leaves out (test VMODs, inline C, DNS), a macro the file only defines at run
//! time, or a VCC parameter set before it that has no Shellac equivalent — whatever else its
//! file needs, so that a file skipped for a `logexpect` still has its `-errvcl` cases counted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::check::{check_vcl, first_error};
use super::context::{Flavour, Halt, Shared};
use super::lex::{self, Command};
use super::params::Settings;
use super::runner::{Runner, define_macros, spread};
use super::scope;

/// How one case came out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaseVerdict {
    /// Shellac refuses the VCL, as Varnish does.
    Refused,
    /// Shellac accepts a VCL Varnish refuses.
    Accepted,
    /// The case needs something out of scope (the reason).
    OutOfScope(String),
}

/// One `-errvcl MSG {VCL}` or `-badvcl {VCL}`.
#[derive(Clone, Debug)]
pub struct Case {
    pub file: PathBuf,
    pub line: u32,
    /// Varnish's message (`-errvcl`).
    pub expected: Option<String>,
    pub verdict: CaseVerdict,
    /// Shellac's first error, when it refused.
    pub message: String,
    /// Shellac's errors name what Varnish's message names (its whole text, or every word it
    /// quotes: `'sess.xid'`): refused for the same reason, as far as words can tell.
    pub same_reason: bool,
}

impl Case {
    /// `trunk/v00021.vtc:118`.
    pub fn name(&self) -> String {
        format!("{}:{}", super::outcome::display_name(&self.file), self.line)
    }
}

struct Found {
    line: u32,
    expected: Option<String>,
    text: Result<String, String>,
    settings: Settings,
}

impl Runner {
    /// Checks every `-errvcl` / `-badvcl` of `files` on its own, the files `opts.jobs` at a
    /// time (each case is a `shellac check` process); the cases in the files' order.
    pub fn errvcl_census(&self, files: &[PathBuf]) -> Vec<Case> {
        let dir = self.root.join("census");
        let _ = std::fs::create_dir_all(&dir);
        spread(self.opts.jobs, files, |n, f| self.census_of(&dir, n, f))
            .into_iter()
            .flatten()
            .collect()
    }

    /// The cases of file `f` (the `n`th), each checked in `dir`.
    fn census_of(&self, dir: &Path, n: usize, f: &Path) -> Vec<Case> {
        let mut out = Vec::new();
        for (i, c) in cases(f).into_iter().enumerate() {
            let verdict_of = |text: &str| -> (CaseVerdict, String, bool) {
                match check_vcl(
                    &self.opts.shellac,
                    self.wiring,
                    &c.settings,
                    dir,
                    &format!("c{n}_{i}"),
                    text,
                ) {
                    Ok((_, checked)) if checked.accepted => {
                        (CaseVerdict::Accepted, String::new(), false)
                    }
                    Ok((_, checked)) => (
                        CaseVerdict::Refused,
                        first_error(&checked.output),
                        c.expected
                            .as_deref()
                            .is_some_and(|e| same_reason(e, &checked.output)),
                    ),
                    Err(Halt::Skip(r)) => (CaseVerdict::OutOfScope(r), String::new(), false),
                    Err(h) => (CaseVerdict::OutOfScope(h.to_string()), String::new(), false),
                }
            };
            let (verdict, message, same) = match &c.text {
                Err(why) => (CaseVerdict::OutOfScope(why.clone()), String::new(), false),
                Ok(text) => verdict_of(text),
            };
            out.push(Case {
                file: f.to_path_buf(),
                line: c.line,
                expected: c.expected,
                verdict,
                message,
                same_reason: same,
            });
        }
        out
    }
}

/// Which VCL a compile parameter without an equivalent changes.
#[derive(Clone, Copy)]
enum Relevance {
    All,
    /// VCL that includes files or imports VMODs (paths and how they may be written).
    Paths,
}

impl Relevance {
    fn changes(self, vcl: &str) -> bool {
        match self {
            Relevance::All => true,
            Relevance::Paths => vcl.contains("include") || vcl.contains("import"),
        }
    }
}

/// Whether `output` names what Varnish's `expected` message names: its whole text, or every
/// word it quotes in `'...'` (at least one).
fn same_reason(expected: &str, output: &str) -> bool {
    if output.contains(expected) {
        return true;
    }
    let quoted: Vec<&str> = expected
        .split('\'')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.is_empty())
        .collect();
    !quoted.is_empty() && quoted.iter().all(|w| output.contains(w))
}

/// The cases of one file, composed, in order.
fn cases(path: &Path) -> Vec<Found> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let Ok(cmds) = lex::split(&text, 1) else {
        return Vec::new();
    };
    let flavour = match cmds.first().map(Command::name) {
        Some("test") => Flavour::Legacy,
        _ => Flavour::Trunk,
    };
    let shared = Shared::new(flavour, Duration::from_secs(1), std::env::temp_dir());
    define_macros(&shared, path, &std::env::temp_dir(), 0, 9);
    let mut walk = Walk {
        shared,
        flavour,
        settings: Settings::default(),
        unmapped: Vec::new(),
        out: Vec::new(),
        port: 20000,
    };
    walk.commands(&cmds);
    walk.out
}

struct Walk {
    shared: Shared,
    flavour: Flavour,
    settings: Settings,
    /// Parameters without an equivalent that change how Varnish compiles VCL, set so far:
    /// `(what, which VCL it changes)`; a later case they change is out of scope.
    unmapped: Vec<(String, Relevance)>,
    out: Vec<Found>,
    port: u16,
}

impl Walk {
    fn commands(&mut self, cmds: &[Command]) {
        for c in cmds {
            let words: Vec<&str> = c.words.iter().map(|w| w.text.as_str()).collect();
            match c.name() {
                "server" | "varnish" | "barrier" if words.len() > 1 => {
                    self.entity(words[1]);
                    if c.name() == "varnish" {
                        self.varnish(c);
                    }
                }
                "loop" => {
                    if let Some(b) = c.words.get(2)
                        && let Ok(inner) = lex::split(&b.text, b.line)
                    {
                        self.commands(&inner);
                    }
                }
                _ => {}
            }
        }
    }

    /// The macros a server, `varnish` or barrier defines once it runs.
    fn entity(&mut self, name: &str) {
        if self.shared.macro_value(&format!("{name}_addr")).is_some() {
            return;
        }
        self.port += 1;
        let port = self.port.to_string();
        self.shared
            .define("top", &format!("{name}_addr"), "127.0.0.1");
        self.shared
            .define("top", &format!("{name}_port"), port.clone());
        let sock = match self.flavour {
            Flavour::Trunk => format!("127.0.0.1:{port}"),
            Flavour::Legacy => format!("127.0.0.1 {port}"),
        };
        self.shared.define("top", &format!("{name}_sock"), sock);
        self.shared
            .define("top", &format!("{name}_name"), format!("/tmp/vtc/{name}"));
    }

    fn varnish(&mut self, c: &Command) {
        let w = &c.words;
        let mut syntax = "4.1".to_string();
        let mut i = 2;
        while i < w.len() {
            match w[i].text.as_str() {
                "-syntax" => {
                    i += 1;
                    if let Some(s) = w.get(i) {
                        syntax = s.text.clone();
                    }
                }
                "-arg" => {
                    i += 1;
                    let words = super::cli::split_args(w.get(i).map_or("", |a| a.text.as_str()));
                    for (j, word) in words.iter().enumerate() {
                        if word == "-p" {
                            if let Some(kv) = words.get(j + 1) {
                                self.param(kv);
                            }
                        } else if let Some(kv) = word.strip_prefix("-p") {
                            self.param(kv);
                        }
                    }
                }
                "-cli" | "-cliok" => {
                    i += 1;
                    self.cli(w.get(i).map_or("", |a| a.text.as_str()));
                }
                "-clierr" | "-cliexpect" => {
                    i += 2;
                    self.cli(w.get(i).map_or("", |a| a.text.as_str()));
                }
                "-expect" => i += 3,
                "-vcl" | "-vcl+backend" | "-storage" | "-vsc" => i += 1,
                opt @ ("-errvcl" | "-badvcl") => {
                    let line = w[i].line;
                    let expected = if opt == "-errvcl" {
                        i += 1;
                        w.get(i).map(|a| a.text.clone())
                    } else {
                        None
                    };
                    i += 1;
                    let Some(body) = w.get(i) else { break };
                    let text = self.compose(&syntax, &body.text);
                    self.out.push(Found {
                        line,
                        expected,
                        text,
                        settings: self.settings.clone(),
                    });
                }
                _ => {}
            }
            i += 1;
        }
    }

    fn compose(&self, syntax: &str, body: &str) -> Result<String, String> {
        if let Some((why, _)) = self.unmapped.iter().find(|(_, r)| r.changes(body)) {
            return Err(format!(
                "{why} set before it changes how Varnish compiles it"
            ));
        }
        if let Some(why) = scope::vcl(body) {
            return Err(why);
        }
        let body = self.shared.expand(body).map_err(|h| match h {
            Halt::Fail(m) | Halt::Skip(m) => m,
            Halt::Stopped => "stopped".into(),
        })?;
        Ok(match self.flavour {
            Flavour::Trunk => format!("vcl {syntax};\n\n{body}\n"),
            Flavour::Legacy => format!("\n{body}\n"),
        })
    }

    fn cli(&mut self, line: &str) {
        let args = super::cli::split_args(line);
        if args.first().map(String::as_str) == Some("param.set")
            && let (Some(n), Some(v)) = (args.get(1), args.get(2))
        {
            self.param(&format!("{n}={v}"));
        }
    }

    /// A parameter: the VCC ones and those of Varnish's C compiler and paths change how VCL
    /// is compiled; only `vcc_feature ±err_unref` has an equivalent. `allow_inline_c` only
    /// changes VCL with inline C (out of scope anyway), `unsafe_path`, `vcl_path` and
    /// `vmod_path` only VCL that includes or imports.
    fn param(&mut self, kv: &str) {
        let Some((name, value)) = kv.split_once('=') else {
            return;
        };
        match name {
            "vcc_feature" => {
                for flag in value.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                    let bare = flag.trim_start_matches(['+', '-']);
                    match bare {
                        "err_unref" => {
                            let _ = self.settings.set(name, flag);
                        }
                        "allow_inline_c" => {}
                        "unsafe_path" => self
                            .unmapped
                            .push((format!("vcc_feature {flag}"), Relevance::Paths)),
                        _ => self
                            .unmapped
                            .push((format!("vcc_feature {flag}"), Relevance::All)),
                    }
                }
            }
            "vcc_err_unref" => {
                let _ = self.settings.set(name, value);
            }
            "vcc_allow_inline_c" => {}
            "vcc_unsafe_path" | "vcl_path" | "vmod_path" => self
                .unmapped
                .push((format!("{name}={value}"), Relevance::Paths)),
            "cc_command" | "cc_warnings" => self
                .unmapped
                .push((format!("{name}={value}"), Relevance::All)),
            n if n.starts_with("vcc") => self
                .unmapped
                .push((format!("{name}={value}"), Relevance::All)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reasons_by_their_quoted_words() {
        let varnish = "Symbol not found: 'sess.xid' (Only available when 4.1 <= VCL syntax)";
        assert!(super::same_reason(
            varnish,
            "x.vcl:2:30: 'sess.xid' is 4.1 only"
        ));
        assert!(!super::same_reason(varnish, "x.vcl:1:1: No backends"));
        assert!(!super::same_reason("Must specify .threshold", "other"));
        assert!(super::same_reason(
            "Must specify",
            "error: Must specify .threshold"
        ));
    }
}
