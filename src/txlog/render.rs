//! Rendering access-log lines: a parsed [`Format`] applied to one encoded record
//! ([`View`]), with the escaping NCSA text lines and JSON lines need. Runs on the background
//! writer, never on the request path.

use std::cell::RefCell;
use std::io::Write as _;
use std::time::Duration;

use super::format::{Format, Item, Kind};
use super::record::{protocol, protocol_with_space};
use super::time::{bracketed_clf_time, iso_time};
use super::wire::View;

/// Appends the first `len` bytes of `piece` by copying all `N` (a fixed-size store the
/// compiler inlines, where a run-time length means a `memcpy` call) and cutting the rest off.
#[inline]
fn put_fixed<const N: usize>(out: &mut Vec<u8>, piece: &[u8; N], len: usize) {
    out.extend_from_slice(piece);
    out.truncate(out.len() - (N - len.min(N)));
}

impl Format {
    /// Appends one log line for `r` (with a trailing newline) to `out`. Bytes, not a
    /// `String`: the writer renders a whole pass into one buffer and every value is escaped
    /// to ASCII (text formats) or is valid UTF-8 (JSON).
    pub(super) fn render(&self, r: &View<'_>, out: &mut Vec<u8>) {
        match &self.kind {
            Kind::Text(items) => {
                for item in items {
                    render_item(item, r, out);
                }
            }
            Kind::Json => render_json(r, out),
        }
        out.push(b'\n');
    }
}

fn render_item(item: &Item, r: &View<'_>, out: &mut Vec<u8>) {
    match item {
        Item::Literal(s) => out.extend_from_slice(s.as_bytes()),
        Item::Short(piece, len) => put_fixed(out, piece, usize::from(*len)),
        Item::ClientIp => client_ip(r.client, out),
        Item::Dash => out.push(b'-'),
        Item::Time => bracketed_clf_time(r.time, out),
        // A refused request whose line was not valid: `-`, as Apache logs garbage.
        Item::RequestLine | Item::Method | Item::Protocol if !r.has_request_line() => {
            out.push(b'-')
        }
        Item::RequestLine => {
            // A method is a token (RFC 9110 §9.1): nothing in it needs escaping.
            out.extend_from_slice(r.method);
            out.push(b' ');
            escape(r.target(), out);
            out.extend_from_slice(protocol_with_space(r.version).as_bytes());
        }
        Item::Method => out.extend_from_slice(r.method),
        Item::Path => escape(r.path(), out),
        Item::Query => {
            if let Some(q) = r.query() {
                out.push(b'?');
                escape(q, out);
            }
        }
        Item::Protocol => out.extend_from_slice(protocol(r.version).as_bytes()),
        Item::Status => status(r.status, out),
        Item::BytesClf if r.bytes == 0 => out.push(b'-'),
        Item::BytesClf | Item::Bytes => number(r.bytes, out),
        Item::DurationUs => number(r.duration.as_micros() as u64, out),
        Item::DurationSecs => number(r.duration.as_secs(), out),
        Item::RequestHeader(i) => header_value(r.request_header(*i), out),
        Item::ResponseHeader(i) => header_value(r.response_header(*i), out),
        Item::Cache => out.extend_from_slice(r.kind.as_str().as_bytes()),
        Item::Reason => escape(r.reason.unwrap_or(b"-"), out),
        Item::Backend => escape(r.backend().unwrap_or(b"-"), out),
        Item::Tls(i) => match r.tls_field(usize::from(*i)) {
            Some(v) if !v.is_empty() => escape(v, out),
            _ => out.push(b'-'),
        },
        Item::Vcl => escape(r.vcl().unwrap_or(b"-"), out),
        Item::Site => escape(r.site().unwrap_or(b"-"), out),
        Item::Ttfb => seconds(r.ttfb, out),
        Item::EsiLevel => number(u64::from(r.esi_level), out),
        Item::EsiParent => escape(r.esi_parent().unwrap_or(b"-"), out),
        Item::Host => {
            let host = r.host();
            if host.is_empty() {
                out.push(b'-');
            } else {
                escape(host, out);
            }
        }
    }
}

/// A status code: three digits stored at once (itoa for anything else).
fn status(code: u16, out: &mut Vec<u8>) {
    if (100..1000).contains(&code) {
        let digits = [
            b'0' + (code / 100) as u8,
            b'0' + (code / 10 % 10) as u8,
            b'0' + (code % 10) as u8,
        ];
        out.extend_from_slice(&digits);
    } else {
        number(u64::from(code), out);
    }
}

