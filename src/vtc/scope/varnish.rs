//! Is a `varnish vN` command in scope: its options, the VCL it gives (test VMODs, inline C,
//! DNS names), its CLI lines and varnishd arguments (parameters and storage with a Shellac
//! setting), and the counters it expects.

use crate::vtc::cli;
use crate::vtc::counters;
use crate::vtc::lex::Command;
use crate::vtc::outcome::Wiring;
use crate::vtc::params::{ParamError, Settings};

/// `varnish vN OPTIONS...`: its options, VCLs, CLI lines, varnishd arguments and counters.
pub(super) fn command(c: &Command, wiring: Wiring) -> Option<String> {
    let w = &c.words;
    let mut settings = Settings::default();
    let mut i = 2;
    let mut uses_vcl = false;
    let text = |i: usize| w.get(i).map_or("", |w| w.text.as_str());
    while i < w.len() {
        let opt = text(i);
        match opt {
            "-vcl" | "-vcl+backend" | "-badvcl" => {
                uses_vcl = true;
                i += 1;
                if let Some(r) = vcl(text(i)) {
                    return Some(r);
                }
            }
            "-errvcl" => {
                uses_vcl = true;
                i += 2;
                if let Some(r) = vcl(text(i)) {
                    return Some(r);
                }
            }
            "-start" => uses_vcl = true,
            "-cli" | "-cliok" => {
                i += 1;
                if let Some(r) = cli_line(text(i), false, &mut settings) {
                    return Some(r);
                }
            }
            "-clierr" | "-cliexpect" => {
                i += 2;
                if opt == "-clierr"
                    && let Some(r) = refusal_of_an_ignored_param(text(i))
                {
                    return Some(r);
                }
                if let Some(r) = cli_line(text(i), opt == "-cliexpect", &mut settings) {
                    return Some(r);
                }
            }
            "-expect" => {
                let name = text(i + 1);
                i += 3;
                if name.starts_with('!') {
                    return Some(format!("-expect {name}: Varnish's counter namespace"));
                }
                // Which VCL is in use is only known at run time: any is fine here.
                if let Err(crate::vtc::context::Halt::Skip(r)) = counters::source(name, None) {
                    return Some(r);
                }
                let rhs = text(i);
                if rhs.parse::<u64>().is_err()
                    && !rhs.starts_with("0x")
                    && let Err(crate::vtc::context::Halt::Skip(r)) = counters::source(rhs, None)
                {
                    return Some(r);
                }
            }
            "-arg" => {
                i += 1;
                if let Some(r) = varnishd(text(i), &mut settings) {
                    return Some(r);
                }
            }
            "-storage" => {
                i += 1;
                for s in text(i).split_whitespace() {
                    if let Err(ParamError::Unmapped(r)) =
                        settings.storage(s.strip_prefix("-s").unwrap_or(s))
                    {
                        return Some(r);
                    }
                }
            }
            "-syntax" | "-vsc" => i += 1,
            "-stop" | "-wait" | "-vsl_catchup" | "-wait-running" | "-wait-stopped" => {}
            "-proto" => {
                i += 1;
                if !matches!(text(i), "PROXY" | "HTTP") {
                    return Some(format!("varnish -proto {}", text(i)));
                }
            }
            "-clijson" | "-cleanup" | "-expectexit" | "-jail" => {
                return Some(format!("varnish {opt}: Varnish's management process"));
            }
            other => return Some(format!("varnish option {other} is not implemented")),
        }
        i += 1;
    }
    if uses_vcl && !wiring.serve && !wiring.check {
        return Some(
            "VCL not wired: neither `shellac check FILE.vcl` nor `[vcl] file` is on main yet"
                .into(),
        );
    }
    None
}

/// A VCL the file gives: Varnish's test VMODs, inline C and DNS names are out of scope.
pub(in crate::vtc) fn vcl(text: &str) -> Option<String> {
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("import") {
            let m = rest.trim_start().trim_end_matches(';').trim();
            let m = m.split_whitespace().next().unwrap_or("");
            if matches!(m, "debug" | "vtc" | "${vmod_debug}" | "${vmod_vtc}")
                || m.starts_with("${vmod_")
            {
                return Some(format!(
                    "Varnish's test VMOD {} (import in VCL)",
                    m.trim_start_matches("${vmod_").trim_end_matches('}')
                ));
            }
            if m == "proxy" {
                return Some(
                    "VMOD proxy: Shellac checks a PROXY header's TLVs but keeps none for VCL"
                        .into(),
                );
            }
        }
    }
    if text.contains("C{") {
        return Some("inline C in VCL".into());
    }
    if let Some(name) = dns_name(text) {
        return Some(format!(
            "DNS: the VCL names backend host {name:?} (only loopback addresses here)"
        ));
    }
    None
}

