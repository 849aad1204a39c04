//! Access log formats: NCSA common / combined, custom format strings in the style of Apache's
//! `LogFormat` and varnishncsa, and JSON lines. Parsed once (at config time); rendered by the
//! background writer, never on the request path.

use std::sync::Arc;

use http::header::HeaderName;

/// NCSA common log format.
pub const COMMON: &str = "%h %l %u %t \"%r\" %>s %b";
/// NCSA combined log format (the default).
pub const COMBINED: &str = "%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-agent}i\"";

/// One piece of a format string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Item {
    Literal(String),
    /// A literal of at most 8 bytes (most separators: `" "`, `"\" \""`): copied as one
    /// 8-byte store instead of a `memcpy` call.
    Short([u8; 8], u8),
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
    /// `%{vcl}x`: which VCL subroutine returned what (`recv:hash hash:lookup ...`), or `-`.
    Vcl,
    /// `%{site}x`: the `[[site]]` that answered, or `-` (no sites, or none on the listener).
    Site,
    /// `%{ttfb}x`: seconds from request to response head, microsecond precision.
    Ttfb,
    /// `%{host}x`: the Host the request was for (the cache key's host).
    Host,
    /// `%{esi_level}x`: the ESI depth, 0 for a client's request, n for an include.
    EsiLevel,
    /// `%{esi_parent}x`: for an ESI include, the target of the page that included it; `-`.
    EsiParent,
    /// `%{tls_version}x`, `%{tls_cipher}x`, `%{tls_sni}x`, `%{tls_alpn}x`,
    /// `%{tls_client}x`: what the client's TLS connection negotiated (field 0-4 of
    /// `Record::set_tls`), `-` over cleartext or when empty.
    Tls(u8),
}

impl Item {
    fn literal(text: String) -> Item {
        match text.len() {
            0..=8 => {
                let mut short = [0u8; 8];
                short[..text.len()].copy_from_slice(text.as_bytes());
                Item::Short(short, text.len() as u8)
            }
            _ => Item::Literal(text),
        }
    }
}

/// A parsed access-log format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    pub(super) kind: Kind,
    /// Request headers the format prints, captured per transaction in this order.
    pub request_headers: Vec<HeaderName>,
    /// Response headers the format prints, captured per transaction in this order.
    pub response_headers: Vec<HeaderName>,
    /// Whether the format prints the host (`%{host}x`, JSON): only then is it captured.
    needs_host: bool,
    /// Whether it prints TLS facts (`%{tls_*}x`, JSON): only then are they captured.
    needs_tls: bool,
    /// Where its lines go when not to the access log (`[log] access_log`): a site's own
    /// `access_log` (a file path or `"stdout"`).
    output: Option<Arc<str>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Kind {
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
                needs_host: true,
                needs_tls: true,
                output: None,
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
        let mut chars = spec.char_indices();
        while let Some((at, c)) = chars.next() {
            if c != '%' {
                literal.push(c);
                continue;
            }
            let Some((d, arg)) = directive(&mut chars, at)? else {
                literal.push('%');
                continue;
            };
            let item = match (d, arg) {
                ('i', Some(name)) => {
                    let name = header_name(&name, at)?;
                    Item::RequestHeader(index_of(&mut request_headers, name))
                }
                ('o', Some(name)) => {
                    let name = header_name(&name, at)?;
                    Item::ResponseHeader(index_of(&mut response_headers, name))
                }
                (d, arg) => item(d, arg.as_deref(), at)?,
            };
            // `%l` / `%u` print a constant: part of the surrounding literal, so the writer
            // copies one piece instead of three.
            if item == Item::Dash {
                literal.push('-');
                continue;
            }
            if !literal.is_empty() {
                items.push(Item::literal(std::mem::take(&mut literal)));
            }
            items.push(item);
        }
        if !literal.is_empty() {
            items.push(Item::literal(literal));
        }
        Ok(Format {
            needs_host: items.contains(&Item::Host),
            needs_tls: items.iter().any(|i| matches!(i, Item::Tls(_))),
            kind: Kind::Text(items),
            request_headers,
            response_headers,
            output: None,
        })
    }

    /// This format writing to `output` (a file path or `"stdout"`) instead of the access log.
    pub fn to_output(mut self, output: &str) -> Format {
        self.output = Some(Arc::from(output));
        self
    }

    /// Where lines of this format go: `None` for the access log.
    pub fn output(&self) -> Option<&Arc<str>> {
        self.output.as_ref()
    }

    /// Whether records for this format must capture the request's host.
    pub fn needs_host(&self) -> bool {
        self.needs_host
    }

    /// Whether records for this format must capture the TLS connection's facts.
    pub fn needs_tls(&self) -> bool {
        self.needs_tls
    }
}

/// Reads one directive after the `%` at position `at`: its letter and its `{name}`, if any
/// (`%>s` reads as `s`). None for `%%`, a literal `%`.
fn directive(
    chars: &mut impl Iterator<Item = (usize, char)>,
    at: usize,
) -> Result<Option<(char, Option<String>)>, String> {
    let Some((_, mut d)) = chars.next() else {
        return Err(format!(
            "`%` at the end (position {at}); write `%%` for a literal %"
        ));
    };
    if d == '%' {
        return Ok(None);
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
    Ok(Some((d, arg)))
}

/// The item of directive `d` (with its `{name}`, if any) at position `at`; headers
/// (`%{Name}i`, `%{Name}o`) are the caller's, which numbers them.
fn item(d: char, arg: Option<&str>, at: usize) -> Result<Item, String> {
    Ok(match (d, arg) {
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
        ('x', Some(name)) => extension(name, at)?,
        ('i' | 'o' | 'x', None) => {
            return Err(format!(
                "`%{d}` at position {at} needs a name: `%{{Name}}{d}`"
            ));
        }
        (other, _) => {
            return Err(format!("unknown directive `%{other}` at position {at}"));
        }
    })
}

/// `%{name}x`: Shellac's own fields.
fn extension(name: &str, at: usize) -> Result<Item, String> {
    Ok(match name {
        "cache" => Item::Cache,
        "reason" => Item::Reason,
        "backend" => Item::Backend,
        "vcl" => Item::Vcl,
        "site" => Item::Site,
        "ttfb" => Item::Ttfb,
        "host" => Item::Host,
        "esi_level" => Item::EsiLevel,
        "esi_parent" => Item::EsiParent,
        "tls_version" => Item::Tls(0),
        "tls_cipher" => Item::Tls(1),
        "tls_sni" => Item::Tls(2),
        "tls_alpn" => Item::Tls(3),
        "tls_client" => Item::Tls(4),
        other => {
            return Err(format!(
                "`%{{{other}}}x` at position {at}: known are %{{cache}}x, %{{reason}}x, %{{backend}}x, %{{vcl}}x, %{{site}}x, %{{ttfb}}x, %{{host}}x, %{{esi_level}}x, %{{esi_parent}}x, %{{tls_version}}x, %{{tls_cipher}}x, %{{tls_sni}}x, %{{tls_alpn}}x, %{{tls_client}}x"
            ));
        }
    })
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
