//! Access log formats: NCSA common / combined, custom format strings in the style of Apache's
//! `LogFormat` and varnishncsa, and JSON lines. Parsed once (at config time); rendered by the
//! background writer, never on the request path.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::HeaderName;

use super::Record;

/// NCSA common log format.
pub const COMMON: &str = "%h %l %u %t \"%r\" %>s %b";
/// NCSA combined log format (the default).
pub const COMBINED: &str = "%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-agent}i\"";

/// One piece of a format string.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    Literal(String),
    /// `%h`, `%a`: client IP address.
    ClientIp,
    /// `%l`, `%u`: identity and user, always `-`.
    Dash,
    /// `%t`: `[10/Oct/2000:13:55:36 +0000]`, when the request arrived (UTC).
    Time,
    /// `%r`: `GET /path?q HTTP/1.1`.
    RequestLine,
    /// `%m`
    Method,
    /// `%U`: path without query.
    Path,
    /// `%q`: `?query` or empty.
    Query,
    /// `%H`: `HTTP/1.1`.
    Protocol,
    /// `%s`, `%>s`
    Status,
    /// `%b`: body bytes sent, `-` for none.
    BytesClf,
    /// `%B`: body bytes sent.
    Bytes,
    /// `%D`: microseconds from request to the last body byte.
    DurationUs,
    /// `%T`: whole seconds, same span.
    DurationSecs,
    /// `%{Name}i`: a request header, by its index in [`Format::request_headers`].
    RequestHeader(usize),
    /// `%{Name}o`: a response header, by its index in [`Format::response_headers`].
    ResponseHeader(usize),
    /// `%{cache}x`: hit, miss, pass or synth.
    Cache,
    /// `%{reason}x`: why the response was not a plain hit/miss (Cache-Status detail), or `-`.
    Reason,
    /// `%{backend}x`: backend name, or `-` when none was contacted.
    Backend,
    /// `%{ttfb}x`: seconds from request to response head, microsecond precision.
    Ttfb,
    /// `%{host}x`: the Host the request was for (the cache key's host).
    Host,
}

/// A parsed access-log format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    kind: Kind,
    /// Request headers the format prints, captured per transaction in this order.
    pub request_headers: Vec<HeaderName>,
    /// Response headers the format prints, captured per transaction in this order.
    pub response_headers: Vec<HeaderName>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Text(Vec<Item>),
    Json,
}

impl Format {
    /// `combined`, `common`, `json`, or a format string with `%` directives.
    pub fn parse(spec: &str) -> Result<Format, String> {
        match spec {
            "combined" => Format::parse_text(COMBINED),
            "common" => Format::parse_text(COMMON),
            "json" => Ok(Format {
                kind: Kind::Json,
                request_headers: ["referer", "user-agent", "x-forwarded-for"]
                    .into_iter()
                    .map(HeaderName::from_static)
                    .collect(),
                response_headers: vec![],
            }),
            s if s.contains('%') => Format::parse_text(s),
            s => Err(format!(
                "`{s}` is not a format: use \"combined\", \"common\", \"json\" or a string with % directives (e.g. \"%h %t \\\"%r\\\" %s\")"
            )),
        }
    }

