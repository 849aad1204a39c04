//! Varnish CLI commands (`varnish vN -cli|-cliok|-clierr|-cliexpect`) done on Shellac: the
//! parameters it has (`param.set`, `param.reset`), bans through its admin API (`ban`, 2.1's
//! `purge` and `purge.url`), `start`/`stop`, `status`, `ping`, loaded VCLs (`vcl.load`,
//! `vcl.inline` — quoted or as a `<< TOKEN` block —, `vcl.use`, `vcl.discard`; `vcl.list`
//! and `backend.list` for their status only). The answer carries Varnish's
//! status code (200 OK, 106 bad parameter, 300 cannot). A command with no equivalent makes
//! the file skipped, naming it; so does `-cliexpect` on an answer whose text is Varnish's
//! (a ban list, a parameter's description), which Shellac does not write.

use std::sync::Arc;

use super::context::{Halt, Shared, Step, skip};
use super::params::ParamError;
use super::varnish::Varnish;

/// Varnish's CLI status codes the runner answers with.
pub const OK: u32 = 200;
pub const PARAM: u32 = 106;
pub const CANT: u32 = 300;

/// One answer.
pub struct Answer {
    pub status: u32,
    pub text: String,
}

/// Splits a CLI line into arguments as Varnish's CLI does (blanks separate, `"..."` quotes
/// with backslash escapes).
pub fn split_args(line: &str) -> Vec<String> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let mut word = Vec::new();
        if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    let (c, n) = super::lex::backslash(&b[i..]);
                    word.push(c);
                    i += n;
                } else {
                    word.push(b[i]);
                    i += 1;
                }
            }
            i += 1;
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                word.push(b[i]);
                i += 1;
            }
        }
        out.push(String::from_utf8_lossy(&word).into_owned());
    }
    out
}

/// The commands done here.
const COMMANDS: &[&str] = &[
    "ping",
    "status",
    "start",
    "stop",
    "param.set",
    "param.reset",
    "ban",
    "purge",
    "purge.url",
    "ban.list",
    "purge.list",
    "vcl.load",
    "vcl.inline",
    "vcl.use",
    "vcl.discard",
    "vcl.list",
    "backend.list",
    "backend.set_health",
    "debug.fragfetch",
];

/// Why CLI `line` cannot be done here (`None`: it can). `expect_text`: the answer's text is
/// to be matched (`-cliexpect`), which only `status` and `ping` answer as Varnish does.
pub fn unsupported(line: &str, expect_text: bool) -> Option<String> {
    let args = split_args(line);
    let cmd = args.first()?;
    if !COMMANDS.contains(&cmd.as_str()) {
        return Some(format!(
            "Varnish CLI command `{cmd}` has no Shellac equivalent in the runner"
        ));
    }
    if expect_text && !matches!(cmd.as_str(), "status" | "ping") {
        return Some(format!(
            "-cliexpect on the answer to `{cmd}`: Shellac does not write Varnish's text"
        ));
    }
    None
}

/// Does `line` on `v`. `expect_text`: the caller will match the answer's text (`-cliexpect`).
pub fn run(v: &mut Varnish, shared: &Arc<Shared>, line: &str, expect_text: bool) -> Step<Answer> {
    let args = split_args(line);
    let Some(cmd) = args.first() else {
        return Ok(Answer {
            status: 101,
            text: "Empty CLI command".into(),
        });
    };
    if let Some(why) = unsupported(line, expect_text) {
        return skip(why);
    }
    let ok = |text: &str| {
        Ok(Answer {
            status: OK,
            text: text.to_string(),
        })
    };
    match cmd.as_str() {
        "ping" => ok("PONG"),
        "status" => ok(if v.running() {
            "Child in state running"
        } else {
            "Child in state stopped"
        }),
        "start" => {
            if v.running() {
                return Ok(Answer {
                    status: CANT,
                    text: "Child in state running".into(),
                });
            }
            v.start(shared)?;
            ok("")
        }
        "stop" => {
            if !v.running() {
                return Ok(Answer {
                    status: CANT,
                    text: "Child in state stopped".into(),
                });
            }
            v.stop(shared)?;
            ok("")
        }
        "param.set" => {
            let (Some(name), Some(value)) = (args.get(1), args.get(2)) else {
                return Ok(Answer {
                    status: 104,
                    text: "Too few parameters".into(),
                });
            };
            param(v, shared, |s| s.set(name, value))
        }
        "param.reset" => {
            let Some(name) = args.get(1) else {
                return Ok(Answer {
                    status: 104,
                    text: "Too few parameters".into(),
                });
            };
            param(v, shared, |s| s.reset(name))
        }
        "ban" | "purge" => ban(v, shared, &args[1..]),
        "purge.url" => match args.get(1) {
            Some(re) => ban(v, shared, &["req.url".into(), "~".into(), re.clone()]),
            None => Ok(Answer {
                status: 104,
                text: "Too few parameters".into(),
            }),
        },
        "vcl.load" | "vcl.inline" | "vcl.use" | "vcl.discard" => vcl(v, shared, line, &args),
        "vcl.list" => ok(""),
        "backend.list" => {
            let r = v
                .admin()?
                .request("GET", "/backends")
                .map_err(|e| Halt::Fail(format!("GET /backends: {e}")))?;
            Ok(Answer {
                status: if r.status == 200 { OK } else { CANT },
                text: r.body,
            })
        }
        "backend.set_health" => set_health(v, shared, &args[1..]),
        // The size of the pieces Varnish's fetch hands its filters: Shellac's ESI parser
        // gives the same program however its input is cut.
        "debug.fragfetch" => ok(""),
        "ban.list" | "purge.list" => {
            let admin = v.admin()?;
            let r = admin
                .request("GET", "/bans")
                .map_err(|e| Halt::Fail(format!("GET /bans: {e}")))?;
            Ok(Answer {
                status: if r.status == 200 { OK } else { CANT },
                text: r.body,
            })
        }
        other => skip(format!(
            "Varnish CLI command `{other}` has no Shellac equivalent in the runner"
        )),
    }
}

