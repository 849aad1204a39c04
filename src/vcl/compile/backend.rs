//! `backend` declarations, checked as vcc checks them and turned into Shellac's backend
//! settings: `.host` and `.port`, the timeouts, limits, probe, Host header, preamble and
//! PROXY protocol header (`.proxy_header`).

use std::net::IpAddr;

use super::super::ast::{Expr, Field, FieldValue, Pos};
use super::Checker;
use super::consts::{Const, const_of};
use crate::config::units::Dur;
use crate::config::{BackendConfig, ProbeRef};
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

impl Checker<'_> {
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
        let mut path: Option<Option<String>> = None;
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
                    if let Some(p) = self.backend_port(f) {
                        port = Some(p);
                    }
                }
                "path" => path = Some(self.backend_path(f)),
                _ => self.backend_setting(&mut b, f),
            }
        }
        if b.preamble.is_some() && b.proxy_protocol.is_some() {
            self.error(
                pos,
                format!("backend {name}: '.preamble' and '.proxy_header' both want the first bytes of a connection: keep one"),
            );
            return None;
        }
        if let Some(p) = path {
            // A `.path` refused (reported by `backend_path`) is the backend's only problem:
            // no "host missing" beside it (an abstract name is unsupported, not invalid).
            let p = p?;
            if host.is_some() {
                self.error(
                    pos,
                    format!("backend {name}: Address redefinition at: '.path' after '.host' (only one may be given)"),
                );
                return None;
            }
            // A Unix-socket backend (`address = "unix:PATH"`); without `.host_header`
            // Varnish sends `0.0.0.0` to a request without Host.
            b.address = Some(format!("unix:{p}"));
            b.host_header.get_or_insert_with(|| "0.0.0.0".to_string());
            return Some(b);
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

    /// `.path`: the absolute path of a Unix socket, checked as vcc checks it (VCL 4.1, not
    /// too long for `sun_path`, not an existing file that is not a socket; one that does not
    /// exist yet is fine). Linux's abstract names (`@name`) are refused: Shellac connects to
    /// socket files only.
    fn backend_path(&mut self, f: &Field) -> Option<String> {
        use std::os::unix::fs::FileTypeExt;
        let p = self.field_str(f)?;
        if self.dialect == Dialect::V40 {
            self.error(
                f.pos,
                "Unix socket backends only supported in VCL4.1 and higher.",
            );
            return None;
        }
        if p.starts_with('@') {
            self.unsupported(
                f.pos,
                "abstract Unix sockets ('.path = \"@name\"') are not supported by Shellac: give a socket file's absolute path",
            );
            return None;
        }
        if !p.starts_with('/') {
            self.error(
                f.pos,
                format!("Must be a valid path or abstract socket: {p}"),
            );
            return None;
        }
        // `sun_path` holds 108 bytes with its terminating NUL.
        if p.len() > 107 {
            self.error(f.pos, "Path too long for a Unix domain socket");
            return None;
        }
        if let Ok(m) = std::fs::metadata(&p)
            && !m.file_type().is_socket()
        {
            self.error(f.pos, format!("Not a socket: {p}"));
            return None;
        }
        Some(p)
    }

    /// `.port`: a number or a service name (reported when it is neither).
    fn backend_port(&mut self, f: &Field) -> Option<u16> {
        let text = match &f.value {
            FieldValue::Expr(e) => match const_of(e) {
                Some(Const::Str(s)) => Some(s),
                Some(Const::Int(n)) => Some(n.to_string()),
                _ => None,
            },
            _ => None,
        };
        match text.as_deref().map(service_port) {
            Some(Some(p)) => Some(p),
            _ => {
                self.error(
                    f.pos,
                    "'.port' must be a port number or service name (\"8080\", \"http\")",
                );
                None
            }
        }
    }

    /// A backend field other than `.host`, `.port` and `.path` into `b` (or refused).
    fn backend_setting(&mut self, b: &mut BackendConfig, f: &Field) {
        match f.name.as_str() {
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
            "probe" => {
                if let Some(p) = self.backend_probe(f) {
                    b.probe = Some(p);
                }
            }
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
            // Varnish's `.proxy_header`: Shellac's `[[backend]] proxy_protocol`.
            "proxy_header" => match self.field_uint(f) {
                Some(1) => b.proxy_protocol = Some(crate::config::ProxyVersion::V1),
                Some(2) => b.proxy_protocol = Some(crate::config::ProxyVersion::V2),
                Some(_) => self.error(f.pos, "'.proxy_header' must be 1 or 2"),
                None => {}
            },
            "saintmode_threshold" => self.unsupported(
                f.pos,
                "'.saintmode_threshold': Shellac's saint mode holds a backend off for \
                 every object once it is held off for 10 (Varnish's default \
                 saintmode_threshold); a threshold per backend is not supported",
            ),
            "wait_limit" => {
                if let Some(n) = self.field_uint(f) {
                    b.max_queue = n as usize;
                }
            }
            "wait_timeout" => {
                if let Some(d) = self.field_duration(f) {
                    b.wait_timeout = Some(Dur(d));
                }
            }
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

    /// `.probe`: a named probe or an inline `{ ... }` one.
    fn backend_probe(&mut self, f: &Field) -> Option<ProbeRef> {
        match &f.value {
            FieldValue::Table(t) => self.probe_config("", t, f.pos).map(ProbeRef::Inline),
            FieldValue::Expr(Expr::Name(n, p)) => match self.probes.get_mut(n) {
                Some(sym) => {
                    sym.used = true;
                    Some(ProbeRef::Named(n.clone()))
                }
                None => {
                    self.error(
                        *p,
                        format!("Symbol not found: '{n}' (no probe has this name)"),
                    );
                    None
                }
            },
            _ => {
                self.error(f.pos, "'.probe' must name a probe or be a { ... } probe");
                None
            }
        }
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