    fn parse_text(spec: &str) -> Result<Format, String> {
        let mut items = Vec::new();
        let mut request_headers: Vec<HeaderName> = Vec::new();
        let mut response_headers: Vec<HeaderName> = Vec::new();
        let mut literal = String::new();
        let mut chars = spec.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            if c != '%' {
                literal.push(c);
                continue;
            }
            let Some((_, mut d)) = chars.next() else {
                return Err(format!(
                    "`%` at the end (position {at}); write `%%` for a literal %"
                ));
            };
            if d == '%' {
                literal.push('%');
                continue;
            }
            if !literal.is_empty() {
                items.push(Item::Literal(std::mem::take(&mut literal)));
            }
            let mut arg = None;
            if d == '{' {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some((_, '}')) => break,
                        Some((_, ch)) => name.push(ch),
                        None => return Err(format!("unclosed `%{{` at position {at}")),
                    }
                }
                arg = Some(name);
                d = match chars.next() {
                    Some((_, ch)) => ch,
                    None => {
                        return Err(format!(
                            "`%{{...}}` at position {at} needs a letter after it (i, o or x)"
                        ));
                    }
                };
            }
            if d == '>' {
                d = match chars.next() {
                    Some((_, 's')) => 's',
                    _ => return Err(format!("`%>` at position {at}: only `%>s` is known")),
                };
            }
            let item = match (d, arg) {
                ('h' | 'a', None) => Item::ClientIp,
                ('l' | 'u', None) => Item::Dash,
                ('t', None) => Item::Time,
                ('r', None) => Item::RequestLine,
                ('m', None) => Item::Method,
                ('U', None) => Item::Path,
                ('q', None) => Item::Query,
                ('H', None) => Item::Protocol,
                ('s', None) => Item::Status,
                ('b', None) => Item::BytesClf,
                ('B', None) => Item::Bytes,
                ('D', None) => Item::DurationUs,
                ('T', None) => Item::DurationSecs,
                ('i', Some(name)) => {
                    let name = header_name(&name, at)?;
                    Item::RequestHeader(index_of(&mut request_headers, name))
                }
                ('o', Some(name)) => {
                    let name = header_name(&name, at)?;
                    Item::ResponseHeader(index_of(&mut response_headers, name))
                }
                ('x', Some(name)) => match name.as_str() {
                    "cache" => Item::Cache,
                    "reason" => Item::Reason,
                    "backend" => Item::Backend,
                    "ttfb" => Item::Ttfb,
                    "host" => Item::Host,
                    other => {
                        return Err(format!(
                            "`%{{{other}}}x` at position {at}: known are %{{cache}}x, %{{reason}}x, %{{backend}}x, %{{ttfb}}x, %{{host}}x"
                        ));
                    }
                },
                ('i' | 'o' | 'x', None) => {
                    return Err(format!(
                        "`%{d}` at position {at} needs a name: `%{{Name}}{d}`"
                    ));
                }
                (other, _) => {
                    return Err(format!("unknown directive `%{other}` at position {at}"));
                }
            };
            items.push(item);
        }
        if !literal.is_empty() {
            items.push(Item::Literal(literal));
        }
        Ok(Format {
            kind: Kind::Text(items),
            request_headers,
            response_headers,
        })
    }

    /// Appends one log line for `r` (with a trailing newline) to `out`.
    pub fn render(&self, r: &Record, out: &mut String) {
        match &self.kind {
            Kind::Text(items) => {
                for item in items {
                    render_item(item, r, out);
                }
            }
            Kind::Json => render_json(r, out),
        }
        out.push('\n');
    }
}

fn header_name(name: &str, at: usize) -> Result<HeaderName, String> {
    HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| format!("`{name}` at position {at} is not a header name"))
}

fn index_of(list: &mut Vec<HeaderName>, name: HeaderName) -> usize {
    match list.iter().position(|n| *n == name) {
        Some(i) => i,
        None => {
            list.push(name);
            list.len() - 1
        }
    }
}

fn render_item(item: &Item, r: &Record, out: &mut String) {
    match item {
        Item::Literal(s) => out.push_str(s),
        Item::ClientIp => ip(r.client, out),
        Item::Dash => out.push('-'),
        Item::Time => {
            out.push('[');
            clf_time(r.time, out);
            out.push(']');
        }
        // A refused request whose line was not valid: `-`, as Apache logs garbage.
        Item::RequestLine | Item::Method | Item::Protocol if !r.has_request_line() => out.push('-'),
        Item::RequestLine => {
            escape(r.method.as_str(), out);
            out.push(' ');
            escape(r.target(), out);
            out.push(' ');
            out.push_str(r.protocol());
        }
        Item::Method => escape(r.method.as_str(), out),
        Item::Path => escape(r.path(), out),
        Item::Query => {
            if let Some(q) = r.query() {
                out.push('?');
                escape(q, out);
            }
        }
        Item::Protocol => out.push_str(r.protocol()),
        Item::Status => number(u64::from(r.status), out),
        Item::BytesClf if r.bytes == 0 => out.push('-'),
        Item::BytesClf | Item::Bytes => number(r.bytes, out),
        Item::DurationUs => {
            let _ = write!(out, "{}", r.duration.as_micros());
        }
        Item::DurationSecs => {
            let _ = write!(out, "{}", r.duration.as_secs());
        }
        Item::RequestHeader(i) => header_value(r.request_header(*i), out),
        Item::ResponseHeader(i) => header_value(r.response_header(*i), out),
        Item::Cache => out.push_str(r.decision.kind.as_str()),
        Item::Reason => out.push_str(r.decision.reason.as_deref().unwrap_or("-")),
        Item::Backend => out.push_str(r.backend().unwrap_or("-")),
        Item::Ttfb => seconds(r.ttfb, out),
        Item::Host => {
            let host = r.host();
            if host.is_empty() {
                out.push('-');
            } else {
                escape(host, out);
            }
        }
    }
}