/// Decimal digits (itoa: no `core::fmt`; the writer prints several numbers per line).
fn number(n: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// The last client address and its text (at most 39 bytes, IPv6 included).
struct LastIp {
    addr: Option<std::net::IpAddr>,
    text: [u8; 40],
    len: usize,
}

thread_local! {
    /// Consecutive records often share a client (keep-alive connections, a proxy in front).
    static LAST_IP: RefCell<LastIp> = const {
        RefCell::new(LastIp { addr: None, text: [0; 40], len: 0 })
    };
}

/// Client address, from the cache when it is the previous record's; an IPv4 address is
/// copied as one 16-byte store.
fn client_ip(addr: std::net::IpAddr, out: &mut Vec<u8>) {
    LAST_IP.with_borrow_mut(|last| {
        if last.addr != Some(addr) {
            let mut text = Vec::with_capacity(40);
            ip(addr, &mut text);
            let len = text.len().min(40);
            last.text[..len].copy_from_slice(&text[..len]);
            last.len = len;
            last.addr = Some(addr);
        }
        match last.text.first_chunk::<16>() {
            Some(v4) if last.len <= 16 => put_fixed(out, v4, last.len),
            _ => out.extend_from_slice(&last.text[..last.len]),
        }
    });
}

fn ip(addr: std::net::IpAddr, out: &mut Vec<u8>) {
    match addr {
        std::net::IpAddr::V4(v4) => {
            // Built on the stack and copied once: at most 15 bytes.
            let mut buf = [0u8; 15];
            let mut n = 0;
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    buf[n] = b'.';
                    n += 1;
                }
                if octet >= 100 {
                    buf[n] = b'0' + octet / 100;
                    n += 1;
                }
                if octet >= 10 {
                    buf[n] = b'0' + octet / 10 % 10;
                    n += 1;
                }
                buf[n] = b'0' + octet % 10;
                n += 1;
            }
            out.extend_from_slice(&buf[..n]);
        }
        v6 => {
            let _ = write!(out, "{v6}");
        }
    }
}

fn header_value(v: Option<&[u8]>, out: &mut Vec<u8>) {
    match v {
        Some(v) => escape(v, out),
        None => out.push(b'-'),
    }
}

/// `1.000250`: seconds with microsecond precision.
fn seconds(d: Duration, out: &mut Vec<u8>) {
    number(d.as_secs(), out);
    let mut frac = *b".000000";
    let mut micros = d.subsec_micros();
    for digit in frac[1..].iter_mut().rev() {
        *digit = b'0' + (micros % 10) as u8;
        micros /= 10;
    }
    out.extend_from_slice(&frac);
}

/// Bytes printed as they are in text formats; everything else becomes `\\xHH`.
const fn safe_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0x20;
    while b < 0x7f {
        t[b] = b != b'"' as usize && b != b'\\' as usize;
        b += 1;
    }
    t
}
static SAFE: [bool; 256] = safe_table();

/// Apache-style escaping: `"`, `\\` and control or non-ASCII bytes become `\\xHH`, so a header
/// value can never break a line or a quoted field. Runs of safe bytes are copied at once.
fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    // The common case: nothing to escape, one copy.
    let Some(first) = bytes.iter().position(|&b| !SAFE[b as usize]) else {
        out.extend_from_slice(bytes);
        return;
    };
    out.extend_from_slice(&bytes[..first]);
    for &b in &bytes[first..] {
        if SAFE[b as usize] {
            out.push(b);
        } else {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[b'\\', b'x', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        }
    }
}

