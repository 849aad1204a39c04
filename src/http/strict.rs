//! Strict HTTP/1.1 request framing (RFC 9112 §2–§7, RFC 9110 §5, §7.6.1), checked on the raw
//! bytes before hyper parses them. Pure: no I/O, no allocation; `server/h1/scan.rs` feeds it.
//!
//! Why a second parser in front of hyper: hyper is lenient where a cache must not be. It
//! accepts `Transfer-Encoding: ,chunked`, a missing or duplicated `Host`, `Connection:
//! Content-Length`, bare LF line ends, and reports chunk-syntax errors only after the head was
//! handed to the application. Every message this module accepts is one that hyper (httparse)
//! parses with the same boundaries, so both always agree where a request ends; everything else
//! is refused before hyper sees a byte of it.
//!
//! [`check_head`] validates one complete request head; [`Scanner`] follows the byte stream of a
//! connection (heads, `Content-Length` bodies, chunked bodies with extensions and trailers) so
//! that the gate knows where each request begins.

mod line;
mod parts;
mod tokens;
mod violation;

use line::{RequestLine, request_line};
pub use line::{check_path, trimmed_value, valid_authority, valid_request_line};
pub use parts::{MAX_PART_FIELDS, Parts};
pub use tokens::trim_ows;
use tokens::{END_TO_END, field_run, is_tchar, list};
pub use violation::{Class, Violation};

/// Bounds on what one request may use. Defaults in `config::ServerConfig`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Request line (method, target, version) in bytes; longer → 414.
    pub max_request_line: usize,
    /// Whole head (request line and fields) in bytes; larger → 431. Also bounds trailers.
    pub max_header_size: usize,
    /// Field lines in a head; more → 431.
    pub max_headers: usize,
    /// One field line (name, colon and value, without its CR LF) in bytes; longer → 431.
    pub max_field_size: usize,
    /// Request body bytes (declared or chunked); more → 413.
    pub max_body_size: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_line: 8 * 1024,
            max_header_size: 32 * 1024,
            max_headers: 100,
            max_field_size: 32 * 1024,
            max_body_size: 1 << 30,
        }
    }
}

/// How the body of an accepted request is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (no Content-Length, no Transfer-Encoding, or `Content-Length: 0`).
    None,
    Length(u64),
    Chunked,
}

/// What the gate needs to know about an accepted head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub framing: Framing,
    /// `Upgrade` present, named in `Connection`, and no body: the connection may switch
    /// protocols right after this head.
    pub upgrade: bool,
    /// The request line says `HTTP/1.x` with a minor version above 1: it is read as HTTP/1.1
    /// (RFC 9110 §2.5), framing included, and [`as_http11`] must rewrite it so before the
    /// HTTP/1.1 parser (which knows only 1.0 and 1.1) reads it.
    pub later_minor: bool,
}

/// Rewrites the version of the request line at the start of `head`, a head whose
/// [`Head::later_minor`] is set, to `HTTP/1.1`: one digit, in place.
pub fn as_http11(head: &mut [u8]) {
    if let Some(lf) = memchr::memchr(b'\n', head)
        && lf >= 9
        && &head[lf - 9..lf - 2] == b"HTTP/1."
    {
        head[lf - 2] = b'1';
    }
}

/// Validates one complete request head: `head` runs from the request line through the blank
/// line (`\r\n\r\n`) that ends it, without leading empty lines.
pub fn check_head(head: &[u8], limits: &Limits) -> Result<Head, Violation> {
    match parse_head(head, limits)? {
        Some((end, h)) if end == head.len() => Ok(h),
        Some(_) => Err(Violation::BadFieldValue),
        None => Err(Violation::BadRequestLine),
    }
}

/// Whether a request line whose LF has not arrived yet is already longer than `max`. Its last
/// byte may be the CR that ends it: a line of exactly `max` bytes must not be refused because
/// its CR and LF came in different reads.
pub(crate) fn partial_line_too_long(partial: &[u8], max: usize) -> bool {
    partial.len() - usize::from(partial.last() == Some(&b'\r')) > max
}

/// Parses the head at the start of `data` in one pass: `Some((length, head))` once its blank
/// line is in `data`, `None` while it is incomplete (with every complete line already checked),
/// or the first rule it breaks.
pub fn parse_head(data: &[u8], limits: &Limits) -> Result<Option<(usize, Head)>, Violation> {
    parse_head_into(data, limits, None)
}