/// `vcl.load NAME FILE`, `vcl.inline NAME VCL|<< TOKEN`, `vcl.use NAME`, `vcl.discard NAME`.
fn vcl(v: &mut Varnish, shared: &Arc<Shared>, line: &str, args: &[String]) -> Step<Answer> {
    let answer = |(status, text): (u32, String)| Ok(Answer { status, text });
    let Some(name) = args.get(1) else {
        return answer((104, "Too few parameters".into()));
    };
    match args[0].as_str() {
        "vcl.use" => answer(v.cli_use(shared, name)?),
        "vcl.discard" => answer(v.cli_discard(name)),
        "vcl.load" => {
            let Some(file) = args.get(2) else {
                return answer((104, "Too few parameters".into()));
            };
            match std::fs::read_to_string(file) {
                Ok(text) => answer(v.cli_load(shared, name, &text)?),
                Err(e) => answer((106, format!("Cannot read {file}: {e}"))),
            }
        }
        _ => {
            // `vcl.inline NAME << TOKEN` then the VCL's lines up to TOKEN alone on a line.
            let first = line.lines().next().unwrap_or("");
            let text = match first.split_once("<<") {
                Some((_, token)) => {
                    let token = token.trim();
                    line.lines()
                        .skip(1)
                        .take_while(|l| l.trim() != token)
                        .collect::<Vec<_>>()
                        .join("\n")
                }
                None => match args.get(2) {
                    Some(t) => t.clone(),
                    None => return answer((104, "Too few parameters".into())),
                },
            };
            answer(v.cli_load(shared, name, &text)?)
        }
    }
}

fn param(
    v: &mut Varnish,
    shared: &Arc<Shared>,
    change: impl FnOnce(&mut super::params::Settings) -> Result<(), ParamError>,
) -> Step<Answer> {
    match change(&mut v.settings) {
        Ok(()) => {
            if v.running() {
                v.reload(shared)?;
            }
            Ok(Answer {
                status: OK,
                text: String::new(),
            })
        }
        Err(ParamError::Unmapped(why)) => skip(why),
        Err(ParamError::Invalid(why)) => Ok(Answer {
            status: PARAM,
            text: why,
        }),
    }
}

/// A ban: Varnish's arguments joined into Shellac's expression (`FIELD OP VALUE && ...`).
/// Fewer than three arguments is Varnish's CLI's own refusal (104) before any parsing.
fn ban(v: &mut Varnish, shared: &Shared, args: &[String]) -> Step<Answer> {
    if args.len() < 3 {
        return Ok(Answer {
            status: 104,
            text: "Too few parameters".into(),
        });
    }
    let expr = args
        .iter()
        .map(|a| {
            if a.contains(char::is_whitespace) || a.is_empty() {
                format!("\"{a}\"")
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    let admin = v.admin()?;
    let r = admin
        .request_with_body("POST", "/ban", expr.as_bytes())
        .map_err(|e| Halt::Fail(format!("POST /ban: {e}")))?;
    shared.log(
        &v.name,
        format!("ban {expr}: {} {}", r.status, r.body.trim()),
    );
    Ok(Answer {
        status: match r.status {
            200 => OK,
            400 => PARAM,
            _ => CANT,
        },
        text: r.body,
    })
}

/// `backend.set_health PATTERN sick|healthy|auto`: `POST /backends/NAME/health`. Varnish
/// names a backend `VCL.NAME` (`vcl1.s1`, `*.s1`); Shellac's names are the VCL's own, so the
/// part before the last `.` is dropped.
fn set_health(v: &mut Varnish, shared: &Arc<Shared>, args: &[String]) -> Step<Answer> {
    let [pattern, state] = args else {
        return Ok(Answer {
            status: 104,
            text: "Too few parameters".into(),
        });
    };
    let name = pattern.rsplit('.').next().unwrap_or(pattern);
    let r = v
        .admin()?
        .request_with_body(
            "POST",
            &format!("/backends/{name}/health"),
            state.as_bytes(),
        )
        .map_err(|e| Halt::Fail(format!("POST /backends/{name}/health: {e}")))?;
    shared.log(
        &v.name,
        format!("backend.set_health {name} {state}: {}", r.status),
    );
    Ok(Answer {
        status: if r.status == 200 { OK } else { PARAM },
        text: r.body,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_words() {
        assert_eq!(
            super::split_args("ban req.url ~ \"^/a b\\\"\"  && obj.status == 200"),
            vec![
                "ban",
                "req.url",
                "~",
                "^/a b\"",
                "&&",
                "obj.status",
                "==",
                "200"
            ]
        );
    }
}