/// One JSON object, written directly (no intermediate `serde_json::Value`: this runs once per
/// request on the writer thread).
fn render_json(r: &View<'_>, out: &mut Vec<u8>) {
    let header = |i: usize| r.request_header(i);
    out.extend_from_slice(b"{\"time\":\"");
    iso_time(r.time, out);
    out.extend_from_slice(b"\",\"client\":\"");
    client_ip(r.client, out);
    out.extend_from_slice(b"\",\"method\":");
    let line = r.has_request_line();
    json_opt(line.then_some(r.method), out);
    out.extend_from_slice(b",\"url\":");
    json_opt(line.then(|| r.target()), out);
    out.extend_from_slice(b",\"protocol\":");
    json_opt(line.then(|| protocol(r.version).as_bytes()), out);
    out.extend_from_slice(b",\"host\":");
    json_str(r.host(), out);
    // Over TLS only: what the connection negotiated (empty fields as null).
    if r.tls_field(0).is_some() {
        out.extend_from_slice(b",\"tls\":{");
        for (i, key) in ["version", "cipher", "sni", "alpn", "client"]
            .iter()
            .enumerate()
        {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(b"\":");
            json_opt(r.tls_field(i).filter(|v| !v.is_empty()), out);
        }
        out.push(b'}');
    }
    out.extend_from_slice(b",\"status\":");
    number(u64::from(r.status), out);
    out.extend_from_slice(b",\"bytes\":");
    number(r.bytes, out);
    out.extend_from_slice(b",\"duration_us\":");
    number(r.duration.as_micros() as u64, out);
    out.extend_from_slice(b",\"ttfb_us\":");
    number(r.ttfb.as_micros() as u64, out);
    out.extend_from_slice(b",\"cache\":\"");
    out.extend_from_slice(r.kind.as_str().as_bytes());
    out.extend_from_slice(b"\",\"reason\":");
    json_opt(r.reason, out);
    out.extend_from_slice(b",\"backend\":");
    json_opt(r.backend(), out);
    // Only with sites: lines of a configuration without any stay as they were.
    if let Some(site) = r.site() {
        out.extend_from_slice(b",\"site\":");
        json_str(site, out);
    }
    // Only on an ESI include's line: other lines stay as they were.
    if r.esi_level > 0 {
        out.extend_from_slice(b",\"esi_level\":");
        number(u64::from(r.esi_level), out);
        out.extend_from_slice(b",\"esi_parent\":");
        json_opt(r.esi_parent(), out);
    }
    out.extend_from_slice(if r.complete {
        b",\"complete\":true,\"referer\":"
    } else {
        b",\"complete\":false,\"referer\":"
    });
    json_opt(header(0), out);
    out.extend_from_slice(b",\"user_agent\":");
    json_opt(header(1), out);
    out.extend_from_slice(b",\"x_forwarded_for\":");
    json_opt(header(2), out);
    out.push(b'}');
}

fn json_opt(s: Option<&[u8]>, out: &mut Vec<u8>) {
    match s {
        Some(s) => json_str(s, out),
        None => out.extend_from_slice(b"null"),
    }
}

/// Bytes copied as they are inside a JSON string: everything but `"`, `\\` and controls.
const fn json_plain_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0x20;
    while b < 256 {
        t[b] = b != b'"' as usize && b != b'\\' as usize;
        b += 1;
    }
    t
}
static JSON_PLAIN: [bool; 256] = json_plain_table();