/// [`parse_head`], noting in `parts` (when given) where the accepted head's parts are.
pub fn parse_head_into(
    data: &[u8],
    limits: &Limits,
    mut parts: Option<&mut Parts>,
) -> Result<Option<(usize, Head)>, Violation> {
    let Some(first) = memchr::memchr(b'\n', data) else {
        return if partial_line_too_long(data, limits.max_request_line) {
            Err(Violation::UriTooLong)
        } else {
            Ok(None)
        };
    };
    if first == 0 || data[first - 1] != b'\r' {
        return Err(Violation::BareLf);
    }
    if first - 1 > limits.max_request_line {
        return Err(Violation::UriTooLong);
    }
    let RequestLine {
        method_end,
        target_end,
        http10,
        later_minor,
        escapes,
    } = request_line(&data[..first - 1])?;
    if let Some(p) = parts.as_deref_mut() {
        p.start(method_end, target_end, http10, escapes);
    }
    let mut pos = first + 1;
    let mut fields = 0usize;
    let mut seen = Seen::default();
    let end = loop {
        if pos > limits.max_header_size {
            return Err(Violation::HeaderTooLarge);
        }
        let (name_end, value_end) = match field_line(data, pos, limits)? {
            Line::Blank => break pos + 2,
            Line::Incomplete => return Ok(None),
            Line::Field {
                name_end,
                value_end,
            } => (name_end, value_end),
        };
        fields += 1;
        if fields > limits.max_headers {
            return Err(Violation::TooManyHeaders);
        }
        seen.field(&data[pos..name_end], &data[name_end + 1..value_end])?;
        if let Some(p) = parts.as_deref_mut() {
            p.field(data, pos, name_end, value_end);
        }
        pos = value_end + 2;
    };
    if end > limits.max_header_size {
        return Err(Violation::HeaderTooLarge);
    }
    let framing = seen.framing(http10, limits)?;
    Ok(Some((
        end,
        Head {
            framing,
            // Only a request without a body can switch protocols right after its head.
            upgrade: seen.upgrade_field && seen.connection_upgrade && framing == Framing::None,
            later_minor,
        },
    )))
}

/// One line of a head, at `pos`.
enum Line {
    /// The blank line that ends the head.
    Blank,
    /// Not all of it is in yet.
    Incomplete,
    /// A field line: its name ends at `name_end` (the colon), its value at `value_end` (CR).
    Field { name_end: usize, value_end: usize },
}

/// The line at `pos` of `data`: the blank line, a field line whose name and value are
/// valid bytes, or the rule it breaks.
#[inline]
fn field_line(data: &[u8], pos: usize, limits: &Limits) -> Result<Line, Violation> {
    // The blank line ends the head.
    match data.get(pos..pos + 2) {
        Some(b"\r\n") => return Ok(Line::Blank),
        Some([b'\n', _]) => return Err(Violation::BareLf),
        Some([b'\r', _]) => return Err(Violation::BadFieldName),
        None if data.get(pos) == Some(&b'\n') => return Err(Violation::BareLf),
        None => return Ok(Line::Incomplete),
        Some(_) => {}
    }
    // Field name: tchar up to the colon.
    let i = data[pos..]
        .iter()
        .position(|b| !is_tchar(*b))
        .map_or(data.len(), |n| pos + n);
    match data.get(i) {
        Some(b':') if i > pos => {}
        Some(b' ' | b'\t') if i == pos => return Err(Violation::ObsFold),
        Some(b' ' | b'\t') => return Err(Violation::SpaceBeforeColon),
        None => return Ok(Line::Incomplete),
        _ => return Err(Violation::BadFieldName),
    }
    // Field value: field bytes up to CR LF.
    let j = field_run(data, i + 1);
    if j - pos > limits.max_field_size {
        return Err(Violation::HeaderTooLarge);
    }
    match data.get(j..j + 2) {
        Some(b"\r\n") => {}
        Some([b'\n', _]) => return Err(Violation::BareLf),
        None if j == data.len() || data[j] == b'\r' => return Ok(Line::Incomplete),
        None if data[j] == b'\n' => return Err(Violation::BareLf),
        _ => return Err(Violation::BadFieldValue),
    }
    Ok(Line::Field {
        name_end: i,
        value_end: j,
    })
}

