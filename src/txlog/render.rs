//! Rendering access-log lines: a parsed [`Format`] applied to one encoded record
//! ([`View`]): the text formats item by item here, the `json` format in `json.rs`, the values
//! and their escaping in `values.rs`. Runs on the background writer, never on the request path.

use super::format::{Format, Item, Kind};
use super::json::render_json;
use super::record::{protocol, protocol_with_space};
use super::time::bracketed_clf_time;
use super::values::{client_ip, escape, number, put_fixed, seconds, status};
use super::wire::View;

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

fn header_value(v: Option<&[u8]>, out: &mut Vec<u8>) {
    match v {
        Some(v) => escape(v, out),
        None => out.push(b'-'),
    }
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
    }
}