/// A `.host = "NAME"` that only DNS could resolve (not an address, `localhost` or a macro).
fn dns_name(text: &str) -> Option<String> {
    let mut rest = text;
    while let Some(at) = rest.find(".host") {
        rest = &rest[at + 5..];
        let after = rest.trim_start();
        let Some(after) = after.strip_prefix('=') else {
            continue;
        };
        let Some(value) = after.trim_start().strip_prefix('"') else {
            continue;
        };
        let Some(end) = value.find('"') else { continue };
        let host = &value[..end];
        // "host port", "host:port" and "[v6]:port" forms.
        let name = host
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_start_matches('[');
        let name = name.split(']').next().unwrap_or(name);
        let name = if name.matches(':').count() == 1 {
            name.split(':').next().unwrap_or(name)
        } else {
            name
        };
        if name.is_empty()
            || name.contains("${")
            || name == "localhost"
            || name.parse::<std::net::IpAddr>().is_ok()
            || !name.chars().any(|c| c.is_ascii_alphabetic())
        {
            continue;
        }
        return Some(name.to_string());
    }
    None
}

/// `-clierr STATUS "param.set NAME VALUE"` on a parameter the runner accepts and ignores
/// (Varnish's threads, pools, workspaces, log knobs): the refusal it expects is Varnish's
/// check of a value that means nothing here, which cannot be checked (trunk b00034, c00079).
fn refusal_of_an_ignored_param(line: &str) -> Option<String> {
    let args = cli::split_args(line);
    match (args.first().map(String::as_str), args.get(1)) {
        (Some("param.set"), Some(name)) if Settings::ignored(name) => Some(format!(
            "-clierr on `param.set {name}`: a knob of Varnish's own machinery, accepted and \
             ignored here, whose refused values cannot be checked"
        )),
        _ => None,
    }
}

fn cli_line(line: &str, expect_text: bool, settings: &mut Settings) -> Option<String> {
    if let Some(r) = cli::unsupported(line, expect_text) {
        return Some(r);
    }
    let args = cli::split_args(line);
    match args.first().map(String::as_str) {
        Some("param.set") => {
            if let (Some(n), Some(v)) = (args.get(1), args.get(2))
                && let Err(ParamError::Unmapped(r)) = settings.set(n, v)
            {
                return Some(r);
            }
        }
        Some("param.reset") => {
            if let Some(n) = args.get(1)
                && let Err(ParamError::Unmapped(r)) = settings.reset(n)
            {
                return Some(r);
            }
        }
        _ => {}
    }
    None
}

fn varnishd(line: &str, settings: &mut Settings) -> Option<String> {
    let words = cli::split_args(line);
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        let (flag, inline) = if w.len() > 2 && w.starts_with('-') {
            (&w[..2], Some(w[2..].to_string()))
        } else {
            (w, None)
        };
        let value = match inline {
            Some(v) => v,
            None => {
                i += 1;
                words.get(i).cloned().unwrap_or_default()
            }
        };
        let r = match flag {
            "-p" => match value.split_once('=') {
                Some((n, v)) => settings.set(n, v),
                None => Ok(()),
            },
            "-s" => settings.storage(&value),
            "-t" => settings.set("default_ttl", &value),
            "-a" if value.contains(['=', ','])
                || value.starts_with('@')
                || (value.contains('/') && !value.starts_with('/') && !value.starts_with("${")) =>
            {
                Err(ParamError::Unmapped(format!(
                    "varnishd -a {value}: named, PROXY or abstract listeners"
                )))
            }
            "-a" | "-b" | "-l" | "-h" | "-W" => Ok(()),
            other => Err(ParamError::Unmapped(format!("varnishd option {other}"))),
        };
        if let Err(ParamError::Unmapped(r)) = r {
            return Some(r);
        }
        i += 1;
    }
    None
}
