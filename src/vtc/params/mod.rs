//! Varnish parameters (`-p NAME=VALUE`, `param.set`) and storage (`-s`) as Shellac
//! settings, and the configuration file a `varnish vN` runs on. One table says which
//! parameters have a Shellac equivalent; a file that sets any other is skipped, naming it.
//!
//! varnishd runs with its parameters' defaults; where Shellac has the setting, the runner
//! writes Varnish's default (`default_ttl` 120 s, `default_grace` 10 s, `default_keep` 0 s)
//! so that Shellac stands in for a Varnish as the tests assume one.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::config::units;

mod storage;
mod table;

use table::{Flag, Kind, PARAMS, Rule};

/// `cache.memory_size`'s minimum, from its definition.
fn memory_floor() -> u64 {
    match crate::config::settings::find("cache", "memory_size").map(|s| &s.kind) {
        Some(crate::config::settings::Kind::Size { min, .. }) => *min,
        _ => 0,
    }
}

/// Why a parameter cannot be set.
#[derive(Debug, PartialEq, Eq)]
pub enum ParamError {
    /// No Shellac equivalent: the file is skipped.
    Unmapped(String),
    /// Not a valid value (Varnish answers 106).
    Invalid(String),
}

/// The settings one `varnish vN` runs with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `(section, key) → TOML value`.
    values: BTreeMap<(&'static str, &'static str), String>,
    /// `[vcl] err_unref` (`vcc_feature -err_unref`); `None`: Shellac's default (true).
    pub err_unref: Option<bool>,
    /// `-s` storages without a name seen (`s0`, `s1`, ...).
    unnamed: u32,
    /// `-s NAME=...` other than `s0`: `[[storage.named]]` (name, size).
    named: Vec<(String, Option<u64>)>,
}

impl Settings {
    /// The settings a file starts with; `vsl`: it has a `logexpect`, so the process keeps
    /// Varnish-style records (`log.vsl_records`; off otherwise, since it turns fast hits off).
    pub fn for_file(vsl: bool) -> Settings {
        let mut s = Settings::default();
        if vsl {
            s.values
                .insert(("log", "vsl_records"), "200000".to_string());
        }
        s
    }
}

impl Default for Settings {
    fn default() -> Settings {
        let mut s = Settings {
            values: BTreeMap::new(),
            err_unref: None,
            unnamed: 0,
            named: Vec::new(),
        };
        for (name, rule) in PARAMS {
            if let Rule::Setting(_, _, _, default) = rule {
                // The table's defaults are valid by construction.
                let _ = s.set(name, default);
            }
        }
        // Varnish fetches a page's includes one after another, and the scripts' origins
        // expect them in page order on one connection: one at a time, as Varnish.
        s.values.insert(("esi", "concurrency"), "1".into());
        // Varnish fetches an absolute `src` naming any host (routed by the VCL like any
        // request): Shellac's refusal of hosts not configured is lifted, as an operator
        // moving a Varnish setup over would.
        s.values.insert(("esi", "hosts"), "[\"*\"]".into());
        s
    }
}

/// A parameter (or a value of one) Shellac has no equivalent for.
fn unmapped(what: String) -> Result<(), ParamError> {
    Err(ParamError::Unmapped(format!(
        "Varnish parameter {what} has no Shellac equivalent"
    )))
}