/// Decimal digits without `core::fmt` (the writer prints several numbers per line).
fn number(mut n: u64, out: &mut String) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &buf[i..] {
        out.push(d as char);
    }
}

fn ip(addr: std::net::IpAddr, out: &mut String) {
    match addr {
        std::net::IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                number(u64::from(octet), out);
            }
        }
        v6 => {
            let _ = write!(out, "{v6}");
        }
    }
}

fn header_value(v: Option<&str>, out: &mut String) {
    match v {
        Some(v) => escape(v, out),
        None => out.push('-'),
    }
}

fn seconds(d: Duration, out: &mut String) {
    let _ = write!(out, "{}.{:06}", d.as_secs(), d.subsec_micros());
}

/// Apache-style escaping: `"`, `\\` and control or non-ASCII bytes become `\\xHH`, so a header
/// value can never break a line or a quoted field. Runs of safe bytes are copied at once.
fn escape(s: &str, out: &mut String) {
    let bytes = s.as_bytes();
    let mut from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            // Safe bytes are ASCII, so `from..i` lies on char boundaries.
            out.push_str(&s[from..i]);
            let _ = write!(out, "\\x{b:02x}");
            from = i + 1;
        }
    }
    out.push_str(&s[from..]);
}

/// One JSON object, written directly (no intermediate `serde_json::Value`: this runs once per
/// request on the writer thread).
fn render_json(r: &Record, out: &mut String) {
    let header = |i: usize| r.request_header(i);
    out.push_str("{\"time\":\"");
    iso_time(r.time, out);
    let _ = write!(out, "\",\"client\":\"{}\",\"method\":", r.client);
    let line = r.has_request_line();
    json_opt(line.then(|| r.method.as_str()), out);
    out.push_str(",\"url\":");
    json_opt(line.then(|| r.target()), out);
    out.push_str(",\"protocol\":");
    json_opt(line.then(|| r.protocol()), out);
    out.push_str(",\"host\":");
    json_str(r.host(), out);
    let _ = write!(
        out,
        ",\"status\":{},\"bytes\":{},\"duration_us\":{},\"ttfb_us\":{},\"cache\":\"{}\",\"reason\":",
        r.status,
        r.bytes,
        r.duration.as_micros(),
        r.ttfb.as_micros(),
        r.decision.kind.as_str()
    );
    json_opt(r.decision.reason.as_deref(), out);
    out.push_str(",\"backend\":");
    json_opt(r.backend(), out);
    let _ = write!(out, ",\"complete\":{},\"referer\":", r.complete);
    json_opt(header(0), out);
    out.push_str(",\"user_agent\":");
    json_opt(header(1), out);
    out.push_str(",\"x_forwarded_for\":");
    json_opt(header(2), out);
    out.push('}');
}

fn json_opt(s: Option<&str>, out: &mut String) {
    match s {
        Some(s) => json_str(s, out),
        None => out.push_str("null"),
    }
}

/// A JSON string literal (RFC 8259 escaping). Runs of plain characters are copied at once.
fn json_str(s: &str, out: &mut String) {
    out.push('"');
    let mut from = 0;
    for (i, b) in s.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            b if b < 0x20 => "",
            _ => continue,
        };
        // Escaped bytes are ASCII, so `from..i` lies on char boundaries.
        out.push_str(&s[from..i]);
        if escaped.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escaped);
        }
        from = i + 1;
    }
    out.push_str(&s[from..]);
    out.push('"');
}

/// Days since 1970-01-01 → (year, month 1-12, day 1-31); Howard Hinnant's civil_from_days.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u64,
    minute: u64,
    second: u64,
}