/// A JSON string literal (RFC 8259 escaping). Runs of plain bytes are found with a table and
/// copied at once (a per-byte `match` cost ~700 instructions per JSON line, callgrind).
/// Bytes other than `"`, `\\` and controls are copied as they are: they come from `str`s, so
/// the output stays UTF-8.
fn json_str(bytes: &[u8], out: &mut Vec<u8>) {
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut rest = bytes;
    while let Some(i) = rest.iter().position(|&b| !JSON_PLAIN[b as usize]) {
        out.extend_from_slice(&rest[..i]);
        let b = rest[i];
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 15) as usize],
                ]);
            }
        }
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txlog::decision::{Decision, DecisionKind};
    use crate::txlog::record::Record;
    use crate::txlog::wire;

    /// `f`'s line for `r`, rendered as the writer does: from the record's encoded form.
    fn line(f: &Format, r: &Record) -> Vec<u8> {
        let mut bytes = Vec::new();
        wire::encode(r, &mut bytes);
        let mut input = &bytes[..];
        let mut view = View::parse(&mut input).unwrap();
        // The wall-clock time travels as the arrival instant; pin it to the sample's.
        view.time = r.time;
        let mut out = Vec::new();
        f.render(&view, &mut out);
        out
    }

    fn record(format: &Format) -> Record {
        let mut r = Record::sample();
        for n in &format.request_headers {
            r.push_request_header(match n.as_str() {
                "referer" => Some(b"http://ref.example/"),
                "user-agent" => Some(b"curl/8.0 \"quoted\""),
                "x-forwarded-for" => Some(b"203.0.113.9"),
                _ => None,
            });
        }
        for _ in &format.response_headers {
            r.push_response_header(Some(b"shellac; hit"));
        }
        r
    }

    #[test]
    fn combined_is_ncsa() {
        let f = Format::parse("combined").unwrap();
        let out = line(&f, &record(&f));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "192.0.2.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a/b?x=1 HTTP/1.1\" 200 1234 \"http://ref.example/\" \"curl/8.0 \\x22quoted\\x22\"\n"
        );
    }

    #[test]
    fn custom_directives() {
        let f = Format::parse(
            "%{X-Forwarded-For}i %a %m %U%q %H %>s %B %D %{cache}x %{reason}x %{backend}x %{ttfb}x %{host}x %{Cache-Status}o 100%%",
        )
        .unwrap();
        let out = line(&f, &record(&f));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "203.0.113.9 192.0.2.1 GET /a/b?x=1 HTTP/1.1 200 1234 1500 pass no-store app 0.000250 example.com shellac; hit 100%\n"
        );
    }

    #[test]
    fn missing_values_are_dashes() {
        let f = Format::parse("%{X-Nope}i %b %{backend}x").unwrap();
        let mut r = record(&f);
        r.bytes = 0;
        r.set_backend(None);
        let out = line(&f, &r);
        assert_eq!(out, b"- - -\n");
    }

    #[test]
    fn esi_sub_requests_are_marked() {
        let f = Format::parse("%U %{esi_level}x %{esi_parent}x").unwrap();
        let mut r = record(&f);
        assert_eq!(line(&f, &r), b"/a/b 0 -\n");
        r.set_esi(2, "/page?x=\"1\"");
        assert_eq!(line(&f, &r), b"/a/b 2 /page?x=\\x221\\x22\n");
        let json = Format::parse("json").unwrap();
        let out = line(&json, &r);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["esi_level"], 2);
        assert_eq!(v["esi_parent"], "/page?x=\"1\"");
        let v: serde_json::Value = serde_json::from_slice(&line(&json, &record(&json))).unwrap();
        assert!(
            v.get("esi_level").is_none(),
            "a client's line stays as it was"
        );
    }

    #[test]
    fn json_lines() {
        let f = Format::parse("json").unwrap();
        let mut r = record(&f);
        r.decision = Decision {
            kind: DecisionKind::Hit,
            reason: None,
        };
        let out = line(&f, &r);
        let out = String::from_utf8(out).unwrap();
        assert!(out.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["time"], "2000-10-10T13:55:36.000Z");
        assert_eq!(v["status"], 200);
        assert_eq!(v["cache"], "hit");
        assert_eq!(v["reason"], serde_json::Value::Null);
        assert_eq!(v["url"], "/a/b?x=1");
        assert_eq!(v["x_forwarded_for"], "203.0.113.9");
        assert_eq!(v["user_agent"], "curl/8.0 \"quoted\"");
        assert_eq!(v["complete"], true);
        assert_eq!(v["backend"], "app");
        let mut tricky = Vec::new();
        json_str("a\"b\\c\nd\u{1}é".as_bytes(), &mut tricky);
        assert_eq!(
            serde_json::from_slice::<String>(&tricky).unwrap(),
            "a\"b\\c\nd\u{1}é"
        );
    }

    #[test]
    fn numbers_and_addresses() {
        let mut s = Vec::new();
        for n in [0, 7, 10, 65535, u64::MAX] {
            number(n, &mut s);
            s.push(b' ');
        }
        ip("10.0.255.1".parse().unwrap(), &mut s);
        s.push(b' ');
        ip("::1".parse().unwrap(), &mut s);
        s.push(b' ');
        for micros in [0, 250, 1_000_000, 12_345_678] {
            seconds(Duration::from_micros(micros), &mut s);
            s.push(b' ');
        }
        escape("a\"b\\c\u{7f}é ok".as_bytes(), &mut s);
        assert_eq!(
            String::from_utf8(s).unwrap(),
            "0 7 10 65535 18446744073709551615 10.0.255.1 ::1 0.000000 0.000250 1.000000 12.345678 a\\x22b\\x5cc\\x7f\\xc3\\xa9 ok"
        );
    }

    #[test]
    fn the_client_address_cache_follows_the_address() {
        let mut s = Vec::new();
        for a in ["10.0.0.1", "10.0.0.1", "192.0.2.77"] {
            client_ip(a.parse().unwrap(), &mut s);
            s.push(b' ');
        }
        assert_eq!(s, b"10.0.0.1 10.0.0.1 192.0.2.77 ");
    }
}
