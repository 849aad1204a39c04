//! One HTTP/1 conversation of a client or server specification, as varnishtest's
//! vtc_http.c has it: the last request and response received (split into their three
//! first-line parts and raw field lines) and the body; what it sends is in `tx.rs`.

use std::sync::Arc;
use std::time::Duration;

use super::conn::{Conn, RxError};
use super::context::{Flavour, Halt, Shared, Step, fail};

/// A received head: `[method|proto, url|status, proto|reason]` and the field lines.
#[derive(Clone, Debug, Default)]
pub struct Head {
    pub parts: [Option<String>; 3],
    pub fields: Vec<String>,
}

impl Head {
    /// The value of the first field `name` (case-insensitive), blanks after the colon
    /// skipped, as `http_find_header`.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.iter().find_map(|f| field_value(f, name))
    }

    pub fn count(&self, name: &str) -> usize {
        self.fields
            .iter()
            .filter(|f| field_value(f, name).is_some())
            .count()
    }

    /// Splits a head (its bytes up to and including the blank line).
    pub fn parse(raw: &[u8]) -> Head {
        let text = String::from_utf8_lossy(raw);
        let t = text.trim_start_matches([' ', '\t', '\r', '\n']);
        let mut lines = t.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
        let first = lines.next().unwrap_or("");
        let mut head = Head::default();
        let (a, rest) = split_word(first);
        head.parts[0] = Some(a.to_string());
        let rest = rest.trim_start_matches([' ', '\t']);
        let (b, rest) = split_word(rest);
        head.parts[1] = Some(b.to_string());
        if !rest.is_empty() {
            head.parts[2] = Some(rest.trim_start_matches([' ', '\t']).to_string());
        }
        for l in lines {
            if l.is_empty() {
                break;
            }
            head.fields.push(l.to_string());
        }
        head
    }
}

fn split_word(s: &str) -> (&str, &str) {
    match s.find([' ', '\t']) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

fn field_value<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let n = name.len();
    if line.len() > n
        && line.as_bytes()[n] == b':'
        && line.is_char_boundary(n)
        && line[..n].eq_ignore_ascii_case(name)
    {
        Some(line[n + 1..].trim_start_matches([' ', '\t']))
    } else {
        None
    }
}

/// One conversation.
pub struct Session {
    pub shared: Arc<Shared>,
    pub name: String,
    pub conn: Option<Conn>,
    /// A server's listening socket (`accept` takes the next connection from it).
    pub listener: Option<Arc<super::sock::Listening>>,
    pub server: bool,
    pub req: Head,
    pub resp: Head,
    pub body: Option<Vec<u8>>,
    pub bodylen: Option<String>,
    pub chunklen: String,
    pub timeout: Duration,
    /// A failed read or write fails the test (`fatal`, the default) or is only logged.
    pub fatal: bool,
    pub head_method: bool,
    pub rem_ip: String,
    pub rem_port: String,
    /// `remote.path`: the Unix socket's path, over one.
    pub rem_path: Option<String>,
    /// `-gziplevel`: kept by the connection for its later `-gzipbody` / `-gziplen`, 0 (stored
    /// blocks) until set, as vtc_http.c's `hp->gziplevel`.
    pub gzip_level: u32,
}

impl Session {
    pub fn new(shared: Arc<Shared>, name: &str, conn: Conn, server: bool) -> Session {
        let (rem_ip, rem_port) = match conn.stream().peer_addr() {
            Some(a) => (a.ip().to_string(), a.port().to_string()),
            None => ("0.0.0.0".into(), "0".into()),
        };
        let rem_path = conn.stream().unix_path();
        let timeout = shared.io_timeout;
        Session {
            shared,
            name: name.to_string(),
            conn: Some(conn),
            listener: None,
            server,
            req: Head::default(),
            resp: Head::default(),
            body: None,
            bodylen: None,
            chunklen: String::new(),
            timeout,
            fatal: true,
            head_method: false,
            rem_ip,
            rem_port,
            rem_path,
            gzip_level: 0,
        }
    }

    pub fn log(&self, msg: impl std::fmt::Display) {
        self.shared.log(&self.name, msg);
    }

    /// A failed read or write: fatal, or (after `non_fatal`) logged and the command given up.
    pub fn trouble(&self, msg: String) -> Step {
        if self.fatal {
            fail(msg)
        } else {
            self.log(format!("(non-fatal) {msg}"));
            Ok(())
        }
    }

    fn conn(&mut self) -> Step<&mut Conn> {
        match self.conn.as_mut() {
            Some(c) => Ok(c),
            None => fail("no connection (closed)"),
        }
    }

    fn rx_error(&self, what: &str, e: RxError) -> Halt {
        match e {
            RxError::Stopped => Halt::Stopped,
            e => Halt::Fail(format!("HTTP rx {what}: {e}")),
        }
    }