/// What the fields of a head said about its host, framing and upgrade so far.
#[derive(Default)]
struct Seen {
    hosts: u32,
    length: Option<u64>,
    chunked: bool,
    te_lines: u32,
    upgrade_field: bool,
    connection_upgrade: bool,
}

impl Seen {
    /// One field line (`name`, and its value `raw` with the whitespace around it): the
    /// fields that frame the message, name its host or ask for an upgrade are checked.
    #[inline]
    fn field(&mut self, name: &[u8], raw: &[u8]) -> Result<(), Violation> {
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                let value = trim_ows(raw);
                self.hosts += 1;
                if self.hosts > 1 {
                    return Err(Violation::DuplicateHost);
                }
                if !valid_authority(value) {
                    return Err(Violation::BadHost);
                }
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                for element in list(trim_ows(raw)) {
                    let n = parse_length(element)?;
                    match self.length {
                        Some(prev) if prev != n => {
                            return Err(Violation::ConflictingContentLength);
                        }
                        _ => self.length = Some(n),
                    }
                }
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                self.te_lines += 1;
                self.chunked = transfer_encoding(trim_ows(raw))?;
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in list(trim_ows(raw)) {
                    if token.is_empty() || !token.iter().all(|b| is_tchar(*b)) {
                        return Err(Violation::BadConnection);
                    }
                    if END_TO_END
                        .iter()
                        .any(|f| f.as_bytes().eq_ignore_ascii_case(token))
                    {
                        return Err(Violation::ConnectionNamesEndToEnd);
                    }
                    if token.eq_ignore_ascii_case(b"upgrade") {
                        self.connection_upgrade = true;
                    }
                }
            }
            7 if name.eq_ignore_ascii_case(b"upgrade") => self.upgrade_field = true,
            _ => {}
        }
        Ok(())
    }

    /// The body's framing, once the head ended: the rules that span fields (one `Host` for
    /// HTTP/1.1, `Transfer-Encoding` alone, once, and not in HTTP/1.0), the body limit.
    #[inline]
    fn framing(&self, http10: bool, limits: &Limits) -> Result<Framing, Violation> {
        if self.hosts == 0 && !http10 {
            return Err(Violation::MissingHost);
        }
        if self.te_lines > 0 {
            if http10 {
                return Err(Violation::TransferEncodingHttp10);
            }
            if self.te_lines > 1 {
                return Err(Violation::BadTransferEncoding);
            }
            if self.length.is_some() {
                return Err(Violation::LengthAndChunked);
            }
        }
        Ok(match (self.chunked, self.length) {
            (true, _) => Framing::Chunked,
            (false, Some(n)) if n > limits.max_body_size => return Err(Violation::BodyTooLarge),
            (false, Some(0)) | (false, None) => Framing::None,
            (false, Some(n)) => Framing::Length(n),
        })
    }
}

/// `1*DIGIT`, without overflow.
fn parse_length(v: &[u8]) -> Result<u64, Violation> {
    if v.is_empty() {
        return Err(Violation::BadContentLength);
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            return Err(Violation::BadContentLength);
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or(Violation::BadContentLength)?;
    }
    // hyper refuses lengths this close to u64::MAX; refuse them first, as malformed.
    if n > u64::MAX / 2 {
        return Err(Violation::BadContentLength);
    }
    Ok(n)
}

/// A `Transfer-Encoding` value that is exactly `chunked` → Ok(true). Unknown but well-formed
/// codings → 501; anything else (empty elements, parameters, quotes, duplicates) → 400.
fn transfer_encoding(value: &[u8]) -> Result<bool, Violation> {
    let mut elements = 0;
    let mut unknown = false;
    for element in list(value) {
        elements += 1;
        if element.is_empty() || !element.iter().all(|b| is_tchar(*b)) {
            return Err(Violation::BadTransferEncoding);
        }
        if !element.eq_ignore_ascii_case(b"chunked") {
            unknown = true;
        }
    }
    if unknown {
        return Err(Violation::UnknownTransferCoding);
    }
    if elements != 1 {
        return Err(Violation::BadTransferEncoding);
    }
    Ok(true)
}

mod stream;

pub use stream::{Scan, Scanner};

#[cfg(test)]
mod line_tests;
#[cfg(test)]
mod parts_tests;
#[cfg(test)]
mod tests;
