//! `probe` declarations (named or inline in a backend), checked with vcc's limits and turned
//! into Shellac's probe settings.

use std::time::Duration;

use super::super::ast::{Expr, Field, FieldValue, Pos};
use super::consts::{Const, const_of};
use super::{Checker, ProbeSym};
use crate::config::ProbeConfig;
use crate::config::units::Dur;

const PROBE_FIELDS: &[&str] = &[
    "url",
    "request",
    "expected_response",
    "timeout",
    "interval",
    "window",
    "threshold",
    "initial",
    "expect_close",
];

/// `.window`, `.threshold` and `.initial` with where each was given: checked together once
/// every field is read.
#[derive(Default)]
struct Counts {
    window: Option<(u64, Pos)>,
    threshold: Option<(u64, Pos)>,
    initial: Option<(u64, Pos)>,
}

impl Checker<'_> {
    pub(super) fn probe_decl(&mut self, name: &str, fields: &[Field], pos: Pos) {
        if self.redefined(name, pos) {
            return;
        }
        let Some(config) = self.probe_config(name, fields, pos) else {
            // Still a name, so uses do not report it again.
            self.probes.insert(
                name.to_string(),
                ProbeSym {
                    pos,
                    config: ProbeConfig {
                        name: name.to_string(),
                        ..empty_probe()
                    },
                    used: true,
                },
            );
            return;
        };
        self.probes.insert(
            name.to_string(),
            ProbeSym {
                pos,
                config,
                used: false,
            },
        );
    }

    /// A probe's settings (`name` empty: inline), with vcc's limits.
    pub(super) fn probe_config(
        &mut self,
        name: &str,
        fields: &[Field],
        pos: Pos,
    ) -> Option<ProbeConfig> {
        let fields = self.fields("a probe", fields, PROBE_FIELDS);
        let mut p = ProbeConfig {
            name: name.to_string(),
            ..empty_probe()
        };
        let mut ok = true;
        let mut counts = Counts::default();
        let mut url_at = None;
        for f in fields {
            match f.name.as_str() {
                "url" => ok &= self.probe_url(&mut p, f, &mut url_at, pos),
                "request" => ok &= self.probe_request(&mut p, f, &mut url_at, pos),
                "window" => counts.window = self.field_uint(f).map(|n| (n, f.pos)),
                "threshold" => counts.threshold = self.field_uint(f).map(|n| (n, f.pos)),
                "initial" => counts.initial = self.field_uint(f).map(|n| (n, f.pos)),
                _ => ok &= self.probe_setting(&mut p, f),
            }
        }
        ok &= self.probe_counts(&mut p, &counts);
        if p.url.is_none() && p.request.is_none() {
            // Varnish probes GET "/" by default.
            p.url = Some("/".to_string());
        }
        ok.then_some(p)
    }

    /// `.url`; false when it is wrong (reported).
    fn probe_url(
        &mut self,
        p: &mut ProbeConfig,
        f: &Field,
        url_at: &mut Option<Pos>,
        pos: Pos,
    ) -> bool {
        let mut ok = true;
        if let Some(u) = self.field_str(f) {
            if !u.starts_with('/') || u.contains([' ', '\r', '\n']) {
                self.error(
                    f.pos,
                    format!("'.url' \"{u}\" must be a path starting with '/', without spaces"),
                );
                ok = false;
            }
            if p.request.is_some() {
                let at = self.at(url_at.unwrap_or(pos));
                self.error(
                    f.pos,
                    format!("Probe request redefinition at {at}: give either .url or .request"),
                );
                ok = false;
            }
            p.url = Some(u);
            *url_at = Some(f.pos);
        }
        ok
    }

    /// `.request`: the request's lines; false when it is wrong (reported).
    fn probe_request(
        &mut self,
        p: &mut ProbeConfig,
        f: &Field,
        url_at: &mut Option<Pos>,
        pos: Pos,
    ) -> bool {
        let mut ok = true;
        if url_at.is_some() || p.url.is_some() {
            let at = self.at(url_at.unwrap_or(pos));
            self.error(
                f.pos,
                format!("Probe request redefinition at {at}: give either .url or .request"),
            );
            ok = false;
        }
        let lines = match &f.value {
            FieldValue::Expr(e) => match const_of(e) {
                Some(Const::Str(s)) => Some(vec![s]),
                Some(Const::Lines(l)) => Some(l),
                _ => None,
            },
            _ => None,
        };
        match lines {
            Some(l) if !l.is_empty() && l.iter().all(|x| !x.contains(['\r', '\n'])) => {
                p.request = Some(l)
            }
            _ => {
                self.error(f.pos, "'.request' must be strings, one request line each");
                ok = false;
            }
        }
        *url_at = Some(f.pos);
        ok
    }

    /// `.expected_response`, `.timeout`, `.interval` and `.expect_close`; false when one is
    /// wrong (reported).
    fn probe_setting(&mut self, p: &mut ProbeConfig, f: &Field) -> bool {
        match f.name.as_str() {
            "expected_response" => match self.field_uint(f) {
                Some(n) if (100..=999).contains(&n) => p.expected_status = n as u16,
                Some(_) => {
                    self.error(
                        f.pos,
                        "'.expected_response' must be a status with exactly three digits",
                    );
                    return false;
                }
                None => return false,
            },
            "timeout" => match self.field_duration(f) {
                Some(d) if !d.is_zero() => p.timeout = Dur(d),
                Some(_) => {
                    self.error(f.pos, "'.timeout' must be more than 0s");
                    return false;
                }
                None => return false,
            },
            "interval" => match self.field_duration(f) {
                Some(d) if !d.is_zero() => p.interval = Dur(d),
                Some(_) => {
                    self.error(f.pos, "'.interval' must be more than 0s");
                    return false;
                }
                None => return false,
            },
            "expect_close" => match &f.value {
                FieldValue::Expr(Expr::Name(n, _)) if n == "true" => {}
                FieldValue::Expr(Expr::Name(n, _)) if n == "false" => self.unsupported(
                    f.pos,
                    "'.expect_close = false': Shellac's probes always close the connection",
                ),
                _ => {
                    self.error(f.pos, "Expected \"true\" or \"false\" for '.expect_close'");
                    return false;
                }
            },
            _ => {}
        }
        true
    }

    /// `.window`, `.threshold` and `.initial` against each other and vcc's limits; false
    /// when one is wrong (reported).
    fn probe_counts(&mut self, p: &mut ProbeConfig, c: &Counts) -> bool {
        let mut ok = true;
        if let Some((w, at)) = c.window {
            if w > 64 {
                self.error(at, "Window must be 64 or less");
                ok = false;
            } else if w == 0 {
                self.error(at, "Window must be at least 1");
                ok = false;
            } else {
                p.window = w as u32;
            }
        }
        if let (Some((_, at)), None) = (c.window, c.threshold) {
            self.error(at, "Must specify .threshold with .window");
            ok = false;
        }
        if let Some((t, at)) = c.threshold {
            if t > 64 {
                self.error(at, "Threshold must be 64 or less");
                ok = false;
            } else if t > u64::from(p.window) && self.dialect.is_legacy() && c.window.is_none() {
                // 2.x checked such a threshold against nothing: that backend is never healthy.
                self.unsupported(
                    at,
                    format!(
                        "'.threshold = {t}' with the default window of {}: the backend could \
                         never be healthy; give a .window",
                        p.window
                    ),
                );
                ok = false;
            } else if t > u64::from(p.window) {
                self.error(
                    at,
                    format!("Threshold must not be more than the window ({})", p.window),
                );
                ok = false;
            } else {
                p.threshold = t as u32;
            }
        }
        if let Some((i, at)) = c.initial {
            if i > u64::from(p.window) {
                self.error(
                    at,
                    format!("Initial must not be more than the window ({})", p.window),
                );
                ok = false;
            } else {
                p.initial = Some(i as u32);
            }
        }
        ok
    }
}

fn empty_probe() -> ProbeConfig {
    ProbeConfig {
        name: String::new(),
        url: None,
        request: None,
        expected_status: 200,
        interval: Dur(Duration::from_secs(5)),
        timeout: Dur(Duration::from_secs(2)),
        window: 8,
        threshold: 3,
        initial: None,
    }
}