    /// Sends bytes, or fails (a stopped run, a write error: fatal unless `non_fatal`).
    pub fn send(&mut self, data: &[u8]) -> Step {
        let r = self.conn()?.send(data);
        match r {
            Err(Halt::Fail(m)) => self.trouble(m),
            r => r,
        }
    }

    /// Receives a head; `None` when the connection ended first (non-fatal mode).
    fn rx_head(&mut self) -> Step<Option<Head>> {
        self.body = None;
        self.bodylen = None;
        let timeout = self.timeout;
        let mut scanned = 0;
        let mut state = 0u8;
        loop {
            let pending = self.conn()?.pending();
            let mut end = None;
            for (i, &c) in pending.iter().enumerate().skip(scanned) {
                state = match (state, c) {
                    (0, b'\r') => 1,
                    (0 | 1, b'\n') => 2,
                    (2, b'\r') => 3,
                    (2 | 3, b'\n') => {
                        end = Some(i + 1);
                        break;
                    }
                    _ => 0,
                };
            }
            if let Some(end) = end {
                let raw = self.conn()?.consume(end);
                self.log(format!(
                    "rxhdr| {}",
                    String::from_utf8_lossy(&raw).trim_end()
                ));
                self.body = Some(Vec::new());
                return Ok(Some(Head::parse(&raw)));
            }
            scanned = self.conn()?.pending().len();
            if let Err(e) = self.conn()?.fill(timeout) {
                let e = self.rx_error("header", e);
                if let Halt::Fail(m) = e {
                    self.trouble(format!("{m} (HTTP header is incomplete)"))?;
                    return Ok(None);
                }
                return Err(e);
            }
        }
    }

    /// `n` more bytes of body; false when the connection ended first (non-fatal mode).
    fn rx_bytes(&mut self, n: usize) -> Step<bool> {
        let timeout = self.timeout;
        if let Err(e) = self.conn()?.need(n, timeout) {
            let e = self.rx_error("body", e);
            if let Halt::Fail(m) = e {
                self.trouble(m)?;
                return Ok(false);
            }
            return Err(e);
        }
        let bytes = self.conn()?.consume(n);
        self.body
            .get_or_insert_with(Vec::new)
            .extend_from_slice(&bytes);
        Ok(true)
    }

    /// The body up to the end of the connection (a 200 without length).
    fn rx_to_eof(&mut self, max: usize) -> Step {
        let timeout = self.timeout;
        loop {
            let have = self.conn()?.pending().len();
            if max > 0 && self.body.as_ref().map_or(0, Vec::len) + have >= max {
                let take = max - self.body.as_ref().map_or(0, Vec::len);
                let bytes = self.conn()?.consume(take);
                self.body
                    .get_or_insert_with(Vec::new)
                    .extend_from_slice(&bytes);
                return Ok(());
            }
            match self.conn()?.fill(timeout) {
                Ok(_) => {}
                Err(RxError::Eof) => break,
                Err(e) => {
                    let e = self.rx_error("body", e);
                    if let Halt::Fail(m) = e {
                        return self.trouble(m);
                    }
                    return Err(e);
                }
            }
        }
        let all = self.conn()?.pending().len();
        let bytes = self.conn()?.consume(all);
        self.body
            .get_or_insert_with(Vec::new)
            .extend_from_slice(&bytes);
        Ok(())
    }

    /// One chunk: its size (0: the last), `None` when the connection ended first.
    pub fn rx_chunk(&mut self) -> Step<Option<usize>> {
        let timeout = self.timeout;
        // The size line.
        let line_end = loop {
            if let Some(i) = self.conn()?.pending().iter().position(|&c| c == b'\n') {
                break i + 1;
            }
            if let Err(e) = self.conn()?.fill(timeout) {
                let e = self.rx_error("chunk", e);
                if let Halt::Fail(m) = e {
                    self.trouble(m)?;
                    return Ok(None);
                }
                return Err(e);
            }
        };
        let line = self.conn()?.consume(line_end);
        let text = String::from_utf8_lossy(&line);
        let hex_end = text
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(text.len());
        let rest = &text[hex_end..];
        let size = match usize::from_str_radix(&text[..hex_end], 16) {
            Ok(n) if rest.chars().next().is_none_or(|c| c.is_ascii_whitespace()) => n,
            _ => {
                self.trouble(format!("Chunklen fail ({:?})", text.trim_end()))?;
                return Ok(None);
            }
        };
        self.chunklen = size.to_string();
        if size > 0 && !self.rx_bytes(size)? {
            return Ok(None);
        }
        if let Err(e) = self.conn()?.need(2, timeout) {
            let e = self.rx_error("chunk", e);
            if let Halt::Fail(m) = e {
                self.trouble(m)?;
                return Ok(None);
            }
            return Err(e);
        }
        let crlf = self.conn()?.consume(2);
        if crlf != b"\r\n" {
            self.trouble("Chunklen without CRLF".into())?;
            return Ok(None);
        }
        Ok(Some(size))
    }