impl Settings {
    /// `param.set NAME VALUE` / `-p NAME=VALUE`.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ParamError> {
        if name == "vcc_feature" || name == "vcc_err_unref" {
            return self.vcc_feature(name, value);
        }
        let Some((_, rule)) = PARAMS.iter().find(|p| p.0 == name) else {
            return unmapped(name.to_string());
        };
        match rule {
            Rule::Setting(section, key, Kind::Seconds, _) => {
                let d = seconds(value).ok_or_else(|| {
                    ParamError::Invalid(format!("{name}: {value:?} is not a duration"))
                })?;
                self.values
                    .insert((section, key), format!("\"{}ms\"", d.as_millis()));
                // Varnish's `timeout_idle` also bounds how long a new connection waits for
                // its first request (a PROXY header included): Shellac's
                // `header_read_timeout`.
                if name == "timeout_idle" {
                    self.values.insert(
                        ("server", "header_read_timeout"),
                        format!("\"{}ms\"", d.as_millis()),
                    );
                }
            }
            Rule::Setting(section, key, Kind::Count, _) => {
                let n: u64 = value.trim().parse().map_err(|_| {
                    ParamError::Invalid(format!("{name}: {value:?} is not a number"))
                })?;
                self.values.insert((section, key), n.to_string());
            }
            Rule::Setting(section, key, Kind::Bytes, _) => {
                self.set_bytes(name, value, (section, key))?;
            }
            Rule::Setting(section, key, Kind::Bool, _) => {
                let on = match value.trim() {
                    "on" | "true" => true,
                    "off" | "false" => false,
                    _ => {
                        return Err(ParamError::Invalid(format!(
                            "{name}: {value:?} is not on or off"
                        )));
                    }
                };
                self.values.insert((section, key), on.to_string());
            }
            Rule::LogOnly | Rule::NoMeaning => {}
            Rule::EsiSyntax => self.set_esi_syntax(name, value)?,
            Rule::Fixed(v) => {
                if value != *v {
                    return unmapped(format!("{name}={value}"));
                }
            }
            Rule::AboveZero => {
                let n = units::parse_size(value)
                    .map_err(|e| ParamError::Invalid(format!("{name}: {e}")))?;
                if n == 0 {
                    return unmapped(format!("{name}={value}"));
                }
            }
            Rule::Flags(flags) => self.set_flags(name, value, flags)?,
        }
        Ok(())
    }

    /// A size setting: at least the least Shellac takes (a smaller one is not Shellac's to
    /// run); `max_header_size` bounds the request line too.
    fn set_bytes(
        &mut self,
        name: &str,
        value: &str,
        (section, key): (&'static str, &'static str),
    ) -> Result<(), ParamError> {
        let n =
            units::parse_size(value).map_err(|e| ParamError::Invalid(format!("{name}: {e}")))?;
        let min = match crate::config::settings::find(section, key).map(|s| &s.kind) {
            Some(crate::config::settings::Kind::Size { min, .. }) => *min,
            _ => 0,
        };
        if n < min {
            return unmapped(format!(
                "{name}={value} (below the least {section}.{key} Shellac takes, {})",
                units::format_size(min)
            ));
        }
        self.values.insert((section, key), n.to_string());
        // The request line is part of the head: a head limit below the line's
        // own (8 KiB) bounds the line too.
        if (section, key) == ("server", "max_header_size") {
            self.values
                .insert(("server", "max_request_line"), n.min(8 << 10).to_string());
        }
        Ok(())
    }

    /// 2.x-4.0's `esi_syntax` bitmap (hex or decimal, [`Rule::EsiSyntax`]): 0x1 and 0x2 set
    /// ESI settings, 0x4 and 0x8 change nothing, any other bit has no equivalent.
    fn set_esi_syntax(&mut self, name: &str, value: &str) -> Result<(), ParamError> {
        let v = value.trim();
        let bits = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => v.parse(),
        }
        .map_err(|_| ParamError::Invalid(format!("{name}: {value:?} is not a number")))?;
        if bits & !0xf != 0 {
            return unmapped(format!("{name}={value}"));
        }
        for (bit, key) in [(1, "disable_xml_check"), (2, "ignore_other_elements")] {
            self.values
                .insert(("esi", key), (bits & bit != 0).to_string());
        }
        Ok(())
    }

    /// A flags parameter (`+flag,-flag,flag`): each flag set, ignored or refused as its table
    /// row says.
    fn set_flags(
        &mut self,
        name: &str,
        value: &str,
        flags: &[(&'static str, Flag)],
    ) -> Result<(), ParamError> {
        for f in value.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            let (on, flag) = match f.as_bytes()[0] {
                b'+' => (true, &f[1..]),
                b'-' => (false, &f[1..]),
                _ => (true, f),
            };
            match flags.iter().find(|(n, _)| *n == flag) {
                Some((_, Flag::LogOnly | Flag::NoMeaning)) => {}
                Some((_, Flag::Always)) if on => {}
                Some((_, Flag::Always)) => return unmapped(format!("{name} {f}")),
                Some((_, Flag::Setting(section, key))) => {
                    self.values.insert((section, key), on.to_string());
                }
                Some((_, Flag::Choice(section, key, yes, no))) => {
                    let v = if on { yes } else { no };
                    self.values.insert((section, key), v.to_string());
                }
                None => return unmapped(format!("{name} {f}")),
            }
        }
        Ok(())
    }

    /// `param.reset NAME`.
    /// Whether `name` is a parameter accepted and ignored (a knob of Varnish's own machinery,
    /// or one that only shapes Varnish's log): what Varnish refuses of its values cannot be
    /// checked here.
    pub fn ignored(name: &str) -> bool {
        PARAMS
            .iter()
            .any(|(n, r)| *n == name && matches!(r, Rule::NoMeaning | Rule::LogOnly))
    }

    pub fn reset(&mut self, name: &str) -> Result<(), ParamError> {
        if name == "vcc_feature" || name == "vcc_err_unref" {
            self.err_unref = None;
            return Ok(());
        }
        match PARAMS.iter().find(|p| p.0 == name) {
            Some((_, Rule::Setting(_, _, _, default))) => {
                self.set(name, default)?;
                Ok(())
            }
            Some((_, Rule::Flags(flags))) => {
                for (_, f) in flags.iter() {
                    if let Flag::Setting(section, key) | Flag::Choice(section, key, ..) = f {
                        self.values.remove(&(*section, *key));
                    }
                }
                Ok(())
            }
            Some((_, Rule::EsiSyntax)) => {
                self.values.remove(&("esi", "disable_xml_check"));
                self.values.remove(&("esi", "ignore_other_elements"));
                Ok(())
            }
            Some(_) => Ok(()),
            None => unmapped(name.to_string()),
        }
    }

    /// `vcc_feature` (`+err_unref`, `-err_unref`; others have no equivalent) and 2.x/3.x's
    /// `vcc_err_unref on|off`.
    fn vcc_feature(&mut self, name: &str, value: &str) -> Result<(), ParamError> {
        if name == "vcc_err_unref" {
            self.err_unref = Some(matches!(value, "on" | "true" | "1"));
            return Ok(());
        }
        for flag in value.split(',') {
            match flag.trim() {
                "+err_unref" => self.err_unref = Some(true),
                "-err_unref" => self.err_unref = Some(false),
                other => {
                    return Err(ParamError::Unmapped(format!(
                        "vcc_feature {other} has no Shellac equivalent"
                    )));
                }
            }
        }
        Ok(())
    }

    /// `varnish -proto PROXY`: every listener takes the PROXY protocol (`server.proxy_protocol`)
    /// from the file's clients, which are on loopback.
    pub fn proxy_protocol(&mut self) {
        self.values
            .insert(("server", "proxy_protocol"), "true".into());
        self.values.insert(
            ("server", "proxy_protocol_from"),
            "[\"127.0.0.0/8\", \"::1/128\"]".into(),
        );
    }

    /// The configuration file: `listen`/`admin` (absent for a check), the VCL file, the
    /// settings.
    pub fn toml(
        &self,
        listen: Option<&[String]>,
        admin: Option<&str>,
        vcl: Option<&Path>,
        dir: &Path,
    ) -> String {
        let mut sections: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        if let Some(l) = listen {
            // A path is a Unix socket's (`listen_unix`), the rest TCP addresses.
            let (unix, tcp): (Vec<&String>, Vec<&String>) =
                l.iter().partition(|a| a.starts_with('/'));
            let list = |a: Vec<&String>| a.iter().map(|a| quote(a)).collect::<Vec<_>>().join(", ");
            let server = sections.entry("server").or_default();
            server.push(format!("listen = [{}]", list(tcp)));
            if !unix.is_empty() {
                server.push(format!("listen_unix = [{}]", list(unix)));
            }
        }
        if let Some(a) = admin {
            let server = sections.entry("server").or_default();
            server.push(format!("admin = {}", quote(a)));
            server.push("shutdown_grace = \"1s\"".into());
        }
        let memory = self.memory_with_named();
        for ((section, key), value) in &self.values {
            let value = match (section, key, memory) {
                (&"cache", &"memory_size", Some(m)) => m.to_string(),
                _ => value.clone(),
            };
            sections
                .entry(section)
                .or_default()
                .push(format!("{key} = {value}"));
        }
        if let Some(m) = memory
            && !self.values.contains_key(&("cache", "memory_size"))
        {
            sections
                .entry("cache")
                .or_default()
                .push(format!("memory_size = {m}"));
        }
        if let Some(v) = vcl {
            let vcl = sections.entry("vcl").or_default();
            vcl.push(format!("file = {}", quote(&v.display().to_string())));
            if let Some(e) = self.err_unref {
                vcl.push(format!("err_unref = {e}"));
            }
        }
        let mut out = format!(
            "# Written by `shellac vtc` for one varnishtest file ({}).\n",
            dir.display()
        );
        for (section, lines) in sections {
            out.push_str(&format!("\n[{section}]\n"));
            for l in lines {
                out.push_str(&l);
                out.push('\n');
            }
        }
        out.push_str(&self.named_toml());
        out
    }
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Seconds as Varnish parameters take them: a plain number or a duration with a unit, or
/// `never` (a timeout that does not fire: ten years, the longest duration a setting holds).
fn seconds(v: &str) -> Option<Duration> {
    let v = v.trim();
    if v == "never" {
        return Some(Duration::from_secs(10 * 365 * 86_400));
    }
    if let Ok(f) = v.parse::<f64>() {
        return (f.is_finite() && f >= 0.0).then(|| Duration::from_secs_f64(f));
    }
    units::parse_duration(v).ok()
}

#[cfg(test)]
mod tests;
