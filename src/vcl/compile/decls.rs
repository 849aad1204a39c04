//! Declarations: `import`, `backend`, `probe`, `acl` and 2.x `director` blocks, checked as
//! vcc checks them and turned into Shellac's backend, probe and director settings.

use std::net::IpAddr;
use std::time::Duration;

use super::super::ast::{Expr, Field, FieldValue, Pos};
use super::consts::{Const, const_of};
use super::vmods::Vmod;
use super::{Checker, Import, ProbeSym, Target};
use crate::config::units::Dur;
use crate::config::{BackendConfig, ProbeConfig, ProbeRef};
use crate::vcl::types::Dialect;

const BACKEND_FIELDS: &[&str] = &[
    "host",
    "port",
    "host_header",
    "connect_timeout",
    "first_byte_timeout",
    "between_bytes_timeout",
    "max_connections",
    "probe",
    "proxy_header",
    "preamble",
    "path",
    "via",
    "authority",
    "saintmode_threshold",
    "wait_limit",
    "wait_timeout",
];

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

impl Checker<'_> {
    pub(super) fn import(&mut self, name: &str, alias: Option<&str>, from: Option<&str>, pos: Pos) {
        let local = alias.unwrap_or(name).to_string();
        if self.imports.contains_key(&local) {
            // Importing the same VMOD twice is allowed (an included file may import it too).
            return;
        }
        let vmod = Vmod::by_name(name);
        if let Vmod::Other(_) = vmod {
            self.unsupported(
                pos,
                format!(
                    "Shellac has no VMOD '{name}'{}: it implements std, directors, cookie, purge, \
                     blob and xkey (docs/vcl.md lists what each offers)",
                    from.map(|f| format!(" (from {f})")).unwrap_or_default()
                ),
            );
        } else if from.is_some() {
            self.unsupported(
                pos,
                format!(
                    "import {name} from \"...\": Shellac's {name} is built in, it loads no \
                     shared object"
                ),
            );
        }
        if self.redefined(&local, pos) {
            return;
        }
        self.imports.insert(local, Import { vmod, pos });
    }

    /// Fields of a declaration: each known, none twice; calls `f` with each.
    pub(super) fn fields<'f>(
        &mut self,
        what: &str,
        fields: &'f [Field],
        known: &[&str],
    ) -> Vec<&'f Field> {
        let mut seen: Vec<&'f Field> = Vec::new();
        for f in fields {
            if !known.contains(&f.name.as_str()) {
                self.error(
                    f.pos,
                    format!(
                        "Unknown field: '.{}' in {what} (known: .{})",
                        f.name,
                        known.join(", .")
                    ),
                );
                continue;
            }
            if let Some(first) = seen.iter().find(|s| s.name == f.name) {
                let at = self.at(first.pos);
                self.error(
                    f.pos,
                    format!("Field '.{}' redefined (first at {at})", f.name),
                );
                continue;
            }
            seen.push(f);
        }
        seen
    }

    pub(super) fn field_str(&mut self, f: &Field) -> Option<String> {
        match &f.value {
            FieldValue::Expr(e) => match const_of(e) {
                Some(Const::Str(s)) => Some(s),
                Some(Const::Lines(l)) => Some(l.concat()),
                _ => {
                    self.error(f.pos, format!("'.{}' must be a string in quotes", f.name));
                    None
                }
            },
            _ => {
                self.error(f.pos, format!("'.{}' must be a string in quotes", f.name));
                None
            }
        }
    }

    pub(super) fn field_duration(&mut self, f: &Field) -> Option<Duration> {
        match &f.value {
            FieldValue::Expr(e) => match const_of(e) {
                Some(Const::Duration(s)) if s >= 0.0 && s.is_finite() => {
                    Some(Duration::from_secs_f64(s))
                }
                Some(Const::Duration(_)) => {
                    self.error(f.pos, format!("'.{}' may not be negative", f.name));
                    None
                }
                _ => {
                    self.error(
                        f.pos,
                        format!("'.{}' must be a duration such as 5s or 500ms", f.name),
                    );
                    None
                }
            },
            _ => {
                self.error(f.pos, format!("'.{}' must be a duration", f.name));
                None
            }
        }
    }

    pub(super) fn field_uint(&mut self, f: &Field) -> Option<u64> {
        match &f.value {
            FieldValue::Expr(e) => match const_of(e) {
                Some(Const::Int(n)) if n >= 0 => Some(n as u64),
                _ => {
                    self.error(f.pos, format!("'.{}' must be a whole number", f.name));
                    None
                }
            },
            _ => {
                self.error(f.pos, format!("'.{}' must be a whole number", f.name));
                None
            }
        }
    }

    pub(super) fn add_target(&mut self, name: &str, pos: Pos, none: bool) -> Option<u16> {
        if self.redefined(name, pos) {
            return None;
        }
        if self.dialect.is_legacy() && name.contains('-') {
            self.error(
                pos,
                format!("the name '{name}' may not hold '-' in VCL 2.x (letters, digits, '_')"),
            );
        }
        self.targets.push(Target {
            name: name.to_string(),
            pos,
            used: false,
            none,
        });
        Some((self.targets.len() - 1) as u16)
    }

    /// A backend declaration (its name was registered by `add_target` already).
    pub(super) fn backend(&mut self, name: &str, fields: Option<&[Field]>, pos: Pos) {
        let Some(fields) = fields else {
            // `backend NAME none;` came with VCL 4.1.
            if self.dialect == Dialect::V40 {
                self.error(
                    pos,
                    format!(
                        "'backend {name} none;' needs 'vcl 4.1;': Compiled VCL version (4.0) not supported."
                    ),
                );
            }
            return;
        };
        if let Some(b) = self.backend_config(name, fields, pos) {
            self.origins.backends.push(b);
        }
    }

    /// A backend's settings, from its fields.
    pub(super) fn backend_config(
        &mut self,
        name: &str,
        fields: &[Field],
        pos: Pos,
    ) -> Option<BackendConfig> {
        let fields = self.fields("a backend", fields, BACKEND_FIELDS);
        let mut host: Option<(String, Option<u16>)> = None;
        let mut b = BackendConfig::new(name, "", 80);
        let t = self.options.timeouts;
        b.connect_timeout = Dur(t.connect);
        b.first_byte_timeout = Dur(t.first_byte);
        b.between_bytes_timeout = Dur(t.between_bytes);
        b.idle_timeout = Dur(t.backend_idle);
        let mut port = None;
        let mut uds = false;
        for f in fields {
            match f.name.as_str() {
                "host" => {
                    if let Some(h) = self.field_str(f) {
                        match split_host(&h) {
                            Ok(hp) => host = Some(hp),
                            Err(msg) => self.error(f.pos, msg),
                        }
                    }
                }
                "port" => {
                    let text = match &f.value {
                        FieldValue::Expr(e) => match const_of(e) {
                            Some(Const::Str(s)) => Some(s),
                            Some(Const::Int(n)) => Some(n.to_string()),
                            _ => None,
                        },
                        _ => None,
                    };
                    match text.as_deref().map(service_port) {
                        Some(Some(p)) => port = Some(p),
                        _ => self.error(
                            f.pos,
                            "'.port' must be a port number or service name (\"8080\", \"http\")",
                        ),
                    }
                }
                "connect_timeout" => {
                    if let Some(d) = self.field_duration(f) {
                        b.connect_timeout = Dur(d);
                    }
                }
                "first_byte_timeout" => {
                    if let Some(d) = self.field_duration(f) {
                        b.first_byte_timeout = Dur(d);
                    }
                }
                "between_bytes_timeout" => {
                    if let Some(d) = self.field_duration(f) {
                        b.between_bytes_timeout = Dur(d);
                    }
                }
                "max_connections" => {
                    if let Some(n) = self.field_uint(f) {
                        b.max_connections = n as usize;
                    }
                }
                "probe" => match &f.value {
                    FieldValue::Table(t) => {
                        if let Some(p) = self.probe_config("", t, f.pos) {
                            b.probe = Some(ProbeRef::Inline(p));
                        }
                    }
                    FieldValue::Expr(Expr::Name(n, p)) => match self.probes.get_mut(n) {
                        Some(sym) => {
                            sym.used = true;
                            b.probe = Some(ProbeRef::Named(n.clone()));
                        }
                        None => self.error(
                            *p,
                            format!("Symbol not found: '{n}' (no probe has this name)"),
                        ),
                    },
                    _ => self.error(f.pos, "'.probe' must name a probe or be a { ... } probe"),
                },
                "host_header" => {
                    if let Some(h) = self.field_str(f) {
                        if h.trim().is_empty() || http::HeaderValue::from_str(&h).is_err() {
                            self.error(f.pos, "'.host_header' must be a Host value");
                        } else {
                            b.host_header = Some(h);
                        }
                    }
                }
                "preamble" => match &f.value {
                    FieldValue::Expr(crate::vcl::ast::Expr::Blob(text, _)) => {
                        if crate::http::base64::decode_base64(text).is_some() {
                            b.preamble = Some(text.clone());
                        } else {
                            self.error(f.pos, "'.preamble' must be a BLOB in base64 (`:...:`)");
                        }
                    }
                    _ => self.error(f.pos, "'.preamble' must be a BLOB (`:base64:`)"),
                },
                "saintmode_threshold" => self.unsupported(
                    f.pos,
                    "'.saintmode_threshold': Shellac's saint mode holds a backend off for \
                     every object once it is held off for 10 (Varnish's default \
                     saintmode_threshold); a threshold per backend is not supported",
                ),
                "path" => {
                    self.unsupported(
                        f.pos,
                        "Unix socket backends ('.path') are not supported by Shellac",
                    );
                    uds = true;
                }
                "wait_limit" => {
                    if let Some(n) = self.field_uint(f) {
                        b.max_queue = n as usize;
                    }
                }
                "wait_timeout" => self.unsupported(
                    f.pos,
                    "'.wait_timeout': a request waits for a backend connection at most its \
                     connect_timeout in Shellac",
                ),
                other => {
                    // A name it refers to (`.via = proxy;`) still counts as used.
                    if let FieldValue::Expr(Expr::Name(n, _)) = &f.value
                        && let Some(t) = self.targets.iter_mut().find(|t| t.name == *n)
                    {
                        t.used = true;
                    }
                    self.unsupported(
                        f.pos,
                        format!("the backend setting '.{other}' is not supported by Shellac"),
                    )
                }
            }
        }
        if uds {
            return None;
        }
        let Some((h, inline_port)) = host else {
            self.error(
                pos,
                format!("backend {name}: Mandatory field 'host' missing"),
            );
            return None;
        };
        // Without `.host_header` Varnish sends `.host` (no port) to a request without Host.
        if b.host_header.is_none() {
            b.host_header = Some(if h.contains(':') {
                format!("[{h}]")
            } else {
                h.clone()
            });
        }
        b.host = h;
        b.port = port.or(inline_port).unwrap_or(80);
        Some(b)
    }

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
        let (mut window, mut threshold, mut initial) = (None, None, None);
        let mut url_at = None;
        for f in fields {
            match f.name.as_str() {
                "url" => {
                    if let Some(u) = self.field_str(f) {
                        if !u.starts_with('/') || u.contains([' ', '\r', '\n']) {
                            self.error(f.pos, format!("'.url' \"{u}\" must be a path starting with '/', without spaces"));
                            ok = false;
                        }
                        if p.request.is_some() {
                            let at = self.at(url_at.unwrap_or(pos));
                            self.error(f.pos, format!("Probe request redefinition at {at}: give either .url or .request"));
                            ok = false;
                        }
                        p.url = Some(u);
                        url_at = Some(f.pos);
                    }
                }
                "request" => {
                    if url_at.is_some() || p.url.is_some() {
                        let at = self.at(url_at.unwrap_or(pos));
                        self.error(
                            f.pos,
                            format!(
                                "Probe request redefinition at {at}: give either .url or .request"
                            ),
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
                    url_at = Some(f.pos);
                }
                "expected_response" => match self.field_uint(f) {
                    Some(n) if (100..=999).contains(&n) => p.expected_status = n as u16,
                    Some(_) => {
                        self.error(
                            f.pos,
                            "'.expected_response' must be a status with exactly three digits",
                        );
                        ok = false;
                    }
                    None => ok = false,
                },
                "timeout" => match self.field_duration(f) {
                    Some(d) if !d.is_zero() => p.timeout = Dur(d),
                    Some(_) => {
                        self.error(f.pos, "'.timeout' must be more than 0s");
                        ok = false;
                    }
                    None => ok = false,
                },
                "interval" => match self.field_duration(f) {
                    Some(d) if !d.is_zero() => p.interval = Dur(d),
                    Some(_) => {
                        self.error(f.pos, "'.interval' must be more than 0s");
                        ok = false;
                    }
                    None => ok = false,
                },
                "window" => window = self.field_uint(f).map(|n| (n, f.pos)),
                "threshold" => threshold = self.field_uint(f).map(|n| (n, f.pos)),
                "initial" => initial = self.field_uint(f).map(|n| (n, f.pos)),
                "expect_close" => match &f.value {
                    FieldValue::Expr(Expr::Name(n, _)) if n == "true" => {}
                    FieldValue::Expr(Expr::Name(n, _)) if n == "false" => self.unsupported(
                        f.pos,
                        "'.expect_close = false': Shellac's probes always close the connection",
                    ),
                    _ => {
                        self.error(f.pos, "Expected \"true\" or \"false\" for '.expect_close'");
                        ok = false;
                    }
                },
                _ => {}
            }
        }
        if let Some((w, at)) = window {
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
        if let (Some((_, at)), None) = (window, threshold) {
            self.error(at, "Must specify .threshold with .window");
            ok = false;
        }
        if let Some((t, at)) = threshold {
            if t > 64 {
                self.error(at, "Threshold must be 64 or less");
                ok = false;
            } else if t > u64::from(p.window) && self.dialect.is_legacy() && window.is_none() {
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
        if let Some((i, at)) = initial {
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
        if p.url.is_none() && p.request.is_none() {
            // Varnish probes GET "/" by default.
            p.url = Some("/".to_string());
        }
        let _ = pos;
        ok.then_some(p)
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

/// `.host`: a name or address, optionally with a port (`"h:80"`, `"h 80"`, `"[::1]:80"`).
fn split_host(h: &str) -> Result<(String, Option<u16>), String> {
    let h = h.trim();
    let bad =
        || format!("'.host' \"{h}\" is not a host name or IP address (with an optional port)");
    if h.is_empty() {
        return Err(bad());
    }
    if let Ok(ip) = h.parse::<IpAddr>() {
        return Ok((ip.to_string(), None));
    }
    let (host, port) = if let Some(rest) = h.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        let port = after.trim_start_matches([':', ' ']);
        (host, (!port.is_empty()).then_some(port))
    } else if let Some((host, port)) = h.split_once([' ', ':']) {
        (host, Some(port.trim()))
    } else {
        (h, None)
    };
    let valid = !host.is_empty() && host.parse::<IpAddr>().is_ok()
        || host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_')
            && !host.is_empty()
            && !host.starts_with('.')
            && !host.contains("..");
    if !valid {
        return Err(bad());
    }
    let port = match port {
        Some(p) => Some(service_port(p).ok_or_else(bad)?),
        None => None,
    };
    Ok((host.to_string(), port))
}

/// A port number or a well-known service name.
fn service_port(p: &str) -> Option<u16> {
    match p {
        "http" => Some(80),
        "https" => Some(443),
        _ => p.parse::<u16>().ok().filter(|p| *p > 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_ports() {
        assert_eq!(split_host("127.0.0.1").unwrap(), ("127.0.0.1".into(), None));
        assert_eq!(
            split_host("127.0.0.1 8080").unwrap(),
            ("127.0.0.1".into(), Some(8080))
        );
        assert_eq!(
            split_host("www.example.com:http").unwrap(),
            ("www.example.com".into(), Some(80))
        );
        assert_eq!(split_host("[::1]:81").unwrap(), ("::1".into(), Some(81)));
        assert!(split_host("////").is_err());
        assert!(split_host("a b c").is_err());
        assert_eq!(service_port("https"), Some(443));
        assert_eq!(service_port("////"), None);
    }
}

#[cfg(test)]
mod timeout_tests {
    use std::time::Duration;

    /// `[vcl] backend_idle_timeout` (Varnish's `backend_idle_timeout`) is how long a VCL
    /// backend keeps an idle pooled connection; the connect timeout a backend sets wins over
    /// `[vcl] connect_timeout`.
    #[test]
    fn vcl_backends_take_the_idle_and_connect_defaults() {
        let src = crate::vcl::load::load_text(
            "t.vcl",
            "vcl 4.1;\nbackend a { .host = \"127.0.0.1\"; .port = \"8080\"; }\n\
             backend b { .host = \"127.0.0.1\"; .connect_timeout = 2s; }\n\
             sub vcl_recv { if (req.url == \"/b\") { set req.backend_hint = b; } }\n",
            None,
        )
        .expect("loads");
        let mut options = crate::vcl::Options::default();
        options.timeouts.backend_idle = Duration::from_secs(7);
        options.timeouts.connect = Duration::from_millis(900);
        let program = crate::vcl::compile_with(&src, &options).expect("compiles");
        let backends = &program.origins.backends;
        assert_eq!(backends.len(), 2);
        for b in backends {
            assert_eq!(b.idle_timeout.0, Duration::from_secs(7), "{}", b.name);
        }
        assert_eq!(backends[0].connect_timeout.0, Duration::from_millis(900));
        assert_eq!(backends[1].connect_timeout.0, Duration::from_secs(2));
    }
}