    /// Reads a message's body as `http_swallow_body`: chunked, by length, or (`to_eof`)
    /// up to the end of the connection; `max` (0: all) stops early.
    pub fn swallow_body(&mut self, request: bool, to_eof: bool, max: usize) -> Step {
        let head = if request { &self.req } else { &self.resp };
        let te = head.field("transfer-encoding").map(str::to_string);
        let cl = head.field("content-length").map(str::to_string);
        let start = self.body.as_ref().map_or(0, Vec::len);
        if te
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
        {
            if cl.is_some() {
                return self.trouble("Both C-E: Chunked and C-L".into());
            }
            loop {
                match self.rx_chunk()? {
                    Some(0) | None => break,
                    Some(_) => {
                        let got = self.body.as_ref().map_or(0, Vec::len) - start;
                        if max > 0 && got >= max {
                            break;
                        }
                    }
                }
            }
        } else if let Some(cl) = cl {
            let total: usize = cl.trim().parse().unwrap_or(0);
            let want = if max > 0 && total > start + max {
                max
            } else {
                total.saturating_sub(start)
            };
            self.rx_bytes(want)?;
        } else if to_eof {
            self.rx_to_eof(max)?;
        }
        let len = self.body.as_ref().map_or(0, Vec::len);
        self.bodylen = Some(len.to_string());
        self.log(format!("bodylen = {len}"));
        Ok(())
    }

    /// `rxreq` / `rxreqhdrs`.
    pub fn rx_req(&mut self, body: bool) -> Step {
        match self.rx_head()? {
            Some(h) => self.req = h,
            None => {
                self.req = Head::default();
                return Ok(());
            }
        }
        if self.req.count("Content-Length") > 1 {
            return fail("Multiple Content-Length headers.");
        }
        if body {
            self.swallow_body(true, false, 0)?;
        }
        Ok(())
    }

    /// `rxresp` / `rxresphdrs`.
    pub fn rx_resp(&mut self, body: bool) -> Step {
        match self.rx_head()? {
            Some(h) => self.resp = h,
            None => {
                self.resp = Head::default();
                return Ok(());
            }
        }
        if self.resp.count("Content-Length") > 1 {
            return fail("Multiple Content-Length headers.");
        }
        if !body || self.head_method || self.resp.parts[1].is_none() {
            return Ok(());
        }
        let ok = self.resp.parts[1].as_deref() == Some("200");
        self.swallow_body(false, ok, 0)
    }

    /// The value `expect` sees for a name; `Some(name)` itself when it is not one.
    pub fn resolve(&self, spec: &str) -> Option<String> {
        let legacy = self.shared.flavour == Flavour::Legacy;
        let body = || {
            self.body.as_ref().map(|b| {
                let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                String::from_utf8_lossy(&b[..end]).into_owned()
            })
        };
        match spec {
            "remote.ip" => return Some(self.rem_ip.clone()),
            "remote.port" => return Some(self.rem_port.clone()),
            "remote.path" => return self.rem_path.clone(),
            "req.method" | "req.request" => return self.req.parts[0].clone(),
            "req.url" => return self.req.parts[1].clone(),
            "req.proto" => return self.req.parts[2].clone(),
            "resp.proto" => return self.resp.parts[0].clone(),
            "resp.status" => return self.resp.parts[1].clone(),
            "resp.reason" | "resp.msg" => return self.resp.parts[2].clone(),
            "resp.chunklen" => return Some(self.chunklen.clone()),
            "req.bodylen" | "resp.bodylen" => {
                return Some(self.bodylen.clone().unwrap_or_else(|| "<undef>".into()));
            }
            "req.body" | "resp.body" => return body().or_else(|| Some(spec.to_string())),
            "h2.state" => return Some("false".into()),
            _ => {}
        }
        let found = if let Some(name) = spec.strip_prefix("req.http.") {
            self.req.field(name)
        } else if let Some(name) = spec.strip_prefix("resp.http.") {
            self.resp.field(name)
        } else {
            return Some(spec.to_string());
        };
        match found {
            Some(v) => Some(v.to_string()),
            None if legacy => Some(spec.to_string()),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_split_like_vtc() {
        let h = Head::parse(b"HTTP/1.1 200 OK fine\r\nX-A:  1 \r\nx-b:2\r\n\r\n");
        assert_eq!(h.parts[0].as_deref(), Some("HTTP/1.1"));
        assert_eq!(h.parts[1].as_deref(), Some("200"));
        assert_eq!(h.parts[2].as_deref(), Some("OK fine"));
        assert_eq!(h.field("x-a"), Some("1 "));
        assert_eq!(h.field("X-B"), Some("2"));
        assert_eq!(h.field("x"), None);
        let h = Head::parse(b"GET /\r\n\r\n");
        assert_eq!(h.parts[2], None);
    }
}
