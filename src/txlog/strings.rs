//! The strings a [`Record`] captures (request target, host, user agent, backend, TLS fields,
//! VCL trace, site, ESI parent, the headers the log format prints), all in the record's one
//! text buffer: setters for the request path, readers for the renderers and the live stream.

use http::Uri;

use super::record::{Record, TextRange, protocol};
use super::time;

impl Record {
    fn push(&mut self, s: &str) -> TextRange {
        let start = self.text.len() as u32;
        self.text.push_str(s);
        TextRange {
            start,
            end: self.text.len() as u32,
        }
    }

    fn push_bytes(&mut self, b: &[u8]) -> TextRange {
        match std::str::from_utf8(b) {
            Ok(s) => self.push(s),
            Err(_) => self.push(&String::from_utf8_lossy(b)),
        }
    }

    fn get(&self, span: TextRange) -> &str {
        self.text
            .get(span.start as usize..span.end as usize)
            .unwrap_or("")
    }

    /// Sets the request target as received, and its path and query.
    pub fn set_uri(&mut self, uri: &Uri) {
        match uri.authority() {
            None => {
                let target = uri.path_and_query().map_or("/", |p| p.as_str());
                self.target = self.push(target);
                let path_len = uri.path().len().min(target.len()) as u32;
                self.path = TextRange {
                    start: self.target.start,
                    end: self.target.start + path_len,
                };
                self.query = uri.query().map(|q| TextRange {
                    start: self.target.end - q.len() as u32,
                    end: self.target.end,
                });
            }
            Some(_) => {
                self.target = self.push(&uri.to_string());
                self.path = self.push(uri.path());
                self.query = uri.query().map(|q| self.push(q));
            }
        }
    }

    /// Sets the request target from the raw request line (a request refused before hyper
    /// parsed it), and its path and query.
    pub fn set_request_target(&mut self, target: &str) {
        self.target = self.push(target);
        let path_len = target.find('?').unwrap_or(target.len()) as u32;
        self.path = TextRange {
            start: self.target.start,
            end: self.target.start + path_len,
        };
        self.query = target.find('?').map(|q| TextRange {
            start: self.target.start + q as u32 + 1,
            end: self.target.end,
        });
    }

    /// False for a refused request whose request line was not valid: the log shows `-` for
    /// the request line, method and protocol.
    pub fn has_request_line(&self) -> bool {
        self.target.end > self.target.start
    }

    pub fn set_host(&mut self, host: &[u8]) {
        self.host = self.push_bytes(host);
    }

    pub fn set_user_agent(&mut self, ua: Option<&[u8]>) {
        self.user_agent = ua.map(|v| self.push_bytes(v));
    }

    pub fn set_backend(&mut self, name: Option<&str>) {
        self.backend = name.map(|n| self.push(n));
    }

    /// The client's TLS connection: version, cipher, SNI, ALPN, client certificate subject
    /// (empty when absent).
    pub fn set_tls(&mut self, parts: [&str; 5]) {
        let start = self.text.len() as u32;
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                self.text.push('\x1f');
            }
            self.text.push_str(p);
        }
        self.tls = Some(TextRange {
            start,
            end: self.text.len() as u32,
        });
    }

    /// One field of [`Record::set_tls`] (0 version … 4 client subject); None over cleartext.
    pub fn tls_field(&self, i: usize) -> Option<&str> {
        self.tls.and_then(|s| self.get(s).split('\x1f').nth(i))
    }

    /// Which VCL subroutine returned what (`recv:hash hash:lookup ...`).
    pub fn set_vcl(&mut self, trace: Option<&str>) {
        self.vcl = trace.filter(|t| !t.is_empty()).map(|t| self.push(t));
    }

    /// The `[[site]]` that answered the request.
    pub fn set_site(&mut self, name: Option<&str>) {
        self.site = name.map(|n| self.push(n));
    }

    /// An ESI include's sub-request: its depth (1 for a client's page's includes) and the
    /// target of the page that included it.
    pub fn set_esi(&mut self, level: u8, parent: &str) {
        self.esi_level = level;
        self.esi_parent = Some(self.push(parent));
    }

    pub fn push_request_header(&mut self, value: Option<&[u8]>) {
        let span = value.map(|v| self.push_bytes(v));
        self.request_headers.push(span);
    }

    pub fn push_response_header(&mut self, value: Option<&[u8]>) {
        let span = value.map(|v| self.push_bytes(v));
        self.response_headers.push(span);
    }

    /// The request target as received (`/path?query`, or absolute-form).
    pub fn target(&self) -> &str {
        self.get(self.target)
    }

    pub fn path(&self) -> &str {
        self.get(self.path)
    }

    pub fn query(&self) -> Option<&str> {
        self.query.map(|q| self.get(q))
    }

    /// The host the request was for: the absolute-form authority, else the Host header.
    pub fn host(&self) -> &str {
        self.get(self.host)
    }

    pub fn user_agent(&self) -> Option<&str> {
        self.user_agent.map(|s| self.get(s))
    }

    /// The backend contacted, if any.
    pub fn vcl(&self) -> Option<&str> {
        self.vcl.map(|s| self.get(s))
    }

    pub fn backend(&self) -> Option<&str> {
        self.backend.map(|s| self.get(s))
    }

    /// The `[[site]]` that answered, if sites are configured.
    pub fn site(&self) -> Option<&str> {
        self.site.map(|s| self.get(s))
    }

    /// For an ESI include: the target of the page that included it.
    pub fn esi_parent(&self) -> Option<&str> {
        self.esi_parent.map(|s| self.get(s))
    }

    /// Value of the format's `i`th request header.
    pub fn request_header(&self, i: usize) -> Option<&str> {
        self.request_headers
            .get(i)
            .copied()
            .flatten()
            .map(|s| self.get(s))
    }

    /// Value of the format's `i`th response header.
    pub fn response_header(&self, i: usize) -> Option<&str> {
        self.response_headers
            .get(i)
            .copied()
            .flatten()
            .map(|s| self.get(s))
    }

    pub fn protocol(&self) -> &'static str {
        protocol(self.version)
    }

    /// The record as one JSON object (the live log stream; no captured headers).
    pub fn to_json(&self) -> serde_json::Value {
        let mut time = Vec::with_capacity(24);
        time::iso_time(self.time, &mut time);
        let time = String::from_utf8_lossy(&time);
        serde_json::json!({
            "time": time,
            "client": self.client.to_string(),
            "method": self.has_request_line().then(|| self.method.as_str()),
            "url": self.has_request_line().then(|| self.target()),
            "host": self.host(),
            "status": self.status,
            "bytes": self.bytes,
            "duration_us": self.duration.as_micros() as u64,
            "ttfb_us": self.ttfb.as_micros() as u64,
            "cache": self.decision.kind.as_str(),
            "reason": self.decision.reason.as_deref(),
            "backend": self.backend(),
            "site": self.site(),
            "vcl": self.vcl(),
            "esi_level": self.esi_level,
            "esi_parent": self.esi_parent(),
            "complete": self.complete,
        })
    }
}
