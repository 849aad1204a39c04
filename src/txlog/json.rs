//! JSON access-log lines: one object per record, written directly into the buffer with
//! RFC 8259 string escaping (the `json` format; text formats are `render.rs`).

use super::record::protocol;
use super::time::iso_time;
use super::values::{client_ip, number};
use super::wire::View;

/// One JSON object, written directly (no intermediate `serde_json::Value`: this runs once per
/// request on the writer thread).
pub(super) fn render_json(r: &View<'_>, out: &mut Vec<u8>) {
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

    #[test]
    fn json_strings_are_escaped() {
        let mut tricky = Vec::new();
        json_str("a\"b\\c\nd\u{1}é".as_bytes(), &mut tricky);
        assert_eq!(
            serde_json::from_slice::<String>(&tricky).unwrap(),
            "a\"b\\c\nd\u{1}é"
        );
    }
}
