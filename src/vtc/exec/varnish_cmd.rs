//! The `varnish vN` command's options at the top level, in order: the process's varnishd
//! arguments and storage, its VCLs (loaded, or checked to fail with `-errvcl`), CLI lines
//! mapped to the admin API, start and stop, and counters expected in `/stats`.

use std::sync::Arc;
use std::time::Duration;

use crate::vtc::check::first_error;
use crate::vtc::cli;
use crate::vtc::context::{Halt, Shared, Step, fail, skip};
use crate::vtc::counters;
use crate::vtc::outcome::ErrvclCase;
use crate::vtc::params::ParamError;
use crate::vtc::peer::Arg;
use crate::vtc::varnish::{Varnish, backend_decls};

/// One `varnish vN OPTIONS...` command being run.
pub(super) struct VarnishCommand<'a> {
    pub v: &'a mut Varnish,
    pub shared: &'a Arc<Shared>,
    pub name: &'a str,
    /// The words after `varnish vN`.
    pub rest: &'a [Arg],
    /// The servers already listening (`-vcl+backend` declares them).
    pub bound: &'a [(String, super::super::stream::Where)],
    pub errvcl: &'a mut Vec<ErrvclCase>,
    /// The option being read.
    pub i: usize,
    /// `-syntax`: the VCL version the next VCLs are written in.
    pub syntax: String,
}

impl<'a> VarnishCommand<'a> {
    /// Runs every option in order.
    pub fn run(mut self) -> Step {
        while self.i < self.rest.len() {
            self.shared.check()?;
            let rest = self.rest;
            let opt = rest[self.i].0.as_str();
            match opt {
                "-arg" => {
                    let a = self.next()?;
                    varnishd_args(self.v, a)?;
                }
                "-storage" => {
                    for s in self.next()?.split_whitespace() {
                        let s = s.strip_prefix("-s").unwrap_or(s);
                        param_result(self.v.settings.storage(s))?;
                    }
                }
                "-syntax" => self.syntax = self.next()?.to_string(),
                "-vcl" | "-vcl+backend" | "-errvcl" | "-badvcl" => self.vcl(opt)?,
                "-start" => self.v.start(self.shared)?,
                "-stop" | "-wait" => self.v.stop(self.shared)?,
                "-cli" | "-cliok" | "-clierr" | "-cliexpect" => self.cli(opt)?,
                "-expect" => {
                    let lhs = self.text(self.i + 1)?;
                    if lhs.starts_with('!') {
                        return skip(format!("-expect {lhs}: Varnish's counter namespace"));
                    }
                    let op = self.text(self.i + 2)?;
                    let rhs = self.text(self.i + 3)?;
                    self.i += 3;
                    expect_counter(self.v, self.shared, lhs, op, rhs)?;
                }
                // Varnish's log and counter dumps: nothing to wait for or show here.
                "-vsl_catchup" => {}
                "-vsc" => self.i += 1,
                "-wait-running" => {
                    if !self.v.running() {
                        return fail(format!("{}: not running", self.name));
                    }
                }
                "-wait-stopped" => {
                    if self.v.running() {
                        return fail(format!("{}: still running", self.name));
                    }
                }
                "-proto" => match self.next()? {
                    "PROXY" => self.v.settings.proxy_protocol(),
                    "HTTP" => {}
                    other => return skip(format!("varnish -proto {other}")),
                },
                "-clijson" | "-cleanup" | "-expectexit" | "-jail" => {
                    return skip(format!("varnish {opt}: Varnish's management process"));
                }
                other => return skip(format!("varnish option {other} is not implemented")),
            }
            self.i += 1;
        }
        Ok(())
    }

    /// The word at `i`, or an error naming the option that needed it.
    fn text(&self, i: usize) -> Step<&'a str> {
        let rest = self.rest;
        rest.get(i).map(|a| a.0.as_str()).ok_or_else(|| {
            Halt::Fail(format!(
                "{} needs an argument",
                rest[i.saturating_sub(1).min(rest.len().saturating_sub(1))].0
            ))
        })
    }

    /// Moves to the option's value and returns it.
    fn next(&mut self) -> Step<&'a str> {
        self.i += 1;
        self.text(self.i)
    }

    /// `-vcl`, `-vcl+backend` (loaded), `-errvcl MESSAGE` and `-badvcl` (must be refused).
    fn vcl(&mut self, opt: &str) -> Step {
        let line = self.rest[self.i].2;
        match opt {
            "-vcl" | "-vcl+backend" => {
                let src = self.next()?;
                let decls = if opt == "-vcl" {
                    String::new()
                } else {
                    backend_decls(self.bound)
                };
                let vcl = self.v.compose(self.shared, &self.syntax, src, &decls);
                self.v.load(self.shared, &vcl)
            }
            _ => {
                let expected = if opt == "-errvcl" {
                    Some(self.next()?.to_string())
                } else {
                    None
                };
                let src = self.next()?;
                let vcl = self.v.compose(self.shared, &self.syntax, src, "");
                let (_, c) = self.v.check(self.shared, &vcl)?;
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
                self.shared
                    .log(self.name, "VCL compilation failed (as expected)");
                Ok(())
            }
        }
    }

    /// `-cli`, `-cliok`, `-clierr STATUS` and `-cliexpect REGEX`: a CLI line on the admin API.
    fn cli(&mut self, opt: &str) -> Step {
        match opt {
            "-cli" | "-cliok" => {
                let line = self.next()?;
                let a = cli::run(self.v, self.shared, line, false)?;
                self.shared
                    .log(self.name, format!("CLI {:03} <{line}>", a.status));
                if opt == "-cliok" && a.status != cli::OK {
                    return fail(format!(
                        "FAIL CLI response {} expected {} ({})",
                        a.status,
                        cli::OK,
                        a.text.trim()
                    ));
                }
                Ok(())
            }
            "-clierr" => {
                let want: u32 = self
                    .next()?
                    .parse()
                    .map_err(|_| Halt::Fail("-clierr: not a status".into()))?;
                let line = self.next()?;
                let a = cli::run(self.v, self.shared, line, false)?;
                self.shared
                    .log(self.name, format!("CLI {:03} <{line}>", a.status));
                if a.status != want {
                    return fail(format!(
                        "FAIL CLI response {} expected {want} ({})",
                        a.status,
                        a.text.trim()
                    ));
                }
                Ok(())
            }
            _ => {
                let pattern = self.next()?;
                let re = crate::vtc::expect::regex(pattern)?;
                let line = self.next()?;
                let a = cli::run(self.v, self.shared, line, true)?;
                if !re.is_match(&a.text) {
                    return fail(format!("Expect failed: {pattern:?} on {:?}", a.text));
                }
                Ok(())
            }
        }
    }
}

/// `-arg "..."`: the varnishd options that map (`-p`, `-s`, `-a`, `-b`, `-t`; `-l`, `-h`,
/// `-W` change nothing here).
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
                // A path is a Unix socket's (`server.listen_unix`).
                if a.contains(['=', ','])
                    || a.starts_with('@')
                    || (a.contains('/') && !a.starts_with('/'))
                {
                    return skip(format!(
                        "varnishd -a {a}: named, PROXY or abstract listeners"
                    ));
                }
                v.set_listen(a);
            }
            "-b" => {
                let b = value()?;
                v.set_b_backend(b);
            }
            // The size of Varnish's shared-memory log, its hash table's kind (critbit,
            // simple_list, classic: how Varnish finds an object, not which) and its waiter
            // (`-W poll`, as the `waiter` parameter): nothing to set here.
            "-l" | "-h" | "-W" => {
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