fn civil(t: SystemTime) -> Civil {
    let secs = unix_secs(t);
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    Civil {
        year,
        month,
        day,
        hour: rem / 3600,
        minute: rem % 3600 / 60,
        second: rem % 60,
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

thread_local! {
    /// The writer formats many records per second: keep the last second's text.
    static CLF: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    static ISO: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `10/Oct/2000:13:55:36 +0000`
pub fn clf_time(t: SystemTime, out: &mut String) {
    let secs = unix_secs(t);
    CLF.with_borrow_mut(|(at, text)| {
        if *at != secs {
            let c = civil(t);
            let month = MONTHS[(c.month as usize).saturating_sub(1).min(11)];
            text.clear();
            let _ = write!(
                text,
                "{:02}/{month}/{}:{:02}:{:02}:{:02} +0000",
                c.day, c.year, c.hour, c.minute, c.second
            );
            *at = secs;
        }
        out.push_str(text);
    });
}

/// `2000-10-10T13:55:36.123Z`
pub fn iso_time(t: SystemTime, out: &mut String) {
    let secs = unix_secs(t);
    ISO.with_borrow_mut(|(at, text)| {
        if *at != secs {
            let c = civil(t);
            text.clear();
            let _ = write!(
                text,
                "{}-{:02}-{:02}T{:02}:{:02}:{:02}",
                c.year, c.month, c.day, c.hour, c.minute, c.second
            );
            *at = secs;
        }
        out.push_str(text);
    });
    let millis = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_millis());
    let _ = write!(out, ".{millis:03}Z");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txlog::{Decision, DecisionKind};

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
        let mut out = String::new();
        f.render(&record(&f), &mut out);
        assert_eq!(
            out,
            "192.0.2.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a/b?x=1 HTTP/1.1\" 200 1234 \"http://ref.example/\" \"curl/8.0 \\x22quoted\\x22\"\n"
        );
    }

    #[test]
    fn custom_directives() {
        let f = Format::parse(
            "%{X-Forwarded-For}i %a %m %U%q %H %>s %B %D %{cache}x %{reason}x %{backend}x %{ttfb}x %{host}x %{Cache-Status}o 100%%",
        )
        .unwrap();
        let mut out = String::new();
        f.render(&record(&f), &mut out);
        assert_eq!(
            out,
            "203.0.113.9 192.0.2.1 GET /a/b?x=1 HTTP/1.1 200 1234 1500 pass no-store app 0.000250 example.com shellac; hit 100%\n"
        );
    }

    #[test]
    fn missing_values_are_dashes() {
        let f = Format::parse("%{X-Nope}i %b %{backend}x").unwrap();
        let mut r = record(&f);
        r.bytes = 0;
        r.set_backend(None);
        let mut out = String::new();
        f.render(&r, &mut out);
        assert_eq!(out, "- - -\n");
    }

    #[test]
    fn json_lines() {
        let f = Format::parse("json").unwrap();
        let mut r = record(&f);
        r.decision = Decision {
            kind: DecisionKind::Hit,
            reason: None,
        };
        let mut out = String::new();
        f.render(&r, &mut out);
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
        let mut tricky = String::new();
        json_str("a\"b\\c\nd\u{1}é", &mut tricky);
        assert_eq!(
            serde_json::from_str::<String>(&tricky).unwrap(),
            "a\"b\\c\nd\u{1}é"
        );
    }

    #[test]
    fn bad_formats_are_explained() {
        for (spec, want) in [
            ("fancy", "is not a format"),
            ("%Z", "unknown directive `%Z`"),
            ("%{foo}x", "known are"),
            ("%i", "needs a name"),
            ("abc %", "at the end"),
            ("%{Referer", "unclosed"),
        ] {
            let err = Format::parse(spec).unwrap_err();
            assert!(err.contains(want), "{spec}: {err}");
        }
    }

    #[test]
    fn numbers_and_addresses() {
        let mut s = String::new();
        for n in [0, 7, 10, 65535, u64::MAX] {
            number(n, &mut s);
            s.push(' ');
        }
        ip("10.0.255.1".parse().unwrap(), &mut s);
        s.push(' ');
        ip("::1".parse().unwrap(), &mut s);
        assert_eq!(s, "0 7 10 65535 18446744073709551615 10.0.255.1 ::1");
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        let mut s = String::new();
        clf_time(UNIX_EPOCH + Duration::from_secs(971_186_136), &mut s);
        assert_eq!(s, "10/Oct/2000:13:55:36 +0000");
    }
}
